"""The chosen config's CPU timings, kept for this session only.

A CPU wall-clock time depends on what else the machine runs at that moment, so it is never
cached for every visitor (a GPU timing is: runner.timing). Each session measures its own,
naive and flash interleaved with the adaptive budget (engine.facade.benchmark_cpu_together),
and keeps the last few configs' timings until it asks to time again.
"""
from __future__ import annotations

import streamlit as st

import engine
from app.core.runner import kernels_for
from engine.facade import benchmark_cpu_together

SESSION_KEY = "_cpu_config_timings"
KEEP = 8             # configs whose timings a session keeps


def _key(cfg: engine.AttentionConfig) -> str:
    return repr(cfg)


def kept_cpu_timings(cfg: engine.AttentionConfig) -> list[tuple[str, engine.Timing]] | None:
    """This session's CPU timings of cfg, or None when it has none."""
    return st.session_state.get(SESSION_KEY, {}).get(_key(cfg))


def measure_cpu_timings(cfg: engine.AttentionConfig) -> list[tuple[str, engine.Timing]]:
    """Time naive and the flash emulation of cfg on the CPU now, interleaved, and keep the
    result for this session (replacing any earlier timing of cfg). Limits raise LimitError."""
    runs = kernels_for("numpy")
    timings = benchmark_cpu_together(cfg, [algorithm for _, algorithm, _ in runs])
    entries = [(label, t) for (label, _, _), t in zip(runs, timings)]
    kept = dict(st.session_state.get(SESSION_KEY, {}))
    kept.pop(_key(cfg), None)
    kept[_key(cfg)] = entries
    st.session_state[SESSION_KEY] = dict(list(kept.items())[-KEEP:])
    return entries
