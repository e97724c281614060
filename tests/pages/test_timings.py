"""The Timings page (app/features/timings/): through AppTest, it times and sweeps with
progress, the sweep's length comes from the URL, the recorded files; without a server, the
memory wall, the sweep, the spread of the calls, kernels named in words, the recorded
tables and the naive limit."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import engine
from app.core.style import KERNEL_COLORS, kernel_scale
from app.features.timings import charts as charts_timing, data as timing_data
from app.core.results_dir import BENCH_DIR_ENV
from engine import recorded
from engine.model import iomodel
from engine.model.timing_stats import spread_of
import seeds
from apptest_helpers import (FIXTURES, ON_GPU, assert_clean, color_domains, config_heading,
                             open_page, specs, texts, url)
from chart_helpers import H200, color_domain


def test_sweep_length_comes_from_the_url():
    at = open_page("timings", sweep_largest=1024)
    assert_clean(at)
    assert at.select_slider(key="sweep_largest").value == 1024
    assert url(at)["sweep_largest"] == "1024"
    if not ON_GPU:                     # the CPU emulation offers lengths up to 8192
        far = open_page("timings", sweep_largest=65536)
        assert_clean(far)
        assert any("largest N = 65536 is not offered here" in w.value for w in far.warning)
        assert far.select_slider(key="sweep_largest").value == 2048


def test_timings_page_times_and_sweeps_with_progress():
    at = open_page("timings")
    if ON_GPU:
        assert "CUDA events" in texts(at)
    else:
        assert "CPU emulation" in texts(at) and "Not a GPU figure" in texts(at)
    assert "Test fixture GPU" in texts(at) and "2000-01-01" in texts(at)
    at.select_slider(key="sweep_largest").set_value(512).run()
    next(b for b in at.button if b.label == "Run sweep").click().run()
    assert_clean(at)
    titles = [json.dumps(s.get("title", "")) for s in specs(at)]
    assert sum("TFLOP/s" in t for t in titles) == 2        # this sweep and the recorded one
    assert sum("speedup" in t for t in titles) == 2
    assert sum("peak memory (MiB)" in t for t in titles) == 2
    results = at.session_state["timing_results"]
    assert set(results.kernel) == ({"naive", *engine.KERNELS} if ON_GPU
                                   else {"naive", "CPU emulation"})
    assert set(results.dropna(subset=["median_ms"]).seq.dropna()) == {256.0, 512.0}
    at.number_input(key="seq_q").set_value(512).run()
    assert_clean(at)
    # A new config has no sweep yet; the chosen config's timing is new.
    assert sum("TFLOP/s" in json.dumps(s.get("title", "")) for s in specs(at)) == 1
    assert sum("peak memory (MiB)" in json.dumps(s.get("title", "")) for s in specs(at)) == 1


def test_timings_default_recorded_file_is_the_fastest_kernels(monkeypatch):
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("timings", backend="numpy")      # the H200 profile, also on a GPU
    assert_clean(at)
    assert at.selectbox(key="rec_file").value.startswith("bench_h200_forward.json")
    assert at.selectbox(key="rec_shape").value == "H=8, d=128, bfloat16"
    body = texts(at)
    assert "datasheet" in body and "measured" in body
    legends = [name for s in specs(at) for name in color_domains(s)]
    assert {"PyTorch cuDNN", "PyTorch flash", "flash, tensor core (wgmma)"} <= set(legends)
    assert not {"torch_cudnn", "torch_flash", "torch_math", "tensorcore"} & set(legends)
    # a file without PyTorch's lines borrows them from a file of the same shape and device
    older = next(o for o in at.selectbox(key="rec_file").options
                 if o.startswith("bench_h200_wgmma.json"))
    at.selectbox(key="rec_file").select(older).run()
    assert_clean(at)
    assert "bench_h200_sweep.json" in texts(at)


def test_timings_config_chart_names_runs_and_keeps_the_method_below():
    at = open_page("timings")
    assert_clean(at)
    spec = next(json.dumps(s) for s in specs(at) if "interquartile" in json.dumps(s)
                or "p10–p90" in json.dumps(s))
    if ON_GPU:
        assert "naive (CuPy)" in spec
    else:
        assert "naive (NumPy)" in spec and "flash (CPU emulation)" in spec
    assert any(e.label == "How this was timed" for e in at.expander)
    body = texts(at)
    assert "row limit" in body and "58,112" in body


# ---- its tables and charts, without a server ------------------------------------------
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
    calls, points = [], []

    def time_point(c, runs):
        points.append((c.seq_q, [algorithm for _, algorithm, _ in runs]))
        calls.extend((c.seq_q, algorithm) for _, algorithm, _ in runs)
        return [fake_timing(2.0 if algorithm == "naive" else 0.5) for _, algorithm, _ in runs]

    from app.features.timings.sweep import run_sweep
    progress = []
    df = run_sweep(cfg, "numpy", H200, lengths, time_point,
                   on_point=lambda d, t, what: progress.append((d, t)))
    assert (wall * 2, "naive") not in calls                  # never attempted
    assert (wall // 4, "naive") in calls and (wall * 2, "flash") in calls
    # naive and flash of one length are handed over together (timed interleaved on the CPU)
    assert points[0] == (wall // 4, ["naive", "flash"]) and points[-1] == (wall * 2, ["flash"])
    assert progress[-1] == (6, 6)
    skipped = df[df.skipped != ""]
    assert list(skipped.seq) == [wall * 2] and "predicted not to fit" in skipped.skipped.iloc[0]
    flash = df[(df.kernel == "CPU emulation") & (df.seq == wall // 4)]
    assert flash.speedup.iloc[0] == pytest.approx(4.0)


def test_sweep_over_the_limit_is_refused():
    from app.features.timings.sweep import run_sweep
    with pytest.raises(engine.LimitError, match="sweep_points"):
        run_sweep(engine.AttentionConfig(), "numpy", H200, list(range(1, 40)),
                  lambda c, runs: [fake_timing(1.0) for _ in runs])


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
    assert "139.8 GiB" in mem and "97211" in mem      # totalGlobalMem of the H200
    hbm = json.dumps(charts_timing.hbm_chart(memory).to_dict())
    assert "hbm_GiB" in hbm


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
    for metric in ("median_ms", "peak_MiB"):
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


def test_ceilings_note_says_which_figures_are_measured():
    files = [f for f in recorded.load_benchmarks(recorded.BENCH_DIR)    # the H200's files
             if f["device"]["name"] == "NVIDIA H200"]
    note = timing_data.ceilings_note(files[0], H200)
    assert "800 TFLOP/s" in note and "measured" in note
    assert f"{H200.fp16_tflops:g} TFLOP/s" in note and "datasheet" in note
    assert timing_data.ceilings_note({"method": "no ceilings named"}, H200) == ""


def test_memory_wall_is_drawn_at_the_gpus_memory_and_the_row_limit_apart():
    """The red rule of the memory chart sits where naive's peak passes the GPU's memory
    (gpu.memory_bytes), not at the softmax kernel's row limit; when the row limit comes
    first it is drawn and said on its own."""
    cfg = engine.AttentionConfig()
    walls = timing_data.naive_walls(cfg, H200)
    assert walls["memory"] == timing_data.memory_wall(cfg, H200) > 58113
    assert walls["row"] == 58113 and "comes first" in walls["note"]
    big = engine.AttentionConfig(batch=8, heads=16)
    first = timing_data.naive_walls(big, H200)
    assert first["memory"] < 58113 and first["row"] is None
    assert "comes first" not in first["note"]
    at = open_page("timings", backend="numpy")
    assert_clean(at)
    from app.core.st_internals import arrow_bytes_to_frame
    mem = next(c.proto for c in at.get("vega_lite_chart")
               if "Peak memory (model)" in json.dumps(json.loads(c.proto.spec).get("title")))
    frames = [arrow_bytes_to_frame(d.data.data) for d in mem.datasets]
    drawn = {r.t: r.seq for f in frames if {"t", "seq"} <= set(f) for r in f.itertuples()}
    assert drawn == {f"memory wall (N = {walls['memory']:,})": walls["memory"],
                     "softmax row limit (N = 58,113)": 58113}
    assert "The naive softmax GPU kernel's row limit comes first" in texts(at)


# ---- CPU timings: this session's own, with their spread; talk mode leads with the GPU ------
def fake_cpu_timings(counter: list, noisy: bool = False):
    """A stand-in for engine.facade.benchmark_cpu_together that counts its calls."""
    def timed(cfg, algorithms, direction="forward"):
        counter.append(cfg)
        calls = [1.0, 1.0, 1.6, 1.6] if noisy else [1.0, 1.01, 1.02, 1.03]
        return [with_spread(timing_of([c * (2 if a == "naive" else 1) for c in calls]))
                for a in algorithms]
    return timed


def with_spread(t: engine.Timing) -> engine.Timing:
    s = spread_of(t.samples_ms)
    t.q1_ms, t.q3_ms, t.iqr_rel, t.noisy = s.q1_ms, s.q3_ms, s.iqr_rel, s.noisy
    return t


@pytest.mark.skipif(ON_GPU, reason="a GPU's timings are cached for every visitor")
def test_cpu_timing_is_each_sessions_own_and_can_be_repeated(monkeypatch):
    from app.features.timings import measure
    counter = []
    monkeypatch.setattr(measure, "benchmark_cpu_together", fake_cpu_timings(counter))
    at = open_page("timings")
    assert_clean(at)
    assert len(counter) == 1
    body = texts(at)
    assert "on the CPU" in config_heading(at) and "not a GPU" in config_heading(at)
    assert "**naive (NumPy)**: 2.03 ms, IQR 2.02–2.04 ms" in body and "4 calls" in body
    assert "not shared with other visitors" in body
    assert not any("spread widely" in w.value for w in at.warning)
    at.run()
    assert len(counter) == 1                       # a rerun shows this session's timing
    next(b for b in at.button if b.label == "Time again").click().run()
    assert_clean(at)
    assert len(counter) == 2
    other = open_page("timings")                   # another visitor measures anew
    assert_clean(other)
    assert len(counter) == 3


@pytest.mark.skipif(ON_GPU, reason="CPU timings only")
def test_a_wide_spread_is_a_warning(monkeypatch):
    from app.features.timings import measure
    monkeypatch.setattr(measure, "benchmark_cpu_together", fake_cpu_timings([], noisy=True))
    at = open_page("timings")
    assert_clean(at)
    warned = " ".join(w.value for w in at.warning)
    assert "spread widely" in warned and "not to be trusted" in warned
    assert "naive (NumPy): IQR 46% of the median" in warned


def test_talk_mode_leads_with_recorded_gpu_timings(monkeypatch):
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("timings", talk="true")
    assert_clean(at)
    heads = [h.value for h in at.main.subheader]
    assert heads[0] == "Recorded on real GPUs", heads
    first = json.dumps(specs(at)[0])
    assert "Naive against flash against PyTorch" in first and "NVIDIA H" in first
    assert "GPU figures, recorded" in texts(at)
    if not ON_GPU:
        assert "on the CPU" in heads[1] and "not a GPU" in heads[1]
        assert "CPU figures, not a GPU's" in texts(at)
    plain = open_page("timings")
    assert [h.value for h in plain.main.subheader][0].startswith("This config")


def test_spread_lines_and_noisy_warning():
    calm, wide = (with_spread(timing_of(c)) for c in ([1.0, 1.2, 1.4, 1.6], [1.0, 1.0, 2.0, 2.0]))
    assert not calm.noisy and wide.noisy
    table = timing_data.timing_table([("naive", calm), ("CPU emulation", wide)])
    lines = timing_data.spread_lines(table)
    assert lines[0] == "**naive (NumPy)**: 1.30 ms, IQR 1.15–1.45 ms (IQR/median 23%), 4 calls"
    assert "IQR/median 67%" in lines[1]
    warned = timing_data.noisy_warning(table)
    assert "flash (CPU emulation): IQR 67% of the median" in warned and "naive" not in warned
    assert timing_data.noisy_warning(table.iloc[:1]) == ""
    swept = table.assign(seq=[256, 512])
    assert "at N = 512" in timing_data.noisy_warning(swept)


def test_cpu_point_times_together_and_names_a_limit(monkeypatch):
    from app.features.timings.sweep import cpu_point
    from engine.model.limits import LIMITS
    cfg = engine.AttentionConfig(seq_q=32, seq_k=32, head_dim=16, block_q=16, block_k=16)
    runs = [("naive", "naive", "teaching"), ("CPU emulation", "flash", "teaching")]
    naive, flash = cpu_point(cfg, runs)
    assert naive.reps == flash.reps >= 15 and "interleaved" in naive.method
    monkeypatch.setenv(LIMITS["naive_bytes"].env, "16")
    naive, flash = cpu_point(cfg, runs)
    assert isinstance(naive, str) and "naive_bytes" in naive
    assert isinstance(flash, engine.Timing) and "interleaved" not in flash.method
