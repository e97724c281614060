"""Small helpers the pages share: the current settings, error display, where numbers came
from, and drawing a chart with the app's own fonts. (Animations are played in the browser by
the loop player, app/core/player/.)"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, TypeVar

import streamlit as st
from app.core.st_internals import add_script_run_ctx, get_script_run_ctx

from app.core import deck_view, specs
from app.core.controls import kernel_label
from app.core.sidebar import Settings, keep_page_control
from engine import GpuUnavailableError
from engine.facade import GPU_LOCK, GpuRunError

T = TypeVar("T")
SETTINGS_KEY = "_settings"


def settings() -> Settings:
    return st.session_state[SETTINGS_KEY]


def usable_settings() -> Settings:
    """The settings, after showing any problem; stops the page when there is no valid config."""
    s = settings()
    for msg in s.url_errors:
        st.error(msg)
    if s.error:
        st.error(s.error)
    if s.error or s.cfg is None:
        st.stop()
    return s


def stage():
    """Where a page puts its main chart and that chart's controls: in talk mode a container
    made here, right below the title (call this first), so they fill the projector's first
    screen; otherwise None, and `on_stage` draws them where the page reaches them."""
    return st.container() if settings().talk else None


def on_stage(slot, section: str | None = None):
    """The container for the main chart: the stage in talk mode, else a new one in place. A
    page with several sections that talk mode's deck can put on the stage (app/core/deck.py)
    names each: the stage takes the one the slide shows, the others are drawn in place."""
    if slot is not None and (section is None or section == deck_view.current_section()):
        return slot
    return st.container()


def notes(above):
    """Where the text about a main chart goes: `above` (a container made before the chart)
    normally; in talk mode a new container after the chart, so the chart stays on screen."""
    return st.container() if settings().talk else above


def linked_radio(label: str, key: str, options: dict, default, **kwargs):
    """A page's horizontal radio over `options` (value -> words), kept in the URL under
    `key`; its label is hidden in talk mode."""
    ss = st.session_state
    if key in ss and ss[key] not in options:
        ss[key] = default
    value = st.radio(label, list(options), list(options).index(ss.get(key, default)),
                     format_func=options.get, horizontal=True, key=key,
                     label_visibility="collapsed" if settings().talk else "visible", **kwargs)
    keep_page_control(key, value, default)
    return value


def linked_number(where, label: str, key: str, low: int, high: int, default: int) -> int:
    """A page's number input kept in the URL under `key` (none is drawn when the config leaves
    one choice). A value from the link or from an earlier config that is out of this config's
    range falls back to `default`, saying so."""
    ss = st.session_state
    if high <= low:
        keep_page_control(key, low, low)
        return low
    if key in ss and not low <= ss[key] <= high:
        st.warning(f"{label} {ss[key]} is out of range for this config ({low} to {high}); "
                   f"showing {default}.")
        ss[key] = default
    value = where.number_input(label, low, high, ss.get(key, default), key=key)
    keep_page_control(key, value, default)
    return value


def linked_choice(where, label: str, key: str, options: list, default) -> object:
    """A page's select slider kept in the URL under `key`; a value not offered here falls back
    to `default`, saying so."""
    ss = st.session_state
    if key in ss and ss[key] not in options:
        st.warning(f"{label} = {ss[key]} is not offered here (choose from {options[0]} to "
                   f"{options[-1]}); showing {default}.")
        ss[key] = default
    value = where.select_slider(label, options, ss.get(key, default), key=key)
    keep_page_control(key, value, default)
    return value


GPU_WAIT = ("Waiting for the GPU: another run is using it (one run at a time keeps every "
            "timing honest). This run starts as soon as it is free.")


@contextlib.contextmanager
def gpu_wait_notice():
    """While the block runs on a GPU backend, a wait for GPU_LOCK (another session or app
    process is using the GPU) shows GPU_WAIT here until the block ends. The notice is written
    from a helper thread, outside any st.cache_data function the wait happens in (an element
    written there would be replayed on every later cache hit)."""
    if not settings().on_gpu:
        yield
        return
    slot = st.empty()
    ctx = get_script_run_ctx()

    def show():
        writer = threading.Thread(target=slot.info, args=(GPU_WAIT,), kwargs={"icon": "⏳"})
        add_script_run_ctx(writer, ctx)
        writer.start()
        writer.join()

    try:
        with GPU_LOCK.notify_waits(show):
            yield
    finally:
        slot.empty()


def guarded(fn: Callable[..., T], *args, show: Callable = st.error) -> T | None:
    """Call fn; a ValueError (bad config, limit, unsupported shape, GPU failure) becomes a
    message (st.error unless `show` says otherwise); a GPU failure also offers the emulation.
    A wait for the GPU says so meanwhile (gpu_wait_notice)."""
    try:
        with gpu_wait_notice():
            return fn(*args)
    except ValueError as exc:
        msg = str(exc)
        if isinstance(exc, (GpuRunError, GpuUnavailableError)):
            msg += (' The app keeps working: choose "CPU emulation (NumPy)" as the backend in '
                    'the sidebar to go on without the GPU.')
        show(msg)
        return None


def source_line(s: Settings, backend: str) -> str:
    """Where the numbers on the page came from."""
    if backend == "cupy":
        return f"Values measured on the GPU: {s.device.name}, {kernel_label(s.kernel)} (CuPy)."
    extra = (f" The {kernel_label(s.kernel)} needs a GPU; its algorithm is the same, so the "
             f"emulation stands in for it." if s.kernel != "teaching" else "")
    return (f"Values computed by the CPU emulation (NumPy) of the kernel's loop, emulating "
            f"{s.device.name.removeprefix('CPU emulation of ')}.{extra}")


def chart(builder: Callable, *args, slider_values: dict | None = None, **kwargs) -> None:
    """Draw builder(*args, **kwargs), a chart builder of a page's charts.py, from the
    process-wide cache of charts in their sent form (app.core.specs: built and converted once,
    shared by every session); `slider_values` sets where the chart's browser sliders start, so a playing
    animation reuses one spec."""
    spec = specs.sent_chart(builder, *args, **kwargs).spec_with_data()
    if slider_values and "params" in spec:
        spec["params"] = [{**param, "value": slider_values[param["name"]]}
                          if param["name"] in slider_values else param
                          for param in spec["params"]]
    st.vega_lite_chart(spec=spec, theme=None, width="content")


def picking_chart(builder: Callable, *args, key: str, param: str,
                  pick: Callable[[dict], None], **kwargs) -> None:
    """Draw builder(*args, **kwargs) like `chart`, and on a click in its point selection
    `param` call pick(first selected point) before the rerun."""
    spec = specs.sent_chart(builder, *args, **kwargs).spec_with_data()

    def picked():
        points = st.session_state[key]["selection"].get(param) or []
        if points:
            pick(points[0])

    st.vega_lite_chart(spec=spec, theme=None, width="content", key=key, on_select=picked,
                       selection_mode=param)


def method_note(method: str, gpu_note: str | None = None) -> None:
    """The "How this was timed" block beside a timing chart: the method text of the timing
    itself, and on a GPU a short note on what the events enclose."""
    st.markdown("**How this was timed**")
    st.write(method)
    if gpu_note:
        st.caption(gpu_note)
