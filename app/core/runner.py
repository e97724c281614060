"""Cached calls into the engine. Everything returned is NumPy (st.cache_data pickles it)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import engine
from engine.model import iomodel

# A config is hashed as its repr (every field, exactly): 0.04 ms, where Streamlit's generic
# hashing of the dataclass takes 0.3 ms, and every cached call hashes it on every run.
HASH = dict(hash_funcs={engine.AttentionConfig: repr, engine.DecodeConfig: repr})
CACHE = dict(max_entries=16, show_spinner="Running the kernel…", **HASH)


@st.cache_data(max_entries=8, show_spinner=False, **HASH)
def inputs(cfg: engine.AttentionConfig):
    return engine.make_inputs(cfg)


@st.cache_data(**CACHE)
def flash(cfg: engine.AttentionConfig, backend: str, kernel: str) -> engine.Result:
    """The traced flash run whose numbers every page shows (limits checked before the
    inputs are made)."""
    engine.check_limits(cfg, algorithm="flash", trace=True)
    q, k, v = inputs(cfg)
    return engine.run(cfg, q, k, v, backend=backend, algorithm="flash", kernel=kernel,
                      trace=True)


def timing(cfg: engine.AttentionConfig, algorithm: str, backend: str, kernel: str,
           reps: int | None) -> engine.Timing:
    """A GPU timing, cached for every visitor (CUDA events on a GPU are steady); a CPU timing
    is measured anew (a wall-clock time depends on what else the machine runs just then)."""
    if backend == "numpy":
        return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                                trace=False, reps=reps)
    return _gpu_timing(cfg, algorithm, backend, kernel, reps)


@st.cache_data(**CACHE)
def _gpu_timing(cfg: engine.AttentionConfig, algorithm: str, backend: str, kernel: str,
                reps: int | None) -> engine.Timing:
    return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                            trace=False, reps=reps)


def kernels_for(backend: str) -> list[tuple[str, str, str]]:
    """(label, algorithm, kernel) of everything worth timing on this backend."""
    if backend == "cupy":
        return [("naive", "naive", "teaching")] + [(k, "flash", k) for k in engine.KERNELS]
    return [("naive", "naive", "teaching"), ("CPU emulation", "flash", "teaching")]


def naive_fits_gpu(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> bool:
    """Predicted from the memory model: would naive's S and P fit in the GPU's memory?"""
    return iomodel.peak_memory(cfg, "naive") <= gpu.memory_bytes


@st.cache_data(max_entries=8, show_spinner=False, **HASH)
def dout(cfg: engine.AttentionConfig):
    return engine.make_dout(cfg)


@st.cache_data(**CACHE)
def backward(cfg: engine.AttentionConfig, backend: str) -> engine.Gradients:
    """The traced flash backward the Backward page shows (limits checked before the inputs
    are made). On a GPU the trace comes from the teaching backward kernel, the one that
    writes it."""
    engine.check_limits(cfg, algorithm="flash", trace=True, direction="backward")
    q, k, v = inputs(cfg)
    return engine.run_backward(cfg, q, k, v, dout(cfg), backend=backend, algorithm="flash",
                               kernel="teaching", trace=True)


def backward_timing(cfg: engine.AttentionConfig, algorithm: str, backend: str, kernel: str,
                    reps: int | None) -> engine.Timing:
    """As timing(), of the backward pass: cached on a GPU only."""
    if backend == "numpy":
        return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                                trace=False, reps=reps, direction="backward")
    return _gpu_backward_timing(cfg, algorithm, backend, kernel, reps)


@st.cache_data(**CACHE)
def _gpu_backward_timing(cfg: engine.AttentionConfig, algorithm: str, backend: str,
                         kernel: str, reps: int | None) -> engine.Timing:
    return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                            trace=False, reps=reps, direction="backward")


@st.cache_data(**CACHE)
def decode(cfg: engine.DecodeConfig, backend: str, profile: str) -> engine.DecodeResult:
    """The traced decode step the Decoding page shows; on the CPU "auto" splits for the
    emulated profile's SMs."""
    return engine.run_decode(cfg, backend=backend, trace=True,
                             gpu=engine.PROFILES[profile] if backend == "numpy" else None)


@st.cache_data(max_entries=8, show_spinner="Timing the decode step on the GPU…", **HASH)
def decode_timings(cfg: engine.DecodeConfig, counts: tuple, auto: int) -> list[dict]:
    """GPU only: the decode step timed at each split count, and PyTorch's SDPA on the same
    shape (left out when PyTorch cannot run it), as decode records."""
    from engine.facade import decode_record, time_flash_decode, time_sdpa
    from engine.model.limits import check_decode_limits
    check_decode_limits(cfg, max(counts))
    inputs = engine.make_decode_inputs(cfg)
    records = [decode_record(cfg, "flash_decode", s,
                             time_flash_decode(cfg, s, inputs, 20, 2, budget_s=0.3), s == auto)
               for s in counts]
    flat = cfg.with_(page_size=None)
    try:
        times = time_sdpa(flat, engine.make_decode_inputs(flat), 20, 2, budget_s=0.3)
        records.append(decode_record(flat, "torch_sdpa", None, times, False))
    except ValueError:            # PyTorch missing, or it does not run this shape
        pass
    return records


@dataclass(frozen=True)
class Compared:
    """One run of the Precision page's comparison, as the page uses it: its error against
    float64 (engine.facade.tile_errors and rmse), its Fp8Info (None for 16 bits), the
    backend that ran it, and why the GPU refused it where the page asked the GPU (else None).
    The outputs themselves are not kept, so a cached comparison stays small."""
    tile_errors: object
    rmse: float
    fp8: object
    backend: str
    refusal: str | None


@st.cache_data(max_entries=8, show_spinner="Running attention in fp16, bf16 and FP8…", **HASH)
def compare(sources: tuple, runs: tuple, backend: str, kernel: str) -> list:
    """The Precision page's comparison, for each float32 config of `sources` (the same
    shapes, each with its input preset) and its configs in `runs`: a Compared per run, each
    against the float64 attention of the source's inputs (engine.facade.reference_attention).
    An FP8 run quantizes the source's inputs itself; a 16- or 32-bit run takes make_inputs of
    its own config (the same draws, cast). On a GPU an FP8 run takes the Hopper FP8 kernel
    (kernel="tensorcore", engine.run's one FP8 build) and a 16-bit run `kernel`; a run the
    GPU refuses (another architecture, a shape the kernel does not take) runs on the CPU
    emulation, saying why. One cached call for every preset, so the page waits once."""
    from engine.facade import reference_attention, rmse, tile_errors
    out = []
    for source, configs in zip(sources, runs):
        engine.check_limits(source, algorithm="flash")
        q, k, v = inputs(source)
        reference = reference_attention(source, q, k, v)[0]
        compared = []
        for cfg in configs:
            operands = (q, k, v) if cfg.is_fp8 else engine.make_inputs(cfg)
            refusal = None
            if backend == "cupy":
                try:
                    res = engine.run(cfg, *operands, backend="cupy", algorithm="flash",
                                     kernel="tensorcore" if cfg.is_fp8 else kernel)
                except ValueError as exc:
                    refusal = str(exc)
                    res = engine.run(cfg, *operands, backend="numpy", algorithm="flash")
            else:
                res = engine.run(cfg, *operands, backend="numpy", algorithm="flash")
            compared.append(Compared(tile_errors(cfg, res.output, reference),
                                     rmse(res.output, reference), res.fp8, res.backend,
                                     refusal))
        out.append(compared)
    return out


@st.cache_data(max_entries=16, show_spinner="Emulating FP8 on one head at each threshold…",
               **HASH)
def fp8_head(cfg: engine.AttentionConfig, b: int, h: int, thresholds: tuple) -> dict:
    """The traced FP8 emulation (engine.facade.fp8_emulate) of batch b, head h of the FP8
    config cfg alone, on the float32 inputs of its shapes (make_inputs of cfg in float32:
    the Precision page's source), once per rescale threshold of `thresholds` (FA4's
    conditional rescaling, log2 units; None: the kernels' rule): threshold -> Result. Scales
    are per (batch, head) or finer, so the head's numbers are those of the whole run."""
    from engine.facade import fp8_emulate
    q, k, v = inputs(cfg.with_(dtype="float32"))
    one = cfg.with_(batch=1, heads=1)
    pick = (slice(b, b + 1), slice(h, h + 1))
    return {t: fp8_emulate(one, q[pick], k[pick], v[pick], trace=True, rescale_threshold=t)
            for t in thresholds}
