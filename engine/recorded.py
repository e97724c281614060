"""GPU results recorded in benchmarks/results/ (JSON), shown by the app when no GPU is present.

A benchmark file (benchmarks/results/bench_*.json) holds:
  {"device": {"name", "sms", "driver", "cuda_runtime", "cupy_version", "torch_version", ...},
   "date": "YYYY-MM-DD", "method": "<timing method>",
   "direction": "forward" | "backward"   (absent in older files: forward),
   "results": [{"kernel": "naive" | "teaching" | "tensorcore" | "torch_flash" | "torch_cudnn"
                          | "torch_math", "direction", "batch", "heads", "seq_q", "seq_k", "head_dim",
                "dtype", "causal", "block_q", "block_k", "trace", "median_ms", "p10_ms",
                "p90_ms", "reps", "tflops", "peak_bytes", "stages": {name: ms}}, ...]}
A tile grid (benchmarks/results/tiles_*.json, from `python -m engine tiles`) holds:
  {"device": {...}, "date": ..., "method": ..., "results": [benchmark records as above, one
   per kernel and (block_q, block_k) of each config, optionally with "blocks_per_sm", "registers_per_thread", "threads_per_block",
   "smem_bytes" from CUDA's occupancy calculator], "skipped": [...], "derived_from": the
   file it was taken from, when it was}
A schedule file (benchmarks/results/schedule_*.json, from `python -m engine trace
--schedule-out`) holds:
  {"device": {...}, "date": ..., "kernel": ..., "label": what it shows, in words,
   "info": {compile facts of the build that ran, e.g. "kernel_source"},
   "config": {AttentionConfig fields},
   "block_bh": [...], "block_q_tile": [...], "sm_id": [...], "start_ns": [...],
   "end_ns": [...]}
  one entry per thread block; or, from `python -m engine runs` (the mma.sync kernel's run
  log), "unit": "run" and one entry per run (a block's key tiles [j_lo, j_hi) of one item),
  with "block", "j_lo", "j_hi" and "outcome" ("whole", "posted" or "merged") lists beside.
A compile-facts file (benchmarks/results/kernel_facts_*.json, from `python -m engine facts`)
holds:
  {"device": {...}, "date": ..., "method": ..., "facts": [{"kernel": a key of the kernel
   registry (engine.model.registry.KERNELS: "teaching" | "mma.sync" | "wgmma" | "naive_softmax"
   | "backward teaching" | "backward mma.sync" | "backward wgmma" | "naive_backward"),
   "traced", "config", "kernel_source", "compile_options", "registers_per_thread",
   "local_bytes_per_thread", "threads_per_block", "dynamic_smem_bytes", "static_smem_bytes",
   "grid", "blocks_per_sm"}, ...], "failures": [...]}
A decode file (benchmarks/results/decode_*.json, from `python -m engine decode-bench`) holds:
  {"kind": "decode", "device": {...}, "date": ..., "method": ..., "command": ...,
   "results": [{"kernel": "flash_decode" | "torch_sdpa", "batch", "heads", "kv_heads",
                "seq_q", "seq_k", "head_dim", "dtype", "page_size" (null: contiguous),
                "num_splits" (null for SDPA), "auto_splits", "median_ms", "p10_ms", "p90_ms",
                "reps", "kv_bytes", "floor_ms", "floor_fraction"}, ...], "skipped": [...]}
"""
from __future__ import annotations

import json
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
MAX_FILE_BYTES = 32 << 20


def _load(path: Path) -> dict | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def file_direction(data: dict) -> str:
    """The pass a benchmark file timed: its "direction" key, forward when it has none."""
    return data.get("direction", "forward")


def load_benchmarks(directory: Path = BENCH_DIR, direction: str = "forward") -> list[dict]:
    """Every readable benchmark file of one direction ("forward" or "backward"), newest date
    first, each with its 'file' name added."""
    out = []
    for path in sorted(Path(directory).glob("bench_*.json")):
        data = _load(path)
        if (data and isinstance(data.get("results"), list)
                and file_direction(data) == direction):
            out.append({**data, "file": path.name})
    out.sort(key=lambda d: str(d.get("date", "")), reverse=True)
    return out


def load_tile_grids(directory: Path = BENCH_DIR) -> list[dict]:
    """Every readable tile grid (benchmarks/tiles_*.json), newest date first, each with its
    'file' name added."""
    out = []
    for path in sorted(Path(directory).glob("tiles_*.json")):
        data = _load(path)
        if data and isinstance(data.get("results"), list):
            out.append({**data, "file": path.name})
    out.sort(key=lambda d: str(d.get("date", "")), reverse=True)
    return out


SCHEDULE_FIELDS = ("block_bh", "block_q_tile", "sm_id", "start_ns", "end_ns")
RUN_OUTCOMES = ("whole", "posted", "merged")   # the run log's outcome codes 0, 1, 2
# The fields of one run-log record, in the kernel's order (kernels/ampere/flash_tensorcore.cu, RUNS),
# named as the schedule file names its lists.
RUN_RECORD = ("start_ns", "end_ns", "sm_id", "block", "block_bh", "block_q_tile", "j_lo",
              "j_hi", "outcome")


def schedule_of_runs(records) -> dict:
    """The schedule-file lists ("unit": "run") of a run log: rows of RUN_RECORD, as whole
    numbers, the outcome codes as words."""
    rows = [[int(x) for x in r] for r in records]
    if any(len(r) != len(RUN_RECORD) for r in rows):
        raise ValueError(f"A run record has {len(RUN_RECORD)} fields: {', '.join(RUN_RECORD)}.")
    if any(not 0 <= r[8] < len(RUN_OUTCOMES) or r[0] > r[1] or r[6] >= r[7] for r in rows):
        raise ValueError("A run record needs start <= end, j_lo < j_hi and an outcome of 0, 1 "
                         "or 2.")
    cols = dict(zip(RUN_RECORD, zip(*rows))) if rows else dict.fromkeys(RUN_RECORD, ())
    return {"unit": "run", **{name: list(cols[name]) for name in RUN_RECORD[:-1]},
            "outcome": [RUN_OUTCOMES[c] for c in cols["outcome"]]}


def load_schedules(directory: Path = BENCH_DIR) -> list[dict]:
    """Every readable recorded block-to-SM schedule (all five per-block lists present), newest
    date first, then by file name, each with its 'file' name added."""
    out = []
    for path in sorted(Path(directory).glob("schedule_*.json")):
        data = _load(path)
        if data and all(isinstance(data.get(k), list) for k in SCHEDULE_FIELDS):
            out.append({**data, "file": path.name})
    out.sort(key=lambda d: str(d.get("date", "")), reverse=True)   # stable: names kept in order
    return out


def load_schedule(directory: Path = BENCH_DIR) -> dict | None:
    """The newest recorded block-to-SM schedule, or None when none is recorded."""
    found = load_schedules(directory)
    return found[0] if found else None


def load_kernel_facts(directory: Path = BENCH_DIR) -> dict | None:
    """The newest recorded compile-facts file (with its 'file' name), or None."""
    found = []
    for path in sorted(Path(directory).glob("kernel_facts_*.json")):
        data = _load(path)
        if data and isinstance(data.get("facts"), list):
            found.append({**data, "file": path.name})
    return max(found, key=lambda d: str(d.get("date", "")), default=None)


def load_decode_benchmarks(directory: Path = BENCH_DIR) -> list[dict]:
    """Every readable decode file (benchmarks/results/decode_*.json), newest date first, each
    with its 'file' name added."""
    out = []
    for path in sorted(Path(directory).glob("decode_*.json")):
        data = _load(path)
        if data and data.get("kind") == "decode" and isinstance(data.get("results"), list):
            out.append({**data, "file": path.name})
    out.sort(key=lambda d: str(d.get("date", "")), reverse=True)
    return out
