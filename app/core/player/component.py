"""The loop player: a Streamlit component (static/, no build step, nothing fetched) that gets
every frame of one animation once and plays it in the browser: Play, pause, speed, ◀ ▶, a
slider and the arrow keys, with motion between steps, and, for a kernel's loop, the kernel
source beside the board with the lines of the phase running highlighted. It plays SRAM
tiling's loop, Online softmax's row, the Backward pass's loop, Decoding's merge and the Kernel
page's Hopper pipeline (frames.py's kinds). No rerun per frame: the page runs again only
when Play stops or a step by hand settles (the step comes back as the component's value, so
the page and the URL follow it).

The step is a page control of the URL (app/page_list.py): the browser writes it while playing;
a link with it opens the animation at that step."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import streamlit.components.v1 as components

from app.core.player.frames import (backward_frames, code_panel, home_step, lane_frames,
                                    loop_frames, merge_frames, row_frames)
from app.core.player.kernel_lines import BACKWARD_PHASES, kernel_lines
from app.core.sidebar import keep_page_control, write_page_control
from app.core.style import ALARM, DONE, INK, PENDING, TILE_COLORS

STATIC = Path(__file__).resolve().parent / "static"
_component = components.declare_component("loop_player", path=str(STATIC))

COLORS = {**TILE_COLORS, "done": DONE, "pending": PENDING, "alarm": ALARM, "ink": INK}


def spec_of(frames: dict, url_name: str, base: int = 1, code: dict | None = None,
            label: str = "step", compact: bool = False, home: int = 0) -> dict:
    """Everything the browser is sent: the frames, the kernel's source panel, the palette and
    the URL parameter that holds the step (its value is the 0-based step + base; the step
    `home`, where the animation opens without a link, is left out of the URL)."""
    return {**frames, "code": code, "colors": COLORS, "compact": compact,
            "url": {"name": url_name, "base": base, "label": label, "home": home}}


def signature(spec: dict) -> str:
    """Names one animation: the same frames give the same signature (the browser keeps its
    state across reruns while it holds)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True)
class Animation:
    """One animation as the browser is sent it: its spec (spec_of, shared: not to be
    modified), the spec's signature, and the mark whose change sends the player back to its
    first step (its reset mark). Built once, it can be shown in any number of runs (memoized by
    the page, e.g. by shape: app/core/memo.py) without building or hashing its frames again."""
    spec: dict
    sig: str
    reset: str


def animation(spec: dict, reset_on=None) -> Animation:
    """spec with its signature and its reset mark: the signature of `reset_on`, or of the
    frames when it is None (see play)."""
    sig = signature(spec)
    return Animation(spec, sig, signature({"reset_on": repr(reset_on)})
                     if reset_on is not None else sig)


def start_index(key: str, anim: Animation) -> int:
    """The step (0-based) the animation opens at: where the browser last stopped (its report,
    the component's value); after a change of its reset mark (default: of the frames) the
    first step (`home`), but on the page's first showing in this session the link's. A
    link's step past the last is the last."""
    ss = st.session_state
    spec, sig, mark = anim.spec, anim.sig, anim.reset
    url = spec["url"]
    home = url.get("home", 0)
    of_key, index_key, seen_key = f"{key}_of", f"{key}_index", f"{key}_seen"
    if ss.get(of_key) != mark:
        linked = ss.get(url["name"]) if of_key not in ss else None
        ss[of_key] = mark
        ss[index_key] = int(linked) - url["base"] if isinstance(linked, int) else home
    value = ss.get(f"{key}_player")
    if isinstance(value, dict) and value.get("sig") == sig and value != ss.get(seen_key):
        ss[seen_key] = value
        step = value.get("step")
        if isinstance(step, int) and not isinstance(step, bool):    # what a browser reports
            ss[index_key] = step
    ss[index_key] = min(max(int(ss[index_key]), 0), max(len(spec["frames"]) - 1, 0))
    return ss[index_key]


def play(key: str, spec: dict, reset_on=None) -> int:
    """Show the player for `spec` (spec_of) and return the step (0-based) it stands on as far
    as the server knows: the link's, or where the browser last stopped. A change of
    `reset_on` (default: of the frames) sends it back to the first step."""
    return play_animation(key, animation(spec, reset_on))


def play_animation(key: str, anim: Animation) -> int:
    """play() for an animation already built (animation(), loop_animation())."""
    spec, sig = anim.spec, anim.sig
    index = start_index(key, anim)
    url = spec["url"]
    keep_page_control(url["name"], index + url["base"], url.get("home", 0) + url["base"])
    _component(spec=spec, sig=sig, start=index, key=f"{key}_player", default=None)
    return index


@st.fragment
def play_animation_apart(key: str, anim: Animation) -> None:
    """play_animation() in a fragment of its own, for a page where nothing else depends on the
    step: a stop of the player (its one report) reruns the board and writes the URL, not the
    whole page."""
    play_animation(key, anim)
    write_page_control(anim.spec["url"]["name"])


def loop_animation(view, url_name: str, compact: bool = False) -> Animation:
    """The tile loop of a LoopView (app.features.sram_tiling.data) beside the teaching
    kernel's source. The step stays where it is while the grid's tiles do (so both loop
    orders can be compared at one step)."""
    frames = loop_frames(view.tiles, view.steps, view.rows, view.cols, view.order)
    grid = (view.rows, view.cols, tuple(c >= 0 for c in frames["cells"]))
    return animation(spec_of(frames, url_name, 1, code_panel(kernel_lines("teaching")),
                             "loop step", compact), reset_on=grid)


def play_row(key: str, rows, url_name: str, compact: bool = False) -> int:
    """One query row's online softmax over the key tiles (row_trace's table) played beside
    the teaching kernel's source; returns the key tile shown."""
    return play(key, spec_of(row_frames(rows), url_name, 0, code_panel(kernel_lines("teaching")),
                             "after key tile", compact))


def play_backward(key: str, view, url_name: str, compact: bool = False) -> int:
    """The backward loop of a BackwardLoop (app.features.backward.data: key tiles outer, the
    trace's values after each step) played beside the backward teaching kernel's source;
    returns the step shown (0-based)."""
    frames = backward_frames(view.tiles, view.steps, view.rows, view.cols)
    code = code_panel(kernel_lines("backward teaching"), BACKWARD_PHASES)
    return play(key, spec_of(frames, url_name, 1, code, "loop step", compact))


def play_merge(key: str, states, url_name: str, compact: bool = False) -> int:
    """Decoding's merge of one query row's splits (split_states' table), one split merged a
    step; returns the step shown (0-based: splits 0..step merged)."""
    return play(key, spec_of(merge_frames(states), url_name, 1, None, "splits merged", compact))


def play_lanes(key: str, table, lanes: list[str], end: float, paints: dict[str, str],
               url_name: str, tagged: tuple[str, ...] = (), title: str = "",
               home_t: float = 0.0) -> int:
    """Spans in lanes played over time (frames.lane_frames), one step per moment something
    starts; without a link it opens at model time `home_t`. Returns the step shown."""
    frames = lane_frames(table, lanes, end, paints, tagged, title)
    return play(key, spec_of(frames, url_name, 1, None, "moment", home=home_step(frames,
                                                                                 home_t)))
