"""A sweep over sequence length: every kernel at every length, naive skipped (never attempted)
where the memory model predicts it would not fit on the GPU."""
from __future__ import annotations

from typing import Callable

import pandas as pd

import engine
from app.core.runner import kernels_for, naive_fits_gpu
from app.features.timings.data import add_speedup, timing_row
from engine.model.guards import check_sweep


def run_sweep(cfg: engine.AttentionConfig, backend: str, gpu: engine.GpuProfile,
              lengths: list[int], timer: Callable, reps: int,
              on_point: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Time each (length, kernel); `timer(cfg, algorithm, backend, kernel, reps)` returns an
    engine.Timing. Points that cannot run get a `skipped` reason instead of figures; a sweep
    larger than the server's limit raises LimitError."""
    kernels = kernels_for(backend)
    check_sweep(len(lengths) * len(kernels))
    total, done, rows = len(lengths) * len(kernels), 0, []
    for n in lengths:
        c = cfg.with_(seq_q=n, seq_k=n)
        for label, algorithm, kernel in kernels:
            if algorithm == "naive" and not naive_fits_gpu(c, gpu):
                rows.append({"kernel": label, "seq": n, "skipped":
                             f"predicted not to fit in {gpu.name}'s memory"})
            else:
                try:
                    rows.append({**timing_row(label, timer(c, algorithm, backend, kernel, reps)),
                                 "seq": n, "skipped": ""})
                except ValueError as exc:
                    rows.append({"kernel": label, "seq": n, "skipped": str(exc)})
            done += 1
            if on_point:
                on_point(done, total, f"N = {n}, {label}")
    df = pd.DataFrame(rows)
    for col in ("median_ms", "p10_ms", "p90_ms", "tflops", "peak_MB"):
        if col not in df:
            df[col] = float("nan")
    return add_speedup(df)
