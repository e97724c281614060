"""GPU results recorded in benchmarks/results/ (JSON), shown by the app when no GPU is present.

Every file carries "schema_version" (SCHEMA_VERSION) and "kind"; its kind is also told by its
name (FileKind.pattern). SCHEMAS below declares each kind's fields: the loaders validate every
file against it and raise RecordFormatError, naming the file and the field, for a file that
is not JSON, has another version, or lacks a field or holds one of the wrong type. Fields not
declared are allowed (notes, provenance). The recording jobs of benchmarks/ write the files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
MAX_FILE_BYTES = 32 << 20
SCHEMA_VERSION = 1


class RecordFormatError(ValueError):
    """A results file that does not follow SCHEMAS: the message names the file and field."""


class OneOf(tuple):
    """A field whose value is one of these (strings)."""


NUMBER = (int, float)
NULLABLE_INT = (int, type(None))
COMMON = {"schema_version": int, "kind": str, "device": dict, "date": str}
DEVICE = {"name": str}                  # the device record (benchmarks.recording.device_record)
CONFIG_ROW = {"kernel": str, "batch": int, "heads": int, "seq_q": int, "seq_k": int,
              "head_dim": int, "dtype": str}
TIMING = {"median_ms": NUMBER, "p10_ms": NUMBER, "p90_ms": NUMBER, "reps": int}
# one timing of engine.results.timing_record
TIMING_ROW = {**CONFIG_ROW, **TIMING, "causal": bool, "block_q": int, "block_k": int,
              "tflops": NUMBER, "peak_bytes": int}
TIMING_OPTIONAL = {"direction": OneOf(("forward", "backward")), "trace": bool, "stages": dict}
SKIPPED_ROW = {"kernel": str, "reason": str}
SCHEDULE_FIELDS = ("block_bh", "block_q_tile", "sm_id", "start_ns", "end_ns")
RUN_FIELDS = ("block", "j_lo", "j_hi", "outcome")


@dataclass(frozen=True)
class FileKind:
    """One kind of results file: its name pattern in benchmarks/results/, its required and
    optional top-level fields (name: type, tuple of types, or OneOf values), and lists of
    records, each record checked against its own required and optional fields."""

    pattern: str
    fields: dict
    optional: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)            # list field: (required, optional)
    same_length: tuple = ()                              # list fields of one length


SCHEMAS = {
    "bench": FileKind(       # benchmarks.bench_sweep, benchmarks.merge_bench
        "bench_*.json", {"method": str, "results": list},
        {"direction": OneOf(("forward", "backward")),   # absent: forward
         "command": (str, list), "skipped": list, "note": str},
        rows={"results": (TIMING_ROW, TIMING_OPTIONAL), "skipped": (SKIPPED_ROW, {})}),
    "tiles": FileKind(       # benchmarks.tile_grid
        "tiles_*.json", {"method": str, "results": list},
        {"command": str, "config": dict, "sweep_s": dict, "skipped": list,
         "derived_from": str, "note": str},
        rows={"results": (TIMING_ROW, {**TIMING_OPTIONAL, "blocks_per_sm": int,
                                       "registers_per_thread": int, "threads_per_block": int,
                                       "smem_bytes": int})}),
    "schedule": FileKind(    # benchmarks.traced_schedule; "unit": "run": run_log_schedule
        "schedule_*.json",
        {"kernel": str, "config": dict, **dict.fromkeys(SCHEDULE_FIELDS, list)},
        {"label": str, "info": dict, "unit": OneOf(("run",)), **dict.fromkeys(RUN_FIELDS, list)},
        same_length=SCHEDULE_FIELDS + RUN_FIELDS),
    "kernel_facts": FileKind(   # benchmarks.compile_facts
        "kernel_facts_*.json", {"method": str, "facts": list, "failures": list},
        rows={"facts": ({"kernel": str, "traced": bool, "config": dict, "kernel_source": str,
                         "compile_options": str, "registers_per_thread": int,
                         "local_bytes_per_thread": int, "threads_per_block": int,
                         "dynamic_smem_bytes": int, "static_smem_bytes": int, "grid": str,
                         "blocks_per_sm": int}, {})}),
    "decode": FileKind(      # benchmarks.decode_sweep
        "decode_*.json", {"method": str, "results": list}, {"command": str, "skipped": list},
        rows={"results": ({**CONFIG_ROW, **TIMING, "kv_heads": int, "page_size": NULLABLE_INT,
                           "num_splits": NULLABLE_INT, "auto_splits": bool, "kv_bytes": int,
                           "floor_ms": NUMBER, "floor_fraction": NUMBER}, {})}),
}


def _type_name(spec) -> str:
    if isinstance(spec, OneOf):
        return " or ".join(repr(v) for v in spec)
    if spec == NUMBER:
        return "a number"
    specs = spec if isinstance(spec, tuple) else (spec,)
    names = {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
             list: "a list", dict: "an object", type(None): "null"}
    return " or ".join(names.get(s, s.__name__) for s in specs)


def _fits(value, spec) -> bool:
    if isinstance(spec, OneOf):
        return value in spec
    specs = spec if isinstance(spec, tuple) else (spec,)
    if isinstance(value, bool):                  # a bool is an int to isinstance: not here
        return bool in specs
    return isinstance(value, specs)


def _check(source: str, where: str, obj: dict, required: dict, optional: dict):
    for name, spec in {**required, **optional}.items():
        if name not in obj:
            if name in required:
                raise RecordFormatError(f"{source}: field '{where}{name}' is missing")
            continue
        if not _fits(obj[name], spec):
            raise RecordFormatError(f"{source}: field '{where}{name}' should be "
                                    f"{_type_name(spec)}, not {obj[name]!r:.60}")


def validate(data, kind: str, source: str = "<data>") -> dict:
    """data when it follows SCHEMAS[kind] at SCHEMA_VERSION, else RecordFormatError naming
    source (the file) and the field."""
    if not isinstance(data, dict):
        raise RecordFormatError(f"{source}: a results file holds one JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordFormatError(
            f"{source}: field 'schema_version' is {version!r}; this version of the app reads "
            f"{SCHEMA_VERSION} (docs/DESIGN.md, \"Recorded results\")")
    if data.get("kind") != kind:
        raise RecordFormatError(f"{source}: field 'kind' is {data.get('kind')!r}; a file named "
                                f"{SCHEMAS[kind].pattern} holds {kind!r}")
    spec = SCHEMAS[kind]
    _check(source, "", data, {**COMMON, **spec.fields}, spec.optional)
    _check(source, "device.", data["device"], DEVICE, {})
    for name, (required, optional) in spec.rows.items():
        for i, row in enumerate(data.get(name, ())):
            if not isinstance(row, dict):
                raise RecordFormatError(f"{source}: field '{name}[{i}]' should be an object")
            _check(source, f"{name}[{i}].", row, required, optional)
    lengths = {name: len(data[name]) for name in spec.same_length if name in data}
    if len(set(lengths.values())) > 1:
        raise RecordFormatError(f"{source}: the lists {', '.join(lengths)} differ in length "
                                f"({', '.join(map(str, lengths.values()))})")
    if data.get("unit") == "run":
        _check(source, "", data, dict.fromkeys(RUN_FIELDS, list), {})
    return data


def kind_of(path: Path) -> str | None:
    """The kind a results file's name says it holds, or None."""
    return next((k for k, s in SCHEMAS.items() if Path(path).match(s.pattern)), None)


def load_file(path: Path, kind: str | None = None) -> dict:
    """One results file, read and validated (its kind told by its name unless given)."""
    path = Path(path)
    kind = kind or kind_of(path)
    if kind is None:
        raise RecordFormatError(f"{path}: no results kind has a name like this file's")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise RecordFormatError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        if isinstance(exc, RecordFormatError):
            raise
        raise RecordFormatError(f"{path}: not readable as JSON ({exc})") from exc
    return validate(data, kind, str(path))


def _load_all(directory: Path, kind: str) -> list[dict]:
    """Every file of one kind in directory, validated, each with its 'file' name added, in
    name order."""
    return [{**load_file(path, kind), "file": path.name}
            for path in sorted(Path(directory).glob(SCHEMAS[kind].pattern))]


def _newest_first(files: list[dict]) -> list[dict]:
    return sorted(files, key=lambda d: d["date"], reverse=True)   # stable: names in order


def file_direction(data: dict) -> str:
    """The pass a benchmark file timed: its "direction" key, forward when it has none."""
    return data.get("direction", "forward")


def load_benchmarks(directory: Path = BENCH_DIR, direction: str = "forward") -> list[dict]:
    """Every benchmark file of one direction ("forward" or "backward"), newest date first,
    each with its 'file' name added."""
    return _newest_first([d for d in _load_all(directory, "bench")
                          if file_direction(d) == direction])


def load_tile_grids(directory: Path = BENCH_DIR) -> list[dict]:
    """Every tile grid (tiles_*.json), newest date first, each with its 'file' name added."""
    return _newest_first(_load_all(directory, "tiles"))


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
    """Every recorded block-to-SM schedule, newest date first, then by file name, each with
    its 'file' name added."""
    return _newest_first(_load_all(directory, "schedule"))


def load_schedule(directory: Path = BENCH_DIR) -> dict | None:
    """The newest recorded block-to-SM schedule, or None when none is recorded."""
    found = load_schedules(directory)
    return found[0] if found else None


def load_kernel_facts(directory: Path = BENCH_DIR) -> dict | None:
    """The newest recorded compile-facts file (with its 'file' name), or None."""
    return max(_load_all(directory, "kernel_facts"), key=lambda d: d["date"], default=None)


def load_decode_benchmarks(directory: Path = BENCH_DIR) -> list[dict]:
    """Every decode file (decode_*.json), newest date first, each with its 'file' name
    added."""
    return _newest_first(_load_all(directory, "decode"))
