"""A real browser: start the app headless, open every page in Debian's Chromium (Playwright),
check that nothing raised and the charts are drawn, move a step slider and check the chart
changes, follow a link's page controls into the page and back into the URL, and save a
screenshot of each page (docs/screenshots/ with FA_LAB_SCREENSHOTS=1)."""
from __future__ import annotations

import os
import re
import time

import pytest

from app_server import CHROMIUM, CHROMIUM_ARGS, ROOT, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Screenshots go to docs/screenshots/ (README shows them) only when asked for with
# FA_LAB_SCREENSHOTS=1; otherwise to tests/artifacts/ (ignored by git), so a test run never
# rewrites tracked files.
SHOTS = (ROOT / "docs" / "screenshots" if os.environ.get("FA_LAB_SCREENSHOTS") == "1"
         else ROOT / "tests" / "artifacts" / "screenshots")
# screenshot name -> (url path, draws a chart: from the config, or from what benchmarks/results/
# holds — the Kernel page draws its recorded schedule)
PAGES = {"overview": ("", False), "sram-tiling": ("sram-tiling", True),
         "online-softmax": ("online-softmax", True), "timings": ("timings", True),
         "kernel": ("kernel", True), "downloads": ("downloads", False),
         "backward": ("backward", True), "tile-sizes": ("tile-sizes", True)}
CHART = ".vega-embed canvas, .vega-embed svg"


@pytest.fixture(scope="module")
def server():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with serve() as (base, _proc):
        yield base


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


SETTLED = """() => {
    const block = document.querySelector('[data-testid="stMainBlockContainer"]');
    const charts = [...document.querySelectorAll('.vega-embed')];
    const running = document.querySelector('[data-testid="stStatusWidget"]');
    return [block ? block.scrollHeight : 0, charts.length,
            charts.filter(e => e.querySelector('canvas, svg')).length, !!running].join();
}"""


def _settle(page, quiet_polls: int = 4, timeout_s: float = 60):
    """Wait until the script run is over: no status widget, every chart drawn, and the
    page's height and chart count unchanged for a few polls."""
    last, same, deadline = None, 0, time.time() + timeout_s
    while time.time() < deadline:
        now = page.evaluate(SETTLED)
        height, charts, drawn, running = now.split(",")
        same = same + 1 if now == last and charts == drawn and running == "false" else 0
        if same >= quiet_polls:
            return int(height)
        last = now
        page.wait_for_timeout(400)
    raise AssertionError(f"the page did not settle: {last}")


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(url)
    page.wait_for_selector("h1", timeout=30000)
    _settle(page)
    return page


@pytest.mark.parametrize("name", list(PAGES))
def test_page_renders_without_exception(browser, server, name):
    path, has_charts = PAGES[name]
    page = _open(browser, f"{server}/{path}")
    try:
        if has_charts:
            assert page.locator(CHART).count() > 0
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert "Page not found" not in page.inner_text("body")
        if name in ("sram-tiling", "backward"):    # show the loop mid-way in the README's picture
            slider = page.locator(".vega-bind input[type=range]").first
            slider.fill(str(int(slider.get_attribute("max")) // 2 + 1))
        # Streamlit scrolls inside its main block: grow the window to the content, then shoot.
        height = _settle(page, quiet_polls=1)
        page.set_viewport_size({"width": 1600, "height": min(max(height + 200, 1000), 6000)})
        _settle(page)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"))
    finally:
        page.close()


@pytest.mark.parametrize("path", ["sram-tiling", "online-softmax", "backward"])
def test_step_slider_changes_chart(browser, server, path):
    page = _open(browser, f"{server}/{path}")
    try:
        page.wait_for_selector(CHART, timeout=30000)
        slider = page.locator(".vega-bind input[type=range]").first
        embed = page.locator(".vega-embed").filter(has=slider).first
        before = embed.screenshot()
        top = slider.get_attribute("max")
        slider.fill("1" if slider.input_value() != "1" else top)
        after, deadline = before, time.time() + 10      # redrawn within a frame or two
        while after == before and time.time() < deadline:
            page.wait_for_timeout(250)
            after = embed.screenshot()
        assert slider.input_value() in ("1", top)
        assert before != after, "moving the step slider did not change the chart"
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


def test_tampered_url_shows_error_not_exception(browser, server):
    page = _open(browser, f"{server}/?seq_q=1e12&block_q=-3&dtype=evil")
    try:
        errors = page.locator('[data-testid="stAlertContentError"]')
        errors.first.wait_for(timeout=30000)
        text = " ".join(errors.all_inner_texts())
        assert "seq_q" in text and "block_q" in text and "dtype" in text
        assert "float16" in text          # says what is allowed
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


def test_page_control_link_round_trip(browser, server):
    page = _open(browser, f"{server}/online-softmax?heads=4&sm_head=3&sm_row=100")
    try:
        assert page.get_by_label("query row").input_value() == "100"
        assert page.get_by_label("head index").input_value() == "3"
        assert "Row 100 sits in query tile Q_1" in page.inner_text("body")
        box = page.get_by_label("query row")
        box.fill("7")
        box.press("Enter")
        page.wait_for_url(re.compile(r"[?&]sm_row=7(&|$)"), timeout=60000)
        _settle(page)
        assert "Row 7 sits in query tile Q_0" in page.inner_text("body")
        assert "sm_head=3" in page.url and "heads=4" in page.url
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


def test_tile_sizes_click_on_a_cell_sets_the_tiles(browser, server):
    """A click on a heatmap cell makes its (block_q, block_k) the config: the URL and the
    sidebar follow. The shared-memory heatmap is the page's first chart: block_k across,
    block_q down, five sizes each; the click goes to the cell of the last column, first row."""
    page = _open(browser, f"{server}/tile-sizes?block_q=64&block_k=64")
    try:
        embed = page.locator(".vega-embed").first
        embed.scroll_into_view_if_needed()
        box = embed.locator("canvas, svg").first.bounding_box()
        # the plot area: 380 × 304 px (app/charts_tiles.py), after the y axis (about 55 px)
        # and under the title (about 25 px); Vega pads the view by 5 px
        x = box["x"] + 5 + 55 + 380 * 0.9
        y = box["y"] + 5 + 25 + 304 * 0.1
        page.mouse.click(x, y)
        page.wait_for_url(re.compile(r"[?&]block_q=8(&|$)"), timeout=60000)
        assert re.search(r"[?&]block_k=128(&|$)", page.url), page.url
        _settle(page)
        boxes = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]')
        shown = {label: boxes.filter(has_text=label).first.evaluate(
            "e => [...e.querySelectorAll('input')].map(n => n.value).filter(v => v)")
            for label in ("block_q (Br)", "block_k (Bc)")}
        assert shown == {"block_q (Br)": ["8"], "block_k (Bc)": ["128"]}, shown
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()
