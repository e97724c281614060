"""The Backward pass page (app/features/backward/): through AppTest, the loop from the trace
played in the browser beside the backward teaching kernel's lines (its step from the link and
back into the URL), causal skipping, limits, its row controls, recorded and timed backward
results; without a server, the loop follows the trace key tile by key tile, P rebuilt from
lse, the gradients' growth, bytes, price and peak memory against the IO model."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import engine
from app.features.backward import charts as charts_backward, data as backward_data
from app.features.sram_tiling import data as tiling_data
from app.features.timings import data as timing_data
from app.core.results_dir import BENCH_DIR_ENV
from engine.model import iomodel
from engine.model.tiles import processed_tiles
from app.core.controls import MAX_LOOP_STEPS
from app.core.player import frames as player_frames
from apptest_helpers import (FIXTURES, ON_GPU, assert_clean, color_domains, open_page, player,
                             specs, texts, url)
from chart_helpers import CONFIGS, H200, fresh_seed


def loop_steps(at: AppTest) -> int:
    return len(player(at)["spec"]["frames"])


def test_backward_page_draws_the_loop_from_the_trace():
    at = open_page("backward")
    assert_clean(at)
    assert loop_steps(at) == 16                             # 4×4 tiles, key tile major
    titles = json.dumps([s.get("title", "") for s in specs(at)])
    for title in ("P rebuilt from lse", "HBM bytes of one backward pass", "The price",
                  "Peak memory of the backward"):
        assert title in titles
    body = texts(at)
    assert "largest |Σ_j rowsum(P_ij) − 1|" in body
    gap = next(m for m in at.metric if m.label.startswith("largest |Σ_j"))
    assert float(gap.value) < 1e-5
    assert ("measured on the GPU" if ON_GPU else "CPU emulation") in at.info[0].value


def test_backward_page_causal_skips_tiles():
    at = open_page("backward", causal="true")
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert loop_steps(at) == 10                             # 10 of 16 tiles run


def test_backward_page_plays_in_the_browser_beside_the_backward_kernel():
    at = open_page("backward", bw_step=7)
    assert_clean(at)
    got = player(at)
    assert got["start"] == 6 and got["spec"]["kind"] == "backward"
    assert got["spec"]["url"] == {"name": "bw_step", "base": 1, "label": "loop step", "home": 0}
    assert url(at)["bw_step"] == "7"
    code = got["spec"]["code"]
    assert code["path"] == "kernels/teaching/flash_backward_teaching.cu"
    assert set(code["phases"]) == {p for f in got["spec"]["frames"] for p in f["phases"]}
    assert not any(t.key == "bw_play" for t in at.get("toggle"))      # no server Play
    assert not any("step" in json.dumps(s.get("params", [])) for s in specs(at))


def test_backward_page_step_resets_on_a_config_change_and_follows_the_browser():
    at = open_page("backward")
    at.session_state["bw_player"] = {"step": 9, "sig": player(at)["sig"]}   # stopped on 9
    at.run()
    assert_clean(at)
    assert player(at)["start"] == 9 and url(at)["bw_step"] == "10"
    at.session_state["bw_player"] = {"step": "9; drop", "sig": player(at)["sig"]}  # tampered
    at.run()
    assert_clean(at)
    assert player(at)["start"] == 9
    at.selectbox(key="block_k").set_value(32).run()                    # 4×8 tiles: from 1
    assert_clean(at)
    assert loop_steps(at) == 32 and player(at)["start"] == 0 and "bw_step" not in url(at)


def test_backward_page_over_a_limit_shows_the_error():
    at = open_page("backward", batch=64, heads=64, seq_q=65536)
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "Limit qkv_elements exceeded" in msg and "FA_LAB_MAX_QKV_ELEMENTS" in msg
    assert len(at.get("vega_lite_chart")) >= 3             # the IO model still draws


def test_backward_page_names_the_naive_limit(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_NAIVE_BYTES", "100000")
    at = open_page("backward")
    assert_clean(at)
    msg = " ".join(w.value for w in at.warning)
    cfg = engine.AttentionConfig()
    assert "naive backward's P, dP and dS" in msg
    assert iomodel.format_bytes(iomodel.naive_backward_bytes(cfg)) in msg


def test_backward_page_row_controls_come_from_the_url():
    at = open_page("backward", bw_row=100, bw_key=7)
    assert_clean(at)
    assert at.number_input(key="bw_row").value == 100
    assert "Row 100" in json.dumps(specs(at))
    assert url(at)["bw_row"] == "100" and url(at)["bw_key"] == "7"
    far = open_page("backward", bw_row=5000)
    assert_clean(far)
    assert any("query row 5000 is out of range" in w.value for w in far.warning)


def test_backward_page_says_when_no_backward_results_are_recorded():
    at = open_page("backward")                  # tests/data holds only a forward file
    assert_clean(at)
    assert "No recorded backward results are present" in texts(at)


def test_backward_page_shows_recorded_backward_results(monkeypatch, tmp_path):
    fixture = json.loads((FIXTURES / "bench_fixture.json").read_text())
    rows = [{**r, "kernel": k} for r in fixture["results"][:1]
            for k in ("naive", "tensorcore")]
    rows[1]["median_ms"] = rows[0]["median_ms"] / 4
    (tmp_path / "bench_backward_fixture.json").write_text(json.dumps(
        {**fixture, "direction": "backward", "date": "2000-02-02", "results": rows}))
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("backward")
    assert_clean(at)
    body = texts(at)
    assert "Test fixture GPU" in body and "2000-02-02" in body
    assert "No recorded backward results" not in body
    assert any("speedup" in json.dumps(s.get("title", "")) for s in specs(at))


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its live timings first")
def test_backward_page_names_the_build_of_the_recorded_h200_rows(monkeypatch):
    """The recorded H200 backward file ran the wgmma build at its tiles (compute capability
    9.0 in the file's device): the legend says so, not "mma.sync/wgmma"."""
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("backward")
    assert_clean(at)
    legends = {name for s in specs(at) for name in color_domains(s)}
    assert "flash, tensor core (wgmma)" in legends, legends
    assert "flash, tensor core (mma.sync/wgmma)" not in legends


def test_backward_page_times_naive_against_flash():
    at = open_page("backward")
    if not ON_GPU:
        assert not any("time (ms)" in json.dumps(s) for s in specs(at))
        next(b for b in at.button if b.label == "Time the CPU emulation").click().run()
    assert_clean(at)
    assert any("p10_ms" in json.dumps(s) for s in specs(at)), "no timing chart"
    body = texts(at)
    assert "Backward alone, measured on" in body
    assert ("CUDA events" if ON_GPU else "not a GPU figure") in body
    assert "timed" not in " ".join(w.value for w in at.warning)


# ---- its tables and charts, without a server ------------------------------------------
def backward_trace(cfg: engine.AttentionConfig) -> engine.BackwardTrace:
    return engine.run_backward(cfg, backend="numpy", trace=True).trace


@pytest.mark.parametrize("cfg", CONFIGS)
def test_backward_loop_is_key_tile_major_and_follows_the_trace(cfg):
    cfg = cfg.with_(seed=fresh_seed())
    tr = backward_trace(cfg)
    view = backward_data.loop_view(cfg, tr)
    proc = processed_tiles(cfg)
    assert view.group == 1 and len(view.tiles) == cfg.Tr * cfg.Tc
    assert len(view.steps) == proc.sum() and list(view.steps.order) == list(range(proc.sum()))
    assert list(zip(view.steps.col, view.steps.row)) == sorted(zip(view.steps.col,
                                                                   view.steps.row))
    assert len(view.tiles.query("order < 0")) == (~proc).sum()
    cell = view.tiles.set_index(["row", "col"])
    for i, j in [(0, 0), (cfg.Tr - 1, cfg.Tc - 1), (cfg.Tr // 2, cfg.Tc // 3)]:
        rows = slice(i * cfg.block_q, (i + 1) * cfg.block_q)
        keys = slice(j * cfg.block_k, (j + 1) * cfg.block_k)
        mass = tr.p_rowsum[:, :, rows, j].astype(np.float64).mean()
        dq = np.sqrt((tr.dq_norm[:, :, rows].astype(np.float64) ** 2).sum(axis=(0, 1, 2)))
        dk = np.sqrt((tr.dk_norm[:, :, keys].astype(np.float64) ** 2).sum(axis=(0, 1, 2)))
        msg = f"cell ({i}, {j}) of {cfg}"
        assert cell.p_mass[i, j] == pytest.approx(mass, rel=1e-9, abs=1e-12), msg
        assert cell.dq_frac[i, j] == pytest.approx(dq[j] / dq[-1], rel=1e-9), msg
        assert cell.dk_frac[i, j] == pytest.approx(dk[i] / dk[-1], rel=1e-9), msg
    assert np.allclose(view.tiles[view.tiles.col == cfg.Tc - 1].dq_frac, 1.0)
    assert np.allclose(view.tiles[view.tiles.row == cfg.Tr - 1].dv_frac, 1.0)


def test_backward_loop_groups_large_grids():
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=1024, seq_k=1024, block_q=8,
                                 block_k=16, causal=True, seed=fresh_seed())
    view = backward_data.loop_view(cfg, backward_trace(cfg))
    assert view.group > 1 and len(view.tiles) <= tiling_data.MAX_CELLS
    got = player_frames.backward_frames(view.tiles, view.steps, view.rows, view.cols)
    assert len(got["frames"]) == len(view.steps) <= MAX_LOOP_STEPS
    assert len(got["cells"]) == view.rows * view.cols <= tiling_data.MAX_CELLS


@pytest.mark.parametrize("causal", [False, True])
def test_p_rebuilt_from_lse_sums_to_one_per_row(causal):
    cfg = CONFIGS[1].with_(causal=causal, seed=fresh_seed())
    tr = backward_trace(cfg)
    mass = backward_data.row_mass(tr, cfg, 0, 0, 123)
    assert 123 in set(mass.row) and mass.row.nunique() <= backward_data.MAX_ROWS
    last = mass[mass.tile == cfg.Tc - 1]
    assert np.allclose(last.p_cumulative, 1.0, atol=1e-5), f"seed {cfg.seed}"
    assert (np.diff(mass.p_cumulative.values.reshape(-1, cfg.Tc), axis=1) >= 0).all()
    assert backward_data.rowsum_gap(tr) < 1e-5
    chart = charts_backward.rowsum_chart(mass)
    spec = json.dumps(chart.to_dict())
    assert "p_cumulative" in spec and "Row 123" in spec


def test_gradient_growth_tables_carry_over_skipped_tiles():
    cfg = CONFIGS[1].with_(seed=fresh_seed())         # causal: row 10 sees key tile 0 only
    tr = backward_trace(cfg)
    dq = backward_data.dq_growth(tr, cfg, 0, 0, 10)
    assert list(dq.processed) == list(tr.processed[0])
    assert (dq.norm[~dq.processed] == dq.norm.iloc[0]).all()
    dkv = backward_data.dkv_growth(tr, cfg, 0, 0, 200)   # key 200: query tiles 3, 4 see it
    assert len(dkv) == 2 * cfg.Tr and set(dkv.what) == {"‖dK_c‖", "‖dV_c‖"}
    assert (dkv[dkv.tile < 3].norm == 0).all() and (dkv[dkv.tile >= 3].norm > 0).all()
    spec = json.dumps(charts_backward.growth_chart(dq, dkv).to_dict())
    assert "query tile i" in spec and "key tile j" in spec


def growth_panels(spec: dict) -> list[dict]:
    """Each panel of the growth chart: its y scale and its layers' datasets."""
    panels = []
    for panel in spec["hconcat"]:
        layers = panel.get("layer", [panel])
        panels.append({"y": layers[0]["encoding"]["y"]["scale"],
                       "data": [spec["datasets"][layer["data"]["name"]] for layer in layers]})
    return panels


@pytest.mark.parametrize("cfg", [
    CONFIGS[0], CONFIGS[1],
    engine.AttentionConfig(seq_q=1, seq_k=1),
    engine.AttentionConfig(seq_q=1, seq_k=1, causal=True),
    engine.AttentionConfig(seq_q=257, seq_k=300, block_q=64, block_k=32, causal=True),
    engine.AttentionConfig(seq_q=1, seq_k=512, causal=True)])
def test_growth_chart_norm_axis_is_set_and_finite_with_no_empty_layer(cfg):
    """At every row and key the page can pick, both panels carry a set, finite norm domain
    from 0 over every norm, and no layer is empty (an empty layer's extent is infinite: Vega
    warns and the axis has no domain)."""
    tr = backward_trace(cfg)
    for r in {0, cfg.seq_q - 1, min(cfg.seq_q - 1, cfg.block_q + 5)}:
        for c in {0, cfg.seq_k - 1, min(cfg.seq_k - 1, 3)}:
            dq = backward_data.dq_growth(tr, cfg, 0, 0, r)
            dkv = backward_data.dkv_growth(tr, cfg, 0, 0, c)
            spec = charts_backward.growth_chart(dq, dkv).to_dict()
            for panel, table in zip(growth_panels(spec), (dq, dkv)):
                low, high = panel["y"]["domain"]
                assert low == 0 and np.isfinite(high) and high >= table.norm.max()
                assert all(len(rows) > 0 for rows in panel["data"]), (r, c)
                norms = [row["norm"] for rows in panel["data"] for row in rows]
                assert np.isfinite(norms).all()
            layers = [len(p["data"]) for p in growth_panels(spec)]
            assert layers == [1 + bool((~t.processed).any()) for t in (dq, dkv)], (r, c)


def test_growth_chart_leaves_out_norms_that_are_not_finite():
    dq = pd.DataFrame({"tile": [0, 1, 2], "norm": [np.nan, np.inf, 1.5],
                       "processed": [True, True, False], "what": "‖dQ_r‖"})
    dkv = pd.DataFrame({"tile": [0, 0], "norm": [np.nan, np.nan], "processed": [True, True],
                        "what": ["‖dK_c‖", "‖dV_c‖"]})
    left, right = growth_panels(charts_backward.growth_chart(dq, dkv).to_dict())
    assert left["y"]["domain"] == [0.0, pytest.approx(1.5 * 1.05)]
    assert [row["norm"] for row in left["data"][0]] == [1.5]
    assert right["y"]["domain"] == [0.0, 1.0]      # nothing finite: a set domain all the same


@pytest.mark.parametrize("cfg", CONFIGS)
def test_backward_bytes_price_and_peak_follow_the_io_model(cfg):
    parts = backward_data.hbm_parts(cfg)
    for algo, model in (("naive backward", iomodel.naive_backward_hbm(cfg)),
                        ("flash backward", iomodel.flash_backward_hbm(cfg))):
        mine = parts[parts.algorithm == algo]
        assert mine.bytes.sum() == model.total
        assert mine[mine.way == "read"].bytes.sum() == model.read
    cost = backward_data.price(cfg, H200)
    extra = 2.0 * cfg.bh * cfg.seq_q * cfg.seq_k * cfg.head_dim / (2 if cfg.causal else 1)
    assert cost.recompute_flops == extra
    assert cost.bytes_saved == (iomodel.naive_backward_hbm(cfg).total
                                - iomodel.flash_backward_hbm(cfg).total)
    ms = cost.table.set_index(["algorithm", "resource"]).ms
    # the teaching kernel (the default) computes in float32 on the CUDA cores, whatever dtype
    assert ms["flash backward", "matrix products"] == pytest.approx(
        cfg.flops_of("backward") / (H200.fp32_tflops * 1e12) * 1e3)
    assert ms["flash backward", "matrix products"] > ms["naive backward", "matrix products"]
    peak = backward_data.peak_table(cfg).set_index("algorithm")["bytes"]
    assert peak["naive backward"] == iomodel.backward_peak_memory(cfg, "naive")
    assert peak["naive backward"] > peak["flash backward"]
    for builder, data in ((charts_backward.hbm_parts_chart, parts),
                          (charts_backward.price_chart, cost.table),
                          (charts_backward.peak_chart, backward_data.peak_table(cfg))):
        assert "flash backward" in json.dumps(builder(data).to_dict())


def test_backward_memory_wall_comes_before_the_forward_one():
    cfg = engine.AttentionConfig(batch=4, heads=32, dtype="float16")
    wall = timing_data.memory_wall(cfg, H200, direction="backward")
    peak = lambda n: iomodel.backward_peak_memory(cfg.with_(seq_q=n, seq_k=n), "naive")  # noqa
    assert peak(wall - 1) <= H200.memory_bytes < peak(wall)
    assert wall < timing_data.memory_wall(cfg, H200)       # P, dP and dS against S and P
    table = timing_data.memory_table(cfg, [1024, 4096], direction="backward")
    flash = table[table.algorithm == "FlashAttention"].set_index("seq").hbm_GiB
    assert flash[4096] * 2**30 == pytest.approx(
        iomodel.flash_backward_hbm(cfg.with_(seq_q=4096, seq_k=4096)).total)
