"""The Online softmax page (app/features/online_softmax/): through AppTest, it reacts to the
row and inputs, its page controls come from the URL and go back into it, overflow and
limits are messages; without a server, the partial outputs, traces and charts hold what
the page says."""
from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from app.core.style import ALARM
from app.features.online_softmax import charts as charts_softmax, data as softmax_data
from apptest_helpers import ON_GPU, assert_clean, open_page, player, specs, texts, url
from chart_helpers import datasets, fresh_seed, params


def test_page_controls_come_from_the_url_and_go_back_into_it():
    at = open_page("online_softmax", heads=4, sm_head=2, sm_row=100)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert at.number_input(key="sm_head").value == 2
    assert at.number_input(key="sm_row").value == 100
    assert "Row **100**" in texts(at)
    assert url(at)["sm_row"] == "100" and url(at)["sm_head"] == "2"
    at.number_input(key="sm_row").set_value(7).run()
    assert_clean(at)
    assert url(at)["sm_row"] == "7" and "Row **7**" in texts(at)
    at.number_input(key="sm_head").set_value(0).run()       # back to the default: dropped
    assert "sm_head" not in url(at)
    at.switch_page("features/timings/page.py").run()              # another page: not in its URL
    assert_clean(at)
    assert "sm_row" not in url(at) and url(at)["heads"] == "4"


def _upto(at) -> int:
    stats = next(s for s in specs(at) if s.get("params", [{}])[0].get("name") == "upto")
    return stats["params"][0]["value"]


def test_the_loop_plays_from_tile_0_and_the_links_tile():
    at = open_page("online_softmax")
    assert_clean(at)
    got = player(at)
    assert got["start"] == 0 and _upto(at) == 0               # not the finished state
    assert len(got["spec"]["frames"]) == 4 and got["spec"]["url"]["name"] == "sm_tile"
    assert "sm_tile" not in url(at)
    at = open_page("online_softmax", sm_tile=2)
    assert player(at)["start"] == 2 and _upto(at) == 2 and url(at)["sm_tile"] == "2"
    at.session_state["softmax_player"] = {"step": 3, "sig": player(at)["sig"]}  # stopped on 3
    at.run()
    assert_clean(at)
    assert player(at)["start"] == 3 and _upto(at) == 3 and url(at)["sm_tile"] == "3"
    at.number_input(key="sm_row").set_value(7).run()          # another row: from tile 0
    assert player(at)["start"] == 0 and "sm_tile" not in url(at)


def test_page_control_out_of_this_config_falls_back_with_a_note():
    at = open_page("online_softmax", sm_row=5000, sm_batch=3)    # 256 rows, batch 1
    assert_clean(at)
    assert any("query row 5000 is out of range for this config (0 to 255)" in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert at.number_input(key="sm_row").value == 69              # block_q + 5
    assert "sm_row" not in url(at) and "sm_batch" not in url(at)
    bad = open_page("online_softmax", sm_row="-1")
    assert_clean(bad)
    assert any("sm_row must be a whole number from 0 to 65535" in e.value for e in bad.error)


def test_online_softmax_reacts_to_row_and_inputs():
    at = open_page("online_softmax")
    assert ("measured on the GPU" if ON_GPU else "CPU emulation") in at.info[0].value
    first = specs(at)[0]
    assert first["params"][0]["name"] == "upto"
    at.number_input(key="sm_row").set_value(3).run()
    assert_clean(at)
    assert "Row **3**" in texts(at)
    at.selectbox(key="inputs").set_value("rising").run()
    assert_clean(at)
    rescales = next(m for m in at.metric if m.label == "rescales below 1")
    assert int(rescales.value) >= 2     # the rising preset moves the max at later tiles


def test_online_softmax_overflow_is_reported_for_large_logits():
    """Scores of ~20-60: float32 (the kernels' exp) holds them, float16 (the inputs') would
    not; the page says both, each with its own dtype and limit."""
    at = open_page("online_softmax", logit_scale="20", dtype="float16")
    assert_clean(at)
    body = texts(at)
    assert "take exp in **float32** whatever the input dtype (float16 here)" in body
    assert "e^88.72" in body and "e^11.09" in body
    assert "Taken in float16 instead" in body
    float16_part = body[body.index("Taken in float16 instead"):]
    assert "would give **0** inf" not in float16_part
    assert "with the max subtracted, **0**" in float16_part


def test_online_softmax_overflow_says_the_chosen_dtype():
    """bfloat16 has float32's exponent range: its limit is e^88.72 too, and the page names
    bfloat16 (never float16) and says exp is taken in float32."""
    from app.features.online_softmax import data as sd
    assert sd.exp_limit("float16") == pytest.approx(11.09, abs=0.01)
    assert sd.exp_limit("bfloat16") == pytest.approx(88.72, abs=0.01)
    assert sd.exp_limit("float32") == pytest.approx(88.72, abs=0.01)
    at = open_page("online_softmax", backend="numpy", dtype="bfloat16", logit_scale="30")
    assert_clean(at)
    body = texts(at)
    section = body[body.index("The kernels here keep S_ij in float32"):]
    assert "(bfloat16 here)" in section and "Taken in bfloat16 instead" in section
    assert "float16" not in section.replace("bfloat16", "")
    safe = next(sp for sp in specs(at) if "exp in float32" in json.dumps(sp))
    assert "keys overflow to inf in float32" in json.dumps(safe)


def test_limit_errors_are_messages():
    at = open_page("online_softmax", batch=64, heads=64, seq_q=65536)
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "Limit" in msg and "FA_LAB_MAX_" in msg


def test_online_softmax_says_the_gpu_cannot_launch_too_big_tiles():
    at = open_page("online_softmax", backend="numpy", head_dim=128, block_q=128,
                   block_k=128, dtype="float32")
    assert_clean(at)
    assert "The GPU cannot launch this config" in " ".join(w.value for w in at.warning)
    ok = open_page("online_softmax", backend="numpy")
    assert not any("cannot launch" in w.value for w in ok.warning)


def test_online_softmax_overflow_text_only_says_nan_when_it_overflows():
    calm = open_page("online_softmax")
    assert "returns NaN" not in texts(calm) and "0** inf among" in texts(calm)
    hot = open_page("online_softmax", inputs="rising", logit_scale=1000)
    assert_clean(hot)
    assert "(softmax then returns NaN)" in texts(hot)


def test_online_softmax_draws_skipped_tiles_as_skipped():
    at = open_page("online_softmax", causal="true", sm_row=10)     # query tile 0 of 4
    assert_clean(at)
    stats = json.dumps(specs(at)[0])
    assert "skipped by the causal mask" in stats
    assert "skips the last 3 key tile(s)" in texts(at)


# ---- its tables and charts, without a server ------------------------------------------
def traced(cfg):
    q, k, v = engine.make_inputs(cfg)
    return q, k, v, engine.run(cfg, q, k, v, backend="numpy", trace=True)


@pytest.mark.parametrize("causal", [False, True])
def test_partial_output_matches_attention_over_the_keys_seen(causal):
    cfg = engine.AttentionConfig(seq_q=150, seq_k=200, block_q=32, block_k=32, causal=causal,
                                 seed=fresh_seed(), inputs="rising")
    q, k, v, res = traced(cfg)
    b, h, r = 0, 1, 149
    conv = softmax_data.convergence(cfg, q, k, v, res.output, res.trace, b, h, r)
    for j in range(cfg.Tc):
        end = min((j + 1) * cfg.block_k, cfg.seq_k)
        part = cfg.with_(seq_k=end)
        # float64 reference: attention of row r over the first `end` keys only
        s = part.softmax_scale * (k[b, h, :end].astype(np.float64) @ q[b, h, r].astype(float))
        if causal:
            s[np.arange(end) > r] = -np.inf
        p = np.exp(s - s.max())
        partial = p @ v[b, h, :end].astype(np.float64) / p.sum()
        full_s = cfg.softmax_scale * (k[b, h].astype(np.float64) @ q[b, h, r].astype(float))
        if causal:
            full_s[np.arange(cfg.seq_k) > r] = -np.inf
        pf = np.exp(full_s - full_s.max())
        exact = pf @ v[b, h].astype(np.float64) / pf.sum()
        want = np.linalg.norm(partial - exact) / np.linalg.norm(exact)
        assert conv.table.rel_error[j] == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert conv.table.rel_error.iloc[0] > 1e-3
    assert conv.table.rel_error.iloc[-1] < 1e-12
    assert conv.sum_agreement < 1e-5          # the trace's l_j agrees with float64
    assert conv.output_error < 1e-5


def test_row_trace_is_the_runs_trace():
    cfg = engine.AttentionConfig(seq_q=130, seq_k=130, block_q=32, block_k=16, causal=True,
                                 seed=fresh_seed())
    _, _, _, res = traced(cfg)
    rows = softmax_data.row_trace(res.trace, cfg, 0, 1, 40)
    assert len(rows) == cfg.Tc
    np.testing.assert_array_equal(rows.rescale, res.trace.rescale[0, 1, 40])
    np.testing.assert_array_equal(rows.running_sum, res.trace.running_sum[0, 1, 40])
    hidden = rows.tile_max.isna()                         # tiles past key 40: nothing visible
    assert list(hidden) == list(rows.k0 > 40)
    assert list(rows.visible_keys[:3]) == [16, 16, 9]


def test_score_row_bins_keep_the_peaks():
    cfg = engine.AttentionConfig(seq_q=4, seq_k=8000, block_k=64, seed=fresh_seed())
    q, k, _ = engine.make_inputs(cfg)
    full, _ = softmax_data.scores(cfg, q, k, 0, 0, 2)
    binned = softmax_data.score_row(cfg, q, k, 0, 0, 2)
    assert len(binned) <= softmax_data.MAX_SCORE_POINTS
    assert binned.score.max() == pytest.approx(full.max())


def test_fp16_overflow_counts_real_float16_infs():
    cool = engine.AttentionConfig(dtype="float16", seed=fresh_seed())
    hot = cool.with_(logit_scale=30.0)
    for cfg, overflows in ((cool, False), (hot, True)):
        q, k, _ = engine.make_inputs(cfg)
        o = softmax_data.fp16_overflow(cfg, q, k, 0, 0, 10)
        assert (o.naive_inf > 0) == overflows
        assert o.safe_inf == 0
        assert o.visible == cfg.seq_k


def test_softmax_charts_hold_params_and_data():
    cfg = engine.AttentionConfig(seq_q=200, seq_k=200, block_q=32, block_k=32,
                                 inputs="rising", seed=fresh_seed())
    q, k, v, res = traced(cfg)
    rows = softmax_data.row_trace(res.trace, cfg, 0, 0, 100)
    conv = softmax_data.convergence(cfg, q, k, v, res.output, res.trace, 0, 0, 100)
    stats = charts_softmax.stats_chart(rows, conv.table)
    assert params(stats)["upto"]["bind"]["max"] == cfg.Tc - 1
    spec = json.dumps(stats.to_dict())
    for field in ("tile_max", "running_max", "rescale", "running_sum", "rel_error"):
        assert field in spec
    assert ALARM in spec                       # rescale factors below 1 stand out
    scores = softmax_data.score_row(cfg, q, k, 0, 0, 100)
    safe = charts_softmax.safe_softmax_chart(scores)
    assert "mult" in params(safe)
    assert "65504" in json.dumps(safe.to_dict()) or "4.816" in json.dumps(safe.to_dict())
    bands = charts_softmax.scores_chart(scores, rows)
    assert {len(d) for d in datasets(bands).values()} == {len(scores.dropna()), cfg.Tc}


def test_a_long_row_is_drawn_without_a_trace_of_every_row():
    """N = 32768: the whole trace would be over the server's limit, but the page draws one
    row, so it computes that row alone."""
    cfg = engine.AttentionConfig(seq_q=32768, seq_k=32768)
    with pytest.raises(engine.LimitError, match="trace"):
        engine.check_limits(cfg, algorithm="flash", trace=True)
    at = open_page("online_softmax", backend="numpy", seq_q=32768, seq_k=32768, sm_row=30000)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert "Only the row drawn is computed" in texts(at) and "512 key tiles" in texts(at)
    assert "Row **30000**" in texts(at)
    err = next(m for m in at.metric if m.label == "output row vs float64")
    assert float(err.value) < 1e-5


@pytest.mark.parametrize("kw", [
    dict(seq_q=130, seq_k=200, block_q=32, block_k=16, causal=True),
    dict(seq_q=300, seq_k=100, block_q=32, block_k=32, causal=True, dtype="float16"),
    dict(seq_q=96, seq_k=300, block_q=64, block_k=64, dtype="bfloat16", inputs="rising"),
])
def test_one_row_emulated_alone_is_the_traced_runs_row(kw):
    cfg = engine.AttentionConfig(heads=2, seed=fresh_seed(), **kw)
    q, k, v, res = traced(cfg)
    for r in (0, 5, 40, cfg.seq_q - 1):
        alone = softmax_data.emulate_row(cfg, q, k, v, 0, 1, r)
        whole = softmax_data.row_of(res.trace, cfg, 0, 1, r, res.output)
        np.testing.assert_array_equal(alone.processed, whole.processed)
        for field in ("running_max", "running_sum", "rescale", "tile_max"):
            np.testing.assert_allclose(getattr(alone, field), getattr(whole, field),
                                       rtol=1e-5, err_msg=f"{field}, row {r}")
        # The row alone and the whole run add the same float32 products in different orders,
        # so an output within float32 noise of a rounding boundary of a 16-bit dtype may go
        # to the other neighbour: one unit in that dtype's last place.
        ulp = {"float16": 2.0**-10, "bfloat16": 2.0**-7}.get(cfg.dtype)
        np.testing.assert_allclose(alone.output.astype(np.float64),
                                   whole.output.astype(np.float64), rtol=ulp or 1e-5,
                                   atol=1e-6)
        pd_alone = softmax_data.row_trace(alone, cfg, 0, 1, r)
        pd_whole = softmax_data.row_trace(res.trace, cfg, 0, 1, r)
        assert list(pd_alone.columns) == list(pd_whole.columns)
        conv = softmax_data.convergence(cfg, q, k, v, None, alone, 0, 1, r)
        assert conv.output_error < (1e-5 if cfg.dtype == "float32" else 1e-2)
