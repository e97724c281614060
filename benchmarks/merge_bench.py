"""Join bench files of one device, direction and method into one (e.g. sweeps run at
different tiles per head_dim): their results and skipped lines in order, their commands
joined.

  python -m benchmarks.merge_bench backward_d64.json backward_d128.json --out bench_x.json
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .bench_sweep import print_table
from .recording import job_parser, run_job, write_json


# The plausibility ceilings a method names come from the clock read at the start of each
# sweep, so two sweeps of one run may differ there and nowhere else.
CEILINGS = re.compile(r"\(([\d.]+ TFLOP/s, [\d.]+ TB/s)\)")


def merge_bench(parts: list[dict]) -> dict:
    """One bench record from several of the same device, direction and method: their results
    and skipped lines in order, their commands joined, each sweep's ceilings named in the
    method; ValueError when they differ otherwise."""
    first = parts[0]
    for key in ("device", "direction", "schema_version"):
        if any(p.get(key) != first.get(key) for p in parts[1:]):
            raise ValueError(f"the files differ in {key!r}; only files of one run can be merged")
    methods = [p.get("method", "") for p in parts]
    if len({CEILINGS.sub("()", m) for m in methods}) > 1:
        raise ValueError("the files differ in 'method'; only files of one run can be merged")
    seen = list(dict.fromkeys(c for m in methods for c in CEILINGS.findall(m)))
    method = CEILINGS.sub(f"({'; '.join(seen)})", methods[0], count=1) if seen else methods[0]
    return {**first, "method": method, "date": max(p["date"] for p in parts),
            "command": " ; ".join(p["command"] for p in parts),
            "results": [r for p in parts for r in p["results"]],
            "skipped": [r for p in parts for r in p.get("skipped", [])]}


def merge(args) -> int:
    parts = []
    for name in args.files:
        try:
            parts.append(json.loads(Path(name).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"cannot read {name}: {exc}", file=sys.stderr)
            return 2
    try:
        merged = merge_bench(parts)
    except ValueError as exc:
        print(f"cannot merge: {exc}", file=sys.stderr)
        return 2
    write_json(Path(args.out), merged)
    print_table(merged)
    return 0


def parser():
    m = job_parser(__doc__, "merge_bench")
    m.add_argument("files", nargs="+")
    m.add_argument("--out", required=True)
    return m


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), merge, argv)


if __name__ == "__main__":
    sys.exit(main())
