"""Tables for the Kernel page: the CUDA source by path, compile facts, and the block-to-SM
schedule recorded by a kernel (live Result.schedule or a file in benchmarks/)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import engine

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels"
MAX_BLOCKS_DRAWN = 20000
SCHEDULE_FIELDS = ("block_bh", "block_q_tile", "sm_id", "start_ns", "end_ns")


def kernel_source(kernel: str, info: dict | None = None,
                  directory: Path = KERNEL_DIR) -> tuple[Path, str | None]:
    """The path of the CUDA source that ran and its text (None when the file is absent): the
    file a GPU run named in info["kernel_source"] (the tensor-core kernel dispatches to
    flash_wgmma.cu on Hopper for some shapes), else kernels/flash_<kernel>.cu."""
    named = Path(str((info or {}).get("kernel_source", ""))).name   # a file name, never a path
    path = directory / (named if named.endswith(".cu") else f"flash_{kernel}.cu")
    try:
        return path, path.read_text()
    except OSError:
        return path, None


SCALARS = (str, int, float, bool, np.integer, np.floating)


def facts_table(info: dict) -> pd.DataFrame:
    """The facts a backend reported (compile facts, device, ...) as text: scalars, and lists
    of scalars joined by spaces."""
    rows = []
    for k, v in info.items():
        if isinstance(v, SCALARS):
            rows.append((k, str(v)))
        elif isinstance(v, (list, tuple)) and all(isinstance(x, SCALARS) for x in v):
            rows.append((k, " ".join(str(x) for x in v)))
    return pd.DataFrame(rows, columns=["fact", "value"])


def schedule_table(schedule) -> pd.DataFrame:
    """One row per thread block: SM, start and end in µs from the first start, query tile
    and batch·head. Accepts engine.Schedule or a recorded schedule dict; evenly samples
    down to MAX_BLOCKS_DRAWN blocks."""
    get = (schedule.get if isinstance(schedule, dict)
           else lambda name: getattr(schedule, name, None))
    try:
        cols = {name: np.asarray(get(name), dtype=np.int64) for name in SCHEDULE_FIELDS}
    except (TypeError, ValueError):
        cols = {}
    n = len(cols["sm_id"]) if cols and cols["sm_id"].ndim == 1 else -1
    if n < 0 or any(c.ndim != 1 or len(c) != n for c in cols.values()):
        raise ValueError("A schedule needs block_bh, block_q_tile, sm_id, start_ns and end_ns "
                         "as lists of whole numbers of equal length.")
    t0 = cols["start_ns"].min() if n else 0
    df = pd.DataFrame({"sm": cols["sm_id"], "q_tile": cols["block_q_tile"],
                       "bh": cols["block_bh"], "start_us": (cols["start_ns"] - t0) / 1e3,
                       "end_us": (cols["end_ns"] - t0) / 1e3})
    if n > MAX_BLOCKS_DRAWN:
        df = df.iloc[np.linspace(0, n - 1, MAX_BLOCKS_DRAWN).astype(int)]
    return df.reset_index(drop=True)


def schedule_summary(df: pd.DataFrame) -> dict:
    if df.empty:
        return {"blocks": 0, "sms": 0, "span_us": 0.0}
    return {"blocks": len(df), "sms": int(df.sm.nunique()),
            "span_us": float(df.end_us.max() - df.start_us.min())}


def recorded_config(schedule: dict) -> engine.AttentionConfig | None:
    """The config a recorded schedule ran, if its file names a valid one."""
    try:
        return engine.AttentionConfig(**schedule.get("config", {}))
    except (TypeError, ValueError):
        return None
