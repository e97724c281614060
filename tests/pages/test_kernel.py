"""The Kernel page (app/features/kernel/): through AppTest, the source and the recorded or
live schedule and compile facts, the kernel chooser; without a server, the schedule tables
(block and run schedules), the recorded schedules and facts, the timeline chart."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import engine
from app.features.kernel import charts as charts_kernel, data as kernel_data
from app.core.results_dir import BENCH_DIR_ENV
from engine import recorded
from engine.model import stream_k
import seeds
from apptest_helpers import FIXTURES, ON_GPU, assert_clean, open_page, specs, texts
from chart_helpers import MAX_MARKS, largest_dataset


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its live schedule instead")
def test_kernel_page_shows_source_and_recorded_schedule():
    at = open_page("kernel")
    assert_clean(at)
    body = texts(at)
    assert "No GPU is in use here" in body
    assert "Recorded on Test fixture GPU" in json.dumps(specs(at)[0])
    code = at.code[0].value
    assert "__global__" in code
    at.radio(key="kernel").set_value("tensorcore").run()
    assert_clean(at)
    assert at.code[0].value != code
    assert "mma" in at.code[0].value


@pytest.mark.skipif(not ON_GPU, reason="needs a usable GPU")
def test_kernel_page_on_gpu_shows_live_facts_and_schedule():
    at = open_page("kernel", seq_q=1024, head_dim=64, block_q=64, block_k=64, dtype="float16")
    assert_clean(at)
    assert any("ran on" in m.value for m in at.success)
    assert at.dataframe, "no compile facts were shown"
    spec = json.dumps(specs(at)[0])
    assert "this config" in spec
    blocks = next(m for m in at.metric if m.label == "thread blocks drawn")
    assert blocks.value == f"{2 * 1024 // 64:,}"        # B·H·Tr blocks, each recorded
    at.radio(key="kernel").set_value("tensorcore").run()
    assert_clean(at)
    assert "tensor-core" in " ".join(m.value for m in at.success)
    at.selectbox(key="dtype").set_value("float32").run()      # not a tensor-core shape
    assert_clean(at)
    assert "does not take dtype=float32" in " ".join(e.value for e in at.error)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its live schedule instead")
def test_kernel_page_without_recorded_schedule(monkeypatch, tmp_path):
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("kernel")
    assert_clean(at)
    assert "No block-to-SM schedule" in texts(at)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows the live facts of the kernel that ran")
def test_kernel_page_chooser_changes_source_and_recorded_facts():
    at = open_page("kernel", head_dim=64, block_q=64, block_k=64, dtype="float16")
    assert_clean(at)
    chooser = at.selectbox(key="kernel_shown_teaching")
    assert chooser.value == "teaching"
    teaching_code = at.code[0].value
    assert "flash_teaching" in teaching_code
    body = texts(at)
    assert "Recorded on Test fixture GPU (not a measurement), 2000-01-01" in body
    facts = at.dataframe[0].value
    assert list(facts["registers / thread"]) == [40]
    chooser.set_value("wgmma").run()
    assert_clean(at)
    assert at.code[0].value != teaching_code and "wgmma" in at.code[0].value
    assert list(at.dataframe[0].value["registers / thread"]) == [168]
    at.selectbox(key="kernel_shown_teaching").set_value("naive_backward").run()
    assert "No compile facts of this kernel are recorded" in texts(at)
    assert "softmax_backward" in at.code[0].value
    # the sidebar's kernel choice moves the default to the build that runs the config
    at.radio(key="kernel").set_value("tensorcore").run()
    assert at.selectbox(key="kernel_shown_mma.sync").value == "mma.sync"


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its live schedule first")
def test_kernel_page_offers_every_recorded_schedule(monkeypatch):
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("kernel")
    assert_clean(at)
    picker = at.selectbox(key="schedule_shown")
    assert len(picker.options) == len(recorded.load_schedules()) >= 5
    causal = [o for o in picker.options if "causal" in o]
    assert any("heaviest query tiles first" in o for o in causal)
    assert any("index order" in o for o in causal)
    assert all("NVIDIA H200" in o and "2026-" in o for o in picker.options)
    for option in picker.options:
        at.selectbox(key="schedule_shown").set_value(option).run()
        assert_clean(at)
        spec = json.dumps(specs(at)[0])
        assert "Recorded on NVIDIA H200" in spec
        waves = float(next(m for m in at.metric if m.label == "waves").value)
        assert waves >= 1.0
        runs = any("Each bar is one run" in c.value for c in at.caption)
        assert runs == ("stream-K" in option or "one block per item" in option), option


# ---- its tables and charts, without a server ------------------------------------------
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


def test_compile_facts_of_another_dtype_are_never_this_config():
    """The recorded H200 facts are float16 builds; a float32 config of the same shape gets
    no "◀" on them but the model's own row for its dtype (80.5 KiB, 2 blocks per SM on the
    H200 profile), marked as a model, and a note naming the recorded dtype."""
    from engine.model import iomodel
    from engine.model.devices import PROFILES
    facts = next(f for f in recorded.load_kernel_facts_files()
                 if f["file"] == "kernel_facts_h200.json")
    cfg = engine.AttentionConfig(head_dim=64, block_q=64, block_k=64, dtype="float32")
    table, note = kernel_data.facts_for_config(facts, "teaching", cfg, PROFILES["H200"])
    assert table.loc[0, "this config"] == "◀ model"
    assert table.loc[0, "shared memory / block"] == iomodel.smem_bytes(cfg) == 82432
    assert table.loc[0, "blocks / SM"] == 2
    assert "float32" in table.loc[0, "build"] and "not compiled" in table.loc[0, "build"]
    assert (table["this config"].iloc[1:] == "").all()
    assert "the recorded builds are float16" in note
    same = cfg.with_(dtype="float16")
    table16, note16 = kernel_data.facts_for_config(facts, "teaching", same, PROFILES["H200"])
    assert note16 == "" and table16.loc[0, "this config"] == "◀"
    assert table16.loc[0, "shared memory / block"] == 57856 == iomodel.smem_bytes(same)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows the live facts of the kernel that ran")
def test_kernel_page_float32_config_shows_the_models_facts_labelled():
    at = open_page("kernel", head_dim=64, block_q=64, block_k=64, dtype="float32")
    assert_clean(at)
    facts = at.dataframe[0].value
    assert facts["this config"].iloc[0] == "◀ model"
    assert "◀" not in set(facts["this config"].iloc[1:])
    assert "No build for this config (d=64, 64×64, float32) is recorded" in texts(at)


@pytest.mark.parametrize("sms,lanes", [(132, 1), (132, 2), (132, 3), (108, 2), (40, 1), (1, 1)])
@pytest.mark.parametrize("height", [330, 820])
def test_timeline_bars_are_never_thinner_than_the_minimum(sms, lanes, height):
    """Every block's bar at least MIN_LANE_PX thick, the chart at most `height` tall (talk
    mode: 330 px); where not every SM fits, the SM axis's title says which are drawn."""
    shown, lane_px = charts_kernel.timeline_rows(sms, lanes, height)
    assert 1 <= shown <= sms and lane_px >= charts_kernel.MIN_LANE_PX
    assert shown * lanes * lane_px <= height + 1 or shown == 1
    df = pd.DataFrame({"sm": np.arange(sms * lanes) % sms, "slot": np.arange(sms * lanes) // sms,
                       "q_tile": 0, "bh": 0, "start_us": 0.0, "end_us": 1.0})
    spec = charts_kernel.timeline_chart(df, "t", height=height).to_dict()
    assert spec["height"] == round(shown * lanes * lane_px)
    assert (f"of {sms}" in spec["encoding"]["y"]["title"]) == (shown < sms)
