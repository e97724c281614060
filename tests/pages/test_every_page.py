"""Every page through Streamlit's AppTest, from its row of app/page_list.py: it renders
without an exception (in bfloat16 and in talk mode too), a tampered URL shows messages, a
changed control computes the new config once; and what the shared sidebar and core do on
any page: URL parameters, the GPU backend without a GPU, the loop player's step in the URL,
talk mode, the compute-capability notice."""
from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

import engine
from apptest_helpers import (CHARTS, HEADINGS, ON_GPU, PAGES, assert_clean, config_heading,
                             open_page, player, specs, texts, url)
from app.core import arch_notice
from engine.model.devices import PROFILES


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
FACADE_CALLS = ("fp8_emulate", "reference_attention")     # the Precision page's extras


@pytest.fixture
def engine_calls(monkeypatch):
    """How often the pages call into the engine's compute functions, by function, algorithm
    and config ("run flash AttentionConfig(...)", ...; the rescale threshold too where one is
    given), counted through the engine module and engine.facade the pages' runners use. A page
    that runs several configs (the Precision page: each format on each input preset) counts
    each config on its own."""
    from engine import facade
    calls = collections.Counter()

    def counting(module, name):
        real = getattr(module, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            cfg = args[0] if args else kwargs.get("cfg")
            key = f"{_name} {kwargs.get('algorithm', '')}".strip() + f" {cfg!r}"
            if kwargs.get("rescale_threshold") is not None:
                key += f" threshold {kwargs['rescale_threshold']}"
            calls[key] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
    for name in ENGINE_CALLS:
        counting(engine, name)
    for name in FACADE_CALLS:
        counting(facade, name)
    return calls


@pytest.mark.parametrize("page", PAGES)
def test_control_change_recomputes_only_the_new_config(page, engine_calls):
    """CPU mode, default config: a changed control computes the new config once (each kind of
    run and timing of each config at most once), and a rerun with nothing changed computes nothing:
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


# ---- the loop player (app/core/player/) and talk mode ---------------------------------
# page -> (its player's key, the URL parameter of its step): every animation is played in the
# browser, its step kept in the URL
PLAYERS = {"sram_tiling": ("sram", "sram_step"), "online_softmax": ("softmax", "sm_tile"),
           "backward": ("bw", "bw_step"), "decoding": ("dec", "dec_step"),
           "kernel": ("hopper", "hopper_step")}


def test_every_animation_is_played_in_the_browser():
    """No page plays an animation by rerunning the server: no Play toggle, no step slider or
    step buttons in Python; every page that animates sends its frames to the loop player."""
    for page in PAGES:
        at = open_page(page)
        keys = [w.key for kind in ("toggle", "slider", "button") for w in at.get(kind)]
        assert not [k for k in keys if k and k.endswith(("_play", "_step", "_fwd", "_back"))], \
            (page, keys)
        has_player = any(e.proto.component_name.endswith("loop_player")
                         for e in at.get("component_instance"))
        assert has_player == (page in PLAYERS), page


@pytest.mark.parametrize("page", list(PLAYERS))
def test_the_players_step_comes_from_the_link_and_goes_back_into_it(page):
    """A link's step opens the animation there; the step the browser stops on goes into the
    URL; a step past the last opens the last; garbage is a message naming what is allowed."""
    key, param = PLAYERS[page]
    at = open_page(page)
    got = player(at)
    spec, base = got["spec"], got["spec"]["url"]["base"]
    n, home = len(spec["frames"]), spec["url"]["home"]
    assert spec["url"]["name"] == param and n >= 3, (page, n)
    assert got["start"] == home and param not in url(at)
    linked = (home + 2) % n
    at = open_page(page, **{param: linked + base})
    assert_clean(at)
    assert player(at)["start"] == linked and url(at)[param] == str(linked + base)
    stop = (linked + 1) % n
    at.session_state[f"{key}_player"] = {"step": stop, "sig": player(at)["sig"]}
    at.run()
    assert_clean(at)
    assert player(at)["start"] == stop
    assert url(at).get(param) == (None if stop == home else str(stop + base))
    at = open_page(page, **{param: n + base + 40})
    assert_clean(at)
    assert player(at)["start"] == n - 1 and url(at)[param] == str(n - 1 + base)
    at = open_page(page, **{param: "-1"})
    assert_clean(at)
    assert any(f"{param} must be a whole number" in e.value for e in at.error), page
    assert player(at)["start"] == home


def _drawn(node) -> list[str]:
    """The types of what a block drew, in page order."""
    out = []
    for child in node.children.values():
        out += _drawn(child) if hasattr(child, "children") else [child.type]
    return out


def _player_first(at) -> bool:
    """Whether the loop player comes before the page's first chart."""
    kinds = [k for k in _drawn(at.main) if k in ("component_instance", "vega_lite_chart")]
    return kinds[0] == "component_instance"


def test_talk_mode_puts_the_main_chart_first():
    normal, talk = open_page("sram_tiling"), open_page("sram_tiling", talk="true")
    assert not _player_first(normal)                     # after the shared-memory chart
    assert _player_first(talk)                           # right below the title
    assert player(talk)["spec"]["compact"] and not player(normal)["spec"]["compact"]
    assert len(specs(talk)) == len(specs(normal))        # the same charts, reordered


def test_talk_toggle_goes_into_the_url_and_back_out():
    at = open_page("sram_tiling")
    assert "talk" not in at.query_params
    at.toggle(key="talk").set_value(True).run()
    assert_clean(at)
    assert at.query_params["talk"] == "true" and _player_first(at)
    at.toggle(key="talk").set_value(False).run()
    assert "talk" not in at.query_params and not _player_first(at)


# ---- the compute-capability notice (app/core/arch_notice.py, engine.model.arch) --------
def sidebar_notice(at) -> str:
    return " ".join(w.value for w in at.sidebar.warning)


@pytest.mark.parametrize("page", ["overview", "online_softmax", "timings", "backward"])
def test_an_emulated_t4_in_bfloat16_says_why_and_what_runs_while_the_emulation_runs(page):
    at = open_page(page, backend="numpy", profile="T4", dtype="bfloat16")
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    notice = sidebar_notice(at)
    assert notice.startswith("On a T4 this config would not run:"), notice
    assert "Tesla T4 (compute capability 7.5)" in notice
    assert "cannot run the teaching kernel" in notice and "bfloat16" in notice
    instead = notice.split("run instead:")[1]
    assert "the teaching kernel in float32 or float16" in instead
    assert "bfloat16" not in instead
    assert len(at.get("vega_lite_chart")) >= CHARTS[page]      # the emulation still draws


def test_the_emulation_runs_on_a_t4_in_bfloat16():
    at = open_page("online_softmax", backend="numpy", profile="T4", dtype="bfloat16")
    assert "Values computed by the CPU emulation" in texts(at) and "Tesla T4" in texts(at)


@pytest.mark.parametrize("page,params", [
    ("overview", dict(profile="T4", dtype="float16")),                # Turing's float16
    ("backward", dict(profile="T4", dtype="float16")),                # the teaching backward
    ("overview", dict(profile="T4", dtype="float16", kernel="tensorcore")),
    ("overview", dict(profile="A100 80GB", dtype="bfloat16", kernel="tensorcore")),
    ("backward", dict(profile="A100 80GB", dtype="bfloat16", kernel="tensorcore")),
    ("backward", dict(profile="L4", dtype="float16", kernel="tensorcore")),
    ("decoding", dict(profile="T4", dtype="float16")),
])
def test_no_notice_where_the_config_runs(page, params):
    at = open_page(page, backend="numpy", **params)
    assert_clean(at)
    assert not sidebar_notice(at) and not at.error


def test_the_backward_page_takes_the_t4_tensor_core_backward_in_float16_only():
    # head_dim 64 at 64×64 fits Turing's 64 KiB block with one query buffer: no notice
    at = open_page("backward", backend="numpy", profile="T4", dtype="float16",
                   kernel="tensorcore")
    assert_clean(at)
    assert not sidebar_notice(at)
    at = open_page("backward", backend="numpy", profile="T4", dtype="bfloat16",
                   kernel="tensorcore")
    assert_clean(at)
    notice = sidebar_notice(at)
    assert "cannot run the tensor-core kernel's backward pass in bfloat16" in notice
    assert "the tensor-core kernel in float16" in notice.split("instead:")[1]


def test_the_decoding_page_checks_the_decode_kernel():
    at = open_page("decoding", backend="numpy", profile="T4", dtype="bfloat16")
    assert_clean(at)
    notice = sidebar_notice(at)
    assert "cannot run the Flash-Decoding kernel in bfloat16" in notice
    assert "the Flash-Decoding kernel in float32 or float16" in notice.split("instead:")[1]


def test_choosing_a_t4_shows_the_notice_and_the_url_keeps_the_choice():
    at = open_page("overview", backend="numpy", dtype="bfloat16")
    assert not sidebar_notice(at)                                     # the H200 runs it
    at.selectbox(key="profile").set_value("T4").run()
    assert_clean(at)
    assert sidebar_notice(at).startswith("On a T4 this config would not run:")
    assert url(at)["profile"] == "T4" and url(at)["dtype"] == "bfloat16"
    at.selectbox(key="dtype").set_value("float16").run()              # float16 runs there
    assert not sidebar_notice(at)


@pytest.fixture
def live_t4(monkeypatch):
    """The app on a live Tesla T4 (faked): the device the sidebar finds, and an engine whose
    runs apply the GPU backend's own gate (engine.gpu.runtime.check_arch) before anything."""
    from engine.gpu import runtime
    t4 = PROFILES["T4"]
    monkeypatch.setattr(runtime, "live_gpu", lambda: t4)
    monkeypatch.setattr(runtime, "device_cc", lambda: 7.5)
    cpu = engine.device_info
    monkeypatch.setattr(engine, "device_info", lambda profile=None, prefer_gpu=True: (
        engine.DeviceInfo("gpu", t4.name, t4, None, "a T4 (faked by the test)")
        if prefer_gpu else cpu(profile, prefer_gpu)))

    def run(cfg, q=None, k=None, v=None, backend="auto", algorithm="flash",
            kernel="teaching", trace=False):
        runtime.check_arch(cfg.dtype, kernel if algorithm == "flash" else None)
        raise AssertionError("the gate let a run through that this GPU cannot make")
    monkeypatch.setattr(engine, "run", run)


def test_a_live_t4_refuses_bfloat16_as_an_error_not_a_traceback(live_t4):
    at = open_page("online_softmax", dtype="bfloat16")
    assert_clean(at)
    assert not sidebar_notice(at)
    sidebar = " ".join(e.value for e in at.sidebar.error)
    assert sidebar.startswith("This config cannot run on this GPU: The Tesla T4 (compute "
                              "capability 7.5) cannot run the teaching kernel in bfloat16")
    assert "CPU emulation (NumPy)" in sidebar
    main = " ".join(e.value for e in at.main.error)
    assert "Tesla T4 (compute capability 7.5) cannot run the teaching kernel in bfloat16" in main


def test_the_kernel_page_compiles_no_build_this_gpu_cannot_run():
    a100, t4 = PROFILES["A100 80GB"], PROFILES["T4"]
    assert "compute capability 9.0" in arch_notice.build_refusal(a100, "wgmma", "float16")
    assert arch_notice.build_refusal(a100, "mma.sync", "bfloat16") is None
    assert "compute capability 8.0" in arch_notice.build_refusal(t4, "teaching", "bfloat16")
    assert arch_notice.build_refusal(t4, "backward mma.sync", "float16") is None  # one buffer
    assert "bfloat16" in arch_notice.build_refusal(t4, "backward mma.sync", "bfloat16")
    assert arch_notice.build_refusal(t4, "mma.sync", "float16") is None
    assert arch_notice.build_refusal(t4, "mma.sync", "float32") is None   # the compile says


@pytest.mark.parametrize("profile,article", [("T4", "a"), ("H200", "an"), ("A100 80GB", "an"),
                                             ("L4", "an"), ("RTX 4090", "an")])
def test_the_notice_reads_aloud(profile, article):
    assert arch_notice.notice("…", profile, False).startswith(f"On {article} {profile} ")


def test_no_metric_uses_its_delta_as_a_note():
    """st.metric's delta is a change (an arrow, green or red); a note beside a figure goes in
    its help text or a caption. No call in the app passes a delta, by keyword or as its
    third argument."""
    import ast
    app_dir = Path(__file__).resolve().parents[2] / "app"
    offenders = []
    for path in app_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "metric"
                    and (len(node.args) > 2
                         or any(k.arg in ("delta", "delta_color") for k in node.keywords))):
                offenders.append(f"{path.relative_to(app_dir.parent)}:{node.lineno}")
    assert not offenders, offenders
