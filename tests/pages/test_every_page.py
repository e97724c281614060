"""Every page through Streamlit's AppTest, from its row of app/page_list.py: it renders
without an exception (in bfloat16 and in talk mode too), a tampered URL shows messages, a
changed control computes the new config once; and what the shared sidebar and core do on
any page: URL parameters, the GPU backend without a GPU, the loop player's buttons, talk
mode."""
from __future__ import annotations

import collections
import json

import pytest

import engine
from apptest_helpers import (CHARTS, HEADINGS, ON_GPU, PAGES, assert_clean, config_heading,
                             loop_spec_index, open_page, shown_step, specs)


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


@pytest.mark.parametrize("page", PAGES)
def test_talk_mode_draws_every_page(page):
    at = open_page(page, talk="true")
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert at.toggle(key="talk").value is True
    assert at.query_params["talk"] == "true"
    assert len(at.get("vega_lite_chart")) >= CHARTS[page]


# ---- the sidebar and the URL (app/core/sidebar.py, app/core/url_params.py) ------------
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


@pytest.mark.skipif(ON_GPU, reason="needs a machine without a usable GPU")
def test_gpu_backend_without_gpu_is_an_error():
    at = open_page("kernel", backend="cupy")
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "no GPU can be used here" in msg and "CPU emulation" in msg


# ---- the loop player (app.core.ui.loop_player) and talk mode -------------------------
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
