"""engine.run and engine.benchmark: validate arguments, pick the backend, dispatch."""
from __future__ import annotations

import numpy as np

from .cpu import forward as numpy_backend
from .config import AttentionConfig, ConfigError
from .limits import check_limits
from .devices import probe_gpu
from .inputs import make_inputs
from .results import Result, Timing

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


def _check_inputs(cfg: AttentionConfig, q, k, v):
    if q is None and k is None and v is None:
        return make_inputs(cfg)
    if q is None or k is None or v is None:
        raise ConfigError("Pass all of q, k and v, or none of them (then make_inputs(cfg)).")
    want = {"q": (cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim),
            "k": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim),
            "v": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim)}
    out = []
    for name, x in zip("qkv", (q, k, v)):
        x = np.asarray(x)
        if x.shape != want[name]:
            raise ConfigError(f"{name} must have shape {want[name]} (batch, heads, seq, "
                              f"head_dim) for this config; got {x.shape}.")
        if x.dtype != np.dtype(cfg.dtype):
            raise ConfigError(f"{name} must have dtype {cfg.dtype} (the config's); "
                              f"got {x.dtype}.")
        out.append(x)
    return tuple(out)


def run(cfg: AttentionConfig, q=None, k=None, v=None, backend: str = "auto",
        algorithm: str = "flash", kernel: str = "teaching", trace: bool = False) -> Result:
    """One forward pass. Returns NumPy arrays whatever the backend."""
    if not isinstance(cfg, AttentionConfig):
        raise ConfigError(f"cfg must be an engine.AttentionConfig; got {type(cfg).__name__}.")
    _choose("algorithm", algorithm, ALGORITHMS)
    _choose("kernel", kernel, KERNELS)
    if not isinstance(trace, bool):
        raise ConfigError(f"trace must be True or False; got {trace!r}.")
    be = resolve_backend(backend)
    check_limits(cfg, algorithm=algorithm, trace=trace)
    if be == "cupy":                       # refuse before any input is even generated
        from .gpu.runtime import check_fits
        check_fits(cfg, algorithm, trace)
    q, k, v = _check_inputs(cfg, q, k, v)
    if be == "numpy":
        if algorithm == "naive":
            return numpy_backend.naive(cfg, q, k, v)
        return numpy_backend.flash(cfg, q, k, v, trace=trace)
    from .gpu import backend as cupy_backend
    return cupy_backend.run(cfg, q, k, v, algorithm=algorithm, kernel=kernel, trace=trace)


def benchmark(cfg: AttentionConfig, algorithm: str = "flash", backend: str = "auto",
              kernel: str = "teaching", trace: bool = False, reps: int | None = None,
              warmup: int | None = None) -> Timing:
    """Time one configuration. GPU: CUDA events, warm-up, L2 flush, median of reps.
    CPU: wall-clock of the NumPy emulation, labelled as such."""
    if not isinstance(cfg, AttentionConfig):
        raise ConfigError(f"cfg must be an engine.AttentionConfig; got {type(cfg).__name__}.")
    _choose("algorithm", algorithm, ALGORITHMS)
    _choose("kernel", kernel, KERNELS)
    be = resolve_backend(backend)
    check_limits(cfg, algorithm=algorithm, trace=trace)
    if be == "numpy":
        from .cpu.timing import benchmark_numpy
        return benchmark_numpy(cfg, algorithm=algorithm, trace=trace, reps=reps or 5,
                               warmup=1 if warmup is None else warmup)
    from .gpu.timing import benchmark_gpu
    return benchmark_gpu(cfg, algorithm=algorithm, kernel=kernel, trace=trace,
                         reps=reps or 30, warmup=3 if warmup is None else warmup)
