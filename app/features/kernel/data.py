"""Tables for the Kernel page: every CUDA kernel of the project with its source, its compile
facts (live, or recorded in benchmarks/), and the block-to-SM schedule recorded by a kernel
(live Result.schedule or a file in benchmarks/)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import engine

from engine.facade import recorded
from engine.model import catalog, iomodel, launch, registry, tilemodel

KERNEL_DIR = Path(__file__).resolve().parents[3] / "kernels"
MAX_BLOCKS_DRAWN = 20000


# The kernels the Kernel page shows, forward then backward: rows of the kernel registry, whose
# keys the compile facts (live and recorded) use and whose labels the page shows; the builds of
# the sidebar's dtypes (the FP8 build, of its own source's file, belongs to the FP8 lesson).
KERNEL_SOURCES = tuple(k for d in ("forward", "backward") for k in registry.KERNELS
                       if k.direction == d and set(k.dtypes) & set(engine.DTYPES))
BY_KEY = {k.key: k for k in KERNEL_SOURCES}


def kernel_that_runs(kernel: str, cfg: engine.AttentionConfig, info: dict | None = None,
                     hopper: bool = True) -> str:
    """The key of the forward kernel that runs (or ran) cfg with the sidebar's kernel choice:
    the source a GPU run named in info, else the catalog's dispatch (the wgmma build on
    Hopper for its shapes, as on the H200 the recordings come from)."""
    named = Path(str((info or {}).get("kernel_source", ""))).name
    for k in KERNEL_SOURCES:
        if named == Path(k.source).name:   # recorded facts may predate kernels/' role folders
            return k.key
    if kernel == "tensorcore":
        return "wgmma" if catalog.WGMMA.takes(cfg) and hopper else "mma.sync"
    return "teaching"


def source_text(key: str, directory: Path = KERNEL_DIR) -> tuple[Path, str | None]:
    """The path of a kernel's CUDA source and its text (None when the file is absent)."""
    path = directory / BY_KEY[key].source
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


RUN_COLUMNS = ("block", "j_lo", "j_hi")   # a run schedule's lists beside SCHEDULE_FIELDS


def schedule_table(schedule) -> pd.DataFrame:
    """One row per thread block (or, in a run schedule, per run of a block): SM, start and end
    in µs from the first start, query tile and batch·head, and for runs the block, key tiles
    [j_lo, j_hi) and outcome. Accepts engine.Schedule or a recorded schedule dict; evenly
    samples down to MAX_BLOCKS_DRAWN rows."""
    get = (schedule.get if isinstance(schedule, dict)
           else lambda name: getattr(schedule, name, None))
    runs = get("unit") == "run"
    names = recorded.SCHEDULE_FIELDS + (RUN_COLUMNS if runs else ())
    try:
        cols = {name: np.asarray(get(name), dtype=np.int64) for name in names}
    except (TypeError, ValueError):
        cols = {}
    n = len(cols["sm_id"]) if cols and cols["sm_id"].ndim == 1 else -1
    outcome = list(get("outcome") or []) if runs else []
    if (n < 0 or any(c.ndim != 1 or len(c) != n for c in cols.values())
            or (runs and len(outcome) != n)):
        raise ValueError("A schedule needs block_bh, block_q_tile, sm_id, start_ns and end_ns "
                         "as lists of whole numbers of equal length (a run schedule also "
                         "block, j_lo, j_hi and outcome).")
    t0 = cols["start_ns"].min() if n else 0
    df = pd.DataFrame({"sm": cols["sm_id"], "q_tile": cols["block_q_tile"],
                       "bh": cols["block_bh"], "start_us": (cols["start_ns"] - t0) / 1e3,
                       "end_us": (cols["end_ns"] - t0) / 1e3})
    if runs:
        df = df.assign(**{name: cols[name] for name in RUN_COLUMNS},
                       outcome=[str(o) for o in outcome])
    if n > MAX_BLOCKS_DRAWN:
        df = df.iloc[np.linspace(0, n - 1, MAX_BLOCKS_DRAWN).astype(int)]
    df = df.reset_index(drop=True)
    return df.assign(slot=residency_slots(df))


def residency_slots(df: pd.DataFrame) -> np.ndarray:
    """For each block, a lane of its SM that no block overlapping it in time holds (the
    first free one, blocks taken by start): the blocks resident on an SM at once stack."""
    slot = np.zeros(len(df), dtype=np.int64)
    for _, blocks in df.groupby("sm", sort=False):
        ends: list[float] = []          # end time of the block last placed in each lane
        for idx in blocks.sort_values("start_us", kind="stable").index:
            start = df.at[idx, "start_us"]
            lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
            if lane == len(ends):
                ends.append(0.0)
            ends[lane] = df.at[idx, "end_us"]
            slot[idx] = lane
    return slot


def schedule_summary(df: pd.DataFrame) -> dict:
    """Blocks, runs (one per block unless the table has a "block" column), SMs used, span,
    blocks resident per SM at once (most lanes), waves (blocks over SMs × resident blocks)
    and the idle tail: the mean time SMs sit idle between their last block's end and the
    kernel's end, as a share of the span."""
    if df.empty:
        return {"blocks": 0, "runs": 0, "sms": 0, "span_us": 0.0, "resident": 0, "waves": 0.0,
                "idle_tail": 0.0}
    span = float(df.end_us.max() - df.start_us.min())
    resident = int(df.slot.max()) + 1 if "slot" in df else 1
    sms = int(df.sm.nunique())
    blocks = int(df.block.nunique()) if "block" in df else len(df)
    last_end = df.groupby("sm").end_us.max()
    tail = float((df.end_us.max() - last_end).mean()) / span if span > 0 else 0.0
    return {"blocks": blocks, "runs": len(df), "sms": sms, "span_us": span,
            "resident": resident, "waves": blocks / (sms * resident), "idle_tail": tail}


def recorded_how(rec: dict) -> str:
    """How a recorded schedule was taken, in one line."""
    if rec.get("unit") == "run":
        return ("Recorded on a real GPU with the mma.sync kernel's run log (`python -m "
                "benchmarks.run_log_schedule`), not this config. Stream-K launches always "
                "carry the log; the one-block-per-item build runs about 6% slower with it than without (H200).")
    return ("Recorded on a real GPU with the traced build (`python -m "
            "benchmarks.traced_schedule`), not this config.")


def timeline_caption(summary: dict, runs: bool) -> str:
    """What the timeline's bars are, for a schedule of blocks or of runs."""
    idle = (f"On average SMs idle {summary['idle_tail']:.0%} of the span after their last "
            f"block.")
    if runs:
        return (f"Each bar is one run: a thread block's key tiles j_lo to j_hi of one query "
                f"tile i, on the SM that ran it (%smid), in one of its {summary['resident']} "
                f"lanes when blocks shared the SM, from its start to its end (%globaltimer), "
                f"coloured by i. Under stream-K each block walks an even share of the line of "
                f"key tiles, so an item may be cut: the blocks that ran its first parts post "
                f"them (\"posted\" in the tooltip) and the last one merges them (\"merged\"). "
                f"{idle}")
    return (f"Each bar is one thread block: the SM it ran on (%smid), in one of its "
            f"{summary['resident']} lanes when blocks shared the SM, from its start to its end "
            f"(%globaltimer), coloured by its query tile i. Under a causal mask query tile i "
            f"reads only the key tiles up to its diagonal, so its work grows with i. {idle}")


def _shape(c: dict) -> str:
    return f"d={c.get('head_dim')}, {c.get('block_q')}×{c.get('block_k')}"


def _cfg_shape(cfg: engine.AttentionConfig) -> str:
    return f"d={cfg.head_dim}, {cfg.block_q}×{cfg.block_k}"


FACT_COLUMNS = ["this config", "build", "registers / thread", "spilled (local bytes / thread)",
                "shared memory / block", "threads / block", "blocks / SM"]


def recorded_facts_table(facts_file: dict, key: str,
                         cfg: engine.AttentionConfig | None = None) -> pd.DataFrame:
    """The recorded compile facts of one kernel, one row per build (dtype, config and traced
    or not), the build of cfg's dtype, head_dim and tiles first and marked: a build of
    another dtype is another kernel (its tiles take other bytes), never "this config"."""
    rows = []
    for f in facts_file.get("facts", []):
        if not isinstance(f, dict) or f.get("kernel") != key:
            continue
        c = f.get("config") if isinstance(f.get("config"), dict) else {}
        naive = key.startswith("naive")
        matches = cfg is not None and c.get("dtype") == cfg.dtype and (
            c.get("head_dim") == cfg.head_dim if naive else
            (c.get("head_dim"), c.get("block_q"), c.get("block_k"))
            == (cfg.head_dim, cfg.block_q, cfg.block_k))
        rows.append({"this config": "◀" if matches else "",
                     "build": (f"N={c.get('seq_k')}" if naive else _shape(c))
                     + f", {c.get('dtype', '?')}" + (", traced" if f.get("traced") else ""),
                     "registers / thread": f.get("registers_per_thread"),
                     "spilled (local bytes / thread)": f.get("local_bytes_per_thread"),
                     "shared memory / block": f.get("dynamic_smem_bytes", 0)
                     + f.get("static_smem_bytes", 0),
                     "threads / block": f.get("threads_per_block"),
                     "blocks / SM": f.get("blocks_per_sm")})
    df = pd.DataFrame(rows, columns=FACT_COLUMNS)
    return df.sort_values("this config", ascending=False, kind="stable").reset_index(drop=True)


def recorded_dtypes(facts_file: dict, key: str) -> list[str]:
    """The dtypes of the recorded builds of one kernel, in order of first appearance."""
    got = [(f.get("config") or {}).get("dtype") for f in facts_file.get("facts", [])
           if isinstance(f, dict) and f.get("kernel") == key]
    return list(dict.fromkeys(d for d in got if d))


def _threads(key: str, cfg: engine.AttentionConfig) -> int | None:
    return {"teaching": launch.TEACHING_THREADS, "mma.sync": launch.MMA_SYNC_THREADS,
            "wgmma": launch.wgmma_threads(cfg),
            "backward teaching": launch.BACKWARD_TEACHING_THREADS,
            "backward mma.sync": launch.backward_mma_threads(cfg),
            "backward wgmma": launch.backward_wgmma_threads(cfg)}.get(key)


def model_facts_row(key: str, cfg: engine.AttentionConfig,
                    gpu: engine.GpuProfile) -> dict | None:
    """The model's figures of `key` for cfg on `gpu` (shared memory per block from the
    kernel's layout, engine.model.iomodel.smem_parts; blocks per SM from the tile model's
    occupancy count, registers not counted), as a row of recorded_facts_table marked
    "◀ model"; None for a kernel without a shared-memory layout (the naive kernels), or a
    dtype or shape the kernel does not take."""
    k = BY_KEY[key]
    threads = _threads(key, cfg)
    if k.smem_layout is None or threads is None or not k.takes(cfg):
        return None
    smem = iomodel.smem_bytes(cfg, k.smem_layout)
    occ = tilemodel.model_occupancy(gpu, smem, threads)
    fits = occ.limited_by != "does not fit"
    return {"this config": "◀ model",
            "build": f"{_cfg_shape(cfg)}, {cfg.dtype} (model on the {gpu.name} profile, "
                     f"not compiled{'' if fits else '; does not fit a block'})",
            "registers / thread": None, "spilled (local bytes / thread)": None,
            "shared memory / block": smem, "threads / block": threads,
            "blocks / SM": occ.blocks_per_sm}


def facts_for_config(facts_file: dict | None, key: str, cfg: engine.AttentionConfig,
                     gpu: engine.GpuProfile) -> tuple[pd.DataFrame, str]:
    """(table, note) for the Kernel page: the recorded builds, cfg's own first; when no
    recorded build is cfg's (dtype, head_dim, tiles), the model's row for cfg first and a
    note saying which dtypes are recorded and that the first row is a model."""
    table = (recorded_facts_table(facts_file, key, cfg) if facts_file
             else pd.DataFrame(columns=FACT_COLUMNS))
    if (table["this config"] == "◀").any():
        return table, ""
    dtypes = recorded_dtypes(facts_file, key) if facts_file else []
    have = (f"the recorded builds are {', '.join(dtypes)}" if dtypes
            else "no build of it is recorded")
    row = model_facts_row(key, cfg, gpu)
    if row is None:
        return table, (f"No build for this config ({_cfg_shape(cfg)}, {cfg.dtype}) is "
                       f"recorded ({have}), and this kernel does not take it: no figure for "
                       f"this config.")
    table = pd.concat([pd.DataFrame([row], columns=FACT_COLUMNS), table], ignore_index=True)
    return table, (f"No build for this config ({_cfg_shape(cfg)}, {cfg.dtype}) is "
                   f"recorded ({have}; a build of another dtype or shape is another kernel, "
                   f"with other bytes). The first row, \"◀ model\", is the model's figure "
                   f"for this config: shared memory from the kernel's layout, blocks per SM "
                   f"from shared memory, threads and the block limit (registers not counted).")


def recorded_label(rec: dict) -> str:
    """One line naming a recorded schedule: what it shows, the kernel, config, device, date."""
    c = rec.get("config") if isinstance(rec.get("config"), dict) else {}
    source = Path(str((rec.get("info") or {}).get("kernel_source", ""))).name
    build = next((k.label for k in KERNEL_SOURCES if Path(k.source).name == source),
                 f"{rec.get('kernel', '?')} kernel")
    dev = (rec.get("device") or {}).get("name", "unknown GPU")
    shape = (f"B·H={c.get('batch', 0) * c.get('heads', 0)}, N={c.get('seq_q')}, "
             f"{_shape(c)}{', causal' if c.get('causal') else ''}, {c.get('dtype')}"
             if c else "config not stated")
    what = rec.get("label") or "recorded schedule"
    return f"{what} — {build}; {shape}; {dev}, {rec.get('date', '?')}"
