"""What app/ and pages/ use from the engine beyond its public API (engine/__init__.py) and
the model (engine.model): recorded GPU results, trace files, and the few pieces of the GPU
runtime the pages drive themselves (the GPU lock, the GPU's error type, the live tile sweep,
decode timing, compile facts). app/ and pages/ reach the engine only through engine,
engine.model and this module (pyproject.toml's [tool.importlinter] contracts). The GPU-only
functions import engine.gpu when called, so importing this module needs no CuPy.
"""
from __future__ import annotations

from . import recorded, trace_io
from .gpu.lock import GPU_LOCK
from .gpu.runtime import GpuRunError

__all__ = ["GPU_LOCK", "GpuRunError", "benchmark_cpu_together", "decode_record", "facts_of",
           "recorded", "sweep_tiles", "time_flash_decode", "time_sdpa", "trace_io"]


def benchmark_cpu_together(cfg, algorithms, direction: str = "forward") -> list:
    """engine.benchmark's CPU timing of several algorithms of one config at once, interleaved
    call by call with the adaptive budget (engine.cpu.timing.benchmark_many), so that a busy
    machine slows each alike; one engine.Timing per algorithm. Limits are checked first."""
    from .cpu.timing import benchmark_many
    from .model.limits import check_limits
    for algorithm in algorithms:
        check_limits(cfg, algorithm=algorithm, trace=False, direction=direction)
    return benchmark_many(cfg, list(algorithms), direction=direction)


def sweep_tiles(cfg, kernels, on_point=None) -> tuple[list, list]:
    """The live tile sweep on the GPU (engine.gpu.tilesweep.sweep_tiles at its SWEEP_REPS)."""
    from .gpu import tilesweep
    return tilesweep.sweep_tiles(cfg, kernels, tilesweep.SWEEP_REPS, on_point)


def facts_of(kernel: str, cfg, trace: bool) -> dict:
    """Compile facts of a kernel build on the GPU (engine.gpu.facts.facts_of)."""
    from .gpu.facts import facts_of as facts
    return facts(kernel, cfg, trace)


def time_flash_decode(*args, **kwargs) -> list:
    """Times of the Flash-Decoding kernel (engine.gpu.decode_bench.time_flash_decode)."""
    from .gpu.decode_bench import time_flash_decode as timed
    return timed(*args, **kwargs)


def time_sdpa(*args, **kwargs) -> list:
    """Times of PyTorch's SDPA on a decode step (engine.gpu.decode_bench.time_sdpa)."""
    from .gpu.decode_bench import time_sdpa as timed
    return timed(*args, **kwargs)


def decode_record(*args, **kwargs) -> dict:
    """One decode timing as benchmarks/results/ records it (engine.gpu.decode_bench)."""
    from .gpu.decode_bench import decode_record as record
    return record(*args, **kwargs)
