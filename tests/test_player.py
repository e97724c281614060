"""The loop player (app/core/player/): its frames are the loop's and the trace's values, one a
step (the forward's loop, one row's online softmax, the backward's loop, decoding's merge, the
Hopper pipeline's spans); every phase an animation names is marked in its kernel's source
(the forward and the backward teaching kernels); what the browser is sent fetches nothing from
outside the app."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import engine
from app.core.controls import MAX_LOOP_STEPS
from app.core.player import component, frames, kernel_lines
from app.features.backward import data as backward_data
from app.features.decoding import data as decode_data
from app.features.kernel import hopper_charts, hopper_pipeline
from app.features.online_softmax.data import row_trace
from app.features.sram_tiling import data as tiling_data
from engine.model.decode_config import DecodeConfig

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


# ---- the backward loop -------------------------------------------------------------------
def backward_view(cfg):
    trace = engine.run_backward(cfg, backend="numpy", trace=True).trace
    return backward_data.loop_view(cfg, trace)


@pytest.mark.parametrize("cfg", CFGS)
def test_backward_frames_are_the_loops_steps_and_the_traces_values(cfg):
    view = backward_view(cfg)
    got = frames.backward_frames(view.tiles, view.steps, view.rows, view.cols)
    assert got["kind"] == "backward" and len(got["frames"]) == len(view.steps)
    for s, f in enumerate(got["frames"]):
        step = view.steps.iloc[s]
        assert (f["row"], f["col"], f["label"]) == (step.row, step.col, step.label)
        assert f["p_mass"] == pytest.approx(step.p_mass, rel=1e-12)
        assert (f["dq"], f["dk"], f["dv"]) == pytest.approx(
            (step.dq_frac, step.dk_frac, step.dv_frac), rel=1e-12)
    cells = np.array(got["cells"]).reshape(view.rows, view.cols)
    for s, f in enumerate(got["frames"]):
        assert cells[f["row"], f["col"]] == s
    assert (cells < 0).sum() == (view.tiles.order < 0).sum()
    # key tiles outer: a column's steps are consecutive, and dK_j, dV_j end it complete
    cols = [f["col"] for f in got["frames"]]
    assert cols == sorted(cols)
    ends = [f for s, f in enumerate(got["frames"]) if s == len(cols) - 1 or cols[s + 1] != f["col"]]
    assert all(f["dk"] == pytest.approx(1) and f["dv"] == pytest.approx(1) for f in ends)
    json.dumps(got, allow_nan=False)


def test_backward_phases_load_each_key_tile_once_and_write_its_gradients_at_its_end():
    cfg = CFGS[1]                                        # causal, 8×4 tiles: columns of 8..2
    view = backward_view(cfg)
    got = frames.backward_frames(view.tiles, view.steps, view.rows, view.cols)["frames"]
    per_col = view.steps.groupby("col").size()
    assert sum("load_kv" in f["phases"] for f in got) == len(per_col)
    assert sum("write_dkv" in f["phases"] for f in got) == len(per_col)
    assert all(f["phases"][-4:] == ["load_q", "rebuild_p", "dkv", "dq"] or
               f["phases"][-5:-1] == ["load_q", "rebuild_p", "dkv", "dq"] for f in got)
    assert got[0]["phases"][0] == "load_kv"
    last_of_col0 = int(per_col.iloc[0]) - 1
    assert got[last_of_col0]["phases"][-1] == "write_dkv"
    assert "load_kv" in got[last_of_col0 + 1]["phases"]
    assert frames.backward_phases([0]) == [["load_kv", "load_q", "rebuild_p", "dkv", "dq",
                                            "write_dkv"]]


def test_every_backward_phase_finds_its_lines_in_the_backward_teaching_kernel():
    src = kernel_lines.kernel_lines("backward teaching")
    assert src.path == "kernels/teaching/flash_backward_teaching.cu"
    assert set(src.phases) == set(kernel_lines.BACKWARD_PHASES)
    spans = sorted(src.phases.values())
    for (a, b), (c, _) in zip(spans, spans[1:]):
        assert a <= b < c                                      # in order, not overlapping
    order = sorted(src.phases, key=lambda name: src.phases[name][0])
    assert order == list(kernel_lines.BACKWARD_PHASES)       # the order a step runs them
    text = lambda name: "\n".join(src.lines[src.phases[name][0] - 1:src.phases[name][1]])
    for name in src.phases:                                   # one short comment, then code
        body = [l for l in text(name).splitlines()[1:] if l.strip()]
        assert body and not body[-1].strip().startswith("//"), name
    assert "K_j[c * ROW + t] = K[" in text("load_kv") and "dK_j[idx] = 0.f" in text("load_kv")
    assert "#if TRACE" not in text("load_kv")                 # the trace's writes are not a phase
    assert "Q_i[r * ROW + t] = Q[" in text("load_q") and "L_i[r] = lse[" in text("load_q")
    assert "p = expf(scale * s - L_i[r])" in text("rebuild_p") and "ds = p * (dp" in text(
        "rebuild_p")
    assert "dV_j[idx] += dv" in text("dkv") and "dK_j[idx] += scale * dk" in text("dkv")
    assert "atomicAdd(&dQ_accum[" in text("dq")
    assert "store_as(&dK[" in text("write_dkv") and "store_as(&dV[" in text("write_dkv")


@pytest.mark.parametrize("key,names", [("teaching", frames.INNER + ("load_q", "write_o")),
                                       ("backward teaching", frames.BACKWARD_INNER
                                        + ("load_kv", "write_dkv"))])
def test_every_phase_an_animation_names_is_marked_in_its_kernel(key, names):
    marked = kernel_lines.kernel_lines(key).phases
    assert set(names) == set(marked) == set(kernel_lines.PHASES_OF[key])
    panel = frames.code_panel(kernel_lines.kernel_lines(key), kernel_lines.PHASES_OF[key])
    assert set(panel["labels"]) == set(panel["phases"])


# ---- decoding's merge ---------------------------------------------------------------------
@pytest.mark.parametrize("cfg,row", [
    (DecodeConfig(batch=2, heads=8, kv_heads=2, seq_q=1, seq_k=3000, head_dim=32,
                  dtype="float32", num_splits=16, seed=5), (1, 3, 0)),
    (DecodeConfig(batch=1, heads=4, kv_heads=1, seq_q=2, seq_k=1001, head_dim=64,
                  dtype="float16", num_splits=8, page_size=16, seed=9), (0, 2, 1))])
def test_merge_frames_run_to_the_traces_final_max_and_sum(cfg, row):
    res = engine.run_decode(cfg, trace=True)
    states = decode_data.split_states(res, *row)
    got = frames.merge_frames(states)["frames"]
    assert len(got) == res.num_splits == len(states)
    runs = [f["m_run"] for f in got]
    assert runs == sorted(runs)                                 # the running max never falls
    assert runs[-1] == pytest.approx(float(res.trace.m_final[row]), rel=1e-6)
    assert got[-1]["l_run"] == pytest.approx(float(res.trace.l_final[row]), rel=1e-5)
    for k, f in enumerate(got):                                 # each frame: splits 0..k merged
        m = max(states.m_s[:k + 1])
        l_k = float(sum(np.exp(states.m_s[:k + 1] - m) * states.l_s[:k + 1]))
        assert f["m_run"] == pytest.approx(m, rel=1e-12) and f["l_run"] == pytest.approx(l_k)
        assert f["split"] == k and f["m_s"] == pytest.approx(states.m_s[k])
    json.dumps(got, allow_nan=False)


def test_merge_frames_leave_out_the_splits_a_row_does_not_see():
    cfg = DecodeConfig(batch=1, heads=2, kv_heads=1, seq_q=4, seq_k=8, head_dim=32,
                       dtype="float32", num_splits=8, seed=3)      # token 0 sees keys 0..4
    res = engine.run_decode(cfg, trace=True)
    states = decode_data.split_states(res, 0, 0, 0)
    assert list(states.seen) == [True] * 5 + [False] * 3
    got = frames.merge_frames(states)["frames"]
    assert [f["seen"] for f in got] == list(states.seen)
    assert got[4]["m_run"] == got[-1]["m_run"] and got[4]["l_run"] == got[-1]["l_run"]
    assert got[-1]["m_run"] == pytest.approx(float(res.trace.m_final[0, 0, 0]), rel=1e-6)
    assert "sees none of its keys" in got[6]["label"] and "sees" not in got[2]["label"]


def test_merge_frames_start_empty_when_the_first_splits_are_not_seen():
    import pandas as pd
    states = pd.DataFrame({"split": [0, 1, 2], "k0": [0, 4, 8], "k1": [4, 8, 12],
                           "seen": [False, True, True], "m_s": [1.0, 1.0, 3.0],
                           "l_s": [0.0, 2.0, 1.0], "rescale": [0.0, np.exp(-2), 1.0]})
    got = frames.merge_frames(states)["frames"]
    assert got[0]["m_run"] is None and got[0]["l_run"] == 0
    assert got[1]["m_run"] == 1.0 and got[1]["l_run"] == 2.0
    assert got[2]["m_run"] == 3.0 and got[2]["l_run"] == pytest.approx(2 * np.exp(-2) + 1)
    json.dumps(got, allow_nan=False)


# ---- spans in lanes: the Hopper pipeline's model -----------------------------------------
def pipeline():
    p = hopper_pipeline.simulate([4, 4, 3])
    return p, hopper_charts.pipeline_table(p.spans, p.shape), hopper_charts.lane_order(p.shape)


def test_lane_frames_step_from_one_start_to_the_next():
    p, table, lanes = pipeline()
    got = frames.lane_frames(table, lanes, p.end, hopper_charts.PAINT, hopper_charts.HELD, "t")
    times = [f["t"] for f in got["frames"]]
    assert times == sorted(set(times)) and times[0] == 0.0 and times[-1] == pytest.approx(p.end)
    starts = set(table[~table.paint.isin(hopper_charts.HELD)].start)
    assert starts | {p.end} == set(times)
    assert len(got["spans"]) == len(table) and got["lanes"] == lanes
    for sp, row in zip(got["spans"], table.itertuples()):
        assert lanes[sp["lane"]] == row.lane and (sp["start"], sp["end"]) == (row.start, row.end)
        assert sp["tag"] == (row.paint in hopper_charts.HELD)
        assert got["paints"][sp["paint"]] == hopper_charts.PAINT[sp["paint"]]
    assert set(got["paints"]) == set(table.paint)             # the legend: what is drawn
    first_k = next(f for f in got["frames"] if "K_0 (run 0)" in f["label"])
    assert first_k["t"] == pytest.approx(min(s.start for s in p.spans if s.kind == "K"))
    crowded = max(got["frames"], key=lambda f: f["label"].count(";"))
    assert crowded["label"].count(";") <= frames.MAX_EVENT_NAMES
    json.dumps(got, allow_nan=False)


def test_lane_frames_open_where_asked():
    p, table, lanes = pipeline()
    got = frames.lane_frames(table, lanes, p.end, hopper_charts.PAINT, hopper_charts.HELD)
    wrap = min(s.start for s in p.spans if s.kind == "K" and s.use == p.shape.stages)
    home = frames.home_step(got, wrap)
    assert got["frames"][home]["t"] == pytest.approx(wrap) and home > 0
    assert frames.home_step(got, 0.0) == 0
    assert frames.home_step(got, p.end + 5) == len(got["frames"]) - 1


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


def test_the_sram_loops_animation_is_built_once_a_shape():
    """A step the browser reports and a new seed show the animation built for the shape (the
    same object, not built or hashed again), and it is the one built from the loop's view."""
    cfg = CFGS[1]
    built = tiling_data.loop_player(cfg, "fa2", "sram_step", False)
    assert built is tiling_data.loop_player(cfg.with_(seed=7, inputs="rising"), "fa2",
                                            "sram_step", False)
    assert built is not tiling_data.loop_player(cfg, "fa1", "sram_step", False)
    fresh = component.loop_animation(tiling_data.loop_view(cfg, "fa2"), "sram_step")
    assert built == fresh and built.sig == component.signature(built.spec)
    assert fresh.reset != fresh.sig         # the step outlives the frames while the grid holds


def test_large_loops_stay_within_the_urls_step_range():
    cfg = engine.AttentionConfig(seq_q=8192, seq_k=8192, block_q=8, block_k=8)
    view = tiling_data.loop_view(cfg)
    assert len(view.steps) <= MAX_LOOP_STEPS
    assert tiling_data.MAX_CELLS <= MAX_LOOP_STEPS
