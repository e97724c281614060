"""The classroom lab on screen: a page's question cards (app/core/cards.py), each answered in
a form (nothing reruns while the student types) and graded when Check is pressed, with the
verdict and its explanation below; the lab's progress line; a teacher's link to a set of
cards with this config; and the sidebar's list of a link's cards.

Progress and verdicts live in st.session_state only (this browser session): nothing is
stored on the server."""
from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import streamlit as st

from app.core import sidebar
from app.core.cards import (CARDS_PARAM, CATALOG, CHOICE, MAX_ANSWER_CHARS, NONE_FIT, NUMBER,
                            PRIVACY_NOTE, Card, Record, check, link_text, progress_line,
                            tile_text)
from app.page_list import PAGES

LINK_KEY = sidebar.CARDS_KEY      # the teacher's card ids from the URL (a tuple)
PROGRESS_KEY = "_lab_progress"    # card id -> cards.Record
VERDICTS_KEY = "_lab_verdicts"    # card id -> (the card's fingerprint, cards.Verdict)
TITLES = {row.feature: row.title for row in PAGES}


def answer_key(card: Card) -> str:
    """The session-state key of a card's answer widget."""
    return f"lab_{card.id}_answer"


def check_key(card: Card) -> str:
    """The key of a card's Check button."""
    return f"lab_{card.id}_check"


def linked() -> tuple:
    """The card ids a teacher's link names (empty when none)."""
    return tuple(st.session_state.get(LINK_KEY, ()))


def _records() -> dict:
    return st.session_state.setdefault(PROGRESS_KEY, {})


def _grade(card: Card) -> None:
    """Check's callback (it runs before the rerun, so every progress line of that run is
    already up to date): grade the answer, keep the verdict, count a graded answer."""
    ss = st.session_state
    verdict = check(card, ss.get(answer_key(card)))
    ss.setdefault(VERDICTS_KEY, {})[card.id] = (card.fingerprint(), verdict)
    if verdict.graded:
        before = _records().get(card.id)
        _records()[card.id] = Record((before.attempts if before else 0) + 1, verdict.correct)


def show(cards: list[Card]) -> None:
    """Draw a page's cards: those a teacher's link names, else all of them; nothing when the
    link names none of this page's, nor in talk mode without a link (the projector's page
    stays the talk's)."""
    chosen = linked()
    shown = [c for c in cards if not chosen or c.id in chosen]
    if not shown or (sidebar.talk_requested() and not chosen):
        return
    st.subheader("Classroom lab: check yourself")
    st.caption("Questions about this config and this run: answer, press **Check**, and the "
               "app grades the answer against the run's trace or the model and explains it. "
               + PRIVACY_NOTE)
    line = progress_line(_records(), chosen or None)
    if line:
        st.markdown(line)
    for n, card in enumerate(shown, 1):
        _card(n, card)
    if not chosen:
        _teacher_link([c.id for c in cards])


def _card(n: int, card: Card) -> None:
    text = f"**{n}. {card.title}**\n\n{card.question}"
    if card.truth is None:
        with st.container(border=True):
            st.markdown(text)
            st.info(card.unavailable)
        return
    with st.form(f"lab_{card.id}_form"):        # the card's frame: typing reruns nothing
        st.markdown(text)
        _answer_widget(card)
        st.form_submit_button("Check", key=check_key(card), on_click=_grade,
                              args=(card,), type="primary")
        _verdict(card)


def _answer_widget(card: Card) -> None:
    key = answer_key(card)
    if card.kind == NUMBER:
        st.text_input("your answer (a number)", key=key, max_chars=MAX_ANSWER_CHARS,
                      placeholder="e.g. 0.75, 12 or 1,024")
    elif card.kind == CHOICE:
        words = dict(card.options)
        st.radio("your answer", list(words), index=None, format_func=words.get, key=key)
    else:
        st.multiselect("your answer: every shape that fits", [*card.options, NONE_FIT],
                       format_func=lambda t: "none of them" if t == NONE_FIT else tile_text(t),
                       key=key, placeholder="pick block_q × block_k shapes")


def _verdict(card: Card) -> None:
    got = st.session_state.get(VERDICTS_KEY, {}).get(card.id)
    if got is None:
        return
    fingerprint, verdict = got
    if fingerprint != card.fingerprint():
        st.caption("Your last answer to this card was for another config or row: answer "
                   "again for this one.")
    elif not verdict.graded:
        st.warning(verdict.explanation)
    elif verdict.correct:
        st.success(verdict.explanation, icon="✅")
    else:
        st.error(verdict.explanation, icon="❌")


def _card_label(card_id: str) -> str:
    return f"{TITLES[card_id.split('.', 1)[0]]}: {CATALOG[card_id]}"


def teacher_link(ids, url_path: str, params: dict, base: str = "") -> str:
    """The link that opens /url_path with `params` (the config) and only cards `ids`."""
    query = {k: v for k, v in params.items() if k != CARDS_PARAM}
    if ids:
        query[CARDS_PARAM] = link_text(ids)
    return f"{base}/{url_path}" + (f"?{urlencode(query, safe=',')}" if query else "")


def _app_address() -> str:
    """scheme://host of the app as the browser sees it ("" where unknown)."""
    try:
        parts = urlsplit(st.context.url or "")
    except Exception:          # no browser behind this run (a test): a relative link
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _teacher_link(page_ids: list[str]) -> None:
    """A toggle; its link is built only while it is on (a page's every rerun would otherwise
    pay for the card picker and the link, which only a teacher opens)."""
    url_path = st.session_state.get(sidebar.PAGE_KEY, "")
    if not st.toggle("For teachers: link a set of cards with this config",
                     key=f"lab_teacher_{url_path}"):
        return
    chosen = st.multiselect("cards the link shows", list(CATALOG), default=page_ids,
                            format_func=_card_label, key=f"lab_link_{url_path}")
    st.code(teacher_link(chosen, url_path, sidebar.url_wanted(player_steps=False),
                         _app_address()), language=None)
    st.caption("The link opens this page with this config (every sidebar setting and "
               "this page's own controls but an animation's step, which each student "
               "plays) and shows only the chosen cards, on their "
               "pages; the sidebar lists them with each student's progress. Answers and "
               "progress stay in each student's browser session.")


def sidebar_panel(where) -> None:
    """In `where` (a container at the top of the sidebar): the lab's progress and, for a
    teacher's link, its cards by page with links to those pages. Nothing before the first
    answer when no link names cards."""
    chosen = linked()
    line = progress_line(_records(), chosen or None)
    if not line:
        return
    with where:
        st.markdown("**Classroom lab**")
        st.caption(line)
        for row in PAGES:
            ids = [i for i in chosen if i.split(".", 1)[0] == row.feature]
            if ids:
                done = sum(i in _records() for i in ids)
                st.page_link(row.script, label=f"{row.title}: {done} of {len(ids)} answered")
