"""Benchmark files by direction: the CLI's --direction and engine.recorded's filter (CPU)."""
import json
import re
import shlex
from pathlib import Path

import pytest

from engine import recorded
from engine.cli import parser

ROOT = Path(__file__).resolve().parent.parent


def _bench_file(directory: Path, name: str, date: str, direction: str | None):
    data = {"device": {"name": "Test GPU"}, "date": date, "method": "m",
            "results": [{"kernel": "naive", "seq_q": 128, "median_ms": 1.0}]}
    if direction is not None:
        data["direction"] = direction
    (directory / name).write_text(json.dumps(data))


def test_load_benchmarks_keeps_one_direction(tmp_path):
    _bench_file(tmp_path, "bench_old.json", "2001-01-01", None)          # before the key
    _bench_file(tmp_path, "bench_fwd.json", "2002-01-01", "forward")
    _bench_file(tmp_path, "bench_bwd.json", "2003-01-01", "backward")
    _bench_file(tmp_path, "bench_bwd2.json", "2000-01-01", "backward")
    forward = recorded.load_benchmarks(tmp_path)
    assert [f["file"] for f in forward] == ["bench_fwd.json", "bench_old.json"]
    assert recorded.load_benchmarks(tmp_path, direction="forward") == forward
    backward = recorded.load_benchmarks(tmp_path, direction="backward")
    assert [f["file"] for f in backward] == ["bench_bwd.json", "bench_bwd2.json"]


def test_recorded_files_in_the_repository_are_forward_unless_marked():
    for path in sorted((ROOT / "benchmarks" / "results").glob("bench_*.json")):
        data = json.loads(path.read_text())
        assert recorded.file_direction(data) in ("forward", "backward"), path.name


def test_bench_direction_option():
    base = ["bench", "--seq", "256", "--out", "x.json"]
    assert parser().parse_args(base).direction == "forward"
    assert parser().parse_args(base + ["--direction", "backward"]).direction == "backward"
    with pytest.raises(SystemExit):
        parser().parse_args(base + ["--direction", "sideways"])


def test_gpu_run_script_backward_line_parses():
    """benchmarks/gpu_run.sh's backward mode calls this CLI; its options must parse here."""
    script = (ROOT / "benchmarks" / "gpu_run.sh").read_text()
    block = script[script.index("python3 -m engine bench --direction backward"):]
    block = block[:block.index(">")].replace("\\\n", " ")
    block = re.sub(r'"?\$\{\w+:-([^}]*)\}"?', r"\1", block)          # ${VAR:-default}
    block = block.replace("$OUT", "/tmp").replace("${gpu}", "h200")
    block = block.replace("$d", "128").replace("$bq", "64").replace("$bk", "128")
    args = parser().parse_args(shlex.split(block)[3:])
    assert args.direction == "backward" and args.out.endswith("backward_d128.json")
    assert (args.head_dim, args.block_q, args.block_k) == ([128], 64, 128)
    assert args.seq and set(args.dtype) == {"float16", "bfloat16"} and args.causal == [False, True]


def test_merge_joins_the_sweeps_of_one_run_and_refuses_others(tmp_path):
    from engine.cli import main
    base = {"device": {"name": "NVIDIA H200"}, "direction": "backward", "method": "m",
            "date": "2026-11-23", "skipped": []}
    a = {**base, "command": "bench --head-dim 64", "results": [{"kernel": "naive", "n": 1}]}
    b = {**base, "command": "bench --head-dim 128", "results": [{"kernel": "tensorcore", "n": 2}],
         "skipped": [{"kernel": "naive", "reason": "too big"}]}
    paths = []
    for i, part in enumerate((a, b)):
        paths.append(tmp_path / f"p{i}.json")
        paths[-1].write_text(json.dumps(part))
    from engine.cli import merge_bench
    merged = merge_bench([a, b])
    assert [r["n"] for r in merged["results"]] == [1, 2]
    assert merged["skipped"] == b["skipped"] and "--head-dim 128" in merged["command"]
    with pytest.raises(ValueError, match="direction"):
        merge_bench([a, {**b, "direction": "forward"}])
    assert main(["merge", str(paths[0]), str(tmp_path / "missing.json"),
                 "--out", str(tmp_path / "m.json")]) == 2
