"""The compute-capability gate in the app: whether the sidebar's config runs on the selected
GPU (the emulated profile, or the live GPU), in engine.model.arch's words, and the sidebar's
notice when it does not. Which builds a page reaches is its row's `direction`
(app/page_list.py)."""
from __future__ import annotations

import streamlit as st

from engine.model import arch, registry
from engine.model.devices import GpuProfile

EMULATION_NOTE = " The NumPy emulation still runs it here: the algorithm is the same."
LIVE_NOTE = (' Change the dtype or the flash kernel in the sidebar, or choose "CPU emulation '
             '(NumPy)" as the backend to see the emulation of it.')


def requests(kernel: str, direction: str) -> tuple[tuple[str | None, str], ...]:
    """(family, direction) of every run a page of `direction` makes with the sidebar's flash
    kernel: that kernel's and naive attention's (family None); a decode step's only."""
    if direction == "decode":
        return (("decode", "decode"),)
    return ((kernel, direction), (None, direction))


def refusal(gpu: GpuProfile, dtype: str, kernel: str, direction: str) -> str | None:
    """engine.model.arch's message for the first of the page's runs that this GPU cannot
    make in dtype (what it lacks, what runs instead); None when every one runs."""
    for family, path in requests(kernel, direction):
        message = arch.refusal(gpu.name, gpu.compute_capability, dtype, family, path)
        if message:
            return message
    return None


def _article(name: str) -> str:
    """"a" or "an" before a GPU's name as it is read aloud (an A100, an H200, a T4)."""
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


def notice(message: str, profile: str, on_gpu: bool) -> str:
    """The sidebar's words for a refusal: on the CPU, about the emulated profile (whose
    emulation still runs); on a live GPU, that the run is refused."""
    if on_gpu:
        return f"This config cannot run on this GPU: {message}{LIVE_NOTE}"
    return (f"On {_article(profile)} {profile} this config would not run: {message}"
            f"{EMULATION_NOTE}")


def show(message: str | None, profile: str, on_gpu: bool) -> None:
    """Draw the refusal where it is called (the sidebar): st.error on a live GPU, st.warning
    on the CPU; nothing when the config runs."""
    if message:
        (st.error if on_gpu else st.warning)(notice(message, profile, on_gpu), icon="⚠️")


def build_refusal(gpu: GpuProfile, key: str, dtype: str) -> str | None:
    """Why the registry build `key` is not compiled on this GPU in dtype (it needs a newer
    GPU, or none of its catalogued shapes fits the GPU's shared memory); None when it is,
    or when the build does not take dtype at all (the compile says so)."""
    build = registry.BY_KEY.get(key)
    if build is None or dtype not in build.dtypes:
        return None
    missing = arch.lacks(build, dtype, gpu.compute_capability)
    if missing is None:
        return None
    return (f"Not compiled here: the {gpu.name} (compute capability "
            f"{gpu.compute_capability}) lacks {missing}.")
