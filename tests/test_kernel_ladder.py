"""kernels/README.md's version ladder is the one benchmarks/kernel_ladder.py generates from the
kernel registry and benchmarks/results/, and it names every registry row."""
from __future__ import annotations

from benchmarks import kernel_ladder
from engine.model.registry import KERNELS

README = kernel_ladder.README


def _committed_block() -> str:
    text = README.read_text()
    start = text.index(kernel_ladder.START)
    end = text.index(kernel_ladder.END) + len(kernel_ladder.END)
    return text[start:end]


def test_committed_block_is_the_generated_one():
    assert _committed_block() == kernel_ladder.ladder_block(), (
        "kernels/README.md is out of date: run python -m benchmarks.kernel_ladder")


def test_check_passes_on_the_committed_file():
    assert kernel_ladder.main(["--check"]) == 0


def test_every_registry_row_appears():
    rows = [line for line in _committed_block().splitlines() if line.startswith("| ")]
    for k in KERNELS:
        assert any(f"| `{k.source}` | `{k.key}` |" in row for row in rows), k.key
    assert len(rows) == len(KERNELS) + 1          # the header and one row a build


def test_every_row_says_what_it_adds():
    assert set(kernel_ladder.ADDS) == {k.key for k in KERNELS}


def test_figures_use_the_projects_flop_count():
    best = kernel_ladder.figures()
    assert best["wgmma"]["unit"] == "TFLOP/s" and best["wgmma"]["value"] > 0
    assert best["decode"]["unit"] == "GB/s"
    assert all(fig["file"] in {p.name for p in kernel_ladder.RESULTS.glob("*.json")}
               for fig in best.values())
