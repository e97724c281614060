"""GPU timing harness: CUDA events, warm-up, L2 flush, median of repetitions, ceilings.

time_stages() times any list of enqueueing callables (CuPy kernels, cuBLAS, PyTorch ops on
the same default stream); benchmark_gpu() builds the stages of one engine configuration,
measures its peak device memory and refuses figures above the GPU's measured ceilings.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from kernels.loader import get_function

from ..model.config import BACKWARD_FLOP_FACTOR, DIRECTIONS, AttentionConfig, ConfigError
from .lock import GPU_LOCK
from .runtime import check_fits, gpu_failures, live_gpu
from ..inputs import make_dout, make_inputs
from ..model.devices import PROFILES
from ..model.iomodel import compulsory_bytes
from ..model.units import format_bandwidth, format_bytes, format_gbps, format_tflops
from ..results import Timing

MIN_REPS = 20
MAX_REPS = 10_000
HOLD_NS = 300_000        # GPU wait queued before each repetition's first event
FLUSH_FACTOR = 2         # the L2 flush writes a buffer this many times the L2 size


class ImplausibleTimingError(ValueError):
    """A timing beats what the GPU can do: a bug in the kernel or in the measurement."""


@dataclass(frozen=True)
class Ceiling:
    flops: float          # FLOP/s no kernel on this GPU exceeds
    bytes_per_s: float    # device-memory bytes/s (read + written) no kernel exceeds
    source: str


# The H200's ceilings from its profile (engine.model.devices, the one place of device figures):
# FLOPs: the fastest 8192³ bfloat16 matrix product measured there (769-798 TFLOP/s on random
# data), rounded up to the next 10 TFLOP/s. Bytes: a read-only stream (a decode step reading
# its KV cache) beats a copy (PyTorch's SDPA read up to 4.6 TB/s on 2026-11-23, the copy
# measured 4.3 TB/s counting bytes read and written), so the ceiling is the datasheet's
# bandwidth, which no stream can pass.
_H200 = PROFILES["H200"]
KNOWN_CEILINGS = {
    "H200": Ceiling(math.ceil(_H200.measured_matmul_tflops / 10) * 10e12, _H200.hbm_gbps * 1e9,
                    f"NVIDIA H200: {format_tflops(_H200.measured_matmul_tflops)} bf16 matmul "
                    f"measured (max seen), rounded up; {format_gbps(_H200.hbm_gbps)} HBM, the "
                    f"datasheet's (a copy measured {format_gbps(_H200.measured_copy_gbps)})"),
}


@functools.lru_cache(maxsize=1)
def ceilings() -> Ceiling:
    name = live_gpu().name
    for key, ceiling in KNOWN_CEILINGS.items():
        if key in name:
            return ceiling
    return _measure_ceilings(name)


def _measure_ceilings(name: str) -> Ceiling:
    """For a GPU without recorded ceilings: a 1 GiB copy and a 8192³ float16 matmul, +10%."""
    import cupy
    a = cupy.ones(1 << 28, dtype=cupy.float32)
    b = cupy.empty_like(a)
    copy_ms = min(time_stages([("copy", lambda: cupy.copyto(b, a))], MIN_REPS, 2)[0])
    x = cupy.ones((8192, 8192), dtype=cupy.float16)
    mm_ms = min(time_stages([("matmul", lambda: cupy.matmul(x, x))], MIN_REPS, 2)[0])
    bw = 2 * a.nbytes / (copy_ms * 1e-3)
    fl = 2 * 8192**3 / (mm_ms * 1e-3)
    return Ceiling(1.1 * fl, 1.1 * bw, f"{name}, measured here: {format_tflops(fl / 1e12)} "
                                       f"float16 matmul, {format_bandwidth(bw)} copy; +10%")


@functools.lru_cache(maxsize=1)
def _flush_buffer():
    import cupy
    return cupy.empty(FLUSH_FACTOR * live_gpu().l2_bytes, dtype=cupy.uint8)


def time_stages(stages: list, reps: int, warmup: int,
                budget_s: float | None = None) -> tuple[list, dict]:
    """Time `stages` ([(name, fn)], each fn enqueuing GPU work on the default stream).

    Warm-up runs first; then per repetition: flush L2 (write a buffer of 2× the L2 size,
    then read it back, so the write's dirty lines are written back to HBM before the timed
    region instead of inside it, where they cost a short kernel microseconds), queue a GPU wait of HOLD_NS so the host enqueues the whole region before the GPU reaches
    it, record an event, and one more after each stage. With budget_s, the repetitions are cut
    to fit it (never below MIN_REPS). Returns (total ms per rep, {stage: ms per rep})."""
    import cupy
    hold = get_function("baselines/bench_hold.cu", "hold_gpu")
    flush = _flush_buffer()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        for _, fn in stages:
            fn()
    cupy.cuda.Device().synchronize()
    per_run_s = (time.perf_counter() - t0) / max(warmup, 1)
    if budget_s is not None:
        reps = max(MIN_REPS, min(reps, int(budget_s / max(per_run_s, 1e-6))))
    events = [[cupy.cuda.Event() for _ in range(len(stages) + 1)] for _ in range(reps)]
    for rep in range(reps):
        flush.fill(rep % 251 + 1)
        flush.max()                 # read back: L2 left holding clean lines
        hold((1,), (1,), (np.uint64(HOLD_NS),))
        marks = events[rep]
        marks[0].record()
        for s, (_, fn) in enumerate(stages):
            fn()
            marks[s + 1].record()
    events[-1][-1].synchronize()
    totals = [cupy.cuda.get_elapsed_time(m[0], m[-1]) for m in events]
    per_stage = {name: [cupy.cuda.get_elapsed_time(m[s], m[s + 1]) for m in events]
                 for s, (name, _) in enumerate(stages)}
    return totals, per_stage


class PeakMemory:
    """High-water mark of CuPy memory-pool allocations made inside the `with` block."""

    def __init__(self):
        from cupy.cuda import memory_hook

        outer = self

        class _Hook(memory_hook.MemoryHook):
            name = "PeakMemory"

            def malloc_postprocess(self, **kwargs):
                outer.current += kwargs["mem_size"]
                outer.peak = max(outer.peak, outer.current)

            def free_postprocess(self, **kwargs):
                outer.current -= kwargs["mem_size"]

        self.current = 0
        self.peak = 0
        self._hook = _Hook()

    def __enter__(self):
        self._hook.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hook.__exit__(*exc)


def check_ceilings(cfg: AttentionConfig, algorithm: str, trace: bool, median_ms: float,
                   label: str, direction: str = "forward") -> None:
    ceil = ceilings()
    if cfg.is_fp8:                  # FP8 tensor cores run twice the 16-bit rate (datasheet)
        ceil = Ceiling(2 * ceil.flops, ceil.bytes_per_s, f"twice the 16-bit ceiling: {ceil.source}")
    seconds = median_ms * 1e-3
    flops = cfg.flops_of(direction) / seconds
    # FP8: the timed region is the attention kernel, its quantize pass outside (FP8_NOTE)
    moved = compulsory_bytes(cfg, algorithm, trace, direction, quantize=False) / seconds
    if flops > ceil.flops or moved > ceil.bytes_per_s:
        raise ImplausibleTimingError(
            f"{label}: {median_ms:.4f} ms means {flops / 1e12:.0f} TFLOP/s and "
            f"{moved / 1e12:.2f} TB/s, above this GPU's ceilings ({ceil.flops / 1e12:.0f} "
            f"TFLOP/s, {ceil.bytes_per_s / 1e12:.1f} TB/s; {ceil.source}). Such a figure is a "
            f"bug in the kernel or the timing, so it is refused.")


def method_text(reps: int, warmup: int, extra: str = "", direction: str = "forward") -> str:
    gpu, ceil = live_gpu(), ceilings()
    region = ("the timed region" if direction == "forward" else
              "the backward pass alone (its forward outputs are made once, before timing)")
    flops = ("4·B·H·Nq·Nk·d (halved for causal)" if direction == "forward" else
             f"{BACKWARD_FLOP_FACTOR:g} × 4·B·H·Nq·Nk·d (halved for causal; five matrix "
             f"products against the forward's two)")
    # The ceilings keep the fixed "(N TFLOP/s, X.X TB/s)" form: benchmarks.merge_bench and the
    # Timings page read them back from recorded methods.
    return (f"GPU ({gpu.name}): CUDA events on the default stream around {region}; "
            f"{warmup} warm-up run(s) first, so kernel compilation, module loading and cuBLAS "
            f"handle creation stay out; {reps} repetitions, median with p10/p90; before each, "
            f"the L2 cache ({format_bytes(gpu.l2_bytes)}) is flushed by writing a "
            f"{format_bytes(FLUSH_FACTOR * gpu.l2_bytes)} buffer and reading it back (no "
            f"dirty lines left to write back inside the timed region) and a "
            f"{HOLD_NS // 1000} µs GPU wait is queued so that host launch overhead stays "
            f"outside the events. TFLOP/s = {flops} / median. Peak "
            f"memory: high-water mark of device allocations (inputs, outputs, temporaries) "
            f"during one separate run. Figures above the GPU's ceilings "
            f"({ceil.flops / 1e12:.0f} TFLOP/s, {ceil.bytes_per_s / 1e12:.1f} TB/s) are refused "
            f"as bugs.{extra}")


def summarize(samples: list, cfg: AttentionConfig, direction: str = "forward") -> dict:
    med = float(np.median(samples))
    return {"median_ms": med, "p10_ms": float(np.percentile(samples, 10)),
            "p90_ms": float(np.percentile(samples, 90)), "reps": len(samples),
            "tflops": cfg.flops_of(direction) / (med * 1e-3) / 1e12}


def _check_reps(reps, warmup):
    if not isinstance(reps, int) or isinstance(reps, bool) or not MIN_REPS <= reps <= MAX_REPS:
        raise ConfigError(f"reps must be a whole number from {MIN_REPS} to {MAX_REPS} on the "
                          f"GPU; got {reps!r}.")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or not 1 <= warmup <= 100:
        raise ConfigError(f"warmup must be a whole number from 1 to 100; got {warmup!r}.")


def _flash_stages(cfg, kernel, trace, Q, K, V):
    from .backend import launcher
    if cfg.is_fp8:
        from .launchers import wgmma_fp8
        qz = wgmma_fp8.quantize(cfg, Q, K, V)
        run, out = wgmma_fp8.prepare(cfg, qz, trace)
        return [("kernel", run)], (out, qz), FP8_NOTE
    run, out = launcher(kernel).prepare(cfg, Q, K, V, trace)
    return [("kernel", run)], out, ""


FP8_NOTE = (" FP8: q, k, v are quantized once before timing (the quantize kernel: a scale per "
            "tile, e4m3 bytes, V transposed); the timed region is the attention kernel on the "
            "e4m3 tiles, as FP8 attention is measured elsewhere. Its ceiling is twice the "
            "16-bit one (Hopper's FP8 tensor-core rate is twice its 16-bit rate).")


def _backward_stages(cfg, algorithm, kernel, trace, Q, K, V, dO):
    """(stages, outputs to keep alive, method note) of the backward alone: the forward of the
    same family runs here, once, outside the timed stages."""
    from . import naive as gpu_naive
    from .backend import flash_backward
    if algorithm == "naive":
        fwd = gpu_naive.forward(cfg, Q, K, V)
        del fwd["S"]                       # only P is read by the backward
        stages, out = gpu_naive.prepare_backward(cfg, Q, K, V, dO, fwd)
        return stages, (fwd, out), (" Naive backward stages: cuBLAS dV = Pᵀ dO and dP = dO Vᵀ "
                                    "(strided batched GEMMs, transposes by flags), the fused "
                                    "softmax-backward kernel (dS and D), cuBLAS dQ = scale·dS K "
                                    "and dK = scale·dSᵀ Q.")
    fwd, run, out = flash_backward(cfg, kernel, trace, Q, K, V, dO)
    return [("kernel", run)], (fwd, out), (" The flash backward run: D = rowsum(dO∘O), the "
                                           "dQ accumulation in float32 and its cast to dQ, "
                                           "as the kernel's launcher enqueues them.")


def benchmark_gpu(cfg: AttentionConfig, algorithm: str, kernel: str, trace: bool, reps: int,
                  warmup: int, budget_s: float | None = None, inputs: tuple | None = None,
                  direction: str = "forward") -> Timing:
    """Time one configuration on the GPU (see method_text for the method). inputs: q, k, v
    as make_inputs(cfg) returns them (backward: q, k, v and dout as make_dout(cfg) draws it),
    to spare a sweep generating them once per line. direction="backward" times the backward
    pass alone, after one forward of the same kernel family made outside the timing."""
    import cupy

    from . import naive as gpu_naive
    from .backend import to_device
    _check_reps(reps, warmup)
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction must be one of {', '.join(DIRECTIONS)}; got {direction!r}.")
    label = ("naive attention" if algorithm == "naive" else f"the {kernel} flash kernel") + \
        ("'s backward pass" if direction == "backward" else "")
    with GPU_LOCK, gpu_failures(f"benchmark of {label}"):
        check_fits(cfg, algorithm, trace, direction)
        if inputs is None:
            inputs = make_inputs(cfg) + ((make_dout(cfg),) if direction == "backward" else ())
        with PeakMemory() as peak:
            arrays = [to_device(cfg, x) for x in inputs]
            Q, K, V = arrays[:3]
            if direction == "backward":
                stages, keep, extra = _backward_stages(cfg, algorithm, kernel, trace, *arrays)
            elif algorithm == "naive":
                stages, keep = gpu_naive.prepare(cfg, Q, K, V)
                extra = (" Naive stages: cuBLAS scale·QKᵀ (strided batched GEMM, Kᵀ by a transpose "
                         "flag), the fused softmax kernel, cuBLAS PV.")
            else:
                stages, keep, extra = _flash_stages(cfg, kernel, trace, Q, K, V)
            for _, fn in stages:
                fn()
            cupy.cuda.Device().synchronize()
        totals, per_stage = time_stages(stages, reps, warmup, budget_s)
        del keep
    summary = summarize(totals, cfg, direction)
    check_ceilings(cfg, algorithm, trace, summary["median_ms"], label, direction)
    stage_ms = ({name: float(np.median(ms)) for name, ms in per_stage.items()}
                if algorithm == "naive" else {})
    return Timing(**summary, peak_bytes=int(peak.peak),
                  method=method_text(summary["reps"], warmup, extra, direction), backend="cupy",
                  algorithm=algorithm, kernel=kernel if algorithm == "flash" else None,
                  stages=stage_ms, samples_ms=[float(x) for x in totals])
