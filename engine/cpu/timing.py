"""Wall-clock timing of the NumPy emulation. These are CPU figures, never GPU figures."""
from __future__ import annotations

import time

import numpy as np

from . import forward as numpy_backend
from ..config import AttentionConfig
from ..inputs import make_inputs
from ..iomodel import peak_memory
from ..results import Timing

CPU_METHOD = ("CPU emulation (NumPy, float32 arithmetic): wall-clock time.perf_counter around "
              "each call, {warmup} warm-up call(s), median of {reps} calls. Not a GPU figure.")


def benchmark_numpy(cfg: AttentionConfig, algorithm: str, trace: bool, reps: int,
                    warmup: int) -> Timing:
    q, k, v = make_inputs(cfg)
    fn = numpy_backend.naive if algorithm == "naive" else (
        lambda c, a, b, d: numpy_backend.flash(c, a, b, d, trace=trace))
    for _ in range(warmup):
        fn(cfg, q, k, v)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(cfg, q, k, v)
        samples.append((time.perf_counter() - t0) * 1e3)
    med = float(np.median(samples))
    return Timing(median_ms=med, p10_ms=float(np.percentile(samples, 10)),
                  p90_ms=float(np.percentile(samples, 90)), reps=reps,
                  tflops=cfg.flops / (med * 1e-3) / 1e12,
                  peak_bytes=peak_memory(cfg, algorithm, trace),
                  method=CPU_METHOD.format(warmup=warmup, reps=reps),
                  backend="numpy", algorithm=algorithm, kernel=None, samples_ms=samples)
