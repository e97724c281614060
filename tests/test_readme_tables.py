"""The result tables of README.md and docs/RESULTS.md are the ones benchmarks/readme_tables.py
makes from benchmarks/results/, and its --check names the table that is not."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("readme_tables",
                                               ROOT / "benchmarks" / "readme_tables.py")
readme_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_tables)

FILES = sorted({file for file, _ in readme_tables.TABLES.values()})


@pytest.fixture
def copy(tmp_path):
    """A copy of the files holding tables and of benchmarks/results/: (root, results)."""
    for file in FILES:
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / file, tmp_path / file)
    results = tmp_path / "results"
    shutil.copytree(readme_tables.RESULTS, results)
    return tmp_path, results


def test_check_passes_on_the_committed_files(capsys):
    assert readme_tables.main(["--check"]) == 0, capsys.readouterr().out


def test_every_table_has_its_markers_once():
    for name, (file, _) in readme_tables.TABLES.items():
        text = (ROOT / file).read_text()
        assert text.count(f"<!-- results:{name} begin") == 1, (file, name)
        assert text.count(readme_tables.end_marker(name)) == 1, (file, name)


def test_check_names_the_stale_table_only(copy, capsys):
    root, results = copy
    path = root / "docs" / "RESULTS.md"
    text = path.read_text()
    table = text[text.index(readme_tables.begin_marker("forward")):
                 text.index(readme_tables.end_marker("forward"))]
    row = next(line for line in table.splitlines() if line.startswith("| 4096 | 64 | no |"))
    path.write_text(text.replace(row, row.replace("| 4096 | 64 | no |", "| 4096 | 64 | yes |")))
    assert readme_tables.main(["--check"], root=root, results=results) == 1
    out = capsys.readouterr().out
    assert "table 'forward'" in out and "docs/RESULTS.md" in out
    assert "'summary'" not in out and "'backward'" not in out


def test_check_names_missing_markers(copy, capsys):
    root, results = copy
    path = root / "README.md"
    path.write_text(path.read_text().replace(readme_tables.end_marker("summary"), ""))
    assert readme_tables.main(["--check"], root=root, results=results) == 1
    assert "'summary' (its markers are missing)" in capsys.readouterr().out


def test_a_newer_recording_makes_the_tables_stale_and_writing_them_fixes_it(copy, capsys):
    root, results = copy
    old = json.loads((results / "bench_h200_forward.json").read_text())
    for line in old["results"]:
        line["median_ms"] *= 2
    old["date"] = "2099-01-01"
    (results / "bench_h200_forward_2099-01-01.json").write_text(json.dumps(old))
    assert readme_tables.main(["--check"], root=root, results=results) == 1
    out = capsys.readouterr().out
    assert "'summary'" in out and "'forward'" in out and "'backward'" not in out
    before = {f: (root / f).read_text() for f in FILES}
    assert readme_tables.main([], root=root, results=results) == 0
    assert readme_tables.main(["--check"], root=root, results=results) == 0
    assert "bench_h200_forward_2099-01-01.json" in (root / "README.md").read_text()
    for f in FILES:                        # nothing outside the markers changed
        after = (root / f).read_text()
        for name, (file, _) in readme_tables.TABLES.items():
            if file == f:
                after = after.replace(readme_tables.committed_block(after, name), name)
                before[f] = before[f].replace(readme_tables.committed_block(before[f], name),
                                              name)
        assert after == before[f], f


def test_figures_come_from_the_recorded_lines():
    """A row of the forward table against the recorded line it names, by value."""
    from engine import recorded
    doc = readme_tables._of_device(recorded.load_benchmarks(readme_tables.RESULTS, "forward"))[0]
    assert doc["device"]["name"] == readme_tables.DEVICE
    line = next(r for r in doc["results"] if r["kernel"] == "tensorcore"
                and r["dtype"] == "float16" and (r["seq_q"], r["head_dim"], r["causal"])
                == (8192, 128, True))
    row = next(r for r in readme_tables.forward().splitlines()
               if r.startswith("| 8192 | 128 | yes"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[5]) == pytest.approx(line["median_ms"], abs=5e-4)
    assert float(cells[6]) == pytest.approx(line["tflops"], rel=5e-3)
    assert doc["file"] in readme_tables.forward()


def _gpu_rows() -> dict[str, list[str]]:
    """README's GPU table as {compute capability: cells}, read from the committed README."""
    block = readme_tables.committed_block((ROOT / "README.md").read_text(), "gpus")
    rows = [r for r in block.splitlines() if r.startswith("| ") and r[2].isalpha()][1:]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    return {re.search(r"\d\.\d", c[0]).group(): c for c in cells}


def test_the_gpu_table_has_every_generation_and_follows_the_gate():
    from engine.model import arch
    rows = _gpu_rows()
    assert list(rows) == [g.cc for g in arch.GENERATIONS]
    turing = rows["7.5"]
    assert "bf16" not in " ".join(turing) and "T4" in turing[0]
    assert "mma.sync" in turing[1]                               # float16 tensor cores
    assert "mma.sync (1 of 5 shapes): f16" in turing[2]            # one query buffer, d = 64
    for cc, (_, fwd, bwd, decode) in rows.items():
        assert ("wgmma" in fwd) == ("wgmma" in bwd) == (cc == "9.0"), cc
        assert ("bf16" in decode) == (float(cc) >= arch.BF16_MIN_CC), cc
    assert "(3 of 5 shapes)" in rows["8.6"][2] and "shapes" not in rows["8.0"][2]


def test_check_names_a_stale_gpu_table(copy, capsys):
    root, results = copy
    path = root / "README.md"
    path.write_text(path.read_text().replace("(1 of 5 shapes)", "(2 of 5 shapes)"))
    assert readme_tables.main(["--check"], root=root, results=results) == 1
    out = capsys.readouterr().out
    assert "README.md: table 'gpus'" in out and "'summary'" not in out
