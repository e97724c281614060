"""Talk mode's deck through Streamlit's AppTest: a link's ?talk=true&slide=N opens slide N's
page with the counter and the slide's takeaway on its stage; next and back walk the deck with
the config kept; a talk preset opens the slide that makes its point; a page reached from the
menu shows its own slide; out of talk mode there is no deck and no slide in the URL."""
from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from app.core import deck
from app.core.controls import CONTROLS, PRESETS
from apptest_helpers import MAIN, assert_clean, open_page, url

TAKEAWAY = '<div class="takeaway">'
TITLES = {row: title for row, title in [
    ("overview", "FlashAttention Lab"), ("timings", "Timings"), ("sram-tiling", "SRAM tiling"),
    ("online-softmax", "Online softmax"), ("backward", "Backward pass"),
    ("decoding", "Decoding"), ("precision", "Precision")]}


def _link(**params) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update({k: str(v) for k, v in params.items()})
    at.run()
    return at


def counter(at: AppTest) -> str:
    return next((m.value for m in at.markdown if " / " in m.value and "**" in m.value), "")


def takeaway(at: AppTest) -> str:
    found = [m.value for m in at.markdown if m.value.startswith(TAKEAWAY)]
    assert len(found) <= 1, found
    return html.unescape(found[0].removeprefix(TAKEAWAY).removesuffix("</div>")) if found else ""


@pytest.mark.parametrize("number", range(1, len(deck.SLIDES) + 1))
def test_a_slide_link_opens_that_slide_with_its_counter_and_takeaway(number):
    at = _link(talk="true", slide=number, heads=4)
    assert_clean(at)
    shown = deck.SLIDES[number - 1]
    assert at.title[0].value == TITLES[shown.page]
    assert counter(at) == f"**{deck.counter(number)}** · {shown.title}"
    assert takeaway(at), f"slide {number} has no takeaway"
    assert url(at) == {"talk": "true", "slide": str(number), "heads": "4"}


def test_the_takeaway_stands_above_the_slides_chart():
    """On the Timings page the stage shows the slide's section: the memory chart's takeaway on
    the memory-wall slide, the recorded speed's on the speed slide, never both."""
    memory, speed = _link(talk="true", slide=2), _link(talk="true", slide=7)
    assert takeaway(memory).startswith(("Naive hits", "No memory wall"))
    assert takeaway(speed).startswith("N = ") and "ms; the others take naive" in takeaway(speed)


def test_next_and_back_walk_the_deck_keeping_the_config():
    at = _link(talk="true", heads=4)
    assert counter(at).startswith(f"**1 / {len(deck.SLIDES)}**")
    assert at.button(key="deck_back").disabled
    for number in range(2, len(deck.SLIDES) + 1):
        at.button(key="deck_next").click().run()
        assert_clean(at)
        assert counter(at).startswith(f"**{deck.counter(number)}**"), number
        assert at.title[0].value == TITLES[deck.SLIDES[number - 1].page]
        assert url(at)["slide"] == str(number) and url(at)["heads"] == "4"
        assert at.toggle(key="talk").value is True
    assert at.button(key="deck_next").disabled
    at.button(key="deck_back").click().run()
    assert counter(at).startswith(f"**{deck.counter(len(deck.SLIDES) - 1)}**")
    assert at.title[0].value == "Timings"


POINTS = {"small and clear": "α < 1: the max moved at",
          "long context": "naive needs",
          "causal": "tiles skipped",
          "tiles too big for SRAM": "cannot launch"}


@pytest.mark.parametrize("preset", list(PRESETS))
def test_a_talk_preset_opens_the_slide_that_makes_its_point(preset):
    at = _link(talk="true")
    at.selectbox(key="_preset").set_value(preset).run()
    assert_clean(at)
    number = deck.PRESET_SLIDES[preset]
    assert counter(at).startswith(f"**{deck.counter(number)}**")
    assert POINTS[preset] in takeaway(at), takeaway(at)
    seq_q = url(at).get("seq_q", str(CONTROLS["seq_q"].default))   # the URL keeps the preset
    assert seq_q == str(PRESETS[preset]["seq_q"])


def test_a_page_from_the_menu_shows_its_home_slide():
    at = open_page("backward", talk="true")
    assert counter(at).startswith(f"**{deck.counter(deck.home_slide('backward'))}**")
    assert url(at)["slide"] == str(deck.home_slide("backward"))


def test_out_of_talk_mode_there_is_no_deck():
    at = _link(slide=3)
    assert_clean(at)
    assert counter(at) == "" and takeaway(at) == ""
    assert at.title[0].value == "FlashAttention Lab"
    assert "slide" not in url(at)
    at.toggle(key="talk").set_value(True).run()
    assert counter(at).startswith("**1 / ") and url(at)["slide"] == "1"


def test_a_tampered_slide_says_what_is_allowed():
    at = _link(talk="true", slide="12")
    assert any("slide must be a whole number from 1 to 8" in e.value for e in at.error)
    assert counter(at).startswith("**1 / ")
