"""Chart builders and the tables they draw, without a server: each spec holds the expected
fields, params and data, and every chart stays under ~20k marks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import engine
from app.features.backward import charts as charts_backward, data as backward_data
from app.features.kernel import charts as charts_kernel, data as kernel_data
from app.features.online_softmax import charts as charts_softmax, data as softmax_data
from app.features.sram_tiling import charts as charts_tiling, data as tiling_data
from app.features.timings import charts as charts_timing, data as timing_data
from app.core.style import ALARM, KERNEL_COLORS, TILE_COLORS, kernel_scale
from engine.model import iomodel, stream_k
from engine import recorded
from engine.model.tiles import processed_tiles
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

    from app.features.timings.sweep import run_sweep
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
    from app.features.timings.sweep import run_sweep
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
    assert enc["y"]["field"] == "sm_lane" and enc["color"]["field"] == "q_tile"
    with pytest.raises(ValueError, match="equal length"):
        kernel_data.schedule_table({**rec, "sm_id": rec["sm_id"][:-1]})


def planned_run_log(cfg, G, rng):
    """A run log as the RUNS build writes it, of the runs engine.model.stream_k plans for G blocks:
    each block's runs back to back from a random start, on SM b % 132."""
    tiles, rows = stream_k.key_tiles(cfg), []
    for b, runs in enumerate(stream_k.runs(cfg, cfg.bh, G)):
        t = int(rng.integers(0, 500))
        for r in runs:
            n = r.j_hi - r.j_lo
            whole = n == tiles[r.i]
            outcome = 0 if whole else (2 if r.j_hi == tiles[r.i] else 1)
            rows.append([t, t + 100 * n, b % 132, b, r.bh, r.i, r.j_lo, r.j_hi, outcome])
            t += 100 * n + 7
    return np.array(rows, dtype=np.uint64)


def test_a_run_schedule_draws_each_run_and_counts_blocks():
    cfg = engine.AttentionConfig(batch=1, heads=4, seq_q=4096, seq_k=4096, head_dim=128,
                                 block_q=128, block_k=32, dtype="float16", causal=True)
    G = 264
    log = planned_run_log(cfg, G, seeds.rng(31))
    sched = recorded.schedule_of_runs(log)
    assert sched["unit"] == "run" and len(sched["block"]) == len(log) > G
    assert set(sched["outcome"]) == {"whole", "posted", "merged"}
    df = kernel_data.schedule_table(sched)
    assert list(df.block) == [int(b) for b in log[:, 3]] and (df.j_hi > df.j_lo).all()
    summary = kernel_data.schedule_summary(df)
    assert summary["blocks"] == G and summary["runs"] == len(log)
    assert summary["resident"] == 2 and summary["waves"] == pytest.approx(1.0)
    tips = {t["field"] for t in charts_kernel.timeline_chart(df, "runs").to_dict()["encoding"]
            ["tooltip"]}
    assert {"block", "j_lo", "j_hi", "outcome"} <= tips
    assert "merged" in kernel_data.timeline_caption(summary, True)
    assert "merged" not in kernel_data.timeline_caption(summary, False)
    assert "benchmarks.run_log_schedule" in kernel_data.recorded_how(sched)
    bad = log.copy()
    bad[0, 8] = 3
    with pytest.raises(ValueError, match="outcome"):
        recorded.schedule_of_runs(bad)
    with pytest.raises(ValueError, match="outcome"):
        kernel_data.schedule_table({**sched, "outcome": sched["outcome"][:-1]})


def test_kernel_source_and_facts(tmp_path):
    path, text = kernel_data.source_text("teaching", tmp_path)
    assert text is None and path == tmp_path / "teaching" / "flash_teaching.cu"
    path.parent.mkdir()
    path.write_text("__global__ void k() {}")
    assert kernel_data.source_text("teaching", tmp_path)[1] == "__global__ void k() {}"
    facts = kernel_data.facts_table({"registers": 96, "threads": 128, "grid": [4, 2],
                                     "nested": {"a": 1}})
    assert dict(zip(facts.fact, facts.value)) == {"registers": "96", "threads": "128",
                                                  "grid": "4 2"}


def test_kernel_shown_follows_the_kernel_that_ran():
    from app.features.kernel.data import kernel_that_runs
    small = engine.AttentionConfig(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=64,
                                   block_q=64, block_k=64, dtype="float16")
    big = small.with_(block_q=128, block_k=128)
    assert kernel_that_runs("teaching", big) == "teaching"
    assert kernel_that_runs("tensorcore", small) == "mma.sync"
    assert kernel_that_runs("tensorcore", big) == "wgmma"
    assert kernel_that_runs("tensorcore", big, hopper=False) == "mma.sync"
    assert kernel_that_runs("tensorcore", small,
                            {"kernel_source": "kernels/hopper/flash_wgmma.cu"}) == "wgmma"
    # facts recorded before the sources moved into role folders name the file alone
    assert kernel_that_runs("tensorcore", small,
                            {"kernel_source": "kernels/flash_wgmma.cu"}) == "wgmma"
    assert kernel_that_runs("tensorcore", small, {"kernel_source": "../../etc/passwd"}) \
        == "mma.sync"


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
    assert params(chart)["step"]["value"] == 1          # app.core.ui.loop_player sets the step


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


# ---- recorded schedules and compile facts (benchmarks/results) -----------------------------
def test_every_recorded_schedule_loads_with_its_labels():
    found = recorded.load_schedules()
    files = sorted(p.name for p in recorded.BENCH_DIR.glob("schedule_*.json"))
    assert sorted(r["file"] for r in found) == files and len(files) >= 5
    for rec in found:
        cfg = engine.AttentionConfig(**rec["config"])
        assert rec["label"] and rec["device"]["name"] and rec["date"], rec["file"]
        if rec.get("unit") == "run":      # every item in one run or more, all its key tiles
            items = set(zip(rec["block_bh"], rec["block_q_tile"]))
            assert items == {(bh, i) for bh in range(cfg.bh) for i in range(cfg.Tr)}
            assert sum(h - lo for h, lo in zip(rec["j_hi"], rec["j_lo"])) == cfg.bh * sum(
                stream_k.key_tiles(cfg)), rec["file"]
        else:
            assert len(rec["sm_id"]) == cfg.bh * cfg.Tr, rec["file"]
        source = Path(rec["info"]["kernel_source"]).name
        assert source in {Path(k.source).name for k in kernel_data.KERNEL_SOURCES}, rec["file"]
        label = kernel_data.recorded_label(rec)
        assert rec["label"] in label and rec["date"] in label and f"N={cfg.seq_q}" in label
        df = kernel_data.schedule_table(rec)
        assert (df.end_us > df.start_us).all() and df.sm.max() < rec["device"]["sms"]


def test_recorded_causal_schedules_show_the_launch_order():
    """The recorded schedules: the wgmma kernel launches causal query tiles heaviest first, the
    mma.sync kernel before it did so launched them in index order, batch·head after
    batch·head: the start times within one batch·head fall, resp. rise, with the query tile,
    and the heavy tiles are what the index-order launch ends on."""
    by_label = {r["label"]: kernel_data.schedule_table(r) for r in recorded.load_schedules()}
    mma = next(df for k, df in by_label.items() if "causal" in k and "index order" in k)
    wgmma = next(df for k, df in by_label.items() if "heaviest" in k and "wgmma" in k)
    def order(df):      # mean over batch·heads of corr(query tile, start time)
        return np.mean([np.corrcoef(g.q_tile, g.start_us)[0, 1] for _, g in df.groupby("bh")])
    assert order(mma) > 0.3 and order(wgmma) < -0.3
    for df in (mma, wgmma):      # causal work grows with i: tile duration rises with it
        assert np.corrcoef(df.q_tile, df.end_us - df.start_us)[0, 1] > 0.8
    tiles = mma.q_tile.max() + 1
    assert mma.nlargest(20, "end_us").q_tile.min() >= tiles // 2


def test_recorded_kernel_facts_cover_every_kernel():
    facts = recorded.load_kernel_facts()
    assert facts["device"]["name"] and facts["date"] and not facts["failures"]
    for k in kernel_data.KERNEL_SOURCES:
        table = kernel_data.recorded_facts_table(facts, k.key)
        assert not table.empty, k.key
        assert (table["registers / thread"] > 0).all() and (table["blocks / SM"] >= 1).all()
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=128,
                                 block_q=128, block_k=128, dtype="float16")
    table = kernel_data.recorded_facts_table(facts, "wgmma", cfg)
    assert table.loc[0, "this config"] and table.loc[0, "build"].startswith("d=128, 128×128")


def test_timeline_chart_stacks_resident_blocks_over_several_waves():
    # 4 SMs, 2 blocks resident per SM, 24 blocks of 10 µs: 3 waves, blocks back to back
    n = 24
    wave, k = np.arange(n) // 8, np.arange(n) % 8
    start = wave * 10_000 + k                       # ns; a few ns apart within a wave
    sched = {"block_bh": [0] * n, "block_q_tile": list(range(n)), "sm_id": list(k % 4),
             "start_ns": list(start), "end_ns": list(start + 10_000 - 8)}
    df = kernel_data.schedule_table(sched)
    assert set(df.slot) == {0, 1}
    for (_, lane), blocks in df.groupby(["sm", "slot"]):
        ordered = blocks.sort_values("start_us")
        assert (ordered.start_us.values[1:] >= ordered.end_us.values[:-1]).all()
    summary = kernel_data.schedule_summary(df)
    assert summary["resident"] == 2 and summary["waves"] == pytest.approx(3.0)
    chart = charts_kernel.timeline_chart(df, "waves")
    spec = chart.to_dict()
    assert spec["encoding"]["y"]["field"] == "sm_lane"
    lanes = chart.data.sm_lane - chart.data.sm
    assert set(np.round(lanes, 3)) == {0.0, 0.5}
    assert spec["encoding"]["color"]["legend"]["orient"] == "bottom"


# ---- timings for the projector: spread, names in words, headline, limits ----
def timing_of(calls: list[float], backend: str = "numpy") -> engine.Timing:
    calls_arr = np.asarray(calls)
    return engine.Timing(median_ms=float(np.median(calls_arr)),
                         p10_ms=float(np.percentile(calls_arr, 10)),
                         p90_ms=float(np.percentile(calls_arr, 90)), reps=len(calls),
                         tflops=1.0, peak_bytes=10**6, method="test", backend=backend,
                         samples_ms=list(calls))


def test_spread_ignores_one_slow_call():
    gen = seeds.rng(12001)
    calls = list(1.35 * (1 + 0.02 * gen.standard_normal(9)))
    calm = timing_data.spread(timing_of(calls))
    slow = timing_data.spread(timing_of(calls + [135.0]))
    # the slow call is an outlier (a calm call may be one too: Tukey's fences are tight)
    assert 135.0 in slow["outliers_ms"], f"seed {seeds.SEED}"
    assert set(slow["outliers_ms"]) - {135.0} <= set(calls), f"seed {seeds.SEED}"
    assert slow["spread"] == "IQR" and slow["hi_ms"] < 1.5, f"seed {seeds.SEED}"
    # the box moves by at most one call's share, not by 100×
    assert abs(slow["q3_ms"] - calm["q3_ms"]) / calm["q3_ms"] < 0.05, f"seed {seeds.SEED}"
    assert timing_of(calls + [135.0]).p90_ms > 10       # what the old whisker would have shown
    table = timing_data.timing_table([("naive", timing_of(calls + [135.0])),
                                      ("CPU emulation", timing_of([c / 3 for c in calls]))])
    spec = charts_timing.config_chart(table).to_dict()
    layers = spec["layer"]
    domain = layers[0]["encoding"]["x"]["scale"]["domain"]
    assert domain[1] < 2.0, "one slow call must not stretch the axis"
    points = next(rows for rows in spec["datasets"].values()
                  if rows and "shown_ms" in rows[0])
    off = [p for p in points if p["off"]]
    assert off == [{"name": "naive (NumPy)", "ms": 135.0, "shown_ms": domain[1], "off": True}]
    assert all(p["shown_ms"] == p["ms"] for p in points if not p["off"])
    assert "interquartile" in json.dumps(spec)


def test_spread_without_calls_keeps_p10_p90():
    t = engine.Timing(median_ms=2.0, p10_ms=1.8, p90_ms=2.6, reps=30, tflops=1.0,
                      peak_bytes=1, method="recorded", backend="cupy")
    got = timing_data.spread(t)
    assert (got["q1_ms"], got["q3_ms"], got["spread"]) == (1.8, 2.6, "p10–p90")


def color_domain(spec) -> list:
    """The first colour scale's domain anywhere in a chart spec."""
    if isinstance(spec, dict):
        domain = spec.get("color", {}).get("scale", {}).get("domain") if isinstance(
            spec.get("color"), dict) else None
        if domain:
            return domain
        spec = list(spec.values())
    for part in spec if isinstance(spec, list) else []:
        if (found := color_domain(part)):
            return found
    return []


def test_runs_and_kernels_are_named_in_words():
    from app.core.style import kernel_name
    assert kernel_name("naive", "cupy") == "naive (CuPy)"
    assert kernel_name("naive", "numpy") == "naive (NumPy)"
    assert kernel_name("CPU emulation", "numpy") == "flash (CPU emulation)"
    assert kernel_name("teaching", "cupy") == "flash, teaching kernel (CuPy)"
    assert kernel_name("tensorcore") == "flash, tensor core (mma.sync/wgmma)"
    assert kernel_name("torch_cudnn") == "PyTorch cuDNN"
    assert kernel_name("torch_math", "cupy") == "PyTorch math"
    assert kernel_name("tile_max") == "this tile's max" and kernel_name("m_i") == "running max"
    table = timing_data.timing_table([("naive", fake_timing(2.0)),
                                      ("CPU emulation", fake_timing(1.0))])
    spec = json.dumps(charts_timing.config_chart(table).to_dict())
    assert '"naive (NumPy)"' in spec and '"flash (CPU emulation)"' in spec
    files = recorded.load_benchmarks(recorded.BENCH_DIR)
    rows = timing_data.with_builds(timing_data.recorded_table(files), files)
    one = rows[rows["shape"] == "H=16, d=64, float16"]
    for metric in ("median_ms", "peak_MB"):
        legend = color_domain(charts_timing.sweep_chart(one, metric).to_dict())
        assert "PyTorch cuDNN" in legend and "PyTorch math" in legend
        assert not {"torch_cudnn", "torch_math", "torch_flash", "tensorcore"} & set(legend)


def test_recorded_tensor_core_rows_name_their_build():
    files = recorded.load_benchmarks(recorded.BENCH_DIR)
    rows = timing_data.with_builds(timing_data.recorded_table(files), files)
    tc = rows[rows.kernel == "tensorcore"]
    wgmma = tc[(tc.file == "bench_h200_wgmma.json") & (tc.block_q == 128) & (tc.block_k == 128)]
    mma = tc[(tc.file == "bench_h200_sweep.json") & (tc.block_q == 64)]
    assert not wgmma.empty and set(wgmma.name) == {"flash, tensor core (wgmma)"}
    assert not mma.empty and set(mma.name) == {"flash, tensor core (mma.sync)"}


def test_headline_has_naive_flash_and_pytorch_with_device_and_date():
    files = recorded.load_benchmarks(recorded.BENCH_DIR)
    rows, subtitle = timing_data.headline(files)
    names = set(rows.name)
    assert {"naive", "flash, tensor core (wgmma)", "PyTorch flash", "PyTorch cuDNN"} <= names
    assert "PyTorch math" not in names and not rows.causal.any()
    assert rows.groupby("name").seq.nunique().min() >= 5          # a sweep of N per line
    assert len(rows.drop_duplicates(["name", "seq"])) == len(rows)
    best = timing_data.fastest(timing_data.recorded_table(files))
    assert best.file == "bench_h200_forward_2026-11-23.json"
    assert "NVIDIA H200" in subtitle and "2026-11-23" in subtitle
    spec = charts_timing.headline_chart(rows, subtitle).to_dict()
    text = json.dumps(spec)
    assert "NVIDIA H200" in json.dumps(spec["title"]) and "2026-11-23" in json.dumps(
        spec["title"])
    assert "median_ms" in text and "peak_GB" in text
    legend = color_domain(spec)
    assert "PyTorch cuDNN" in legend and not {"torch_cudnn", "torch_flash"} & set(legend)
    # time and memory panels: flash's peak stays flat while naive's grows with N
    naive = rows[rows.build == "naive"].sort_values("seq").peak_bytes
    wgmma = rows[rows.build == "wgmma"].peak_bytes
    assert naive.iloc[-1] > 10 * naive.iloc[0] and wgmma.max() == wgmma.min()


def test_headline_without_recorded_files_is_empty(tmp_path):
    rows, subtitle = timing_data.headline(recorded.load_benchmarks(tmp_path))
    assert rows.empty and subtitle == ""


def test_naive_limit_is_whichever_comes_first():
    from engine.model.iomodel import naive_row_smem_bytes as row_smem_bytes
    cfg = engine.AttentionConfig()
    n, text = timing_data.naive_limit(cfg, H200)
    assert n == H200.smem_per_block_optin // 4 + 1 == 58113
    assert row_smem_bytes(cfg.with_(seq_k=n)) > H200.smem_per_block_optin
    assert row_smem_bytes(cfg.with_(seq_k=n - 1)) <= H200.smem_per_block_optin
    assert "row limit" in text and "58,112" in text
    assert timing_data.memory_wall(cfg, H200) > n          # the wall comes later here
    big = engine.AttentionConfig(batch=16, heads=16)
    n, text = timing_data.naive_limit(big, H200)
    assert n == timing_data.memory_wall(big, H200) < 58113 and "memory wall" in text


def test_hbm_text_says_what_the_model_says():
    from app.core.figures import hbm_text
    cfg = engine.AttentionConfig(seq_q=4096, seq_k=4096, dtype="float16")
    text = hbm_text(cfg, H200)
    flash = iomodel.flash_hbm(cfg).total
    assert iomodel.format_bytes(flash) in text and "Θ(N²d²/M)" in text
    assert "still grows as N²" in text and "L2" in text
    # the claim itself: doubling N roughly quadruples flash's modelled traffic
    doubled = iomodel.flash_hbm(cfg.with_(seq_q=8192, seq_k=8192)).total
    assert 3.5 < doubled / flash < 4.1


def test_device_sentence_hides_exception_text():
    from app.core.figures import device_sentence
    reason = engine.probe_gpu()[1] if not engine.probe_gpu()[0] else (
        "CuPy is not installed or failed to import (ModuleNotFoundError: No module named "
        "'cupy').")
    for why in (reason, "No usable CUDA driver or GPU (CUDARuntimeError: x).",
                "The GPU is present but kernels cannot be compiled (NVRTC missing?): E: y",
                "something new went wrong: KeyError"):
        plain = device_sentence(why)
        assert "Error" not in plain and ":" not in plain and plain.endswith(".")


def test_ceilings_note_says_which_figures_are_measured():
    files = recorded.load_benchmarks(recorded.BENCH_DIR)
    note = timing_data.ceilings_note(files[0], H200)
    assert "800 TFLOP/s" in note and "measured" in note
    assert f"{H200.fp16_tflops:g} TFLOP/s" in note and "datasheet" in note
    assert timing_data.ceilings_note({"method": "no ceilings named"}, H200) == ""
