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
           "fp8_emulate", "fp8_quantize_inputs", "recorded", "reference_attention", "rmse",
           "sweep_tiles", "tile_errors", "time_flash_decode", "time_sdpa", "trace_io"]


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


def fp8_emulate(cfg, q=None, k=None, v=None, trace: bool = False,
                rescale_threshold: float | None = None):
    """The FP8 forward's NumPy emulation (engine.cpu.fp8.emulate) with the emulation-only
    rescale_threshold (log2 units; None: the kernel's rule): an engine.Result whose .fp8
    counts the rescales skipped and the P elements that saturated. Validated as engine.run
    validates (limits before the inputs are drawn; q, k, v all or none, then
    make_inputs(cfg))."""
    from .api import _check_inputs
    from .cpu import fp8
    from .model.config import ConfigError
    from .model.limits import check_limits
    if not getattr(cfg, "is_fp8", False):
        raise ConfigError(f"fp8_emulate runs dtype float8_e4m3 configs; got "
                          f"{getattr(cfg, 'dtype', cfg)!r}.")
    fp8.check_threshold(rescale_threshold)
    check_limits(cfg, algorithm="flash", trace=trace)
    q, k, v = _check_inputs(cfg, q, k, v)
    return fp8.emulate(cfg, q, k, v, trace=trace, rescale_threshold=rescale_threshold)


def fp8_quantize_inputs(cfg, q=None, k=None, v=None):
    """The FP8 forward's quantized q8, k8, v8 (ml_dtypes.float8_e4m3fn, (B, H, seq, d)), their
    scales and saturated counts (engine.cpu.fp8.quantize_inputs): the bytes the GPU's
    quantize pass must write."""
    from .api import _check_inputs
    from .cpu import fp8
    from .model.limits import check_limits
    check_limits(cfg, algorithm="flash")
    q, k, v = _check_inputs(cfg, q, k, v)
    return fp8.quantize_inputs(cfg, q, k, v)


def reference_attention(cfg, q, k, v):
    """(output, lse) of exact attention in float64 (engine.cpu.precision.reference)."""
    from .cpu import precision
    return precision.reference(cfg, q, k, v)


def tile_errors(cfg, output, reference):
    """The error of `output` per query tile (engine.cpu.precision.tile_errors)."""
    from .cpu import precision
    return precision.tile_errors(cfg, output, reference)


def rmse(output, reference) -> float:
    """sqrt(mean((output - reference)²)) in float64 (engine.cpu.precision.rmse)."""
    from .cpu import precision
    return precision.rmse(output, reference)
