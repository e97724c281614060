"""The shared sidebar: widgets -> Settings (an AttentionConfig plus backend choices), kept in
the URL's query parameters so a link reproduces the exact view."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import engine
from engine import tensorcore
from app.controls import (BACKEND_LABELS, CONTROLS, PRESETS, kernel_label, parse_value,
                          to_text)

CONFIG_FIELDS = ("batch", "heads", "seq_q", "seq_k", "head_dim", "block_q", "block_k", "dtype",
                 "causal", "inputs", "logit_scale", "seed")
NO_PRESET = "(choose a preset)"


@dataclass(frozen=True)
class Settings:
    cfg: engine.AttentionConfig | None   # None when the combination is not allowed
    error: str | None                    # why cfg is None, or why the backend cannot be used
    url_errors: tuple                    # messages about tampered URL parameters
    backend: str                         # "numpy" or "cupy": what will actually run
    kernel: str
    profile: str
    device: engine.DeviceInfo

    @property
    def on_gpu(self) -> bool:
        return self.backend == "cupy"


def apply_preset(name: str | None = None) -> None:
    """Callback: copy a preset's values into the widgets' state."""
    name = name or st.session_state.get("_preset")
    if name in PRESETS:
        st.session_state.update(PRESETS[name])
    st.session_state["_preset"] = NO_PRESET


def _load_url_once() -> list[str]:
    """On a session's first run, seed the widgets from the URL; return messages for bad values."""
    ss = st.session_state
    if ss.get("_url_loaded"):
        return list(ss.get("_url_errors", []))
    errors = []
    params = st.query_params.to_dict()
    for name in CONTROLS:
        if name in params:
            try:
                ss[name] = parse_value(name, params[name])
            except ValueError as exc:
                errors.append(str(exc))
    unknown = sorted(set(params) - set(CONTROLS))
    if unknown:
        errors.append(f"The link has unknown parameters {', '.join(unknown)}; they were "
                      f"ignored. Known parameters: {', '.join(CONTROLS)}.")
    ss["_url_loaded"] = True
    ss["_url_errors"] = errors
    return errors


def _write_url() -> None:
    ss = st.session_state
    wanted = {n: to_text(ss[n]) for n, c in CONTROLS.items() if ss[n] != c.default}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def _clear_url_errors() -> None:
    st.session_state["_url_errors"] = []


def _widgets() -> None:
    ss = st.session_state
    c = CONTROLS
    changed = {"on_change": _clear_url_errors}
    st.selectbox("Preset for talks", [NO_PRESET, *PRESETS], key="_preset",
                 on_change=apply_preset)
    st.subheader("Shapes")
    left, right = st.columns(2)
    left.number_input("batch", c["batch"].low, c["batch"].high, key="batch", **changed)
    right.number_input("heads", c["heads"].low, c["heads"].high, key="heads", **changed)
    st.number_input("seq_q (queries)", c["seq_q"].low, c["seq_q"].high, step=64, key="seq_q",
                    **changed)
    st.checkbox("seq_k = seq_q", key="link_seq", **changed)
    if ss["link_seq"]:
        ss["seq_k"] = ss["seq_q"]
    st.number_input("seq_k (keys)", c["seq_k"].low, c["seq_k"].high, step=64, key="seq_k",
                    disabled=ss["link_seq"], **changed)
    st.selectbox("head_dim d", c["head_dim"].choices, key="head_dim", **changed)
    left, right = st.columns(2)
    left.selectbox("block_q (Br)", c["block_q"].choices, key="block_q", **changed)
    right.selectbox("block_k (Bc)", c["block_k"].choices, key="block_k", **changed)
    st.selectbox("dtype", c["dtype"].choices, key="dtype", **changed)
    st.checkbox("causal", key="causal", **changed)
    st.subheader("Inputs")
    st.selectbox("input preset", c["inputs"].choices, key="inputs", **changed,
                 help="normal: random Q, K, V. rising: scores grow along the keys, so the "
                      "running max rises at every key tile.")
    st.number_input("logit scale", c["logit_scale"].low, c["logit_scale"].high, step=0.5,
                    format="%.2f", key="logit_scale", **changed,
                    help="Multiplies Q, hence every score (a temperature knob).")
    st.number_input("seed", c["seed"].low, c["seed"].high, key="seed", **changed)
    st.subheader("Device")
    st.radio("backend", c["backend"].choices, format_func=BACKEND_LABELS.get, key="backend",
             **changed)
    st.radio("flash kernel (GPU)", c["kernel"].choices, format_func=kernel_label,
             key="kernel", **changed,
             help="The teaching kernel takes every tile size that fits in shared memory. "
                  f"The tensor-core kernel takes {tensorcore.supported_text()}.")
    st.selectbox("GPU profile to emulate on CPU", c["profile"].choices, key="profile",
                 **changed)


def render() -> Settings:
    """Draw the sidebar and return the settings; never raises on bad values."""
    ss = st.session_state
    url_errors = _load_url_once()
    for name, ctl in CONTROLS.items():
        ss.setdefault(name, ctl.default)
    with st.sidebar:
        _widgets()
    _write_url()
    error = None
    try:
        cfg = engine.AttentionConfig(**{f: ss[f] for f in CONFIG_FIELDS})
    except ValueError as exc:
        cfg, error = None, str(exc)
    device = engine.device_info(profile=ss["profile"], prefer_gpu=ss["backend"] != "numpy")
    backend = "cupy" if device.kind == "gpu" else "numpy"
    if ss["backend"] == "cupy" and device.kind != "gpu":
        error = (f"GPU (CuPy) was chosen, but no GPU can be used here: {device.reason} "
                 f"Choose 'auto' or 'CPU emulation' to run the NumPy emulation of "
                 f"{ss['profile']}.")
    return Settings(cfg=cfg, error=error, url_errors=tuple(url_errors), backend=backend,
                    kernel=ss["kernel"], profile=ss["profile"], device=device)
