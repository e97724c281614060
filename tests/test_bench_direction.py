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


def test_gpu_run_script_bwd_wgmma_lines_parse():
    """benchmarks/gpu_run.sh's bwd-wgmma mode: its bench options parse here, and its runs
    time the wgmma build with PyTorch's flash and cuDNN lines, then its staged dQ writer alone,
    and the table reads the mma.sync build from the recorded sweep."""
    from engine.cli import _lines
    script = (ROOT / "benchmarks" / "gpu_run.sh").read_text()
    mode = script[script.index("    bwd-wgmma)"):]
    mode = mode[:mode.index(";;")]
    block = mode[mode.index('"$w" bench --direction backward'):]
    block = block[:block.index(">>")].replace("\\\n", " ")
    block = re.sub(r'"?\$\{\w+:-([^}]*)\}"?', r"\1", block)          # ${VAR:-default}
    block = block.replace("$OUT", "/tmp").replace("${name}", "wgmma")
    block = block.replace('"$seq"', "1024,2048,4096,8192,16384")
    block = block.replace('"$kernels"', "tensorcore,torch_flash,torch_cudnn")
    block = block.replace('"$d"', "128").replace('"$bq"', "64").replace('"$bk"', "128")
    block = block.replace("$d", "128")
    args = parser().parse_args(shlex.split(block)[1:])
    assert args.direction == "backward" and args.out == "/tmp/bwd_wgmma_d128.json"
    assert (args.head_dim, args.block_q, args.block_k) == ([128], 64, 128)
    assert args.seq == [1024, 2048, 4096, 8192, 16384]
    assert set(args.dtype) == {"float16", "bfloat16"} and args.causal == [False, True]
    assert _lines(args.kernels) == ["tensorcore", "torch_flash", "torch_cudnn"]
    assert 'bwd_as 0 wgmma "${BWD_WGMMA_S:-95}" "${SEQ:-1024,2048,4096,8192,16384}"' in mode
    assert 'tensorcore,torch_flash,torch_cudnn $shape' in mode
    assert 'bwd_as 1 wgmma_staged "${BWD_STAGED_S:-55}" 4096,8192,16384 tensorcore $shape' in mode
    assert ("backward_wgmma.DQ_WRITER = dict.fromkeys(backward_wgmma.DQ_WRITER, int(sys.argv[1]))"
            in mode)
    assert "--mma benchmarks/records/backward_mma_sync_h200_2026-11-23.json" in mode
    assert (ROOT / "benchmarks/results/bench_h200_backward.json").is_file()
    assert '"64 128 128" "128 64 128"' in mode


def test_backward_parity_table(tmp_path, capsys, monkeypatch):
    """benchmarks/backward_parity.py: per shape the builds' and PyTorch's ms and FA2 ÷ the
    faster wgmma build from the bench files of the runs; only the tensor-core line of an
    --mma file is read; a missing file is skipped."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import backward_parity

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


def test_the_runs_command_says_what_is_missing_without_a_gpu(capsys, monkeypatch):
    """`python -m engine runs` where no GPU is usable (or sizes are out of range): exit 2 and
    one line that says why, never a traceback."""
    from engine.cli import main
    from engine.devices import device_info
    if device_info(prefer_gpu=True).kind == "gpu":
        pytest.skip("a GPU is usable here")
    assert main(["runs", "--out", "/nonexistent/x.json"]) == 2
    assert "No usable GPU" in capsys.readouterr().err
    assert main(["runs", "--seq-q", "0", "--out", "/nonexistent/x.json"]) == 2
    assert "seq_q" in capsys.readouterr().err
