"""Cached calls into the engine. Everything returned is NumPy (st.cache_data pickles it)."""
from __future__ import annotations

import streamlit as st

import engine
from engine import iomodel

CACHE = dict(max_entries=16, show_spinner="Running the kernel…")


@st.cache_data(max_entries=8, show_spinner=False)
def inputs(cfg: engine.AttentionConfig):
    return engine.make_inputs(cfg)


@st.cache_data(**CACHE)
def flash(cfg: engine.AttentionConfig, backend: str, kernel: str) -> engine.Result:
    """The traced flash run whose numbers every page shows (limits checked before the
    inputs are made)."""
    engine.check_limits(cfg, algorithm="flash", trace=True)
    q, k, v = inputs(cfg)
    return engine.run(cfg, q, k, v, backend=backend, algorithm="flash", kernel=kernel,
                      trace=True)


@st.cache_data(**CACHE)
def timing(cfg: engine.AttentionConfig, algorithm: str, backend: str, kernel: str,
           reps: int) -> engine.Timing:
    return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                            trace=False, reps=reps)


def kernels_for(backend: str) -> list[tuple[str, str, str]]:
    """(label, algorithm, kernel) of everything worth timing on this backend."""
    if backend == "cupy":
        return [("naive", "naive", "teaching")] + [(k, "flash", k) for k in engine.KERNELS]
    return [("naive", "naive", "teaching"), ("CPU emulation", "flash", "teaching")]


def naive_fits_gpu(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> bool:
    """Predicted from the memory model: would naive's S and P fit in the GPU's memory?"""
    return iomodel.peak_memory(cfg, "naive") <= gpu.memory_bytes


@st.cache_data(max_entries=8, show_spinner=False)
def dout(cfg: engine.AttentionConfig):
    return engine.make_dout(cfg)


@st.cache_data(**CACHE)
def backward(cfg: engine.AttentionConfig, backend: str) -> engine.Gradients:
    """The traced flash backward the Backward page shows (limits checked before the inputs
    are made). On a GPU the trace comes from the teaching backward kernel, the one that
    writes it."""
    engine.check_limits(cfg, algorithm="flash", trace=True, direction="backward")
    q, k, v = inputs(cfg)
    return engine.run_backward(cfg, q, k, v, dout(cfg), backend=backend, algorithm="flash",
                               kernel="teaching", trace=True)


@st.cache_data(**CACHE)
def backward_timing(cfg: engine.AttentionConfig, algorithm: str, backend: str, kernel: str,
                    reps: int) -> engine.Timing:
    return engine.benchmark(cfg, algorithm=algorithm, backend=backend, kernel=kernel,
                            trace=False, reps=reps, direction="backward")
