"""The SRAM tiling page (app/features/sram_tiling/): through AppTest, its steps follow the
tiles, the loop player opens at the link's step, follows the browser and resets, the FA1 and
FA2 orders, shared memory against the limit; without a server, the loop's bytes add up to
the IO model and its charts stay under ~20k marks."""
from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import engine
from app.core.style import ALARM, TILE_COLORS
from app.features.sram_tiling import charts as charts_tiling, data as tiling_data
from engine.model import iomodel
from engine.model.units import format_bytes
from engine.model.tiles import processed_tiles
from apptest_helpers import ON_GPU, assert_clean, open_page, player, specs, texts, url
from chart_helpers import CONFIGS, H200, MAX_MARKS, datasets, largest_dataset, params


def test_sram_page_steps_follow_the_tiles():
    at = open_page("sram_tiling")
    assert len(player(at)["spec"]["frames"]) == 16          # 4×4 tiles
    at.selectbox(key="block_q").set_value(32).run()
    assert_clean(at)
    assert len(player(at)["spec"]["frames"]) == 32          # 8×4 tiles


def test_sram_page_causal_has_fewer_steps():
    at = open_page("sram_tiling", causal="true")
    assert_clean(at)
    assert len(player(at)["spec"]["frames"]) == 10          # 10 of 16 tiles run


def test_sram_page_plays_in_the_browser_from_the_links_step():
    at = open_page("sram_tiling", sram_step=7)
    assert_clean(at)
    got = player(at)
    assert got["start"] == 6 and got["spec"]["url"] == {"name": "sram_step", "base": 1,
                                                        "label": "loop step", "home": 0}
    assert url(at)["sram_step"] == "7"
    assert not at.get("toggle") or all(t.key != "sram_play" for t in at.toggle)   # no server Play
    at = open_page("sram_tiling", sram_step=99)             # past the last of 16 steps
    assert player(at)["start"] == 15 and url(at)["sram_step"] == "16"
    at = open_page("sram_tiling")
    assert player(at)["start"] == 0 and "sram_step" not in url(at)


def test_sram_page_tiles_too_big_shows_red_state():
    at = open_page("sram_tiling", head_dim=128, block_q=128, block_k=128, dtype="float32")
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    cfg = engine.AttentionConfig(head_dim=128, block_q=128, block_k=128, dtype="float32")
    need = iomodel.smem_budget(cfg, engine.PROFILES["H200"]).total
    assert format_bytes(need) in msg and "227 KiB" in msg and "Largest tiles" in msg
    assert "128×64" in msg or "64×128" in msg
    assert "Too big" in json.dumps(specs(at)[0])


def test_sram_page_emulated_profile_changes_the_limit():
    at = open_page("sram_tiling", backend="numpy", profile="T4", head_dim=128, block_q=64,
                   block_k=64)
    assert_clean(at)
    assert "at most 64 KiB" in " ".join(e.value for e in at.error)


def _stop_at(at: AppTest, step: int) -> None:
    """The browser reports the step it stopped on (Play paused or a step by hand)."""
    at.session_state["sram_player"] = {"step": step, "sig": player(at)["sig"]}
    at.run()


def test_the_step_the_browser_stops_on_goes_into_the_url():
    at = open_page("sram_tiling")
    _stop_at(at, 8)
    assert_clean(at)
    assert player(at)["start"] == 8 and url(at)["sram_step"] == "9"


def test_loop_player_resets_on_a_config_change():
    at = open_page("sram_tiling")
    _stop_at(at, 8)
    at.selectbox(key="block_q").set_value(32).run()
    assert_clean(at)
    assert player(at)["start"] == 0 and "sram_step" not in url(at)


def test_loop_player_keeps_the_step_across_the_loop_order():
    at = open_page("sram_tiling")
    _stop_at(at, 5)
    at.radio(key="sram_order").set_value("fa1").run()
    assert_clean(at)
    assert player(at)["start"] == 5                       # compare both orders at one step
    assert player(at)["spec"]["order"] == "fa1"


def test_sram_page_switches_to_the_fa1_order():
    at = open_page("sram_tiling")
    cfg = engine.AttentionConfig()
    fa1, fa2 = iomodel.flash1_hbm(cfg), iomodel.flash_hbm(cfg)
    body = texts(at)
    assert f"HBM traffic, FlashAttention-1 order={iomodel.format_bytes(fa1.total)}" in body
    assert f"HBM traffic, FlashAttention-2 order={iomodel.format_bytes(fa2.total)}" in body
    assert player(at)["spec"]["order"] == "fa2"
    at.radio(key="sram_order").set_value("fa1").run()
    assert_clean(at)
    loop = player(at)["spec"]
    assert loop["order"] == "fa1" and loop["frames"][-1]["read"] == fa1.read
    assert "written back" in texts(at)


def test_sram_page_names_l2_and_the_paper_bound():
    at = open_page("sram_tiling")
    body = texts(at)
    # the emulated profile's (H200) without a GPU, the device's own on one
    want = "L2 cache (NVIDIA H200: 60 MiB)" if not ON_GPU else "L2 cache (NVIDIA "
    assert want in body and "Θ(N²d²/M)" in body


def smem_parts_shown(at: AppTest) -> list[str]:
    from app.core.st_internals import arrow_bytes_to_frame as convert_arrow_bytes_to_pandas_df
    proto = at.get("vega_lite_chart")[0].proto
    return list(convert_arrow_bytes_to_pandas_df(proto.datasets[0].data.data).part)


def test_sram_page_shows_the_tensor_core_layout():
    at = open_page("sram_tiling", kernel="tensorcore", dtype="float16", head_dim=64,
                   block_q=128, block_k=128)
    assert_clean(at)
    parts = smem_parts_shown(at)
    assert "K_j (2 buffers)" in parts and "swizzle alignment" in parts     # wgmma on an H200
    assert "wgmma build" in texts(at)
    at = open_page("sram_tiling", kernel="tensorcore", dtype="float16", head_dim=64,
                   block_q=64, block_k=64)
    parts = smem_parts_shown(at)
    assert "K_j (2 buffers)" in parts and "S_ij" not in parts            # mma.sync
    at = open_page("sram_tiling", kernel="tensorcore", dtype="float32")
    assert "No tensor-core build takes this config" in texts(at)


def test_loop_order_comes_from_the_link_and_goes_back_into_it():
    at = open_page("sram_tiling", sram_order="fa1")
    assert_clean(at)
    assert at.radio(key="sram_order").value == "fa1"
    assert player(at)["spec"]["order"] == "fa1"
    assert at.query_params["sram_order"] == "fa1"
    at.radio(key="sram_order").set_value("fa2").run()
    assert "sram_order" not in at.query_params
    bad = open_page("sram_tiling", sram_order="fa3")
    assert_clean(bad)
    assert any("sram_order" in e.value and "fa2, fa1" in e.value for e in bad.error)


# ---- its tables and charts, without a server ------------------------------------------
@pytest.mark.parametrize("cfg", CONFIGS)
def test_loop_bytes_add_up_to_the_io_model(cfg):
    view = tiling_data.loop_view(cfg)
    flash = iomodel.flash_hbm(cfg)
    assert view.steps.flash_read.iloc[-1] == flash.read
    assert view.steps.flash_written.iloc[-1] == flash.written
    assert (np.diff(view.steps.flash_read) >= 0).all()
    assert (view.steps.naive_read == iomodel.naive_hbm(cfg).read).all()
    assert len(view.steps) == processed_tiles(cfg).sum()
    assert len(view.tiles) == cfg.Tr * cfg.Tc
    assert list(view.steps.order) == list(range(len(view.steps)))


def test_loop_order_is_query_tile_major():
    cfg = CONFIGS[1]
    steps = tiling_data.loop_view(cfg).steps
    keys = list(zip(steps.row, steps.col))
    assert keys == sorted(keys)
    skipped = tiling_data.loop_view(cfg).tiles.query("order < 0")
    assert len(skipped) == (~processed_tiles(cfg)).sum()


def test_large_grids_are_grouped_and_keep_the_totals():
    cfg = engine.AttentionConfig(seq_q=8192, seq_k=8192, block_q=8, block_k=16, causal=True)
    view = tiling_data.loop_view(cfg)
    assert view.group > 1
    assert len(view.tiles) <= tiling_data.MAX_CELLS
    assert view.steps.flash_read.iloc[-1] == iomodel.flash_hbm(cfg).read
    chart = charts_tiling.loop_chart(view.tiles, view.steps, view.rows, view.cols)
    assert largest_dataset(chart) <= MAX_MARKS


def test_loop_chart_draws_the_step_of_its_param():
    cfg = CONFIGS[1]
    view = tiling_data.loop_view(cfg)
    chart = charts_tiling.loop_chart(view.tiles, view.steps, view.rows, view.cols, start=4)
    step = params(chart)["step"]
    assert "bind" not in step and step["value"] == 5     # app.core.ui.loop_player sets the step
    spec = json.dumps(chart.to_dict())
    assert "datum.order == (step - 1)" in spec
    for name in ("Q_i", "K_j", "V_j", "O_i", "S_ij"):
        assert TILE_COLORS[name] in spec
    rows = {len(v) for v in datasets(chart).values()}
    assert len(view.tiles) in rows and len(view.steps) in rows


def test_smem_chart_turns_red_when_tiles_do_not_fit():
    small = tiling_data.smem_table(engine.AttentionConfig(), H200)
    big = tiling_data.smem_table(engine.AttentionConfig(head_dim=128, block_q=128,
                                                        block_k=128), H200)
    assert bool(small.fits.iloc[0]) and not bool(big.fits.iloc[0])
    ok, bad = charts_tiling.smem_chart(small).to_dict(), charts_tiling.smem_chart(big).to_dict()
    assert ALARM not in json.dumps(ok) and ALARM in json.dumps(bad)
    assert "Too big" in json.dumps(bad)
    parts = next(iter(charts_tiling.smem_chart(big).to_dict()["datasets"].values()))
    assert sum(p["bytes"] for p in parts) == iomodel.smem_budget(
        engine.AttentionConfig(head_dim=128, block_q=128, block_k=128), H200).total


@pytest.mark.parametrize("cfg", CONFIGS + [engine.AttentionConfig(batch=8, heads=16,
                                                                  seq_q=4096, seq_k=4096)])
def test_waves_place_every_block(cfg):
    w = tiling_data.waves(cfg, H200)
    per_sm = iomodel.smem_budget(cfg, H200).blocks_per_sm
    assert w.blocks == cfg.bh * cfg.Tr and w.per_sm == per_sm
    assert w.waves == -(-w.blocks // (H200.sms * per_sm))
    if w.shown == w.waves:
        assert w.table.blocks.sum() == w.blocks
    assert (w.table.groupby("wave").blocks.sum() <= H200.sms * per_sm).all()
    assert (w.table.blocks <= per_sm).all()
    chart = charts_tiling.waves_chart(w.table, H200.sms)
    assert largest_dataset(chart) <= MAX_MARKS


# ---- FA1 order changes everything it affects; the paper's bound as an order ----------
def test_fa1_order_changes_the_intro_and_the_grid():
    """FA2: one thread block per batch·head and query tile; FA1: one per batch·head, which
    walks the key tiles (K_j, V_j loaded once) and reads and writes every query tile's
    O_i, m_i, l_i in HBM; the intro, the re-read formula and the waves follow the order."""
    cfg = engine.AttentionConfig(batch=2, heads=4, seq_q=1024, seq_k=1024)
    at = open_page("sram_tiling", batch=2, heads=4, seq_q=1024, seq_k=1024)
    assert_clean(at)
    body = texts(at)
    assert f"{cfg.bh * cfg.Tr:,} thread blocks (one per batch·head and query tile" in body
    assert "One thread block per batch·head and query tile" in body
    assert "FA2 reads K and V once per query tile" in body
    at.radio(key="sram_order").set_value("fa1").run()
    assert_clean(at)
    body = texts(at)
    assert f"{cfg.bh:,} thread blocks (one per batch·head, B·H = {cfg.bh:,}" in body
    assert "FlashAttention-1's order: one thread block per batch·head walks the key tiles" in body
    assert "One thread block per batch·head and query tile" not in body
    assert "FA1 reads K and V once but reads and writes Q_i, O_i, m_i, l_i" in body
    fa1 = iomodel.flash1_hbm(cfg).total
    assert f"the count of {iomodel.format_bytes(fa1)} is" in body
    w1 = tiling_data.waves(cfg, H200, "teaching", "fa1")
    w2 = tiling_data.waves(cfg, H200, "teaching", "fa2")
    assert w1.blocks == cfg.bh and w2.blocks == cfg.bh * cfg.Tr
    assert w1.table.blocks.sum() == cfg.bh and w2.table.blocks.sum() == cfg.bh * cfg.Tr


def test_the_papers_bound_is_an_order_with_its_constant():
    from app.core.figures import theta_text
    cfg = engine.AttentionConfig()                         # N = 256, d = 64, float32
    counted = iomodel.flash_hbm(cfg).total
    theta = iomodel.paper_theta_bytes(cfg, H200)
    text = theta_text(cfg, H200, counted)
    assert "an order of growth, not a byte count" in text
    assert f"{counted / theta['flash']:.1f}× that" in text
    assert 30 < counted / theta["flash"] < 40              # 1.31 MB against 36.8 kB
    assert "these are 64×64" in text


def test_sram_metrics_carry_no_notes_as_deltas():
    at = open_page("sram_tiling")
    assert_clean(at)
    assert at.metric and all(not m.proto.delta for m in at.metric)
