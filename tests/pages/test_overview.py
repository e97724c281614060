"""The Overview page (app/features/overview/): its figures follow the controls, the presets,
the headline from the recorded results (its table and chart come from the Timings
feature), the guide to every page, the device box; and the figures of app/core/figures.py
it shows."""
from __future__ import annotations

import json

import pytest

import engine
from app import page_list
from app.features.timings import charts as charts_timing, data as timing_data
from app.core.results_dir import BENCH_DIR_ENV
from engine import recorded
from engine.model import iomodel
from apptest_helpers import ON_GPU, assert_clean, open_page, recorded_date, specs, texts
from chart_helpers import H200, color_domain

H200_FORWARD = "bench_h200_forward.json"     # the headline's recorded sweep


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


def test_overview_headline_from_recorded_results(monkeypatch):
    from engine import recorded
    monkeypatch.setenv(BENCH_DIR_ENV, str(recorded.BENCH_DIR))
    at = open_page("overview", backend="numpy")      # the H200 profile, also on a GPU
    assert_clean(at)
    head = [s for s in specs(at) if "Naive against flash" in json.dumps(s.get("title", ""))]
    assert len(head) == 1
    title = json.dumps(head[0]["title"])
    assert "NVIDIA H200" in title and recorded_date(H200_FORWARD) in title
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


# ---- its tables and figures, without a server -----------------------------------------
def test_headline_has_naive_flash_and_pytorch_with_device_and_date():
    files = [f for f in recorded.load_benchmarks(recorded.BENCH_DIR)    # the H200's files
             if f["device"]["name"] == "NVIDIA H200"]
    rows, subtitle = timing_data.headline(files)
    names = set(rows.name)
    assert {"naive", "flash, tensor core (wgmma)", "PyTorch flash", "PyTorch cuDNN"} <= names
    assert "PyTorch math" not in names and not rows.causal.any()
    assert rows.groupby("name").seq.nunique().min() >= 5          # a sweep of N per line
    assert len(rows.drop_duplicates(["name", "seq"])) == len(rows)
    best = timing_data.fastest(timing_data.recorded_table(files))
    assert best.file == H200_FORWARD
    date = recorded_date(H200_FORWARD)
    assert "NVIDIA H200" in subtitle and date in subtitle
    spec = charts_timing.headline_chart(rows, subtitle).to_dict()
    text = json.dumps(spec)
    assert "NVIDIA H200" in json.dumps(spec["title"]) and date in json.dumps(spec["title"])
    assert "median_ms" in text and "peak_GiB" in text
    legend = color_domain(spec)
    assert "PyTorch cuDNN" in legend and not {"torch_cudnn", "torch_flash"} & set(legend)
    # time and memory panels: flash's peak stays flat while naive's grows with N
    naive = rows[rows.build == "naive"].sort_values("seq").peak_bytes
    wgmma = rows[rows.build == "wgmma"].peak_bytes
    assert naive.iloc[-1] > 10 * naive.iloc[0] and wgmma.max() == wgmma.min()


def test_headline_without_recorded_files_is_empty(tmp_path):
    rows, subtitle = timing_data.headline(recorded.load_benchmarks(tmp_path))
    assert rows.empty and subtitle == ""


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
