"""The shared sidebar: widgets -> Settings (an AttentionConfig plus backend choices), kept in
the URL's query parameters so a link reproduces the exact view."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import engine
from engine.model import catalog
from app.core import arch_notice, deck, deck_view
from app.core.cards import CARDS_PARAM, link_text, parse_link
from app.core.figures import device_sentence
from app.core.controls import BACKEND_LABELS, CONTROLS, PRESETS, kernel_label
from app.core.navigation import APP_DIR
from app.core.url_params import PAGE_CONTROLS, parse_value, to_text
from app.page_list import PAGES, by_url

CONFIG_FIELDS = ("batch", "heads", "seq_q", "seq_k", "head_dim", "block_q", "block_k", "dtype",
                 "causal", "inputs", "logit_scale", "seed")
NO_PRESET = "(choose a preset)"
PAGE_KEY = deck_view.PAGE_KEY  # url_path of the page being shown (set by app/main.py)
PAGE_URL_KEY = "_page_url"    # page control -> (its page, URL text), non-default values only
CARDS_KEY = "_lab_cards"      # the card ids a teacher's link names (app/core/card_view.py)


@dataclass(frozen=True)
class Settings:
    cfg: engine.AttentionConfig | None   # None when the combination is not allowed
    error: str | None                    # why cfg is None, or why the backend cannot be used
    url_errors: tuple                    # messages about tampered URL parameters
    backend: str                         # "numpy" or "cupy": what will actually run
    kernel: str
    profile: str
    device: engine.DeviceInfo
    talk: bool = False                   # talk mode: main chart first, sized for 1280×720
    arch_refusal: str | None = None      # why the selected GPU (emulated or live) cannot run
    #                                      this page's runs of the config (engine.model.arch)

    @property
    def on_gpu(self) -> bool:
        return self.backend == "cupy"


def talk_requested() -> bool:
    """Whether talk mode is on: the session's toggle, or on a session's first run the link's
    talk parameter (read before the page is configured, so the sidebar can start collapsed)."""
    ss = st.session_state
    if "talk" in ss:
        return bool(ss["talk"])
    try:
        return parse_value("talk", st.query_params.get("talk", "false"))
    except ValueError:
        return False


def apply_preset(name: str | None = None) -> None:
    """Callback: copy a preset's values into the widgets' state."""
    name = name or st.session_state.get("_preset")
    if name in PRESETS:
        st.session_state.update(PRESETS[name])
        if st.session_state.get("talk") and name in deck.PRESET_SLIDES:
            deck_view.go(deck.PRESET_SLIDES[name])     # talk mode: the slide making its point
    st.session_state["_preset"] = NO_PRESET


def _load_url_once() -> list[str]:
    """On a session's first run, seed the widgets from the URL; return messages for bad values."""
    ss = st.session_state
    if ss.get("_url_loaded"):
        return list(ss.get("_url_errors", []))
    errors = []
    params = st.query_params.to_dict()
    for name in (*CONTROLS, *PAGE_CONTROLS):
        if name in params:
            try:
                ss[name] = parse_value(name, params[name])
            except ValueError as exc:
                errors.append(str(exc))
                continue
            if name in PAGE_CONTROLS:
                ss.setdefault(PAGE_URL_KEY, {})[name] = (PAGE_CONTROLS[name][0],
                                                         to_text(ss[name]))
    if CARDS_PARAM in params:
        ss[CARDS_KEY], problem = parse_link(params[CARDS_PARAM])
        if problem:
            errors.append(problem)
    if deck.SLIDE_PARAM in params:
        try:
            deck_view.go(deck.parse(params[deck.SLIDE_PARAM]))   # talk mode opens that slide
        except ValueError as exc:
            errors.append(str(exc))
    unknown = sorted(set(params) - set(CONTROLS) - set(PAGE_CONTROLS)
                     - {CARDS_PARAM, deck.SLIDE_PARAM})
    if unknown:
        errors.append(f"The link has unknown parameters {', '.join(unknown)}; they were "
                      f"ignored. Known parameters: "
                      f"{', '.join([*CONTROLS, *PAGE_CONTROLS, CARDS_PARAM, deck.SLIDE_PARAM])}.")
    ss["_url_loaded"] = True
    ss["_url_errors"] = errors
    return errors


def url_wanted(player_steps: bool = True) -> dict:
    """The URL's parameters as name -> text: every sidebar control that differs from its
    default, the shown page's own controls that differ from theirs (without the loop players'
    steps when player_steps is False), a teacher's cards, and in talk mode on a page of the
    deck the slide."""
    ss = st.session_state
    values = {n: ss[n] for n in CONTROLS}
    wanted = {n: to_text(v) for n, v in values.items() if v != CONTROLS[n].default}
    wanted |= {n: text for n, (page, text) in ss.get(PAGE_URL_KEY, {}).items()
               if page == ss.get(PAGE_KEY) and (player_steps or not PAGE_CONTROLS[n][1].player)}
    if ss.get(CARDS_KEY):
        wanted[CARDS_PARAM] = link_text(ss[CARDS_KEY])
    if ss.get("talk") and deck_view.on_deck() and ss.get(deck_view.SLIDE_KEY):
        wanted[deck.SLIDE_PARAM] = str(ss[deck_view.SLIDE_KEY])
    return wanted


def write_url() -> None:
    """Put url_wanted() into the URL."""
    wanted = url_wanted()
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def switch_page(url_path: str) -> None:
    """Show the page at /<url_path> (talk mode's deck going to a slide's page) with the
    sidebar's and that page's controls carried by its URL: st.switch_page drops the widgets'
    state, so the next run reads them back from the link, as a session's first run does."""
    ss = st.session_state
    ss[PAGE_KEY] = url_path
    wanted = url_wanted()
    ss["_url_loaded"] = False
    st.switch_page(APP_DIR / by_url(url_path).script, query_params=wanted)


def keep_page_control(name: str, value, default) -> None:
    """Record a page control's value for the URL (dropped when it equals the default)."""
    kept = st.session_state.setdefault(PAGE_URL_KEY, {})
    kept.pop(name, None)
    if value != default:
        kept[name] = (PAGE_CONTROLS[name][0], to_text(value))


def write_page_control(name: str) -> None:
    """Put one page control kept by keep_page_control into the URL, alone: for a fragment's
    run, where the sidebar's widgets are not drawn and write_url() cannot run."""
    kept = st.session_state.get(PAGE_URL_KEY, {}).get(name)
    if kept is not None:
        if st.query_params.get(name) != kept[1]:
            st.query_params[name] = kept[1]
    elif name in st.query_params:
        del st.query_params[name]


def choose_tiles(point: dict) -> None:
    """Callback: make a clicked (block_q, block_k) the current config (the widgets, hence
    the URL, follow on the rerun); values that are not allowed sizes are ignored."""
    try:
        bq, bk = int(point["block_q"]), int(point["block_k"])
    except (KeyError, TypeError, ValueError):
        return
    if bq in CONTROLS["block_q"].choices and bk in CONTROLS["block_k"].choices:
        st.session_state.update(block_q=bq, block_k=bk)
        _clear_url_errors()


def _clear_url_errors() -> None:
    st.session_state["_url_errors"] = []


def _widgets() -> None:
    """Draw the controls. Each widget is also given the session's current value as its
    default: the browser shows that default until it has applied the session's value, so a
    link's settings are on screen from the first frame, never the widget's minimum."""
    ss = st.session_state
    c = CONTROLS
    changed = {"on_change": _clear_url_errors}

    def number(where, label, name, **kw):
        where.number_input(label, c[name].low, c[name].high, ss[name], key=name, **changed,
                           **kw)

    def choice(where, label, name, **kw):
        where.selectbox(label, c[name].choices, index=c[name].choices.index(ss[name]),
                        key=name, **changed, **kw)

    st.toggle("Talk mode", ss["talk"], key="talk", **changed,
              help="For a projector: the sidebar folds away and each page opens with its main "
                   "chart and that chart's controls, sized to fit 1280×720. The link keeps it "
                   "(talk=true).")
    st.selectbox("Preset for talks", [NO_PRESET, *PRESETS], key="_preset",
                 on_change=apply_preset)
    st.subheader("Shapes")
    left, right = st.columns(2)
    number(left, "batch", "batch")
    number(right, "heads", "heads")
    number(st, "seq_q (queries)", "seq_q", step=64)
    st.checkbox("seq_k = seq_q", ss["link_seq"], key="link_seq", **changed)
    if ss["link_seq"]:
        ss["seq_k"] = ss["seq_q"]
    number(st, "seq_k (keys)", "seq_k", step=64, disabled=ss["link_seq"])
    choice(st, "head_dim d", "head_dim")
    left, right = st.columns(2)
    choice(left, "block_q (Br)", "block_q")
    choice(right, "block_k (Bc)", "block_k")
    choice(st, "dtype", "dtype")
    st.checkbox("causal", ss["causal"], key="causal", **changed)
    st.subheader("Inputs")
    choice(st, "input preset", "inputs",
           help="normal: random Q, K, V. rising: scores grow along the keys, so the "
                "running max rises at every key tile. outliers: normal plus rare large "
                "entries (0.1% of them, about 10× larger), as in a model's activations.")
    number(st, "logit scale", "logit_scale", step=0.5, format="%.2f",
           help="Multiplies Q, hence every score (a temperature knob).")
    number(st, "seed", "seed")
    st.subheader("Device")
    st.radio("backend", c["backend"].choices, c["backend"].choices.index(ss["backend"]),
             format_func=BACKEND_LABELS.get, key="backend", **changed)
    st.radio("flash kernel (GPU)", c["kernel"].choices, c["kernel"].choices.index(ss["kernel"]),
             format_func=kernel_label, key="kernel", **changed,
             help="The teaching kernel takes every tile size that fits in shared memory. "
                  f"The tensor-core kernel takes {catalog.supported_text()}.")
    choice(st, "GPU profile to emulate on CPU", "profile")


def _direction() -> str:
    """The engine path of the page being shown (its row's direction; forward elsewhere)."""
    url_path = st.session_state.get(PAGE_KEY)
    return next((row.direction for row in PAGES if row.url_path == url_path), "forward")


def render() -> Settings:
    """Draw the sidebar and return the settings; never raises on bad values."""
    ss = st.session_state
    url_errors = _load_url_once()
    for name, ctl in CONTROLS.items():
        ss.setdefault(name, ctl.default)
    with st.sidebar:
        _widgets()
    error = None
    try:
        cfg = engine.AttentionConfig(**{f: ss[f] for f in CONFIG_FIELDS})
    except ValueError as exc:
        cfg, error = None, str(exc)
    device = engine.device_info(profile=ss["profile"], prefer_gpu=ss["backend"] != "numpy")
    backend = "cupy" if device.kind == "gpu" else "numpy"
    if ss["backend"] == "cupy" and device.kind != "gpu":
        error = (f"GPU (CuPy) was chosen, but no GPU can be used here: "
                 f"{device_sentence(device.reason)} Choose 'auto' or 'CPU emulation' to run the NumPy emulation of "
                 f"{ss['profile']}.")
    refused = arch_notice.refusal(device.gpu, ss["dtype"], ss["kernel"], _direction())
    with st.sidebar:              # below the device controls (on a GPU the refused runs of
        #                           the page show the engine's same message: ui.guarded)
        arch_notice.show(refused, ss["profile"], backend == "cupy")
    return Settings(cfg=cfg, error=error, url_errors=tuple(url_errors), backend=backend,
                    kernel=ss["kernel"], profile=ss["profile"], device=device, talk=ss["talk"],
                    arch_refusal=refused)
