"""Wall-clock timing of the NumPy emulation. These are CPU figures, never GPU figures."""
from __future__ import annotations

import time

import numpy as np

from . import backward as numpy_backward
from . import forward as numpy_backend
from ..model.config import AttentionConfig
from ..inputs import make_dout, make_inputs
from ..model.iomodel import peak_memory
from ..results import Timing

CPU_METHOD = ("CPU emulation (NumPy, float32 arithmetic){what}: wall-clock time.perf_counter "
              "around each call, {warmup} warm-up call(s), median of {reps} calls. "
              "Not a GPU figure.")


def _forward_call(cfg: AttentionConfig, algorithm: str, trace: bool):
    q, k, v = make_inputs(cfg)
    if algorithm == "naive":
        return lambda: numpy_backend.naive(cfg, q, k, v)
    return lambda: numpy_backend.flash(cfg, q, k, v, trace=trace)


def _backward_call(cfg: AttentionConfig, algorithm: str, trace: bool):
    """The backward alone: inputs, dout and the forward's O and lse are made here, untimed."""
    q, k, v = make_inputs(cfg)
    dout = make_dout(cfg)
    O, lse = numpy_backward.forward_state(cfg, q, k, v, algorithm)
    if algorithm == "naive":
        return lambda: numpy_backward.naive(cfg, q, k, v, dout, O, lse)
    return lambda: numpy_backward.flash(cfg, q, k, v, dout, O, lse, trace=trace)


def benchmark_numpy(cfg: AttentionConfig, algorithm: str, trace: bool, reps: int,
                    warmup: int, direction: str = "forward") -> Timing:
    backward = direction == "backward"
    call = (_backward_call if backward else _forward_call)(cfg, algorithm, trace)
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e3)
    med = float(np.median(samples))
    return Timing(median_ms=med, p10_ms=float(np.percentile(samples, 10)),
                  p90_ms=float(np.percentile(samples, 90)), reps=reps,
                  tflops=cfg.flops_of(direction) / (med * 1e-3) / 1e12,
                  peak_bytes=peak_memory(cfg, algorithm, trace, direction),
                  method=CPU_METHOD.format(what=", backward pass alone" if backward else "",
                                           warmup=warmup, reps=reps),
                  backend="numpy", algorithm=algorithm, kernel=None, samples_ms=samples)
