"""Every page through Streamlit's AppTest: it renders without an exception, it reacts to the
controls, and bad configs or tampered URL parameters show an error message instead."""
from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import engine
from app import page_list
from app.features.timings.data import BENCH_DIR_ENV
from engine.model import iomodel

ON_GPU = engine.probe_gpu()[0]      # backend "auto" runs the CuPy kernels there
ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "app" / "main.py"
FIXTURES = Path(__file__).resolve().parent / "data"
PAGES = [row.feature for row in page_list.PAGES]
# each page's heading: its title, but the Overview is headed with the app's name
HEADINGS = {row.feature: row.title for row in page_list.PAGES} | {"overview": "FlashAttention Lab"}
# charts drawn with the default config and the test fixtures (app/page_list.py's charts)
CHARTS = {row.feature: row.charts for row in page_list.PAGES}


@pytest.fixture(autouse=True)
def fresh_app_state(monkeypatch):
    """Recorded GPU results come from tests/data; no cached run leaks between tests."""
    monkeypatch.setenv(BENCH_DIR_ENV, str(FIXTURES))
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update({k: str(v) for k, v in params.items()})
    at.run()
    if page != "overview":
        at.switch_page(f"features/{page}/page.py").run()
    return at


def specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error")
             for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)


def config_heading(at: AppTest) -> str:
    return next(h.value for h in at.main.subheader if h.value.startswith("This config"))


def assert_clean(at: AppTest):
    assert not at.exception, [e.value for e in at.exception]


@pytest.mark.parametrize("page", PAGES)
def test_page_renders(page):
    at = open_page(page)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == HEADINGS[page]
    assert len(at.get("vega_lite_chart")) >= CHARTS[page]


@pytest.mark.parametrize("page", PAGES)
def test_tampered_url_shows_error_not_exception(page):
    at = open_page(page, seq_q="1e12", block_q="-3", dtype="evil", backend="gpu!")
    assert_clean(at)
    errors = " ".join(e.value for e in at.error)
    assert "seq_q must be a whole number from 1 to 65536" in errors
    assert "block_q must be one of 8, 16, 32, 64, 128" in errors
    assert "dtype must be one of float32, float16" in errors
    assert "backend must be one of auto, cupy, numpy" in errors
    # The page still works with the defaults that replaced the bad values.
    assert at.title[0].value == HEADINGS[page]
    assert at.number_input(key="seq_q").value == 256


ENGINE_CALLS = ("make_inputs", "run", "run_backward", "run_decode", "benchmark")


@pytest.fixture
def engine_calls(monkeypatch):
    """How often the pages call into the engine's compute functions, by function and
    algorithm ("run flash", "benchmark naive", ...), counted through the engine module the
    pages' runners use."""
    calls = collections.Counter()
    for name in ENGINE_CALLS:
        real = getattr(engine, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[f"{_name} {kwargs.get('algorithm', '')}".strip()] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(engine, name, counted)
    return calls


@pytest.mark.parametrize("page", PAGES)
def test_control_change_recomputes_only_the_new_config(page, engine_calls):
    """CPU mode, default config: a changed control computes the new config once (each kind of
    run and timing at most once), and a rerun with nothing changed computes nothing:
    everything comes from the caches. (How long a rerun takes is measured, not asserted:
    benchmarks/page_rerun_cpu.py.)"""
    at = open_page(page, backend="numpy")
    for name, value in (("seq_q", 320), ("block_k", 32), ("causal", True)):
        widget = at.checkbox(key=name) if name == "causal" else (
            at.number_input(key=name) if name == "seq_q" else at.selectbox(key=name))
        widget.set_value(value)
        engine_calls.clear()
        at.run()
        assert_clean(at)
        assert all(n == 1 for n in engine_calls.values()), \
            f"{page}: {name} -> {value} computed something twice: {dict(engine_calls)}"
        engine_calls.clear()
        at.run()
        assert_clean(at)
        assert not any(engine_calls.values()), \
            f"{page}: a rerun with {name} = {value} unchanged computed again: {dict(engine_calls)}"


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_in_bfloat16(page):
    at = open_page(page, dtype="bfloat16", seq_q=320)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="dtype").value == "bfloat16"


def test_unknown_url_parameter_is_reported():
    at = open_page("overview", seq_q="512", colour="red")
    assert_clean(at)
    assert any("unknown parameters colour" in e.value for e in at.error)
    assert at.number_input(key="seq_q").value == 512


def test_url_parameters_set_the_controls_and_follow_them():
    at = open_page("overview", seq_q="1024", link_seq="false", seq_k="300", causal="true",
                   dtype="float16", block_k="32")
    assert_clean(at)
    assert not at.error
    assert at.number_input(key="seq_q").value == 1024
    assert at.number_input(key="seq_k").value == 300
    assert at.checkbox(key="causal").value is True
    assert "N_q=1024, N_k=300" in config_heading(at)
    at.selectbox(key="head_dim").set_value(128).run()
    assert at.query_params["head_dim"] == ["128"] or at.query_params["head_dim"] == "128"
    assert "d=128" in config_heading(at)


def test_overview_figures_follow_the_controls():
    at = open_page("overview")
    before = texts(at)
    at.number_input(key="seq_q").set_value(2048).run()
    assert_clean(at)
    after = texts(at)
    assert before != after
    assert "16 computed" in before and "1024 computed" in after     # 4×4 -> 32×32 tiles


def test_preset_buttons_and_selectbox_apply_presets():
    at = open_page("overview")
    at.button[1].click().run()           # "long context"
    assert_clean(at)
    assert at.number_input(key="seq_q").value == 8192
    assert at.selectbox(key="dtype").value == "float16"
    at.selectbox(key="_preset").set_value("causal").run()
    assert at.checkbox(key="causal").value is True
    assert at.number_input(key="seq_q").value == 512


def test_sram_page_steps_follow_the_tiles():
    at = open_page("sram_tiling")
    assert at.slider(key="sram_step").max == 16             # 4×4 tiles
    at.selectbox(key="block_q").set_value(32).run()
    assert_clean(at)
    assert at.slider(key="sram_step").max == 32             # 8×4 tiles


def test_sram_page_causal_has_fewer_steps():
    at = open_page("sram_tiling", causal="true")
    assert_clean(at)
    assert at.slider(key="sram_step").max == 10             # 10 of 16 tiles run


def test_sram_page_play_advances_the_step():
    at = open_page("sram_tiling")
    at.toggle(key="sram_play").set_value(True).run()
    assert_clean(at)
    assert specs(at)[1]["params"][0]["value"] == 2          # one step on from step 1


def test_sram_page_tiles_too_big_shows_red_state():
    at = open_page("sram_tiling", head_dim=128, block_q=128, block_k=128, dtype="float32")
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    cfg = engine.AttentionConfig(head_dim=128, block_q=128, block_k=128, dtype="float32")
    need = iomodel.smem_budget(cfg, engine.PROFILES["H200"]).total
    assert f"{need / 1024:.1f} KiB" in msg and "227.0 KiB" in msg and "Largest tiles" in msg
    assert "128×64" in msg or "64×128" in msg
    assert "Too big" in json.dumps(specs(at)[0])


def test_sram_page_emulated_profile_changes_the_limit():
    at = open_page("sram_tiling", backend="numpy", profile="T4", head_dim=128, block_q=64,
                   block_k=64)
    assert_clean(at)
    assert "64.0 KiB" in " ".join(e.value for e in at.error)


def url(at: AppTest) -> dict:
    """The app's query parameters as name -> text."""
    return {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}


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
    at = open_page("online_softmax", logit_scale="20", dtype="float16")
    assert_clean(at)
    body = texts(at)
    assert "without subtracting it gives **0** inf" not in body
    assert "with the max subtracted, **0**" in body


def test_limit_errors_are_messages():
    at = open_page("online_softmax", batch=64, heads=64, seq_q=65536)
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "Limit" in msg and "FA_LAB_MAX_" in msg


@pytest.mark.skipif(ON_GPU, reason="needs a machine without a usable GPU")
def test_gpu_backend_without_gpu_is_an_error():
    at = open_page("kernel", backend="cupy")
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "no GPU can be used here" in msg and "CPU emulation" in msg


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
    assert sum("peak memory (MB)" in t for t in titles) == 2
    results = at.session_state["timing_results"]
    assert set(results.kernel) == ({"naive", *engine.KERNELS} if ON_GPU
                                   else {"naive", "CPU emulation"})
    assert set(results.dropna(subset=["median_ms"]).seq.dropna()) == {256.0, 512.0}
    at.number_input(key="seq_q").set_value(512).run()
    assert_clean(at)
    # A new config has no sweep yet; the chosen config's timing is new.
    assert sum("TFLOP/s" in json.dumps(s.get("title", "")) for s in specs(at)) == 1
    assert sum("peak memory (MB)" in json.dumps(s.get("title", "")) for s in specs(at)) == 1


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


def test_downloads_follow_the_session():
    at = open_page("downloads")
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Trace (NPZ)" in labels and "Trace (CSV)" in labels
    assert not any("Timings" in x for x in labels)
    assert any("bench_fixture.json" in x for x in labels)
    at.switch_page("features/timings/page.py").run()
    at.switch_page("features/downloads/page.py").run()
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Timings (JSON)" in labels and "Timings (CSV)" in labels


def loop_steps(at: AppTest) -> int:
    return at.slider(key="bw_step").max


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


def test_backward_page_play_advances_the_step():
    at = open_page("backward")
    at.toggle(key="bw_play").set_value(True).run()
    assert_clean(at)
    spec = next(s for s in specs(at) if s.get("params", [{}])[0].get("name") == "step")
    assert spec["params"][0]["value"] == 2


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


# ---- the Tile sizes page ---------------------------------------------------------------
def title_text(spec: dict) -> str:
    """A chart's title in one line (a long one is a list of lines: app.core.style.wrap_title)."""
    title = spec.get("title", "")
    return " ".join(title) if isinstance(title, list) else title if isinstance(title, str) else ""


def chart_data(at: AppTest, title_start: str):
    """The data of the chart whose title starts with title_start (one dataset each)."""
    from app.core.st_internals import arrow_bytes_to_frame as convert_arrow_bytes_to_pandas_df
    for c in at.get("vega_lite_chart"):
        title = title_text(json.loads(c.proto.spec))
        if title.startswith(title_start):
            return convert_arrow_bytes_to_pandas_df(c.proto.datasets[0].data.data)
    raise AssertionError(f"no chart titled {title_start!r}")


def chart_titles(at: AppTest) -> list[str]:
    return [title_text(json.loads(c.proto.spec)) for c in at.get("vega_lite_chart")]


def test_tile_page_marks_current_paper_and_unfit_cells():
    at = open_page("tile_sizes", backend="numpy", head_dim=128, dtype="float32", block_q=16,
                   block_k=128)
    assert_clean(at)
    smem = chart_data(at, "Shared memory per block").set_index(["block_q", "block_k"])
    assert len(smem) == len(engine.BLOCK_SIZES) ** 2
    # 128 × 128 float32 tiles at d = 128: five 64 KiB tiles, more than the block may take
    big = smem.loc[(128, 128)]
    assert big.status == "does not fit" and big.text == "no fit 321 KiB"
    assert smem.loc[(16, 16)].status == "fits"
    current = smem[smem.current.astype(bool)].index.tolist()
    assert current == [(16, 128)]
    # the paper's choice for float32, d = 128 on the H200 profile: 64 × 64 (worked in
    # tests/test_tilemodel.py)
    assert smem.loc[(64, 64)].marks == "▲"
    spec = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
    cell = next(p for p in spec["params"] if p["name"] == "cell")
    assert cell["select"]["fields"] == ["block_q", "block_k"]


def test_tile_page_without_gpu_labels_model_and_recorded_grid():
    if ON_GPU:
        pytest.skip("a GPU times the shapes live instead")
    at = open_page("tile_sizes", backend="numpy", dtype="float16")
    assert_clean(at)
    text = texts(at)
    titles = chart_titles(at)
    assert "Resident blocks per SM (model)" in titles
    assert any(t.startswith("Waves over") and t.endswith("(model)") for t in titles)
    assert "no GPU here" in text
    # the recorded grid (tests/data/tiles_fixture.json) with its device, date and note
    assert "Recorded on **Test fixture GPU (not a measurement)** on **2000-01-01**" in text
    assert "A test fixture: five made-up shapes." in text
    measured = chart_data(at, "teaching kernel: measured on").set_index(["block_q", "block_k"])
    assert measured.loc[(64, 64)].marks == "★"          # 0.050 ms, the fastest of three
    assert measured.loc[(64, 64)].text == "0.05 ms"
    assert measured.loc[(32, 32)].text == "not timed"
    tc = chart_data(at, "tensor-core kernel: measured on").set_index(["block_q", "block_k"])
    assert tc.loc[(128, 64)].marks == "★"
    assert "fastest 128 × 64 at 0.01 ms" in text
    assert len(chart_data(at, "The memory pyramid")) == 5


def test_tile_page_without_recorded_grid_says_how_to_record_one(monkeypatch, tmp_path):
    if ON_GPU:
        pytest.skip("a GPU times the shapes live instead")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("tile_sizes", backend="numpy")
    assert_clean(at)
    assert "bash benchmarks/gpu_run.sh tile-grid" in texts(at)
    assert not any("measured" in t for t in chart_titles(at))


def test_tile_page_follows_the_url_tiles():
    at = open_page("tile_sizes", backend="numpy", block_q=32, block_k=8)
    assert_clean(at)
    hbm = chart_data(at, "HBM bytes moved").set_index(["block_q", "block_k"])
    assert hbm[hbm.current.astype(bool)].index.tolist() == [(32, 8)]
    at.selectbox(key="block_q").set_value(128).run()
    hbm = chart_data(at, "HBM bytes moved").set_index(["block_q", "block_k"])
    assert hbm[hbm.current.astype(bool)].index.tolist() == [(128, 8)]
    assert at.query_params["block_q"] in ("128", ["128"])


@pytest.mark.skipif(not ON_GPU, reason="needs a usable GPU")
def test_tile_page_live_sweep_on_gpu():
    at = open_page("tile_sizes", dtype="float16", head_dim=64, seq_q=512, seq_k=512)
    assert_clean(at)
    assert "Resident blocks per SM (model)" in chart_titles(at)
    at.multiselect(key="tiles_kernels").set_value(["tensorcore"]).run()
    at.button(key="tiles_sweep").click().run(timeout=240)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    text = texts(at)
    assert "Measured on" in text
    measured = chart_data(at, "tensor-core kernel: measured median")
    timed = measured[measured.status == "fits"]
    assert len(timed) >= 5 and (timed.value > 0).all()
    assert (measured.marks == "★").sum() + (measured.marks == "★ ▲").sum() == 1


@pytest.mark.skipif(not ON_GPU, reason="needs a usable GPU")
def test_tile_page_sweep_over_the_limit_is_a_message(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_TILE_SWEEP_POINTS", "2")
    at = open_page("tile_sizes", dtype="float16", head_dim=64)
    at.button(key="tiles_sweep").click().run()
    assert_clean(at)
    errors = " ".join(e.value for e in at.error)
    assert "tile_sweep_points" in errors and "FA_LAB_MAX_TILE_SWEEP_POINTS" in errors
    assert not any("measured median" in t for t in chart_titles(at))


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


# ---- the projector: Overview headline, Timings defaults, corrected texts ------
def test_overview_headline_from_recorded_results(monkeypatch):
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("overview")
    assert_clean(at)
    head = [s for s in specs(at) if "Naive against flash" in json.dumps(s.get("title", ""))]
    assert len(head) == 1
    title = json.dumps(head[0]["title"])
    assert "NVIDIA H200" in title and "2026-11-23" in title
    body = texts(at)
    for row in page_list.PAGES:
        assert f"**{row.title}**" in body, row.title
    assert "drop from N² to N" not in body and "still grows as N²" in body
    assert "Θ(N²d²/M)" in body


def test_overview_without_recorded_results_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("overview")
    assert_clean(at)
    assert "No GPU results are recorded" in texts(at)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its live device instead")
def test_device_box_speaks_plainly():
    at = open_page("overview")
    from app.core.figures import device_sentence
    reason = engine.probe_gpu()[1]
    box = " ".join(i.value for i in at.info)
    assert device_sentence(reason) in box and reason not in box and "Error" not in box
    assert reason in [c.value for c in at.code]                     # kept for developers
    at = open_page("overview", backend="cupy")
    assert at.error and all("Error" not in e.value for e in at.error)


def color_domains(spec) -> list:
    """Every colour scale's domain in a chart spec (the legends' entries)."""
    if isinstance(spec, list):
        return [n for part in spec for n in color_domains(part)]
    if not isinstance(spec, dict):
        return []
    found = []
    if isinstance(spec.get("color"), dict):
        found += (spec["color"].get("scale") or {}).get("domain", [])
    return found + [n for v in spec.values() for n in color_domains(v)]


def test_timings_default_recorded_file_is_the_fastest_kernels(monkeypatch):
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("timings")
    assert_clean(at)
    assert at.selectbox(key="rec_file").value.startswith("bench_h200_forward_2026-11-23.json")
    assert at.selectbox(key="rec_shape").value == "H=1, d=128, bfloat16"
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


# ---- loop player, FA1 against FA2, corrections (projector issue) -----------------------
def shown_step(at: AppTest) -> int:
    """The step the loop chart draws (its `step` param, set by app.core.ui.loop_player)."""
    spec = next(s for s in specs(at) if s.get("params", [{}])[0].get("name") == "step")
    return spec["params"][0]["value"]


@pytest.mark.parametrize("page,key", [("sram_tiling", "sram"), ("backward", "bw"),
                                      ("decoding", "dec")])
def test_loop_player_step_buttons_move_the_step(page, key):
    at = open_page(page)
    assert shown_step(at) == 1 and at.slider(key=f"{key}_step").value == 1
    at.button(key=f"{key}_fwd").click().run()
    at.button(key=f"{key}_fwd").click().run()
    assert_clean(at)
    assert at.slider(key=f"{key}_step").value == 3 and shown_step(at) == 3
    at.button(key=f"{key}_back").click().run()
    assert shown_step(at) == 2
    for _ in range(3):                                    # never below step 1
        at.button(key=f"{key}_back").click().run()
    assert shown_step(at) == 1


def test_loop_player_plays_on_from_the_step_shown():
    at = open_page("sram_tiling")
    at.slider(key="sram_step").set_value(9).run()
    assert shown_step(at) == 9
    at.toggle(key="sram_play").set_value(True).run()
    assert_clean(at)
    assert shown_step(at) == 10                           # from 9, not from the start
    assert at.select_slider(key="sram_speed").value == "normal"


def test_loop_player_resets_on_a_config_change():
    at = open_page("sram_tiling")
    at.slider(key="sram_step").set_value(9).run()
    at.toggle(key="sram_play").set_value(True).run()
    at.selectbox(key="block_q").set_value(32).run()
    assert_clean(at)
    assert shown_step(at) == 1 and at.slider(key="sram_step").value == 1
    assert at.toggle(key="sram_play").value is False


def test_loop_player_keeps_the_step_across_the_loop_order():
    at = open_page("sram_tiling")
    at.slider(key="sram_step").set_value(6).run()
    at.radio(key="sram_order").set_value("fa1").run()
    assert_clean(at)
    assert shown_step(at) == 6                            # compare both orders at one step


def test_loop_player_plays_a_long_loop_in_at_most_100_frames():
    from app.core.ui import PLAY_FRAMES, next_frame, play_stride
    at = open_page("sram_tiling", seq_q=8192, seq_k=8192, block_q=16, block_k=16)
    assert_clean(at)
    n = at.slider(key="sram_step").max
    stride = play_stride(n)
    assert n > 1000 and -(-n // stride) <= PLAY_FRAMES
    at.toggle(key="sram_play").set_value(True).run()
    assert shown_step(at) == 1 + stride
    frames, step = 0, 1
    while step != n:
        step, frames = next_frame(step, n, stride), frames + 1
    assert frames <= PLAY_FRAMES and next_frame(n, n, stride) == 1


def test_sram_page_switches_to_the_fa1_order():
    at = open_page("sram_tiling")
    cfg = engine.AttentionConfig()
    fa1, fa2 = iomodel.flash1_hbm(cfg), iomodel.flash_hbm(cfg)
    body = texts(at)
    assert f"HBM traffic, FlashAttention-1 order={iomodel.format_bytes(fa1.total)}" in body
    assert f"HBM traffic, FlashAttention-2 order={iomodel.format_bytes(fa2.total)}" in body
    assert "FlashAttention-2 order: read so far" in json.dumps(specs(at)[1])
    at.radio(key="sram_order").set_value("fa1").run()
    assert_clean(at)
    loop = json.dumps(specs(at)[1])
    assert "FlashAttention-1 order: read so far" in loop
    assert "written back" in texts(at)


def test_sram_page_names_l2_and_the_paper_bound():
    at = open_page("sram_tiling")
    body = texts(at)
    # the emulated profile's (H200) without a GPU, the device's own on one
    want = "L2 cache (NVIDIA H200: 60 MB)" if not ON_GPU else "L2 cache (NVIDIA "
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


def loop_spec_index(at: AppTest) -> int:
    return next(i for i, spec in enumerate(specs(at)) if "HBM bytes moved" in json.dumps(spec))


@pytest.mark.parametrize("page", PAGES)
def test_talk_mode_draws_every_page(page):
    at = open_page(page, talk="true")
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert at.toggle(key="talk").value is True
    assert at.query_params["talk"] == "true"
    assert len(at.get("vega_lite_chart")) >= CHARTS[page]


def test_talk_mode_puts_the_main_chart_first():
    normal, talk = open_page("sram_tiling"), open_page("sram_tiling", talk="true")
    assert loop_spec_index(normal) == 1                  # after the shared-memory chart
    assert loop_spec_index(talk) == 0                    # right below the title
    board = specs(talk)[0]
    assert "hconcat" in json.dumps(board)                # HBM bars beside the board
    assert len(specs(talk)) == len(specs(normal))        # the same charts, reordered


def test_talk_toggle_goes_into_the_url_and_back_out():
    at = open_page("sram_tiling")
    assert "talk" not in at.query_params
    at.toggle(key="talk").set_value(True).run()
    assert_clean(at)
    assert at.query_params["talk"] == "true" and loop_spec_index(at) == 0
    at.toggle(key="talk").set_value(False).run()
    assert "talk" not in at.query_params and loop_spec_index(at) == 1


def test_loop_order_comes_from_the_link_and_goes_back_into_it():
    at = open_page("sram_tiling", sram_order="fa1")
    assert_clean(at)
    assert at.radio(key="sram_order").value == "fa1"
    assert "FlashAttention-1 order: read so far" in json.dumps(specs(at)[loop_spec_index(at)])
    assert at.query_params["sram_order"] == "fa1"
    at.radio(key="sram_order").set_value("fa2").run()
    assert "sram_order" not in at.query_params
    bad = open_page("sram_tiling", sram_order="fa3")
    assert_clean(bad)
    assert any("sram_order" in e.value and "fa2, fa1" in e.value for e in bad.error)
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


def test_decoding_page_merge_chart_carries_every_split_once():
    from app.core.st_internals import arrow_bytes_to_frame as convert_arrow_bytes_to_pandas_df
    at = open_page("decoding", dec_seq_k=2000, dec_splits=8)
    assert_clean(at)
    board = next(c.proto for c in at.get("vega_lite_chart")
                 if json.loads(c.proto.spec).get("params", [{}])[0].get("name") == "step")
    states = convert_arrow_bytes_to_pandas_df(board.datasets[0].data.data)
    assert sorted(states.split) == list(range(8)) and len(board.datasets) == 1
    assert abs(states.share.sum() - 1) < 1e-5 and (states.rescale <= 1).all()


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
