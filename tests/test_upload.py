"""Downloads page: a trace file round-trips through the uploader; a hostile file gets a clear
message, never an exception."""
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import engine
from app.features.downloads.data import trace_summary
from engine import trace_io
import seeds

MAIN = Path(__file__).resolve().parent.parent / "app" / "main.py"


@pytest.fixture(autouse=True)
def clear_caches():
    st.cache_data.clear()
    yield
    st.cache_data.clear()


def downloads_page() -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update({"backend": "numpy"})
    at.run()
    at.switch_page("features/downloads/page.py").run()
    return at


def test_uploaded_trace_is_checked_and_summarised():
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=96, seq_k=130, head_dim=32,
                                 block_q=32, block_k=32, inputs="rising", causal=True,
                                 seed=int(seeds.rng(7934).integers(1e9)))
    res = engine.run(cfg, backend="numpy", trace=True)
    at = downloads_page()
    at.file_uploader(key="trace_upload").set_value(
        ("t.npz", trace_io.to_npz_bytes(cfg, res), "application/octet-stream"))
    at.run()
    assert not at.exception
    ok = " ".join(e.value for e in at.success)
    assert "valid trace" in ok and "N_q=96" in ok and "causal" in ok
    table = at.dataframe[-1].value
    assert list(table["key tile j"]) == list(range(cfg.Tc))
    assert table["rows whose max rose (%)"].iloc[0] == 0


@pytest.mark.parametrize("payload,words", [
    (b"PK\x03\x04 not really a zip", "Not a readable NPZ"),
    (b"\x80\x04\x95 pickle bytes", "Not a readable NPZ"),
])
def test_hostile_upload_shows_message(payload, words):
    at = downloads_page()
    at.file_uploader(key="trace_upload").set_value(("x.npz", payload, "application/octet-stream"))
    at.run()
    assert not at.exception
    assert any(words in e.value for e in at.error)


def test_trace_summary_counts_rising_rows():
    cfg = engine.AttentionConfig(seq_q=64, seq_k=256, head_dim=32, block_q=32, block_k=64,
                                 inputs="rising", seed=int(seeds.rng(7934).integers(1e9)))
    res = engine.run(cfg, backend="numpy", trace=True)
    df = trace_summary(res)
    r = res.trace.rescale.reshape(-1, cfg.Tc)
    for j in range(1, cfg.Tc):
        assert df["rows whose max rose (%)"][j] == pytest.approx(100 * (r[:, j] < 1).mean())
        if (r[:, j] < 1).any():
            assert df["mean rescale where it rose"][j] == pytest.approx(r[r[:, j] < 1, j].mean())
    assert np.isnan(df["mean rescale where it rose"][0])


def test_gpu_failure_message_offers_cpu_emulation(monkeypatch):
    """A GPU failure inside a page becomes an error that points to the CPU emulation."""
    from engine.gpu.runtime import GpuRunError

    def failing(*args, **kwargs):
        raise GpuRunError("flash attention on the GPU: the GPU ran out of memory.")

    monkeypatch.setattr(engine, "run", failing)
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update({"backend": "numpy", "seed": "4242"})
    at.run()
    at.switch_page("features/downloads/page.py").run()       # its trace comes from engine.run
    assert not at.exception
    text = " ".join(e.value for e in at.error)
    assert "ran out of memory" in text and "CPU emulation" in text
