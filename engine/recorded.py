"""GPU results recorded in benchmarks/results/ (JSON), shown by the app when no GPU is present.

Every file carries "schema_version" (SCHEMA_VERSION) and "kind"; its kind is also told by its
name (FileKind.pattern). SCHEMAS below declares each kind's fields: the loaders validate every
file against it and raise RecordFormatError, naming the file and the field, for a file that
is not JSON, has another version, or lacks a field or holds one of the wrong type. Fields not
declared are allowed (notes, provenance). The recording jobs of benchmarks/ write the files.
closest_recorded picks, among the files of one kind, those of the recorded GPU closest to the
one a page shows (an emulated profile or the live GPU) and says which it is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .model.config import FP8_DTYPES
from .model.devices import datasheet_profile

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
TIMING_OPTIONAL = {"direction": OneOf(("forward", "backward")), "trace": bool, "stages": dict,
                   "validated": dict}   # bench_sweep: the float64 check before timing
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
    "matmul_ceiling": FileKind(   # benchmarks.matmul_ceiling
        "matmul_ceiling_*.json", {"size": int, "lines": dict}, {"command": (str, list)}),
    "decode": FileKind(      # benchmarks.decode_sweep
        "decode_*.json", {"method": str, "results": list}, {"command": str, "skipped": list},
        rows={"results": ({**CONFIG_ROW, **TIMING, "kv_heads": int, "page_size": NULLABLE_INT,
                           "num_splits": NULLABLE_INT, "auto_splits": bool, "kv_bytes": int,
                           "floor_ms": NUMBER, "floor_fraction": NUMBER},
                          {"validated": dict})}),   # the float64 check before timing
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


def holds_fp8(data: dict) -> bool:
    """Whether a benchmark file times the FP8 build (an FP8 parity run: its 16-bit lines are
    the FP8 lines' comparison, not a full sweep)."""
    return any(r.get("dtype") in FP8_DTYPES for r in data.get("results", []))


def load_benchmarks(directory: Path = BENCH_DIR, direction: str = "forward",
                    fp8: bool | None = False) -> list[dict]:
    """Every benchmark file of one direction ("forward" or "backward"), newest date first,
    each with its 'file' name added. fp8: False (the default, what the pages show) leaves
    out the FP8 parity files (holds_fp8), True keeps only them, None keeps both."""
    return _newest_first([d for d in _load_all(directory, "bench")
                          if file_direction(d) == direction
                          and (fp8 is None or holds_fp8(d) == fp8)])


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


def load_kernel_facts_files(directory: Path = BENCH_DIR) -> list[dict]:
    """Every recorded compile-facts file, newest date first, each with its 'file' name
    added."""
    return _newest_first(_load_all(directory, "kernel_facts"))


def load_kernel_facts(directory: Path = BENCH_DIR) -> dict | None:
    """The newest recorded compile-facts file (with its 'file' name), or None."""
    return next(iter(load_kernel_facts_files(directory)), None)


def load_decode_benchmarks(directory: Path = BENCH_DIR) -> list[dict]:
    """Every decode file (decode_*.json), newest date first, each with its 'file' name
    added."""
    return _newest_first(_load_all(directory, "decode"))


# --- The recorded GPU closest to the one a page shows ------------------------------------

@dataclass(frozen=True)
class Target:
    """The GPU a page shows: an emulated profile, or the live GPU the app runs on."""

    name: str                    # as the driver names it ("NVIDIA H100 80GB HBM3")
    compute_capability: str      # "9.0"
    short: str = ""              # how the page calls it: the profile's key ("H100 SXM"), else name
    live: bool = False           # the GPU the app runs on, not an emulated profile

    @property
    def called(self) -> str:
        return self.short or self.name


@dataclass(frozen=True)
class RecordedDevice:
    """Which recorded GPU closest_recorded chose, and how it relates to the target."""

    name: str
    compute_capability: str | None   # None when neither its files nor a profile state it
    date: str                        # its newest file's date
    exact: bool                      # the target itself (the same device name)
    match: str                       # one of MATCHES
    label: str                       # one line saying so, for a caption


MATCHES = ("name", "compute capability", "nearest compute capability", "unknown")


def file_device(data: dict) -> str:
    """The name of the GPU a results file was recorded on."""
    return str((data.get("device") or {}).get("name", "?"))


def _capability(text) -> int | None:
    """"9.0" -> 90, "7.5" -> 75, "10.0" -> 100; None when it is not major.minor."""
    try:
        major, minor = str(text).split(".")
        return int(major) * 10 + int(minor)
    except ValueError:
        return None


def _device_capability(files: list[dict]) -> str | None:
    """The compute capability a device's files state, else its datasheet profile's."""
    for f in files:
        cc = (f.get("device") or {}).get("compute_capability")
        if _capability(cc) is not None:
            return str(cc)
    profile = datasheet_profile(file_device(files[0]))
    return profile.compute_capability if profile else None


def _rank(name: str, cc: str | None, target: Target) -> tuple:
    """Sort key of a recorded device: the target's own name first; then the same compute
    capability; then the nearest one, the newer of two equally near; then a device whose
    compute capability is unknown. Its first item indexes MATCHES."""
    mine, theirs = _capability(target.compute_capability), _capability(cc)
    if name == target.name:
        step, distance = 0, 0
    elif theirs is None or mine is None:
        step, distance = 3, 0
    elif theirs == mine:
        step, distance = 1, 0
    else:
        step, distance = 2, abs(theirs - mine)
    return step, distance, -(theirs or 0)


def _label(name: str, cc: str | None, date: str, match: str, target: Target,
           where: str) -> str:
    head = f"Recorded on {name} ({date})"
    if match == "name":
        return head + (": the GPU this app runs on." if target.live
                       else ": the chosen profile itself.")
    why = {"compute capability": f"same compute capability, {cc}",
           "nearest compute capability": f"compute capability {cc}, the nearest to its "
                                         f"{target.compute_capability}",
           "unknown": "its compute capability is not recorded"}[match]
    to = (f"this machine's {target.called}" if target.live
          else f"the {target.called} profile")
    own = ("the ones measured live on it" if target.live else "the model's")
    return (f"{head}, the closest recorded GPU to {to} ({why}); no {target.called} recording "
            f"is in {where}. The {target.called}'s own figures on this page are {own}.")


def closest_recorded(files: list[dict], target: Target, where: str = "benchmarks/results/"
                     ) -> tuple[list[dict], RecordedDevice | None]:
    """The files, of one kind, recorded on the GPU closest to target, newest date first, and
    which GPU that is (None when there are no files). Closest: the same device name; else
    the same compute capability; else the nearest compute capability, the newer of two
    equally near (a newer GPU runs every build an older one does); a device whose compute
    capability neither its files nor a datasheet profile state comes last. Several devices
    equally close: the one recorded most recently, then by name. `where` names the folder in
    the label."""
    by_device: dict[str, list[dict]] = {}
    for f in files:
        by_device.setdefault(file_device(f), []).append(f)
    if not by_device:
        return [], None
    facts = {}
    for name, mine in by_device.items():
        facts[name] = (_device_capability(mine), max(str(f.get("date", "?")) for f in mine))
    order = sorted(by_device)                                    # by name,
    order.sort(key=lambda n: facts[n][1], reverse=True)          # the newest first,
    order.sort(key=lambda n: _rank(n, facts[n][0], target))      # the closest first
    name = order[0]
    cc, newest = facts[name]
    step = _rank(name, cc, target)[0]
    match = MATCHES[step]
    chosen = _newest_first(by_device[name])
    return chosen, RecordedDevice(name, cc, newest, step == 0, match,
                                  _label(name, cc, newest, match, target, where))
