"""A sweep over sequence length: every kernel at every length, naive skipped (never attempted)
where the memory model predicts it would not fit on the GPU. On the CPU each length's kernels
are timed together, interleaved call by call with the adaptive budget (the method of the
page's own config), so that a busy machine slows naive and flash alike."""
from __future__ import annotations

from typing import Callable

import pandas as pd

import engine
from app.core.runner import kernels_for, naive_fits_gpu
from app.features.timings.data import add_speedup, timing_row
from engine.facade import benchmark_cpu_together
from engine.model.guards import check_sweep

Run = tuple[str, str, str]                   # (label, algorithm, kernel)
# time_point(cfg, runs) -> for each run an engine.Timing, or the reason it could not run
PointTimer = Callable[[engine.AttentionConfig, list[Run]], list]


def cpu_point(cfg: engine.AttentionConfig, runs: list[Run]) -> list:
    """The runs of one config on the CPU, timed together (engine.facade.benchmark_cpu_together);
    a run over a server limit gets the limit's message and the others still run."""
    reasons = {}
    for label, algorithm, _ in runs:
        try:
            engine.check_limits(cfg, algorithm=algorithm)
        except ValueError as exc:
            reasons[label] = str(exc)
    timed = [r for r in runs if r[0] not in reasons]
    try:
        got = dict(zip((r[0] for r in timed),
                       benchmark_cpu_together(cfg, [r[1] for r in timed]) if timed else []))
    except ValueError as exc:
        got = {r[0]: str(exc) for r in timed}
    return [reasons.get(label, got.get(label)) for label, _, _ in runs]


def each_point(timer: Callable, backend: str, reps: int | None) -> PointTimer:
    """A PointTimer that times run after run with `timer(cfg, algorithm, backend, kernel,
    reps)` (the GPU's cached timing)."""
    def time_point(cfg, runs):
        out = []
        for _, algorithm, kernel in runs:
            try:
                out.append(timer(cfg, algorithm, backend, kernel, reps))
            except ValueError as exc:
                out.append(str(exc))
        return out
    return time_point


def run_sweep(cfg: engine.AttentionConfig, backend: str, gpu: engine.GpuProfile,
              lengths: list[int], time_point: PointTimer,
              on_point: Callable[[int, int, str], None] | None = None) -> pd.DataFrame:
    """Time each length's kernels with `time_point` (cpu_point, or each_point on a GPU).
    Points that cannot run get a `skipped` reason instead of figures; a sweep larger than the
    server's limit raises LimitError."""
    kernels = kernels_for(backend)
    check_sweep(len(lengths) * len(kernels))
    total, done, rows = len(lengths) * len(kernels), 0, []
    for n in lengths:
        c = cfg.with_(seq_q=n, seq_k=n)
        runs = []
        for label, algorithm, kernel in kernels:
            if algorithm == "naive" and not naive_fits_gpu(c, gpu):
                rows.append({"kernel": label, "seq": n, "skipped":
                             f"predicted not to fit in {gpu.name}'s memory"})
            else:
                runs.append((label, algorithm, kernel))
        for (label, _, _), got in zip(runs, time_point(c, runs) if runs else []):
            if isinstance(got, engine.Timing):
                rows.append({**timing_row(label, got), "seq": n, "skipped": ""})
            else:
                rows.append({"kernel": label, "seq": n, "skipped": str(got)})
        done += len(kernels)
        if on_point:
            on_point(done, total, f"N = {n}")
    df = pd.DataFrame(rows)
    for col in ("median_ms", "p10_ms", "p90_ms", "tflops", "peak_MiB", "iqr_rel"):
        if col not in df:
            df[col] = float("nan")
    df["noisy"] = (df["noisy"].fillna(False).astype(bool) if "noisy" in df else False)
    return add_speedup(df)
