"""The loop player (app/core/player/): its frames are the loop's and the trace's values, one a
step; every phase it names is marked in the teaching kernel's source; what the browser is sent
fetches nothing from outside the app."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import engine
from app.core.controls import MAX_LOOP_STEPS
from app.core.player import component, frames, kernel_lines
from app.features.online_softmax.data import row_trace
from app.features.sram_tiling import data as tiling_data

CFGS = [engine.AttentionConfig(), engine.AttentionConfig(causal=True, block_q=32),
        engine.AttentionConfig(seq_q=200, seq_k=300, block_q=32, block_k=64)]


@pytest.mark.parametrize("cfg", CFGS)
@pytest.mark.parametrize("order", ["fa2", "fa1"])
def test_loop_frames_are_the_loops_steps(cfg, order):
    view = tiling_data.loop_view(cfg, order)
    got = frames.loop_frames(view.tiles, view.steps, view.rows, view.cols, view.order)
    assert len(got["frames"]) == len(view.steps)
    assert [f["row"] for f in got["frames"]] == list(view.steps.row)
    assert [f["col"] for f in got["frames"]] == list(view.steps.col)
    assert [f["read"] for f in got["frames"]] == list(view.steps.flash_read)
    assert [f["written"] for f in got["frames"]] == list(view.steps.flash_written)
    cells = np.array(got["cells"]).reshape(view.rows, view.cols)
    for s, f in enumerate(got["frames"]):
        assert cells[f["row"], f["col"]] == s
    assert (cells < 0).sum() == (view.tiles.order < 0).sum()
    json.dumps(got)                                   # JSON-ready


def test_fa2_loads_q_once_a_row_and_writes_o_at_its_end():
    view = tiling_data.loop_view(CFGS[0], "fa2")      # 4×4 tiles
    got = frames.loop_frames(view.tiles, view.steps, view.rows, view.cols, "fa2")["frames"]
    assert sum("load_q" in f["phases"] for f in got) == 4
    assert sum("write_o" in f["phases"] for f in got) == 4
    assert got[0]["phases"] == ["load_q", "load_kv", "scores", "softmax", "pv"]
    assert got[3]["phases"][-1] == "write_o"
    fa1 = tiling_data.loop_view(CFGS[0], "fa1")
    got1 = frames.loop_frames(fa1.tiles, fa1.steps, fa1.rows, fa1.cols, "fa1")["frames"]
    assert all("write_o" in f["phases"] for f in got1)          # O_i back to HBM every step
    assert sum("load_kv" in f["phases"] for f in got1) == 4     # K_j, V_j once a column


@pytest.mark.parametrize("causal", [False, True])
def test_row_frames_are_the_traces_values(causal):
    cfg = engine.AttentionConfig(causal=causal, inputs="rising")
    res = engine.run(cfg, backend="numpy", trace=True)
    r = 70
    rows = row_trace(res.trace, cfg, 0, 1, r)
    got = frames.row_frames(rows)["frames"]
    assert len(got) == cfg.Tc
    for j, f in enumerate(got):
        assert f["tile"] == j and f["processed"] == bool(res.trace.processed[r // cfg.block_q, j])
        for name in ("running_max", "rescale", "running_sum"):
            want = float(getattr(res.trace, name)[0, 1, r, j])
            assert f[name] == pytest.approx(want, rel=1e-6), (name, j)
        assert (f["phases"] == []) == (not f["processed"])
    assert "load_q" in got[0]["phases"]
    last = max(j for j, f in enumerate(got) if f["processed"])
    assert got[last]["phases"][-1] == "write_o"
    assert any(f["rescale"] < 1 for f in got[1:] if f["processed"])   # rising: the max moves
    if causal:
        assert not got[-1]["processed"]
    json.dumps(got, allow_nan=False)


def test_every_phase_finds_its_lines_in_the_teaching_kernel():
    src = kernel_lines.kernel_lines("teaching")
    assert set(src.phases) == set(kernel_lines.PHASES)
    spans = sorted(src.phases.values())
    for (a, b), (c, _) in zip(spans, spans[1:]):
        assert a <= b < c                                      # in order, not overlapping
    code = lambda a, b: [l for l in src.lines[a - 1:b] if l.strip() and
                         not l.strip().startswith("//")]
    for name, (a, b) in src.phases.items():
        assert code(a, b), f"phase {name} holds no code"
    text = lambda name: "\n".join(src.lines[src.phases[name][0] - 1:src.phases[name][1]])
    assert "Q_i[idx] = Q[" in text("load_q")
    assert "K_jT[" in text("load_kv") and "V_j[idx] = V[" in text("load_kv")
    assert "dot +=" in text("scores")
    assert "rescale" in text("softmax") and "l_i[r] = row_l" in text("softmax")
    assert "O_i[idx] += acc" in text("pv")
    assert "store_as(&O[" in text("write_o")


def test_phase_lines_reads_paragraphs_and_refuses_a_phase_marked_twice():
    text = "a\n// [phase pv]\nx = 1;\ny = 2;\n\nz\n  // [phase scores]\ns;\n"
    assert kernel_lines.phase_lines(text) == {"pv": (2, 4), "scores": (7, 8)}
    with pytest.raises(ValueError, match="marked twice"):
        kernel_lines.phase_lines(text + "\n// [phase pv]\nq;\n")


def test_the_code_panel_holds_every_phase():
    panel = frames.code_panel(kernel_lines.kernel_lines("teaching"))
    first = panel["first"]
    for a, b in panel["phases"].values():
        assert first <= a and b < first + len(panel["lines"])
    assert panel["lines"][0].strip() == "// [phase load_q]"


STATIC = component.STATIC


def test_the_player_fetches_nothing_from_outside():
    """No URL to anywhere: the app starts offline, and the browser loads only the static
    folder's files, which name only each other."""
    files = {p.name: p.read_text() for p in STATIC.iterdir()}
    assert set(files) == {"index.html", "player.js", "player.css"}
    for name, text in files.items():
        assert not re.search(r"https?:|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\(", text), name
    loaded = re.findall(r'(?:src|href)="([^"]+)"', files["index.html"])
    assert sorted(loaded) == ["player.css", "player.js"]


def test_what_the_browser_is_sent_holds_every_frame_and_no_url():
    view = tiling_data.loop_view(CFGS[1], "fa2")
    spec = component.spec_of(frames.loop_frames(view.tiles, view.steps, view.rows, view.cols),
                             "sram_step", 1, frames.code_panel(kernel_lines.kernel_lines()))
    text = json.dumps(spec, allow_nan=False)
    assert "http" not in text
    assert len(spec["frames"]) == len(view.steps)
    assert component.signature(spec) == component.signature(json.loads(text))
    other = tiling_data.loop_view(CFGS[1], "fa1")
    assert component.signature(spec) != component.signature(component.spec_of(
        frames.loop_frames(other.tiles, other.steps, other.rows, other.cols, "fa1"),
        "sram_step", 1))


def test_large_loops_stay_within_the_urls_step_range():
    cfg = engine.AttentionConfig(seq_q=8192, seq_k=8192, block_q=8, block_k=8)
    view = tiling_data.loop_view(cfg)
    assert len(view.steps) <= MAX_LOOP_STEPS
    assert tiling_data.MAX_CELLS <= MAX_LOOP_STEPS
