"""Chart builders and the tables they draw, without a server: each spec holds the expected
fields, params and data, and every chart stays under ~20k marks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import engine
from app import charts_backward, charts_kernel, charts_softmax, charts_tiling, charts_timing
from app import backward_data, kernel_data, softmax_data, tiling_data, timing_data
from app.style import ALARM, KERNEL_COLORS, TILE_COLORS, kernel_scale
from engine import iomodel, recorded
from engine.cpu.forward import processed_tiles
import seeds

H200 = engine.PROFILES["H200"]
FIXTURES = Path(__file__).resolve().parent / "data"
MAX_MARKS = 20000


def datasets(chart) -> dict:
    return chart.to_dict()["datasets"]


def largest_dataset(chart) -> int:
    return max(len(rows) for rows in datasets(chart).values())


def params(chart) -> dict:
    return {p["name"]: p for p in chart.to_dict().get("params", [])}


def fresh_seed() -> int:
    return int(seeds.rng(7706).integers(0, 2**31))


CONFIGS = [
    engine.AttentionConfig(),
    engine.AttentionConfig(seq_q=300, seq_k=257, block_q=64, block_k=32, causal=True),
    engine.AttentionConfig(batch=2, heads=3, seq_q=129, seq_k=520, block_q=16, block_k=128,
                           dtype="float16"),
]


# ---- SRAM tiling ------------------------------------------------------------------------
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
    assert "bind" not in step and step["value"] == 5     # app.ui.loop_player sets the step
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


# ---- online softmax ---------------------------------------------------------------------
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


# ---- timings ----------------------------------------------------------------------------
def test_memory_wall_is_where_naive_stops_fitting():
    for cfg in (engine.AttentionConfig(), engine.AttentionConfig(batch=4, heads=32,
                                                                 dtype="float16")):
        wall = timing_data.memory_wall(cfg, H200)
        peak = lambda n: iomodel.peak_memory(cfg.with_(seq_q=n, seq_k=n), "naive")  # noqa: E731
        assert peak(wall - 1) <= H200.memory_bytes < peak(wall)


def fake_timing(ms: float, stages=None) -> engine.Timing:
    return engine.Timing(median_ms=ms, p10_ms=0.9 * ms, p90_ms=1.2 * ms, reps=5, tflops=1.0,
                         peak_bytes=10**6, method="test", backend="numpy",
                         stages=stages or {})


def test_sweep_skips_naive_past_the_wall_and_computes_speedup():
    cfg = engine.AttentionConfig(batch=8, heads=32, dtype="float16")
    wall = timing_data.memory_wall(cfg, H200)
    lengths = [wall // 4, wall // 2 + 1, wall * 2]
    calls = []

    def timer(c, algorithm, backend, kernel, reps):
        calls.append((c.seq_q, algorithm))
        return fake_timing(2.0 if algorithm == "naive" else 0.5)

    from app.sweep import run_sweep
    progress = []
    df = run_sweep(cfg, "numpy", H200, lengths, timer, 3,
                   on_point=lambda d, t, what: progress.append((d, t)))
    assert (wall * 2, "naive") not in calls                  # never attempted
    assert (wall // 4, "naive") in calls and (wall * 2, "flash") in calls
    assert progress[-1] == (6, 6)
    skipped = df[df.skipped != ""]
    assert list(skipped.seq) == [wall * 2] and "predicted not to fit" in skipped.skipped.iloc[0]
    flash = df[(df.kernel == "CPU emulation") & (df.seq == wall // 4)]
    assert flash.speedup.iloc[0] == pytest.approx(4.0)


def test_sweep_over_the_limit_is_refused():
    from app.sweep import run_sweep
    with pytest.raises(engine.LimitError, match="sweep_points"):
        run_sweep(engine.AttentionConfig(), "numpy", H200, list(range(1, 40)),
                  lambda *a: fake_timing(1.0), 3)


def test_timing_charts():
    table = timing_data.timing_table([("naive", fake_timing(2.0)),
                                      ("CPU emulation", fake_timing(1.0))])
    spec = json.dumps(charts_timing.config_chart(table).to_dict())
    assert "p10_ms" in spec and "p90_ms" in spec and "median_ms" in spec
    stages = timing_data.stage_table(fake_timing(2.0, {"QK^T": 0.5, "softmax": 1.0, "PV": .5}))
    st_spec = charts_timing.stages_chart(stages).to_dict()
    assert [r["stage"] for r in next(iter(st_spec["datasets"].values()))] == ["QK^T", "softmax",
                                                                               "PV"]
    sweep = pd.DataFrame({"kernel": ["naive", "CPU emulation"] * 2, "seq": [256, 256, 512, 512],
                          "median_ms": [2.0, 1.0, 8.0, 2.0], "p10_ms": [1.9, .9, 7.5, 1.8],
                          "p90_ms": [2.2, 1.1, 8.5, 2.2], "tflops": [1, 2, 1, 4]})
    sweep = timing_data.add_speedup(sweep)
    assert list(sweep.speedup) == [1.0, 2.0, 1.0, 4.0]
    chart = charts_timing.sweep_chart(sweep, "median_ms", wall=4096).to_dict()
    text = json.dumps(chart)
    assert '"type": "log"' in text and "memory wall" in text and "4096" in text
    memory = timing_data.memory_table(engine.AttentionConfig(), [256, 1024, 4096])
    assert set(memory.algorithm) == {"naive", "FlashAttention"}
    mem = json.dumps(charts_timing.memory_chart(memory, H200.memory_bytes, "H200", 97211)
                     .to_dict())
    assert "141 GiB" in mem and "97211" in mem
    hbm = json.dumps(charts_timing.hbm_chart(memory).to_dict())
    assert "hbm_GB" in hbm


def test_every_kernel_keeps_one_distinct_colour():
    names = ["naive", "teaching", "future_a", "torch_math", "future_b"]
    scale = kernel_scale(names).to_dict()
    assert scale["domain"] == names
    assert scale["range"][0] == KERNEL_COLORS["naive"]
    assert len(set(scale["range"])) == len(names)
    again = kernel_scale(["future_a", "naive"]).to_dict()
    assert again["range"][1] == KERNEL_COLORS["naive"]


def test_recorded_results_flatten_with_device_and_date():
    files = recorded.load_benchmarks(FIXTURES)
    table = timing_data.recorded_speedup(timing_data.recorded_table(files))
    assert len(table) == len(files[0]["results"])
    assert set(table.device) == {files[0]["device"]["name"]} and set(table.date) == {"2000-01-01"}
    naive = table[table.kernel == "naive"]
    assert (naive.speedup == 1.0).all()
    assert timing_data.recorded_table([]).empty


# ---- kernel -----------------------------------------------------------------------------
def test_schedule_table_from_recorded_file_and_from_schedule():
    rec = recorded.load_schedule(FIXTURES)
    df = kernel_data.schedule_table(rec)
    assert len(df) == len(rec["sm_id"]) and df.start_us.min() == 0
    assert (df.end_us > df.start_us).all()
    sched = engine.Schedule(block_bh=np.zeros(30000, int), block_q_tile=np.arange(30000),
                            sm_id=np.arange(30000) % 132, start_ns=np.arange(30000) * 10,
                            end_ns=np.arange(30000) * 10 + 5)
    big = kernel_data.schedule_table(sched)
    assert len(big) == kernel_data.MAX_BLOCKS_DRAWN
    chart = charts_kernel.timeline_chart(big, "test")
    assert largest_dataset(chart) <= MAX_MARKS
    enc = chart.to_dict()["encoding"]
    assert enc["x"]["field"] == "start_us" and enc["x2"]["field"] == "end_us"
    assert enc["y"]["field"] == "sm" and enc["color"]["field"] == "q_tile"
    with pytest.raises(ValueError, match="equal length"):
        kernel_data.schedule_table({**rec, "sm_id": rec["sm_id"][:-1]})
    assert kernel_data.recorded_config(rec).seq_q == 512


def test_kernel_source_and_facts(tmp_path):
    path, text = kernel_data.kernel_source("teaching", None, tmp_path)
    assert text is None and path.name == "flash_teaching.cu"
    (tmp_path / "flash_teaching.cu").write_text("__global__ void k() {}")
    assert kernel_data.kernel_source("teaching", None, tmp_path)[1] == "__global__ void k() {}"
    facts = kernel_data.facts_table({"registers": 96, "threads": 128, "grid": [4, 2],
                                     "nested": {"a": 1}})
    assert dict(zip(facts.fact, facts.value)) == {"registers": "96", "threads": "128",
                                                  "grid": "4 2"}


def test_kernel_source_follows_the_kernel_that_ran(tmp_path):
    from app.kernel_data import kernel_source
    (tmp_path / "flash_tensorcore.cu").write_text("// mma.sync")
    (tmp_path / "flash_wgmma.cu").write_text("// wgmma")
    assert kernel_source("tensorcore", None, tmp_path)[1] == "// mma.sync"
    path, text = kernel_source("tensorcore", {"kernel_source": "kernels/flash_wgmma.cu"}, tmp_path)
    assert path.name == "flash_wgmma.cu" and text == "// wgmma"
    path, text = kernel_source("tensorcore", {"kernel_source": "../../etc/passwd"}, tmp_path)
    assert path.name == "flash_tensorcore.cu"


# ---- backward ---------------------------------------------------------------------------
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
    chart = charts_backward.loop_chart(view.tiles, view.steps, view.rows, view.cols)
    assert largest_dataset(chart) <= MAX_MARKS
    assert params(chart)["step"]["value"] == 1          # app.ui.loop_player sets the step


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
    assert ms["flash backward", "matrix products"] == pytest.approx(
        cfg.flops_of("backward") / (H200.fp16_tflops * 1e12) * 1e3)
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
    flash = table[table.algorithm == "FlashAttention"].set_index("seq").hbm_GB
    assert flash[4096] * 1e9 == pytest.approx(
        iomodel.flash_backward_hbm(cfg.with_(seq_q=4096, seq_k=4096)).total)
