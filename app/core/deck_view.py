"""Talk mode as a deck (app/core/deck.py's slides): the run's route to the slide's page, the
counter with its back and next buttons, the keys that press them, and each slide's takeaway on
its chart. Pages stay layout: they name their stage's sections (app.core.ui.on_stage) and hand
their takeaway's text (app/core/takeaways.py) to `takeaway`."""
from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from app.core import deck

SLIDE_KEY = "slide"          # the slide shown (1-based): the URL's `slide`
GOING_KEY = "_deck_going"    # the slide was just chosen: show its page
PAGE_SEEN_KEY = "_deck_page"  # the page the deck showed last
PAGE_KEY = "_page"           # url_path of the page being shown (app/main.py sets it)
KEYS_JS = (Path(__file__).resolve().parent / "deck_keys.js").read_text()


def go(number: int) -> None:
    """Callback of back and next (and of a talk preset): show slide `number`."""
    st.session_state[SLIDE_KEY] = deck.clamp(number)
    st.session_state[GOING_KEY] = True


def follow(page: str, talk: bool) -> str | None:
    """Before the page runs, in talk mode: the url_path of the chosen slide's page when that
    is another page (the caller switches to it), else None, the slide following a page
    reached from the menu (deck.route). Out of talk mode a slide chosen (by a link) is let
    go, and the deck starts afresh when talk mode comes back."""
    ss = st.session_state
    if not talk:
        ss.pop(GOING_KEY, None)
        ss.pop(PAGE_SEEN_KEY, None)
        return None
    number, switch_to = deck.route(ss.get(SLIDE_KEY) or deck.home_slide(page) or 1, page,
                                   ss.get(PAGE_SEEN_KEY), bool(ss.pop(GOING_KEY, False)))
    ss[SLIDE_KEY] = number
    ss[PAGE_SEEN_KEY] = switch_to or page
    return switch_to


def on_deck(page: str | None = None) -> bool:
    """Whether the page shown (or `page`) has a slide."""
    page = page or st.session_state.get(PAGE_KEY)
    return any(s.page == page for s in deck.SLIDES)


def current_section() -> str | None:
    """The section of the page shown that talk mode puts on its stage (None: the page's only
    one, or not in talk mode)."""
    ss = st.session_state
    if not ss.get("talk"):
        return None
    return deck.section(ss.get(SLIDE_KEY) or 1, ss.get(PAGE_KEY))


def bar() -> None:
    """The counter ("3 / 8" and the slide's title) between back and next, in the header's
    corner, with the keys that press them."""
    number = deck.clamp(st.session_state.get(SLIDE_KEY) or 1)
    shown = deck.slide(number)
    off = "" if on_deck() else " (not on this page)"
    with st.container(key="deck_bar", horizontal=True, vertical_alignment="center",
                      width="content", gap="small"):
        st.button("◀", key="deck_back", help="previous slide (← or Page Up)",
                  disabled=number <= 1, on_click=go, args=(number - 1,))
        st.markdown(f"**{deck.counter(number)}** · {html.escape(shown.title)}{off}")
        st.button("▶", key="deck_next", help="next slide (→ or Page Down)",
                  disabled=number >= len(deck.SLIDES), on_click=go, args=(number + 1,))
        st.html(f"<script>{KEYS_JS}</script>", unsafe_allow_javascript=True)


def takeaway(text: str, section: str | None = None) -> None:
    """In talk mode, the slide's point written over its chart (call it inside the stage, just
    before the chart); `section`: only when the stage shows that section."""
    if not text or not st.session_state.get("talk"):
        return
    if section is not None and section != current_section():
        return
    st.markdown(f'<div class="takeaway">{html.escape(text, quote=False)}</div>', unsafe_allow_html=True)
