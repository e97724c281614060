"""Talk mode's deck in a real browser (Chromium through Playwright, a server and browser as in
tests/test_browser.py: tests/conftest.py) at 1280×720: the arrow keys and Page Down/Up (what a
clicker sends) walk the whole deck and back with no mouse, every slide's main chart and
takeaway on the one screen; a slide's link reopens that slide; the arrows inside the loop
player step the player, not the deck."""
from __future__ import annotations

import pytest

from app.core import deck
from test_browser import TALK_FIRST_SCREEN, _assert_vega_clean, _new_page, _settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOWN = """() => {
    const bar = document.querySelector('.st-key-deck_bar');
    const take = document.querySelector('.takeaway');
    const r = take ? take.getBoundingClientRect() : null;
    return {counter: bar ? bar.innerText.replace(/\\s+/g, ' ') : '',
            takeaway: take ? take.innerText : '',
            inside: !!r && r.top >= 0 && r.bottom <= innerHeight + 1,
            title: (document.querySelector('h1') || {}).innerText || ''};
}"""


def _on_slide(page, number: int) -> dict:
    """Wait until the deck shows slide `number` and the run is over; what is on screen."""
    page.wait_for_function(
        f"() => (document.querySelector('.st-key-deck_bar') || {{}}).innerText"
        f"?.includes('{deck.counter(number)}')", timeout=90000)
    _settle(page)
    return page.evaluate(SHOWN)


def _fits(page, number: int) -> dict:
    """Slide `number` on one 1280×720 screen: its takeaway and main chart inside it."""
    got = _on_slide(page, number)
    first = page.evaluate(TALK_FIRST_SCREEN)
    where = f"slide {number} ({page.url})"
    assert got["takeaway"] and got["inside"], f"{where}: takeaway off screen: {got}"
    assert first["chart"] and first["chart"][2], f"{where}: chart at y = {first['chart']}"
    assert first["scrolled"] == 0, where
    assert page.locator('[data-testid="stException"]').count() == 0, where
    _assert_vega_clean(page, where)
    return got


def test_the_keys_walk_the_deck_and_back_and_a_slide_link_reopens_it(browser, server):
    page = _new_page(browser, viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{server}/overview?talk=true&heads=4")
        page.wait_for_selector("h1", timeout=30000)
        seen = {1: _fits(page, 1)}
        for number in range(2, len(deck.SLIDES) + 1):
            page.keyboard.press("ArrowRight" if number % 2 else "PageDown")
            seen[number] = _fits(page, number)
            assert f"slide={number}" in page.url and "heads=4" in page.url, page.url
            assert f"/{deck.SLIDES[number - 1].page}?" in page.url, page.url
        page.keyboard.press("ArrowRight")              # the last slide: nowhere to go
        page.wait_for_timeout(1500)
        assert page.evaluate(SHOWN)["counter"] == seen[len(deck.SLIDES)]["counter"]
        for number in range(len(deck.SLIDES) - 1, 0, -1):
            page.keyboard.press("ArrowLeft" if number % 2 else "PageUp")
            got = _on_slide(page, number)
            assert got["takeaway"] == seen[number]["takeaway"], number
        link = f"{server}/overview?talk=true&heads=4&slide=4"    # a link names its slide
        page.goto(link)
        got = _on_slide(page, 4)
        assert got["takeaway"] == seen[4]["takeaway"] and got["title"] == "Online softmax"
        assert "/online-softmax?" in page.url and "slide=4" in page.url
    finally:
        page.close()


def test_the_arrows_inside_the_loop_player_step_it_not_the_deck(browser, server):
    page = _new_page(browser, viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{server}/sram-tiling?talk=true&slide=3")
        page.wait_for_selector("h1", timeout=30000)
        _on_slide(page, 3)
        player = page.frame_locator('iframe[title*="loop_player"]')
        player.locator(".player").focus()
        count = player.locator(".count")
        before = count.inner_text()
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(1500)
        assert count.inner_text() != before              # the player stepped
        assert deck.counter(3) in page.evaluate(SHOWN)["counter"]    # the deck did not
        assert "/sram-tiling?" in page.url
    finally:
        page.close()
