"""engine.run, engine.run_backward and engine.benchmark: validate arguments, pick the backend,
dispatch."""
from __future__ import annotations

import dataclasses

import numpy as np

from .cpu import forward as numpy_backend
from .cpu import fp8 as fp8_backend
from .model.config import (DIRECTIONS, FP8_INPUT_DTYPES, AttentionConfig, ConfigError,
                           forward_only_message)
from .model.limits import check_limits
from .model.timing_stats import spread_of
from .devices import probe_gpu
from .inputs import make_dout, make_inputs
from .results import Gradients, Result, Timing

BACKENDS = ("auto", "numpy", "cupy")
ALGORITHMS = ("flash", "naive")
KERNELS = ("teaching", "tensorcore")


class GpuUnavailableError(ValueError):
    """backend="cupy" was asked for but no usable GPU exists; the message says why."""


def _choose(name, value, allowed):
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}.")


def resolve_backend(backend: str) -> str:
    """'auto' -> 'cupy' when a GPU is usable, else 'numpy'; 'cupy' without one raises."""
    _choose("backend", backend, BACKENDS)
    if backend == "numpy":
        return "numpy"
    usable, reason = probe_gpu()
    if backend == "cupy" and not usable:
        raise GpuUnavailableError(f"backend='cupy' needs a usable GPU: {reason} "
                                  f"Use backend='numpy' (CPU emulation) or 'auto'.")
    return "cupy" if usable else "numpy"


def _check_array(cfg: AttentionConfig, name: str, x, shape):
    x = np.asarray(x)
    if x.shape != shape:
        raise ConfigError(f"{name} must have shape {shape} (batch, heads, seq, "
                          f"head_dim) for this config; got {x.shape}.")
    if cfg.is_fp8:
        if x.dtype.name not in FP8_INPUT_DTYPES:
            raise ConfigError(f"{name} must have dtype {', '.join(FP8_INPUT_DTYPES)} for a "
                              f"{cfg.dtype} run (it quantizes them itself); got {x.dtype}.")
        return x
    if x.dtype != np.dtype(cfg.dtype):
        raise ConfigError(f"{name} must have dtype {cfg.dtype} (the config's); "
                          f"got {x.dtype}.")
    return x


def _check_inputs(cfg: AttentionConfig, q, k, v):
    if q is None and k is None and v is None:
        return make_inputs(cfg)
    if q is None or k is None or v is None:
        raise ConfigError("Pass all of q, k and v, or none of them (then make_inputs(cfg)).")
    want = {"q": (cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim),
            "k": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim),
            "v": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim)}
    return tuple(_check_array(cfg, name, x, want[name]) for name, x in zip("qkv", (q, k, v)))


def _check_dout(cfg: AttentionConfig, dout):
    if dout is None:
        return make_dout(cfg)
    return _check_array(cfg, "dout", dout, (cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim))


def _check_common(cfg, algorithm, kernel, trace, direction: str = "forward"):
    if not isinstance(cfg, AttentionConfig):
        raise ConfigError(f"cfg must be an engine.AttentionConfig; got {type(cfg).__name__}.")
    _choose("algorithm", algorithm, ALGORITHMS)
    _choose("kernel", kernel, KERNELS)
    if not isinstance(trace, bool):
        raise ConfigError(f"trace must be True or False; got {trace!r}.")
    if cfg.is_fp8:                         # the flash forward only (FORWARD_ONLY_DTYPES)
        if direction == "backward":
            raise ConfigError(forward_only_message("the backward pass", cfg.dtype))
        if algorithm == "naive":
            raise ConfigError(forward_only_message(
                "naive attention", cfg.dtype, "; naive attention runs in 16 or 32 bits (FP8 "
                "is a flash-kernel feature)"))


def run(cfg: AttentionConfig, q=None, k=None, v=None, backend: str = "auto",
        algorithm: str = "flash", kernel: str = "teaching", trace: bool = False) -> Result:
    """One forward pass. Returns NumPy arrays whatever the backend."""
    _check_common(cfg, algorithm, kernel, trace)
    be = resolve_backend(backend)
    check_limits(cfg, algorithm=algorithm, trace=trace)
    if be == "cupy":                       # refuse before any input is even generated
        from .gpu.runtime import check_fits
        check_fits(cfg, algorithm, trace)
    if cfg.is_fp8 and be == "cupy":       # the Hopper FP8 build only: refuse before any input
        from .gpu.runtime import check_arch
        check_arch(cfg.dtype, kernel)
    q, k, v = _check_inputs(cfg, q, k, v)
    if cfg.is_fp8:
        # kernel= is ignored: FP8 has one build (registry "wgmma fp8"), and on the CPU one
        # emulation of it (engine.cpu.fp8)
        if be == "numpy":
            return fp8_backend.run(cfg, q, k, v, trace=trace)
        from .gpu import backend as cupy_backend
        return _with_fp8_info(cupy_backend.run_fp8(cfg, q, k, v, trace))
    if be == "numpy":
        if algorithm == "naive":
            return numpy_backend.naive(cfg, q, k, v)
        return numpy_backend.flash(cfg, q, k, v, trace=trace)
    from .gpu import backend as cupy_backend
    return cupy_backend.run(cfg, q, k, v, algorithm=algorithm, kernel=kernel, trace=trace)


def _with_fp8_info(res: Result) -> Result:
    """An FP8 Result with its Fp8Info also in Result.info (Fp8Info.as_info), whichever
    backend made it."""
    if res.fp8 is not None:
        res.info = {**res.info, **res.fp8.as_info()}
    return res


def run_backward(cfg: AttentionConfig, q=None, k=None, v=None, dout=None, backend: str = "auto",
                 algorithm: str = "flash", kernel: str = "teaching",
                 trace: bool = False) -> Gradients:
    """One backward pass (after the forward of the same algorithm, for O and lse): the
    gradients of sum(O ∘ dout) with respect to q, k and v. NumPy arrays whatever the backend.
    q, k, v (all or none) and dout may be omitted: make_inputs(cfg) and make_dout(cfg)."""
    _check_common(cfg, algorithm, kernel, trace, "backward")
    be = resolve_backend(backend)
    check_limits(cfg, algorithm=algorithm, trace=trace, direction="backward")
    if be == "cupy":                       # refuse before any input is even generated
        from .gpu.runtime import check_fits
        check_fits(cfg, algorithm, trace, direction="backward")
    q, k, v = _check_inputs(cfg, q, k, v)
    dout = _check_dout(cfg, dout)
    if be == "numpy":
        from .cpu import backward as numpy_backward
        return numpy_backward.run(cfg, q, k, v, dout, algorithm=algorithm, trace=trace)
    from .gpu import backend as cupy_backend
    return cupy_backend.run_backward(cfg, q, k, v, dout, algorithm, kernel, trace)


def benchmark(cfg: AttentionConfig, algorithm: str = "flash", backend: str = "auto",
              kernel: str = "teaching", trace: bool = False, reps: int | None = None,
              warmup: int | None = None, direction: str = "forward") -> Timing:
    """Time one configuration. GPU: CUDA events, warm-up, L2 flush, median of reps (30 unless
    given). CPU: wall-clock of the NumPy emulation, labelled as such: `reps` calls when given,
    else adaptive (warm-ups, then calls until engine.model.timing_stats.CPU_BUDGET is spent).
    Either way the Timing carries its calls and their spread (q1_ms, q3_ms, iqr_rel, noisy).
    direction="backward" times the backward pass alone (the forward's outputs are made before
    timing starts)."""
    _check_common(cfg, algorithm, kernel, trace, direction)
    _choose("direction", direction, DIRECTIONS)
    be = resolve_backend(backend)
    check_limits(cfg, algorithm=algorithm, trace=trace, direction=direction)
    if cfg.is_fp8 and be == "cupy":       # the Hopper FP8 build only, as engine.run
        from .gpu.runtime import check_arch
        check_arch(cfg.dtype, kernel)
    if be == "numpy":
        from .cpu.timing import benchmark_numpy
        return benchmark_numpy(cfg, algorithm=algorithm, trace=trace, reps=reps, warmup=warmup,
                               direction=direction)
    from .gpu.timing import benchmark_gpu
    return with_spread(benchmark_gpu(cfg, algorithm=algorithm, kernel=kernel, trace=trace,
                                     reps=reps or 30, warmup=3 if warmup is None else warmup,
                                     direction=direction))


def with_spread(t: Timing) -> Timing:
    """t with its quartiles, IQR/median and noisy flag from its calls (unchanged without)."""
    if not t.samples_ms:
        return t
    s = spread_of(t.samples_ms)
    return dataclasses.replace(t, q1_ms=s.q1_ms, q3_ms=s.q3_ms, iqr_rel=s.iqr_rel,
                               noisy=s.noisy)
