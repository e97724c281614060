"""Tables for the Timings page: measured timings, sweeps over sequence length, the memory model
with naive attention's wall, and GPU results recorded in benchmarks/."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

import engine
from engine import iomodel, recorded
from engine.config import MAX_SEQ

BENCH_DIR_ENV = "FA_LAB_BENCH_DIR"   # where recorded results are read (tests point it elsewhere)
TIMING_COLUMNS = ["kernel", "median_ms", "p10_ms", "p90_ms", "reps", "tflops", "peak_MB",
                  "backend", "method"]


def bench_dir() -> Path:
    return Path(os.environ.get(BENCH_DIR_ENV) or recorded.BENCH_DIR)


def timing_row(label: str, t: engine.Timing) -> dict:
    return {"kernel": label, "median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
            "reps": t.reps, "tflops": t.tflops, "peak_MB": t.peak_bytes / 1e6,
            "backend": t.backend, "method": t.method}


def timing_table(entries: list[tuple[str, engine.Timing]]) -> pd.DataFrame:
    return pd.DataFrame([timing_row(label, t) for label, t in entries], columns=TIMING_COLUMNS)


def stage_table(t: engine.Timing) -> pd.DataFrame:
    """Naive attention's stages (e.g. QKᵀ, softmax, PV) with their median times."""
    return pd.DataFrame({"stage": list(t.stages), "ms": [float(v) for v in t.stages.values()]})


def sweep_lengths(smallest: int, largest: int) -> list[int]:
    """Powers of two from smallest to largest."""
    n, out = smallest, []
    while n <= largest:
        out.append(n)
        n *= 2
    return out


def memory_wall(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
                direction: str = "forward") -> int | None:
    """Smallest seq_q = seq_k at which naive attention's peak memory (of the forward or the
    backward) exceeds the GPU's memory (predicted by iomodel.peak_memory; never attempted), or
    None below the structural bound."""
    def too_big(n: int) -> bool:
        return iomodel.peak_memory(cfg.with_(seq_q=n, seq_k=n), "naive",
                                   direction=direction) > gpu.memory_bytes
    if not too_big(MAX_SEQ):
        return None
    lo, hi = 1, MAX_SEQ
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if too_big(mid) else (mid + 1, hi)
    return lo


HBM_MODELS = {("forward", "naive"): iomodel.naive_hbm, ("forward", "flash"): iomodel.flash_hbm,
              ("backward", "naive"): iomodel.naive_backward_hbm,
              ("backward", "flash"): iomodel.flash_backward_hbm}


def memory_table(cfg: engine.AttentionConfig, ns: list[int],
                 direction: str = "forward") -> pd.DataFrame:
    """Peak memory and HBM bytes of naive and flash (forward or backward) at N_q = N_k = n."""
    rows = []
    for n in ns:
        c = cfg.with_(seq_q=n, seq_k=n)
        for algo, label in (("naive", "naive"), ("flash", "FlashAttention")):
            rows.append({"seq": n, "algorithm": label,
                         "peak_GB": iomodel.peak_memory(c, algo, direction=direction) / 1e9,
                         "hbm_GB": HBM_MODELS[direction, algo](c).total / 1e9})
    return pd.DataFrame(rows)


def add_speedup(sweep: pd.DataFrame) -> pd.DataFrame:
    """Speedup of each kernel over naive at the same sequence length (NaN without naive)."""
    naive = sweep[sweep.kernel == "naive"].groupby("seq").median_ms.min()
    return sweep.assign(speedup=sweep.seq.map(naive) / sweep.median_ms)


RECORDED_FIELDS = ("kernel", "batch", "heads", "seq_q", "seq_k", "head_dim", "dtype", "causal",
                   "median_ms")


def recorded_table(files: list[dict]) -> pd.DataFrame:
    """Every recorded result as one row, with the device, date and file it came from; results
    lacking a field the charts need are left out. `shape` groups a sweep's lines: heads,
    head_dim, dtype and causal (batch may shrink as N grows, holding B·N constant)."""
    rows = []
    for f in files:
        dev = f.get("device") if isinstance(f.get("device"), dict) else {}
        for r in f.get("results", []):
            if isinstance(r, dict) and all(k in r for k in RECORDED_FIELDS):
                rows.append({**r, "device": dev.get("name", "unknown GPU"),
                             "date": f.get("date", "unknown date"), "file": f["file"],
                             "method": f.get("method", "")})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["seq"] = df.seq_q
    df["tokens"] = df.batch * df.seq_q
    df["peak_MB"] = df.peak_bytes / 1e6 if "peak_bytes" in df else np.nan
    df["shape"] = [f"H={h}, d={d}, {t}" + (", causal" if c else "")
                   for h, d, t, c in zip(df.heads, df.head_dim, df.dtype, df.causal)]
    return df


def recorded_speedup(df: pd.DataFrame) -> pd.DataFrame:
    parts = [add_speedup(g) for _, g in df.groupby(["file", "shape"])]
    return pd.concat(parts) if parts else df.assign(speedup=np.nan)
