"""The Decoding page (app/features/decoding/): through AppTest, its controls from the URL, bad
combinations as messages, auto splits by profile, the merge played in the browser (its step
from the link and back into the URL), recorded decode results;
without a server, every chart builds a valid Vega-Lite spec and the data say what the page
claims (shares of the merge, the pool against the block table, the model's shape)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import engine
from app.features.decoding import charts as charts_decode, data as decode_data
from app.core.results_dir import BENCH_DIR_ENV
from engine.model.decode_config import DecodeConfig
from apptest_helpers import ON_GPU, assert_clean, open_page, player, specs, texts, url
from chart_helpers import H200


def metric(at: AppTest, label: str):
    return next(m for m in at.metric if m.label == label)


def test_decoding_page_follows_its_controls_from_the_url():
    at = open_page("decoding", heads=4, dec_seq_k=1001, dec_splits=8, dec_page=32,
                   dec_kv_heads=1, dec_seq_q=2)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert str(metric(at, "num_splits").value) == "8"
    assert metric(at, "keys per split").value == "126"                  # ⌈1001/8⌉, last 119
    assert str(metric(at, "query rows per block").value) == "8"       # 4 heads × 2 tokens
    assert "32 pages of 32 keys" in texts(at)                            # ⌈1001/32⌉, batch 1
    assert url(at)["dec_splits"] == "8" and url(at)["dec_page"] == "32"
    at.select_slider(key="dec_page").set_value("none").run()
    assert_clean(at)
    assert "The cache is contiguous" in texts(at) and url(at)["dec_page"] == "none"
    at.switch_page("features/timings/page.py").run()                          # not in its URL
    assert "dec_splits" not in url(at)


@pytest.mark.parametrize("params,words", [
    (dict(heads=4, dec_kv_heads=3), "heads must be a multiple of kv_heads"),
    (dict(dec_seq_k=100, dec_splits=128), "every split must hold a key"),
    (dict(heads=64, dec_kv_heads=1, dec_seq_q=2), "must be at most 32"),
])
def test_decoding_page_bad_combination_is_a_message(params, words):
    at = open_page("decoding", **params)
    assert_clean(at)
    assert any(words in e.value for e in at.error), [e.value for e in at.error]


def test_decoding_page_auto_splits_follow_the_emulated_profile():
    h200 = open_page("decoding", backend="numpy", dec_seq_k=32768, heads=32, dec_kv_heads=8)
    t4 = open_page("decoding", backend="numpy", dec_seq_k=32768, heads=32, dec_kv_heads=8,
                   profile="T4")
    assert str(metric(h200, "num_splits").value) == "32"                 # 2·132 / 8 = 33
    assert str(metric(t4, "num_splits").value) == "8"                    # 2·40 / 8 = 10


def test_decoding_page_plays_the_merge_in_the_browser_one_split_a_step():
    at = open_page("decoding", dec_seq_k=2000, dec_splits=8)
    assert_clean(at)
    got = player(at)
    merge = got["spec"]
    assert merge["kind"] == "merge" and merge["code"] is None       # no kernel lines: below
    assert [f["split"] for f in merge["frames"]] == list(range(8)) and got["start"] == 0
    assert merge["url"] == {"name": "dec_step", "base": 1, "label": "splits merged", "home": 0}
    assert [(f["k0"], f["k1"]) for f in merge["frames"]][-1] == (1750, 2000)   # 8 × 250 keys
    last = merge["frames"][-1]
    assert last["m_run"] == max(f["m_s"] for f in merge["frames"])
    shares = [f["rescale"] * f["l_s"] / last["l_run"] for f in merge["frames"]]
    assert abs(sum(shares) - 1) < 1e-5 and all(f["rescale"] <= 1 for f in merge["frames"])
    assert not any(t.key == "dec_play" for t in at.get("toggle"))     # no server Play
    assert "last block merges all splits at once" in texts(at)


def test_decoding_page_merge_step_from_the_link_resets_on_another_head():
    at = open_page("decoding", heads=4, dec_step=3)
    assert_clean(at)
    assert player(at)["start"] == 2 and url(at)["dec_step"] == "3"
    at.session_state["dec_player"] = {"step": 5, "sig": player(at)["sig"]}   # stopped on 6
    at.run()
    assert player(at)["start"] == 5 and url(at)["dec_step"] == "6"
    at.number_input(key="dec_head").set_value(1).run()                   # another row
    assert_clean(at)
    assert player(at)["start"] == 0 and "dec_step" not in url(at)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows live decode timings instead")
def test_decoding_page_says_no_recorded_decode_results_exist():
    at = open_page("decoding")
    assert "No recorded H200 decode results exist yet" in texts(at)
    assert any("Model of NVIDIA H200 (not measured)" in json.dumps(s) for s in specs(at))


@pytest.mark.skipif(ON_GPU, reason="a GPU shows live decode timings instead")
def test_decoding_page_shows_recorded_decode_results(monkeypatch, tmp_path):
    rows = [{"kernel": "flash_decode", "batch": 1, "heads": 32, "kv_heads": 8, "seq_q": 1,
             "seq_k": 32768, "head_dim": 128, "dtype": "float16", "page_size": None,
             "num_splits": n, "auto_splits": n == 32, "median_ms": 1.0 / n + 0.02,
             "p10_ms": 0.0, "p90_ms": 0.0, "reps": 20, "kv_bytes": 1, "floor_ms": 0.02,
             "floor_fraction": 0.5} for n in (1, 2, 4, 32)]
    rows.append({**rows[0], "kernel": "torch_sdpa", "num_splits": None, "median_ms": 0.1})
    (tmp_path / "decode_fixture.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "decode",
         "device": {"name": "Fixture GPU"}, "date": "2000-01-01",
         "method": "fixture method", "results": rows}))
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("decoding")
    assert_clean(at)
    body = texts(at)
    assert "No recorded H200 decode results" not in body and "fixture method" in body
    assert at.selectbox(key="dec_rec_file").value == "decode_fixture.json"
    assert any("Recorded on Fixture GPU" in json.dumps(s) and "2000-01-01" in json.dumps(s)
               for s in specs(at))


# ---- its tables and charts, without a server ------------------------------------------
@pytest.fixture(scope="module")
def run():
    cfg = DecodeConfig(batch=3, heads=8, kv_heads=2, seq_q=2, seq_k=1001, head_dim=32,
                       dtype="float32", num_splits=8, page_size=16, seed=7)
    return cfg, engine.run_decode(cfg, trace=True)


def test_split_states_carry_the_merge(run):
    cfg, res = run
    states = decode_data.split_states(res, 1, 5, 1)
    assert len(states) == 8 and states["keys"].sum() == cfg.seq_k
    assert states.share.sum() == pytest.approx(1, abs=1e-5)
    assert (states.rescale <= 1).all() and states.rescale.max() == 1
    assert states.m_s.max() == pytest.approx(states.m_final.iloc[0])


def test_pool_cells_invert_the_block_table(run):
    cfg, res = run
    cells = decode_data.pool_cells(cfg, res.block_table, res.bounds)
    assert len(cells) == cfg.num_pages == 3 * 63
    for row in cells.itertuples():
        assert res.block_table[row.sequence, row.logical] == row.page
        assert res.bounds[row.split] <= row.k0 < res.bounds[row.split + 1]
    assert cells.k1.max() == cfg.seq_k


def test_bytes_and_models(run):
    cfg, _ = run
    table = decode_data.bytes_table(cfg, H200)
    assert list(table.kv_heads) == [8, 2, 1]
    assert table.bytes_per_token.iloc[0] == 4 * table.bytes_per_token.iloc[1]
    model = decode_data.splits_model(cfg.with_(seq_k=65536, batch=1), H200)
    m = model[model.series == "model"].set_index("num_splits").ms
    assert m.loc[1] > m.loc[16] and set(model.series) == {"model", "HBM floor"}
    sweep = decode_data.floor_sweep(cfg, H200)
    floor = sweep[sweep.series.str.startswith("HBM floor")].ms.to_numpy()
    assert np.allclose(floor[1:] / floor[:-1], 2)                # linear in seq_k


def test_spread_unsplit_draws_sdpa_across_the_split_counts():
    rows = pd.DataFrame({"series": ["a", "a", "sdpa"], "num_splits": [1, 64, None],
                         "ms": [2.0, 1.0, 1.5]})
    out = decode_data.spread_unsplit(rows)
    assert sorted(out[out.series == "sdpa"].num_splits) == [1, 64]


def test_every_decode_chart_is_valid(run):
    cfg, res = run
    charts = [
        charts_decode.cache_chart(decode_data.split_strip(res), cfg.seq_k, cfg.page_size),
        charts_decode.pool_chart(decode_data.pool_cells(cfg, res.block_table, res.bounds),
                                 decode_data.POOL_COLUMNS),
        charts_decode.bytes_chart(decode_data.bytes_table(cfg, H200)),
        charts_decode.floor_chart(decode_data.floor_sweep(cfg, H200)),
        charts_decode.splits_chart(decode_data.splits_model(cfg, H200), ["Model", "x"], 8)]
    specs = [c.to_dict(validate=True) for c in charts]
    assert len(specs) == 5


# ---- auto against the model, the recorded panel's shape, metrics without notes as deltas --
def test_auto_is_explained_where_the_model_prefers_another_count():
    """At a short cache with one KV head, auto is held to 256 keys a split (16 splits at
    4,096 keys) while the model, which charges only bytes and idle SMs, is fastest at 128:
    the page says why, with the model's own ratio; at the decode targets auto is the model's
    best (within 25 %) and nothing is said."""
    from engine.model import iomodel
    cfg = DecodeConfig(batch=1, heads=2, kv_heads=1, seq_k=4096, head_dim=64, dtype="float32")
    assert cfg.splits_on(H200.sms) == 16
    ratio = iomodel.decode_model_ms(cfg, 16, H200) / iomodel.decode_model_ms(cfg, 128, H200)
    text = decode_data.auto_against_model(cfg, H200)
    assert "auto takes 16 splits when the model's fastest is 128" in text
    assert f"({ratio:.1f}× faster in the model)" in text and "256 keys" in text
    assert "not at this shape" in text
    targets = DecodeConfig(batch=1, heads=32, kv_heads=8, seq_k=32768)
    assert decode_data.auto_against_model(targets, H200) == ""


def test_the_recorded_step_quoted_is_the_recorded_files():
    """The step and floor the explanation quotes are the recorded H200 sweep's line at batch 1,
    seq_k 32,768, the auto split count, contiguous."""
    data = json.loads((engine.recorded.BENCH_DIR / "decode_h200_2026-11-28.json").read_text())
    row, = (r for r in data["results"] if r["kernel"] == "flash_decode" and r["batch"] == 1
            and r["seq_k"] == 32768 and r["auto_splits"] and r["page_size"] is None)
    assert decode_data.RECORDED_STEP_US == round(row["median_ms"] * 1e3, 1)
    assert decode_data.RECORDED_FLOOR_US == round(row["floor_ms"] * 1e3, 1)


def test_closest_recorded_shape_is_the_configs_own_when_recorded():
    rows = pd.DataFrame({"shape": ["B=1, H=32, kv_heads=8, seq_q=1, seq_k=32768, d=128, float16",
                                   "B=8, H=32, kv_heads=8, seq_q=1, seq_k=131072, d=128, float16",
                                   "B=1, H=32, kv_heads=8, seq_q=1, seq_k=4096, d=64, float32"]})
    mine = DecodeConfig(batch=8, heads=32, kv_heads=8, seq_k=131072)
    assert decode_data.closest_shape(rows, mine) == decode_data.decode_shape_text(mine)
    small = DecodeConfig(batch=1, heads=2, kv_heads=1, seq_k=4096, head_dim=64, dtype="float32")
    assert decode_data.closest_shape(rows, small) == rows["shape"][2]


@pytest.mark.skipif(ON_GPU, reason="a GPU shows live decode timings instead")
def test_recorded_panel_says_when_it_is_another_shape(monkeypatch, tmp_path):
    rows = [{"kernel": "flash_decode", "batch": 1, "heads": 32, "kv_heads": 8, "seq_q": 1,
             "seq_k": 4096, "head_dim": 128, "dtype": "float16", "page_size": None,
             "num_splits": n, "auto_splits": n == 32, "median_ms": 1.0 / n + 0.02,
             "p10_ms": 0.0, "p90_ms": 0.0, "reps": 20, "kv_bytes": 1, "floor_ms": 0.02,
             "floor_fraction": 0.5} for n in (1, 2, 4, 32)]
    (tmp_path / "decode_fixture.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "decode", "device": {"name": "Fixture GPU"},
         "date": "2000-01-01", "method": "fixture method", "results": rows}))
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("decoding", backend="numpy")          # B=1, H=2: not the recorded shape
    assert_clean(at)
    body = texts(at)
    assert "The recorded panel shows **another shape**" in body
    assert "none recorded is this page's" in body
    assert any("another shape:" in json.dumps(s) for s in specs(at))
    assert "Why auto takes 16 splits when the model's fastest is 128" in body
    same = open_page("decoding", backend="numpy", heads=32, dec_kv_heads=8, head_dim=128,
                     dtype="float16", dec_seq_k=4096)
    assert_clean(same)
    assert "another shape" not in texts(same)
    assert any("this page's shape" in json.dumps(s) for s in specs(same))


def test_decoding_metrics_carry_no_notes_as_deltas():
    at = open_page("decoding", backend="numpy")
    assert_clean(at)
    assert at.metric and all(not m.proto.delta for m in at.metric), \
        [(m.label, m.proto.delta) for m in at.metric]


def test_paged_against_contiguous_compares_like_with_like():
    """Each paged line over the contiguous one at the same split count; the layout's reason
    only where every paged line is faster, the block table's cost where one is not, nothing
    without both kinds of line."""
    def rows(paged_ms):
        return pd.DataFrame({
            "series": ["flash-decoding, contiguous", "flash-decoding, contiguous",
                       "flash-decoding, pages of 16", "flash-decoding, pages of 64",
                       "PyTorch SDPA"],
            "num_splits": [4, 8, 4, 4, None], "ms": [1.0, 1.2, paged_ms, 0.96, 0.95]})
    faster = decode_data.paged_against_contiguous(rows(0.94))
    assert "pages of 16 0.94× at 4 splits; pages of 64 0.96× at 4 splits." in faster
    assert "kv_heads × page_size × head_dim" in faster and "block table" not in faster
    slower = decode_data.paged_against_contiguous(rows(1.03))
    assert "pages of 16 1.03× at 4 splits" in slower and "block table" in slower
    assert "warp by warp" in slower and "warp by warp" not in faster
    assert "kv_heads × page_size" not in slower
    only_contiguous = rows(0.9).iloc[[0, 1, 4]]
    assert decode_data.paged_against_contiguous(only_contiguous) == ""
    no_match = rows(0.9).assign(num_splits=[2, 8, 4, 4, None])   # no contiguous line at 4
    assert decode_data.paged_against_contiguous(no_match) == ""
