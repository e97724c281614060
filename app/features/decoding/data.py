"""Data of the Decoding page: a DecodeConfig from the sidebar and the page's controls, the
splits of the cache, each split's softmax state for the merge, the paged pool and its block
table, bytes per token, and times (model, measured, recorded). Pure functions: DataFrames out;
byte counts from engine.model.iomodel."""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine import AttentionConfig, GpuProfile
from engine.model import iomodel
from engine.model.decode_config import (AUTO, AUTO_BLOCKS_PER_SM, MAX_SPLITS, MIN_SPLIT_KEYS,
                                        DecodeConfig, splits_without_empty)
from engine.model.devices import DEFAULT_PROFILE, PROFILES
from app.features.decoding.floor import floor_ms, recorded_fraction, recorded_profile

POOL_COLUMNS = 32          # physical pages drawn per row of the pool
POOL_CAP = 4096            # pages drawn at most (the rest named in a caption)


def default_kv_heads(heads: int, seq_q: int) -> int:
    """The page's first view shows grouped-query attention: the largest group of 4, 2 or 1
    query heads per KV head that divides heads and keeps group · seq_q rows under 32."""
    for group in (4, 2, 1):
        if heads % group == 0 and group * seq_q <= 32:
            return heads // group
    return heads


def decode_config(cfg: AttentionConfig, seq_k: int, seq_q: int, kv_heads: int, splits,
                  page) -> DecodeConfig:
    """The decode step of the sidebar's batch, heads, head_dim, dtype, scale and seed and
    the page's cache length, query tokens, KV heads, split count and page size (ConfigError
    when the combination is not allowed)."""
    return DecodeConfig(batch=cfg.batch, heads=cfg.heads, kv_heads=kv_heads, seq_q=seq_q,
                        seq_k=seq_k, head_dim=cfg.head_dim, dtype=cfg.dtype,
                        num_splits=splits, page_size=None if page == "none" else page,
                        scale=cfg.scale, seed=cfg.seed)


def split_strip(res: engine.DecodeResult) -> pd.DataFrame:
    """One row per split: its keys [k0, k1)."""
    b = res.bounds
    return pd.DataFrame({"split": np.arange(res.num_splits), "k0": b[:-1], "k1": b[1:],
                         "keys": np.diff(b)})


def split_states(res: engine.DecodeResult, b: int, h: int, t: int) -> pd.DataFrame:
    """The trace of query row (b, h, t), one row per split: its keys, m_s, l_s (seen=False
    for a split the row does not see; m_s is then drawn at the smallest seen m_s), the
    rescale exp(m_s - m_final) and its share rescale·l_s / l_final of the final sum."""
    tr = res.trace
    m, l = tr.split_max[b, h, t].astype(float), tr.split_sum[b, h, t].astype(float)
    seen = np.isfinite(m)
    table = split_strip(res)
    table["seen"] = seen
    table["m_s"] = np.where(seen, m, m[seen].min())
    table["l_s"] = l
    table["rescale"] = tr.rescale[b, h, t].astype(float)
    table["share"] = table["rescale"] * l / float(tr.l_final[b, h, t])
    table["m_final"] = float(tr.m_final[b, h, t])
    table["l_final"] = float(tr.l_final[b, h, t])
    return table


def merge_gap(trace) -> float:
    """How exactly the splits' sums merge: the largest gap between Σ_s l_s·exp(m_s − m_final)
    and l_final over every row, relative to the largest l_final."""
    merged = (trace.split_sum * trace.rescale).sum(-1)
    return float(abs(merged - trace.l_final).max() / trace.l_final.max())


def pool_cells(cfg: DecodeConfig, table: np.ndarray, bounds: np.ndarray) -> pd.DataFrame:
    """The physical pages of the paged pool (the first POOL_CAP), POOL_COLUMNS a row: which
    sequence owns each, its logical page, its keys and the split of its first key."""
    seq, logical = np.divmod(np.argsort(table.ravel(), kind="stable"), cfg.pages_per_seq)
    n = min(cfg.num_pages, POOL_CAP)
    page = np.arange(n)
    first = logical[:n] * cfg.page_size
    split = np.searchsorted(bounds, first, side="right") - 1
    return pd.DataFrame({"page": page, "col": page % POOL_COLUMNS, "row": page // POOL_COLUMNS,
                         "sequence": seq[:n], "logical": logical[:n], "k0": first,
                         "k1": np.minimum(first + cfg.page_size, cfg.seq_k), "split": split})


def layouts(cfg: DecodeConfig) -> list[tuple[str, DecodeConfig]]:
    """This config beside multi-head (kv_heads = heads) and multi-query (kv_heads = 1)."""
    out = [(f"multi-head (kv_heads = {cfg.heads})", cfg.with_(kv_heads=cfg.heads,
                                                                num_splits=1)),
           (f"this config (kv_heads = {cfg.kv_heads})", cfg),
           ("multi-query (kv_heads = 1)", cfg.with_(kv_heads=1, num_splits=1))]
    seen, unique = set(), []
    for name, c in out:
        if c.kv_heads not in seen:
            seen.add(c.kv_heads)
            unique.append((name, c))
    return unique


def bytes_table(cfg: DecodeConfig, gpu: GpuProfile) -> pd.DataFrame:
    """K and V bytes read per generated token and the step's HBM floor (floor.py: the
    datasheet bandwidth), for this config and the multi-head and multi-query layouts of its heads."""
    rows = []
    for name, c in layouts(cfg):
        rows.append({"layout": name, "kv_heads": c.kv_heads,
                     "bytes_per_token": iomodel.decode_bytes_per_token(c),
                     "floor_us": 1e3 * floor_ms(c, gpu)})
    return pd.DataFrame(rows)


def split_counts(cfg: DecodeConfig, sms: int) -> list[int]:
    """Powers of two up to MAX_SPLITS, and the auto rule's count, that leave no split empty."""
    wanted = {2 ** k for k in range(8) if 2 ** k <= MAX_SPLITS} | {cfg.splits_on(sms)}
    return sorted(s for s in wanted if s <= cfg.seq_k and splits_without_empty(cfg.seq_k, s))


def splits_model(cfg: DecodeConfig, gpu: GpuProfile) -> pd.DataFrame:
    """The model's time of one step (iomodel.decode_model_ms) per split count, beside the
    HBM floor."""
    counts = split_counts(cfg, gpu.sms)
    floor = floor_ms(cfg, gpu)
    model = pd.DataFrame({"num_splits": counts, "series": "model",
                          "ms": [iomodel.decode_model_ms(cfg, s, gpu) for s in counts]})
    floor_rows = pd.DataFrame({"num_splits": counts, "series": "HBM floor", "ms": floor})
    return pd.concat([model, floor_rows], ignore_index=True)


# A recorded H200 step (benchmarks/results/decode_h200_2026-11-28.json: batch 1, 32 heads,
# 8 KV heads, seq_k 32768, d 128, float16, auto = 32 splits) and its HBM floor (the K and V
# bytes at the datasheet's 4.8 TB/s), µs: what is left over is a fixed cost no split count
# removes (launch, the ramp of one wave, the merge). A test holds them to the file.
RECORDED_STEP_US, RECORDED_FLOOR_US = 41.4, 28.0


def auto_against_model(cfg: DecodeConfig, gpu: GpuProfile, ratio_shown: float = 1.25) -> str:
    """Why the auto rule's split count is not the model's fastest, where the model makes
    another count at least `ratio_shown` times faster; "" where auto is (about) the model's
    best. The model (iomodel.decode_model_ms) charges bytes and idle SMs only; auto also keeps
    splits at least MIN_SPLIT_KEYS keys long, for the fixed costs the model leaves out."""
    auto_cfg = cfg.with_(num_splits=AUTO)
    auto = auto_cfg.splits_on(gpu.sms)
    counts = split_counts(auto_cfg, gpu.sms)
    times = {n: iomodel.decode_model_ms(cfg, n, gpu) for n in counts}
    best = min(times, key=times.get)
    ratio = times[auto] / times[best]
    if ratio < ratio_shown:
        return ""
    groups = cfg.batch * cfg.kv_heads
    fill = AUTO_BLOCKS_PER_SM * gpu.sms // groups
    longest = max(1, cfg.seq_k // MIN_SPLIT_KEYS)
    busy = min(1.0, groups * auto / gpu.sms)
    floor_us = 1e3 * iomodel.decode_floor_ms(cfg, gpu.hbm_gbps * 1e9)
    if longest < fill:
        why = (f"auto keeps every split at least {MIN_SPLIT_KEYS} keys long (seq_k "
               f"{cfg.seq_k:,} ÷ {MIN_SPLIT_KEYS} = {longest}, taken down to a power of two), "
               f"so that each block's fixed cost — its launch and start, the latency of its "
               f"first key tile, its share of the merge — stays small beside the keys it reads")
    else:
        why = (f"auto stops at {AUTO_BLOCKS_PER_SM} thread blocks per SM ({AUTO_BLOCKS_PER_SM}"
               f" · {gpu.sms} SMs ÷ {groups} sequence·KV-head groups, taken down to a power "
               f"of two), the count measured fastest on the H200, where more blocks made a "
               f"partial second wave")
    return (f"**Why auto takes {auto} splits when the model's fastest is {best}** "
            f"({ratio:.1f}× faster in the model): {why}. The model has no such cost: it "
            f"charges only bytes and the SMs left idle ({groups * auto:,} blocks keep "
            f"{busy:.0%} of the {gpu.sms} SMs busy), so any count that fills the SMs wins in "
            f"it. This whole step's HBM floor is {floor_us:.2g} µs, while a recorded H200 "
            f"step (batch 1, 8 KV heads, seq_k 32,768) took {RECORDED_STEP_US:g} µs against "
            f"its {RECORDED_FLOOR_US:g} µs floor: about "
            f"{RECORDED_STEP_US - RECORDED_FLOOR_US:.0f} µs of fixed cost that no split count "
            f"removes. So the model's {ratio:.1f}× is a gap in SM fill, not a measured gain; "
            f"the auto rule was measured only at the decode targets (H200, batch 1–8, 8 KV "
            f"heads, seq_k 32k–128k), not at this shape.")


def floor_sweep(cfg: DecodeConfig, gpu: GpuProfile) -> pd.DataFrame:
    """Over cache lengths 1k to 128k: the HBM floor and the model's time with the auto split
    count and with one split."""
    rows = []
    for n in (2 ** k for k in range(10, 18)):
        c = cfg.with_(seq_k=n, num_splits=AUTO)
        auto = c.splits_on(gpu.sms)
        rows += [{"seq_k": n, "series": "HBM floor (K, V bytes ÷ bandwidth)",
                  "ms": floor_ms(c, gpu)},
                 {"seq_k": n, "series": "model, auto splits",
                  "ms": iomodel.decode_model_ms(c, auto, gpu)},
                 {"seq_k": n, "series": "model, num_splits = 1",
                  "ms": iomodel.decode_model_ms(c, 1, gpu)}]
    return pd.DataFrame(rows)


def measured_table(records: list[dict], counts: list[int]) -> pd.DataFrame:
    """Timing records (engine.gpu.decode_bench.decode_record) as chart rows; a record without
    a split count (PyTorch's SDPA) becomes a flat line across `counts`."""
    rows = [{"num_splits": s, "series": _series(r), "ms": r["median_ms"],
             "p10_ms": r["p10_ms"], "p90_ms": r["p90_ms"],
             "floor_fraction": r["floor_fraction"]}
            for r in records
            for s in ([r["num_splits"]] if r["num_splits"] else [min(counts), max(counts)])]
    return pd.DataFrame(rows, columns=["num_splits", "series", "ms", "p10_ms", "p90_ms",
                                       "floor_fraction"])


def _series(record: dict) -> str:
    if record["kernel"] == "torch_sdpa":
        return "PyTorch SDPA"
    page = record.get("page_size")
    return "flash-decoding, " + (f"pages of {page}" if page else "contiguous")


SHAPE_FIELDS = ("batch", "heads", "kv_heads", "seq_q", "seq_k", "head_dim", "dtype")


def paged_against_contiguous(rows: pd.DataFrame) -> str:
    """For one recorded shape (recorded_table's rows): each paged series' time over the
    contiguous cache's at the same split count, and why a paged pool can read faster; ""
    where the shape has no paged line beside a contiguous one."""
    contiguous_name = _series({"kernel": "flash_decode", "page_size": None})
    contiguous = rows[rows.series == contiguous_name].groupby("num_splits").ms.first()
    paged = rows[rows.series.str.startswith("flash-decoding, pages")
                 & rows.num_splits.isin(contiguous.index)].sort_values(["series", "num_splits"])
    if paged.empty:
        return ""
    ratio = paged.ms.to_numpy() / contiguous[paged.num_splits].to_numpy()
    text = "Paged against contiguous, time over time: " + "; ".join(
        f"{r.series.removeprefix('flash-decoding, ')} {x:.2f}× at {int(r.num_splits)} splits"
        for r, x in zip(paged.itertuples(), ratio)) + "."
    if (ratio < 1).all():
        return text + (" A page holds every KV head's rows of its keys (the pool is pages × "
                       "kv_heads × page_size × head_dim), so the blocks of one split and "
                       "sequence read one region of memory together, while a contiguous cache "
                       "keeps each KV head's rows apart; on an H200 that made paged steps "
                       "faster whether the pages lay in order or scattered (docs/RESULTS.md, "
                       "Decoding).")
    return text + (" A paged step also reads the block table: each lane looks up its pages "
                   "one key tile ahead of its copies. Where the copy engine brings the tiles "
                   "(Hopper, from 1.5 blocks an SM), a tile comes in one copy for the whole "
                   "block from a contiguous cache or from pages of whole tiles, while a tile "
                   "that spans pages (pages smaller than a tile) comes warp by warp.")


def recorded_table(files: list[dict], gpu: GpuProfile | None = None) -> pd.DataFrame:
    """Every recorded decode timing with the fields the charts need, one row each, with its
    file and shape in words; floor_fraction against the page's one HBM floor (floor.py) on
    the GPU the file was recorded on (`gpu`, default the H200 profile, when none matches)."""
    gpu = gpu or PROFILES[DEFAULT_PROFILE]
    rows = []
    for f in files:
        for r in f.get("results", []):
            if not isinstance(r, dict) or not all(k in r for k in (*SHAPE_FIELDS, "kernel",
                                                                    "median_ms")):
                continue
            shape = (f"B={r['batch']}, H={r['heads']}, kv_heads={r['kv_heads']}, "
                     f"seq_q={r['seq_q']}, seq_k={r['seq_k']}, d={r['head_dim']}, {r['dtype']}")
            rows.append({"file": f["file"], "shape": shape, "series": _series(r),
                         "num_splits": r.get("num_splits"), "ms": r["median_ms"],
                         "kv_bytes": r.get("kv_bytes"),
                         "floor_fraction": recorded_fraction(r, recorded_profile(f, gpu))})
    return pd.DataFrame(rows, columns=["file", "shape", "series", "num_splits", "ms",
                                       "kv_bytes", "floor_fraction"])


def decode_shape_text(cfg: DecodeConfig) -> str:
    """A decode config's shape in the words of recorded_table's "shape" column."""
    return (f"B={cfg.batch}, H={cfg.heads}, kv_heads={cfg.kv_heads}, seq_q={cfg.seq_q}, "
            f"seq_k={cfg.seq_k}, d={cfg.head_dim}, {cfg.dtype}")


def closest_shape(rows: pd.DataFrame, cfg: DecodeConfig) -> str:
    """The recorded shape (a value of rows["shape"]) nearest cfg's: the same one if recorded,
    else the same head_dim and dtype first, then the nearest kv_heads, batch and seq_k."""
    import math
    import re

    def distance(shape: str):
        f = dict(re.findall(r"(\w+)=(\d+)", shape))
        return (int(f["d"]) != cfg.head_dim, not shape.endswith(cfg.dtype),
                abs(math.log2(int(f["kv_heads"]) / cfg.kv_heads)),
                abs(math.log2(int(f["B"]) / cfg.batch)),
                abs(math.log2(int(f["seq_k"]) / cfg.seq_k)), shape)
    return min(rows["shape"].unique(), key=distance)


def spread_unsplit(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows without a split count (PyTorch's SDPA) drawn as flat lines across the split
    counts of the other rows."""
    split = rows[rows.num_splits.notna()]
    flat = rows[rows.num_splits.isna()]
    if flat.empty or split.empty:
        return split
    lo, hi = split.num_splits.min(), split.num_splits.max()
    spread = pd.concat([flat.assign(num_splits=lo), flat.assign(num_splits=hi)])
    return pd.concat([split, spread], ignore_index=True)
