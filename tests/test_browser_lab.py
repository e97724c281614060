"""The classroom lab in a real browser (Chromium through Playwright, a server and browser as in
tests/test_browser.py: tests/conftest.py): a teacher's link at 1280×720 shows its card; a
student's unreadable, wrong and right answers come back as a message and verdicts; the
sidebar's link opens the page of the link's other card with the config kept."""
from __future__ import annotations

import re

import pytest

from test_browser import _new_page, _settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LINK = "online-softmax?heads=4&inputs=rising&cards=online_softmax.alpha,tile_sizes.fit"


def _check(page, typed: str) -> str:
    """Type an answer to the page's number card, press Check, return the verdict's text."""
    box = page.get_by_label("your answer (a number)")
    box.fill(typed)
    page.get_by_role("button", name="Check").click()
    _settle(page)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text=re.compile(
        r"Right\.|Not quite\.|not a number"))
    alert.first.wait_for(timeout=30000)
    return alert.first.inner_text()


def test_a_student_answers_a_linked_card_and_follows_the_link_to_the_next(browser, server):
    page = _new_page(browser, viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{server}/{LINK}")
        page.wait_for_selector("h1", timeout=30000)
        _settle(page)
        body = page.inner_text("body")
        assert "Predict the rescale factor α" in body
        assert "Does exp(s) overflow" not in body          # not linked
        assert "not a number" in _check(page, "abc")
        wrong = _check(page, "2")
        true = re.search(r"the true value is (-?\d+(?:\.\d+)?(?:e-?\d+)?)", wrong).group(1)
        assert "Right." in _check(page, true)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert "cards=online_softmax.alpha" in page.url and "heads=4" in page.url
        page.get_by_role("link", name=re.compile(r"Tile sizes: 0 of 1 answered")).click()
        page.wait_for_url(re.compile(r"/tile-sizes"), timeout=60000)
        page.wait_for_selector("h1", timeout=30000)
        _settle(page)
        body = page.inner_text("body")
        assert "Which tiles fit this GPU's shared memory?" in body
        assert "1 of 2 linked cards answered, 1 right" in body
        assert "heads=4" in page.url and "cards=" in page.url
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()
