"""Benchmark files by direction and the recording jobs of benchmarks/ that make them: the
bench sweep's --direction, engine.recorded's filter, gpu_run.sh's sweep lines, the merge, the
backward parity table and the run-log job without a GPU (CPU)."""
import json
import re
import shlex
from pathlib import Path

import pytest

from benchmarks.bench_sweep import lines, parser
from engine import recorded

ROOT = Path(__file__).resolve().parent.parent


def _bench_file(directory: Path, name: str, date: str, direction: str | None):
    fixture = json.loads((ROOT / "tests" / "data" / "bench_fixture.json").read_text())
    data = {**fixture, "date": date}
    data.pop("direction", None)
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
    base = ["--seq", "256", "--out", "x.json"]
    assert parser().parse_args(base).direction == "forward"
    assert parser().parse_args(base + ["--direction", "backward"]).direction == "backward"
    with pytest.raises(SystemExit):
        parser().parse_args(base + ["--direction", "sideways"])


def _sweep_lines(mode: str) -> list[str]:
    """The bench_sweep calls of one gpu_run.sh mode, as argument lists, ${VAR:-default} and
    the shell's variables replaced by sample values."""
    script = (ROOT / "benchmarks" / "gpu_run.sh").read_text()
    body = script[script.index(f"    {mode})"):]
    body = body[:body.index(";;")]
    grid = script[script.index("grid32k=("):]
    grid = grid[len("grid32k=("):grid.index(")\n")].replace("\n", " ")
    out = []
    for call in body.split("python3 -m benchmarks.bench_sweep")[1:]:
        call = call[:call.index(">")].replace("\\\n", " ")
        call = call.replace('"${grid32k[@]}"', grid)
        call = re.sub(r'"?\$\{\w+:-([^}]*)\}"?', r"\1", call)          # ${VAR:-default}
        call = call.replace("$OUT", "/tmp").replace("${gpu}", "h200")
        call = call.replace('"$d"', "128").replace('"$bq"', "64").replace('"$bk"', "128")
        out.append(shlex.split(call.replace("$d", "128")))
    return out


def test_gpu_run_script_sweep_lines_parse():
    """benchmarks/gpu_run.sh's sweep modes call benchmarks.bench_sweep; their options parse
    here, the backward sweep at the backward's tiles for head_dim 128."""
    (backward,) = _sweep_lines("backward-sweep")
    args = parser().parse_args(backward)
    assert args.direction == "backward" and args.out.endswith("backward_d128.json")
    assert (args.head_dim, args.block_q, args.block_k) == ([128], 64, 128)
    assert args.seq and set(args.dtype) == {"float16", "bfloat16"} and args.causal == [False, True]
    for mode, want in (("forward-sweep", ["naive", "tensorcore", *lines(["torch"])]),
                       ("forward-parity", ["tensorcore", "torch_flash", "torch_cudnn"])):
        (call,) = _sweep_lines(mode)
        args = parser().parse_args(call)
        assert args.direction == "forward" and lines(args.kernels) == want
        assert (args.block_q, args.block_k, args.tokens) == (128, 128, 32768)
        assert args.seq == [1024, 2048, 4096, 8192, 16384] and args.head_dim == [64, 128]
        assert args.heads == (1 if mode == "forward-parity" else 0)   # 0: 1024 / d


def test_gpu_run_script_names_every_mode_in_its_usage():
    script = (ROOT / "benchmarks" / "gpu_run.sh").read_text()
    usage = script[script.index("# Usage"):script.index("set -u")]
    modes = re.findall(r"^    ([a-z-]+)\)", script, flags=re.M)
    assert len(modes) >= 5
    for mode in modes:
        assert re.search(rf"^#   {mode} ", usage, flags=re.M), mode


def test_merge_joins_the_sweeps_of_one_run_and_refuses_others(tmp_path):
    from benchmarks.merge_bench import main, merge_bench
    base = {"schema_version": recorded.SCHEMA_VERSION, "kind": "bench",
            "device": {"name": "NVIDIA H200"}, "direction": "backward", "method": "m",
            "date": "2026-11-23", "skipped": []}
    row = json.loads((ROOT / "tests" / "data" / "bench_fixture.json").read_text())["results"][0]
    a = {**base, "command": "--head-dim 64", "results": [{**row, "kernel": "naive", "n": 1}]}
    b = {**base, "command": "--head-dim 128", "results": [{**row, "kernel": "tensorcore", "n": 2}],
         "skipped": [{"kernel": "naive", "config": row, "reason": "too big"}]}
    paths = []
    for i, part in enumerate((a, b)):
        paths.append(tmp_path / f"p{i}.json")
        paths[-1].write_text(json.dumps(part))
    merged = merge_bench([a, b])
    assert [r["n"] for r in merged["results"]] == [1, 2]
    assert merged["skipped"] == b["skipped"] and "--head-dim 128" in merged["command"]
    with pytest.raises(ValueError, match="direction"):
        merge_bench([a, {**b, "direction": "forward"}])
    assert main([str(paths[0]), str(tmp_path / "missing.json"),
                 "--out", str(tmp_path / "m.json")]) == 2
    assert main([str(paths[0]), str(paths[1]), "--out", str(tmp_path / "m.json")]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["results"] == merged["results"]


def test_merge_names_each_sweeps_ceilings_and_refuses_another_method():
    from benchmarks.merge_bench import merge_bench
    ceiling = "t; Figures above the GPU's ceilings ({} TFLOP/s, 3.3 TB/s) are refused as bugs."
    base = {"schema_version": recorded.SCHEMA_VERSION, "kind": "bench", "device": {"name": "G"},
            "direction": "backward", "date": "2026-11-25", "command": "c", "results": []}
    merged = merge_bench([{**base, "method": ceiling.format(990)},
                          {**base, "method": ceiling.format(983)}])
    assert "(990 TFLOP/s, 3.3 TB/s; 983 TFLOP/s, 3.3 TB/s)" in merged["method"]
    with pytest.raises(ValueError, match="method"):
        merge_bench([{**base, "method": ceiling.format(990)},
                     {**base, "method": "another " + ceiling.format(990)}])


def test_backward_parity_table(tmp_path, capsys):
    """benchmarks/backward_parity.py: per shape the builds' and PyTorch's ms and FA2 ÷ the
    faster wgmma build from the bench files of the runs; only the tensor-core line of an
    --mma file is read; a missing file is skipped."""
    from benchmarks import backward_parity

    def rec(kernel, n, ms, causal=False):
        return {"kernel": kernel, "seq_q": n, "head_dim": 128, "dtype": "float16",
                "causal": causal, "batch": 32768 // n, "heads": 8, "median_ms": ms}

    wgmma = tmp_path / "bwd_wgmma_d128.json"
    wgmma.write_text(json.dumps({"results": [
        rec("tensorcore", 4096, 4.0), rec("torch_flash", 4096, 5.0), rec("torch_cudnn", 4096, 2.5),
        rec("tensorcore", 8192, 10.0), rec("torch_flash", 8192, 9.0)]}))
    staged = tmp_path / "bwd_wgmma_staged_d128.json"
    staged.write_text(json.dumps({"results": [rec("tensorcore", 4096, 3.6),
                                              rec("tensorcore", 1024, 0.6, causal=True)]}))
    mma = tmp_path / "bench_backward.json"        # a recorded sweep: only its tensorcore line
    mma.write_text(json.dumps({"results": [rec("tensorcore", 4096, 5.5),
                                           rec("torch_flash", 4096, 99.0)]}))
    assert backward_parity.main(["--wgmma", str(wgmma), str(tmp_path / "missing.json"),
                                 "--staged", str(staged), "--mma", str(mma)]) == 0
    out, err = capsys.readouterr()
    assert "missing.json" in err
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert rows[0] == ["1024", "128", "float16", "True", "256", "-", "0.600", "-", "-", "-",
                       "-"]
    assert rows[1] == ["4096", "128", "float16", "False", "64", "4.000", "3.600", "5.500",
                       "5.000", "2.500", "1.389"]
    assert rows[2] == ["8192", "128", "float16", "False", "32", "10.000", "-", "-", "9.000",
                       "-", "0.900"]
    assert "lowest FA2 ÷ wgmma at N >= 4096: 0.900 (misses" in out


def test_the_run_log_job_says_what_is_missing_without_a_gpu(capsys):
    """`python -m benchmarks.run_log_schedule` where no GPU is usable (or sizes are out of
    range): exit 2 and one line that says why, never a traceback."""
    from benchmarks.run_log_schedule import main
    from engine.devices import device_info
    if device_info(prefer_gpu=True).kind == "gpu":
        pytest.skip("a GPU is usable here")
    assert main(["--out", "/nonexistent/x.json"]) == 2
    assert "No usable GPU" in capsys.readouterr().err
    assert main(["--seq-q", "0", "--out", "/nonexistent/x.json"]) == 2
    assert "seq_q" in capsys.readouterr().err
