"""A real browser: start the app headless, open every page in Debian's Chromium (Playwright),
check that nothing raised and the charts are drawn, play every animation in the browser with
no message to the server, step a Vega slider and check the chart changes,
follow a link's page controls into the page and back into the URL, check every page is
legible at 1280×720 and 1500 px wide (no sideways scroll, no chart cut off, no overlapping
elements), that no page logs a Vega warning or error and no chart is drawn without its marks
(axes and no bars), with and without talk mode, and capture every page: at full length 1600 px wide (full/), at 1280×720 (1280/)
and in talk mode (talk/), in the capture folder, never in the repository (CAPTURES below).
scripts/update_screenshots.sh copies them, made small, into docs/screenshots/ on purpose."""
from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest

from app_server import ROOT
import engine
from app import page_list
from app.features.tile_sizes.charts import HEATMAP_SIZE

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Captures go to $FA_LAB_CAPTURE_DIR, else to fa-lab-captures in the system's temp folder:
# outside the repository, so a test run never writes a tracked or an untracked file there.
CAPTURES = Path(os.environ.get("FA_LAB_CAPTURE_DIR")
                or Path(tempfile.gettempdir()) / "fa-lab-captures")
SHOTS = CAPTURES / "full"
# screenshot name (the url path) -> (url path, draws a chart: from the config, or from what
# benchmarks/results/ holds — the Kernel page draws its recorded schedule), from app/page_list.py
PAGES = {row.url_path: (row.url_path, row.browser_chart) for row in page_list.PAGES}
CHART = ".vega-embed canvas, .vega-embed svg"


def test_captures_stay_outside_the_repository():
    """Unless FA_LAB_CAPTURE_DIR names another folder, a run writes nothing in the checkout
    (docs/screenshots/ changes only through scripts/update_screenshots.sh)."""
    if os.environ.get("FA_LAB_CAPTURE_DIR"):
        pytest.skip("FA_LAB_CAPTURE_DIR chooses the folder")
    assert ROOT.resolve() not in CAPTURES.resolve().parents, CAPTURES


# `server` (one per test process) and `browser` (one per browser test file in a process: this
# file, test_browser_deck.py, test_browser_lab.py) are in tests/conftest.py. Under
# pytest-xdist (scripts/test.sh) this file's tests go out in four groups, each run whole by
# one worker (tests/conftest.py, group_of).


# The page is settled when Streamlit says its script run is over and the browser has drawn it
# all: the app connected and its script state "notRunning" (the attribute Streamlit's own
# browser tests wait on), no status widget or spinner (a cached computation in progress), no
# element still loading (a skeleton) or left from the last run (stale), every Vega chart
# drawn, every component frame loaded; and then nothing in the page's DOM changed, and the
# window was not resized, for `quiet_ms` (a MutationObserver's clock, installed by the first
# call on a page: a chart redrawn, a frame resized, a late rerun all restart it). Returns the
# main block's height once settled, else (as text) what is still missing.
SETTLED = """quietMs => {
    if (window.__faLastChange === undefined) {
        window.__faLastChange = performance.now();
        const touch = () => { window.__faLastChange = performance.now(); };
        new MutationObserver(touch).observe(document, {subtree: true, childList: true,
                                                       attributes: true, characterData: true});
        window.addEventListener('resize', touch);
    }
    const app = document.querySelector('[data-testid="stApp"]');
    const block = document.querySelector('[data-testid="stMainBlockContainer"]');
    const charts = [...document.querySelectorAll('.vega-embed')];
    const drawn = charts.filter(e => e.querySelector('canvas, svg')).length;
    const busy = [...document.querySelectorAll('[data-testid="stStatusWidget"], '
        + '[data-testid="stSpinner"], [data-testid="stSkeleton"], [data-stale="true"]')];
    const frames = [...document.querySelectorAll('iframe')].filter(f => {
        try { return f.contentDocument && f.contentDocument.readyState !== 'complete'; }
        catch (e) { return false; } });
    const quiet = Math.round(performance.now() - window.__faLastChange);
    const state = app ? `${app.dataset.testScriptState}/${app.dataset.testConnectionState}`
                      : 'no app';
    if (state === 'notRunning/CONNECTED' && block && !busy.length && drawn === charts.length
            && !frames.length && quiet >= quietMs)
        return block.scrollHeight;
    return `script ${state}, busy ${busy.map(e => e.dataset.testid || 'stale')}, `
        + `charts drawn ${drawn}/${charts.length}, frames loading ${frames.length}, `
        + `quiet ${quiet} ms`;
}"""


def _url_has(page, frame, param: str, value: str, timeout_ms: int = 10000) -> bool:
    """Whether the page's URL shows the player's step `value` within timeout_ms: param=value,
    or no param at all where value is the step the player opens at without a link (its
    data-home), which the URL leaves out. The app writes its query string after the rerun
    that a Pause sends, so a loaded machine may show it a moment after the page settled."""
    if value == frame.evaluate("() => document.body.dataset.home"):
        pattern = re.compile(rf"^(?!.*[?&]{param}=).*$")
    else:
        pattern = re.compile(rf"[?&]{param}={value}(&|$)")
    try:
        page.wait_for_url(pattern, timeout=timeout_ms)
    except Exception:           # Playwright's TimeoutError
        return False
    return True


def _url_follows(page, param: str, timeout_ms: int = 10000) -> bool:
    """Whether the URL shows a step of the playing player (param=<step>) within timeout_ms.
    The player writes the URL at most every few hundred ms and leaves out the step it opens
    at (its data-home), so on a loaded machine the URL read at one moment of Play may still
    show the step before, or that home step, which it names by no param at all."""
    try:
        page.wait_for_url(re.compile(rf"[?&]{param}=\d+(&|$)"), timeout=timeout_ms)
    except Exception:           # Playwright's TimeoutError
        return False
    return True


def _settle(page, quiet_ms: int = 600, timeout_s: float = 60) -> int:
    """Wait until the script run is over and the page drawn and still (SETTLED); the main
    block's height."""
    deadline = time.time() + timeout_s
    while True:
        got = page.evaluate(SETTLED, quiet_ms)
        if isinstance(got, int):
            return got
        if time.time() > deadline:
            raise AssertionError(f"the page did not settle: {got}")
        page.wait_for_timeout(100)


# ---- Vega's own complaints and empty charts ----------------------------------------------
# Vega logs through the console as "WARN <message>" or "ERROR <message>" (vega-util's logger)
VEGA_LOG = re.compile(r"^(WARN|ERROR)\b|vega", re.IGNORECASE)

# Per chart: its title, whether Vega drew it as SVG and shown, and how many items of its data
# marks (Vega's SVG gives each mark a group of class role-mark; axes, legends, headers and
# titles have other roles) are drawn with some extent: a line, rule or text in either
# direction, a bar, area or symbol in both. A bar that starts at log(0) is drawn as
# "M0,1h0v18h0Z": a chart of those shows its axes and labels and nothing else. A canvas chart
# (Streamlit picks canvas for large data) keeps its marks out of the DOM, and a chart in a
# closed expander has no layout: neither is counted.
MARKS = """() => [...document.querySelectorAll('.vega-embed')].map(e => {
    const svg = e.querySelector('svg.marks');
    const title = [...((svg || e).querySelectorAll('.role-title-text text, .role-title-text'))]
                  .map(t => t.textContent).find(t => t) || e.getAttribute('aria-label') || '';
    if (!svg || !svg.checkVisibility() || !svg.getBoundingClientRect().width)
        return {title, shown: false, items: 0, drawn: 0};
    const thin = /\\bmark-(rule|line|trail|text)\\b/;
    let items = 0, drawn = 0;
    for (const group of svg.querySelectorAll('g.role-mark')) {
        const either = thin.test(group.getAttribute('class'));
        for (const item of group.children) {
            items += 1;
            const b = item.getBBox ? item.getBBox() : {width: 0, height: 0};
            const w = Number.isFinite(b.width) && b.width > 0;
            const h = Number.isFinite(b.height) && b.height > 0;
            if (either ? (w || h) : (w && h)) drawn += 1;
        }
    }
    return {title, shown: true, items, drawn};
})"""


def _new_page(browser, viewport: dict):
    """A page of the file's browser context (tests/conftest.py), `viewport` wide and high,
    that keeps Vega's console warnings and errors in `page.vega_log`."""
    page = browser.new_page()
    page.set_viewport_size(viewport)
    page.vega_log = []
    page.on("console", lambda msg: page.vega_log.append(f"{msg.type}: {msg.text}")
            if msg.type in ("warning", "error") and VEGA_LOG.search(msg.text) else None)
    return page


def _assert_vega_clean(page, where: str, charts: bool = True) -> None:
    """No Vega warning or error in the console so far, and (with `charts`) every chart
    drawn with some of its marks."""
    assert not page.vega_log, f"{where}: Vega logged {page.vega_log}"
    if charts:
        empty = [f"chart {i + 1} ({c['title'] or 'untitled'})" for i, c in enumerate(page.evaluate(MARKS))
                 if c["shown"] and c["drawn"] == 0]
        assert not empty, f"{where}: charts drawn with axes but no marks: {empty}"


# what a page's full-length capture shows (the backward loop mid-way)
CAPTURE_QUERY = {"backward": "?bw_step=9"}


def _open(browser, url: str):
    page = _new_page(browser, viewport={"width": 1600, "height": 1000})
    page.goto(url)
    page.wait_for_selector("h1", timeout=30000)
    _settle(page)
    return page


def test_every_page_url_opens_its_page(browser, server):
    """Every URL the app names opens its page with no "Page not found" and no Vega warning:
    the root and each page's url_path (the Overview's "/overview" included); the root,
    "/overview" and the pages without a chart in talk mode too, whose query parameters
    survive the root's hop to "/overview". Each page's own url_path, as it is, at 1280×720,
    is the first screen of test_page_renders_and_is_legible_at_projector_sizes, which checks
    the same (and more) there: this test opens the URLs that one does not."""
    from app.core import navigation
    paths = navigation.url_paths()
    legible = {path for path, _ in PAGES.values()}      # opened there, as they are, at 1280×720
    assert "overview" in paths and set(paths) >= legible and legible <= set(VARIANTS.values())
    # talk mode: the root and "/overview", and the pages without a chart (the talk-mode test
    # below opens those with one)
    talk = ["", "overview"] + [path for path, draws in PAGES.values()
                               if not draws and path != "overview"]
    visits = ([(p, "") for p in paths if p not in legible]
              + [(p, "?talk=true&seq_q=512") for p in talk])
    for path, query in visits:
        talk = bool(query)
        page = _new_page(browser, viewport={"width": 1280, "height": 720})
        try:
            page.goto(f"{server}/{path}{query}")
            page.wait_for_selector("h1", timeout=30000)
            _settle(page)
            assert "Page not found" not in page.inner_text("body"), f"/{path}{query}"
            assert page.locator('[data-testid="stException"]').count() == 0, f"/{path}{query}"
            if talk:
                assert "talk=true" in page.url and "seq_q=512" in page.url, (path, page.url)
            if path == "":
                assert page.url.split("?")[0].endswith("/overview"), page.url
            _assert_vega_clean(page, f"/{path}{query}")
        finally:
            page.close()


# ---- the loop player: the animation runs in the browser (app/core/player/) ----------------
PLAYER = 'iframe[title*="loop_player"]'
# Samples the board (its SVG, the phase and the source's highlight) every 50 ms for `ms`, in
# the player's own frame, and counts how often it changed.
BOARD_CHANGES = """ms => new Promise(done => {
    const look = () => document.querySelector('svg').innerHTML + '|' + document.body.dataset.phase
        + '|' + [...document.querySelectorAll('.ln.hl')].length;
    let last = look(), changes = 0;
    const t0 = performance.now();
    const id = setInterval(() => {
        const now = look();
        if (now !== last) { changes += 1; last = now; }
        if (performance.now() - t0 >= ms) { clearInterval(id); done(changes); }
    }, 50);
})"""


def _player(page):
    """The player's frame, once it has drawn its frames."""
    page.wait_for_selector(PLAYER, timeout=60000)      # a busy machine draws it late
    frame = page.locator(PLAYER).element_handle().content_frame()
    frame.wait_for_selector("button.play", timeout=60000)
    return frame


def _sent(page) -> list:
    """Every websocket message the page sends to the server from now on (a rerun is one)."""
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
    return sent


def test_play_runs_in_the_browser_without_a_rerun(browser, server):
    """A link with sram_step opens the board there; during 3 s of Play the board changes at
    least 20 times while the browser sends the server nothing, the URL follows the step, and
    Pause reports the step once; the arrow keys step inside the player."""
    page = _new_page(browser, viewport={"width": 1280, "height": 900})
    sent = _sent(page)
    try:
        page.goto(f"{server}/sram-tiling?sram_step=3")
        page.wait_for_selector("h1", timeout=30000)
        frame = _player(page)
        _settle(page)
        assert frame.evaluate("() => document.body.dataset.step") == "3"
        before = len(sent)
        frame.click("button.play")
        changes = frame.evaluate(BOARD_CHANGES, 3000)
        during = len(sent) - before
        step = int(frame.evaluate("() => document.body.dataset.step"))
        assert changes >= 20, f"the board changed {changes} times in 3 s of Play"
        assert during == 0, f"the browser sent the server {during} messages while playing"
        assert step > 3, (step, page.url)
        assert _url_follows(page, "sram_step"), (step, page.url)
        frame.click("button.play")                            # pause: the step goes back once
        page.wait_for_timeout(1500)
        _settle(page)
        stopped = frame.evaluate("() => document.body.dataset.step")
        assert _url_has(page, frame, "sram_step", stopped), (stopped, page.url)
        assert 1 <= len(sent) - before <= 3, len(sent) - before
        frame.locator(".player").focus()
        page.keyboard.press("ArrowRight")
        assert frame.evaluate("() => document.body.dataset.step") == str(int(stopped) + 1)
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        assert frame.evaluate("() => document.body.dataset.step") == str(int(stopped) - 1)
        assert frame.locator(".ln.hl").count() > 0            # the kernel's lines of the step
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


# page -> the URL parameter of its player's step, and whether the player shows kernel lines
PLAYED = {"backward": ("bw_step", True), "decoding": ("dec_step", False),
          "kernel": ("hopper_step", False)}


@pytest.mark.parametrize("path", list(PLAYED))
def test_backward_decoding_and_hopper_play_in_the_browser_without_a_rerun(browser, server,
                                                                          path):
    """During 3 s of Play the board changes at least 20 times while the browser sends the
    server nothing, and the URL follows the step; Pause reports the step once; the URL's step
    opened in a new tab shows the same step. On the Backward page the backward kernel's lines
    of the phase running are highlighted."""
    param, lines = PLAYED[path]
    page = _new_page(browser, viewport={"width": 1280, "height": 900})
    sent = _sent(page)
    try:
        page.goto(f"{server}/{path}?{param}=2")
        page.wait_for_selector("h1", timeout=30000)
        frame = _player(page)
        _settle(page)
        page.locator(PLAYER).evaluate("e => e.scrollIntoView({block: 'center'})")
        assert frame.evaluate("() => document.body.dataset.step") == "2"
        before = len(sent)
        frame.click("button.play")
        if lines:                                             # the phase running, lit
            page.wait_for_timeout(300)
            # the player moves on while the page is read: read the phase and its lit lines in
            # one script call, so both come from one frame
            phase, lit = frame.evaluate("""() => [document.body.dataset.phase,
                [...document.querySelectorAll('.ln.hl .tx')].map(e => e.innerText)]""")
            assert phase and lit and any(f"[phase {phase}]" in t for t in lit), (phase, lit)
        changes = frame.evaluate(BOARD_CHANGES, 3000)
        during = len(sent) - before
        step = int(frame.evaluate("() => document.body.dataset.step"))
        assert changes >= 20, f"/{path}: the board changed {changes} times in 3 s of Play"
        assert during == 0, f"/{path}: the browser sent the server {during} messages playing"
        assert step > 2, (step, page.url)
        assert _url_follows(page, param), (step, page.url)
        frame.click("button.play")                            # pause: the step goes back once
        page.wait_for_timeout(1500)
        _settle(page)
        stopped = frame.evaluate("() => document.body.dataset.step")
        assert _url_has(page, frame, param, stopped), (stopped, page.url)
        assert 1 <= len(sent) - before <= 3, len(sent) - before
        assert (frame.locator(".ln.hl").count() > 0) == lines
        assert page.locator('[data-testid="stException"]').count() == 0
        link = page.url
    finally:
        page.close()
    again = _new_page(browser, viewport={"width": 1280, "height": 900})
    try:
        again.goto(link)
        again.wait_for_selector("h1", timeout=30000)
        frame = _player(again)
        assert frame.evaluate("() => document.body.dataset.step") == stopped, link
        assert again.locator('[data-testid="stException"]').count() == 0
    finally:
        again.close()


def test_online_softmax_plays_from_tile_0(browser, server):
    page = _new_page(browser, viewport={"width": 1280, "height": 900})
    try:
        page.goto(f"{server}/online-softmax?inputs=rising")
        page.wait_for_selector("h1", timeout=30000)
        frame = _player(page)
        assert frame.evaluate("() => document.body.dataset.step") == "0"
        frame.click("button.play")
        page.wait_for_timeout(1200)
        assert int(frame.evaluate("() => document.body.dataset.step")) >= 1
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        page.close()


@pytest.mark.parametrize("path", ["online-softmax"])
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
        # the plot area: HEATMAP_SIZE × 0.8 of it (app/features/tile_sizes/charts.py), after the
        # y axis (about 55 px) and under the title (about 25 px); Vega pads the view by 5 px
        x = box["x"] + 5 + 55 + HEATMAP_SIZE * 0.9
        y = box["y"] + 5 + 25 + int(HEATMAP_SIZE * 0.8) * 0.1
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


# ---- legible at 1280×720 and 1500 px ----------------------------------------------------
SIZES = {"1280x720": (1280, 720), "1500x900": (1500, 900)}
SHOTS_1280 = CAPTURES / "1280"
SHOTS_TALK = CAPTURES / "talk"

LAYOUT = """() => {
    const vw = window.innerWidth;
    const box = e => { const r = e.getBoundingClientRect();
                       return {x: r.left, y: r.top, r: r.right, b: r.bottom,
                               w: r.width, h: r.height}; };
    const scrollers = [document.documentElement,
                       ...document.querySelectorAll('[data-testid="stMain"], '
                                                   + '[data-testid="stMainBlockContainer"], '
                                                   + '[data-testid="stAppViewContainer"]')];
    const sideways = scrollers.filter(e => e.scrollWidth > e.clientWidth + 1)
        .map(e => `${e.dataset.testid || e.tagName}: ${e.scrollWidth} > ${e.clientWidth}`);
    const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(c => {
        const drawn = c.querySelector('.vega-embed canvas, .vega-embed svg');
        return {outer: box(c), drawn: drawn ? box(drawn) : null,
                title: (c.querySelector('.vega-embed') || c).getAttribute('aria-label') || ''};
    });
    const leaves = [...document.querySelectorAll('[data-testid="stElementContainer"]')]
        .filter(e => !e.querySelector('[data-testid="stElementContainer"]')
                     && e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}))
        .map(e => ({b: box(e), text: ((e.innerText || '').trim().slice(0, 60) || (e.querySelector(
            '[data-testid]')?.dataset.testid || 'element')) + ` at (${Math.round(box(e).x)}, `
            + `${Math.round(box(e).y)}), ${Math.round(box(e).w)} px wide`}))
        .filter(e => e.b.w > 0 && e.b.h > 0);
    const main = document.querySelector('[data-testid="stMain"]');
    const edge = main ? main.getBoundingClientRect().right : vw;
    const wide = [...document.querySelectorAll('[data-testid="stElementContainer"]')]
        .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > edge + 1)
        .map(e => `${e.querySelector('[data-testid]:not([data-testid="stElementContainer"])')
                     ?.dataset.testid} ${e.scrollWidth} px wide: ${(e.innerText || '').slice(0, 50)}`);
    return {vw, sideways, charts, leaves, wide};
}"""


def _overlap(a: dict, b: dict) -> float:
    w = min(a["r"], b["r"]) - max(a["x"], b["x"])
    h = min(a["b"], b["b"]) - max(a["y"], b["y"])
    return max(w, 0) * max(h, 0)


# beside every page at its defaults: configs that widen or lengthen the charts
VARIANTS = {**{name: path for name, (path, _) in PAGES.items()},
            "sram-tiling-long": "sram-tiling?seq_q=8192&seq_k=8192&causal=true&batch=4&heads=8",
            "online-softmax-causal": "online-softmax?causal=true&sm_row=10&inputs=rising"}


def _check_layout(page, name: str, size: str) -> None:
    got = page.evaluate(LAYOUT)
    assert not got["sideways"], (f"{name} at {size} scrolls sideways: {got['sideways']}; "
                                 f"too wide: {got['wide']}")
    for c in got["charts"]:
        d, o = c["drawn"], c["outer"]
        if o["w"] == 0 and o["h"] == 0:
            continue          # inside a closed expander: drawn when it is opened
        assert d is not None, f"{name} at {size}: a chart was not drawn: {c['title']!r} at {o}"
        assert d["r"] <= min(o["r"], got["vw"]) + 1, (
            f"{name} at {size}: chart {c['title']!r} is {d['w']:.0f} px wide, cut off at "
            f"{min(o['r'], got['vw']):.0f} px (its legend or axis is hidden)")
    leaves = got["leaves"]
    for i, a in enumerate(leaves):
        for b in leaves[i + 1:]:
            area = _overlap(a["b"], b["b"])
            assert area <= 4, (f"{name} at {size}: {a['text']!r} and {b['text']!r} "
                               f"overlap by {area:.0f} px²")
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.parametrize("name", list(VARIANTS))
def test_page_renders_and_is_legible_at_projector_sizes(browser, server, name):
    """The page renders: found (no "Page not found"), no exception and no error box, every
    chart drawn (waited for however long a loaded machine takes: it fails after 2 min). At
    each size of SIZES (the page loaded at the first, then the window resized, as a
    presenter does): no sideways scroll; every chart drawn inside its element and the window
    (so no legend or axis is cut off: Vega draws legends inside its canvas); no two page
    elements on top of each other (text over a chart, or text over text). Then, for each page
    of the app, the whole page at 1600 pixels wide (its CAPTURE_QUERY state) is captured, with
    no Vega warning and every chart drawn with its marks."""
    first, *others = SIZES
    width, height = SIZES[first]
    page = _new_page(browser, viewport={"width": width, "height": height})
    where = f"/{VARIANTS[name]}"
    try:
        page.goto(f"{server}/{VARIANTS[name]}")
        page.wait_for_selector("h1", timeout=30000)
        if name in PAGES and PAGES[name][1]:
            page.wait_for_selector(CHART, timeout=120000)
        _settle(page)
        # (test_every_page_url_opens_its_page leaves each page's own URL to this test)
        assert "Page not found" not in page.inner_text("body"), where
        assert page.locator('[data-testid="stException"]').count() == 0, where
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0, where
        if name in PAGES:
            SHOTS_1280.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS_1280 / f"{name}.png"))
            if name in ("sram-tiling", "backward"):     # the loop board as a talk shows it
                page.locator(PLAYER).evaluate("e => e.scrollIntoView({block: 'start'})")
                page.wait_for_timeout(500)
                page.screenshot(path=str(SHOTS_1280 / f"{name}-loop.png"))
                page.evaluate("() => window.scrollTo(0, 0)")
        _check_layout(page, name, first)
        for size in others:
            width, height = SIZES[size]
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_function(f"() => window.innerWidth === {width}")
            _settle(page)
            _check_layout(page, name, size)
        _assert_vega_clean(page, where)
        if name in PAGES:
            if name in CAPTURE_QUERY:
                where = f"/{PAGES[name][0]}{CAPTURE_QUERY[name]}"
                page.goto(f"{server}{where}")
                page.wait_for_selector("h1", timeout=30000)
            page.set_viewport_size({"width": 1600, "height": 1000})
            height = _settle(page)
            # Streamlit scrolls inside its main block: grow the window to the content, shoot.
            page.set_viewport_size({"width": 1600,
                                    "height": min(max(height + 200, 1000), 6000)})
            _settle(page)
            assert page.locator('[data-testid="stException"]').count() == 0, where
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name}.png"))
            _assert_vega_clean(page, where)
    finally:
        page.close()


# ---- talk mode: the main chart and its controls on the first 1280×720 screen --------------
TALK_FIRST_SCREEN = """() => {
    const box = e => e.getBoundingClientRect();
    const side = document.querySelector('[data-testid="stSidebar"]');
    const chart = document.querySelector('iframe[title*="loop_player"], '
                                         + '[data-testid="stVegaLiteChart"]');
    const inside = r => r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight + 1
                        && r.right <= innerWidth + 1;
    const controls = [...document.querySelectorAll('[data-testid="stCheckbox"], '
                                                   + '[data-testid="stSlider"]')]
        .filter(e => !e.closest('[data-testid="stSidebar"]'));
    return {sidebar: side ? box(side).width : 0, scrolled: scrollY,
            chart: chart ? [box(chart).top, box(chart).bottom, inside(box(chart))] : null,
            player: !!chart && chart.tagName === 'IFRAME',
            controls: controls.map(e => [(e.innerText || '').split('\\n')[0], inside(box(e))])};
}"""


PLAYER_FIRST = ("sram-tiling", "backward", "decoding")     # talk mode's stage: the loop player


@pytest.mark.parametrize("name", [n for n, (_, draws) in PAGES.items() if draws]
                         + ["overview"])
def test_talk_mode_fits_the_main_chart_on_one_screen(browser, server, name):
    """?talk=true at 1280×720: the sidebar folded away, the page's main chart (its first, or
    its loop player where that comes first: the loop's pages) whole on the first screen, and
    the chart's own controls (Play, speed, loop step) there too; nothing overlaps and nothing
    scrolls sideways."""
    page = _new_page(browser, viewport={"width": 1280, "height": 720})
    try:
        path = PAGES[name][0]
        page.goto(f"{server}/{path}?talk=true")
        page.wait_for_selector("h1", timeout=30000)
        if name in PLAYER_FIRST:                  # drawn with the script's first elements
            _player(page)
        _settle(page)
        got = page.evaluate(TALK_FIRST_SCREEN)
        assert got["sidebar"] < 5, f"{name}: the sidebar is open in talk mode ({got})"
        assert got["chart"] is not None and got["chart"][2], (
            f"{name}: the main chart spans y = {got['chart']} px, not inside 0–720")
        loop = [c for c in got["controls"] if c[0] in ("Play", "speed", "loop step")]
        assert all(inside for _, inside in loop), f"{name}: controls off screen: {loop}"
        if name in PLAYER_FIRST:                  # the player: its own controls
            assert got["player"], f"{name}: the loop player is not the main chart ({got})"
        layout = page.evaluate(LAYOUT)
        assert not layout["sideways"], f"{name}: scrolls sideways: {layout['sideways']}"
        leaves = layout["leaves"]
        for i, a in enumerate(leaves):
            for b in leaves[i + 1:]:
                assert _overlap(a["b"], b["b"]) <= 4, f"{name}: {a['text']!r} over {b['text']!r}"
        assert page.locator('[data-testid="stException"]').count() == 0
        _assert_vega_clean(page, f"/{path}?talk=true")
        SHOTS_TALK.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS_TALK / f"{name}.png"))
    finally:
        page.close()


# ---- every page on the classroom profiles, default and talk mode: drawn and readable ------
# The H200, H100, A100 and T4 profiles (their keys in engine.PROFILES). CI opens every page in
# both modes, the profiles taken in turn (each page meets two, each profile several pages);
# FA_LAB_BROWSER_EVERY_PROFILE=1 opens every page on every profile in both modes.
CLASSROOM = tuple(next(k for k in engine.PROFILES if k.startswith(p))
                  for p in ("H200", "H100", "A100", "T4"))
EVERY_PROFILE = os.environ.get("FA_LAB_BROWSER_EVERY_PROFILE") == "1"


def _profile_matrix() -> list[tuple[str, str, bool]]:
    names = list(PAGES)
    if EVERY_PROFILE:
        return [(n, p, talk) for n in names for p in CLASSROOM for talk in (False, True)]
    return [(n, CLASSROOM[(i + 2 * talk) % len(CLASSROOM)], talk)
            for i, n in enumerate(names) for talk in (False, True)]


# What a reader of each SVG chart could not read: text on a filled cell (a rect, bar, area or
# symbol mark under its centre, drawn before it, at least half opaque, 3 px or more each way)
# below 4.5:1 (WCAG's relative luminance, from the SVG's own fill colours), a label wider than
# its cell, two labels of the marks on top of each other, two labels of one axis on top of each
# other ("0.00.5"), and a legend label of six or more decimals.
READABLE = r"""() => {
  const hex = c => { if (!c) return null; c = c.trim();
    let m = c.match(/^#([0-9a-f]{3})$/i); if (m) return m[1].split('').map(x => parseInt(x + x, 16));
    m = c.match(/^#([0-9a-f]{6})$/i); if (m) return [0, 2, 4].map(i => parseInt(m[1].slice(i, i + 2), 16));
    m = c.match(/^rgba?\(([^)]*)\)/); if (m) { const p = m[1].split(',').map(Number);
      if (p.length > 3 && p[3] < 0.5) return null; return p.slice(0, 3); }
    if (c === 'white') return [255, 255, 255]; if (c === 'black') return [0, 0, 0];
    return null; };
  const lum = rgb => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]); };
  const contrast = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const opaque = el => { const o = s => s == null ? 1 : Number(s);
    return o(el.getAttribute('fill-opacity')) * o(el.getAttribute('opacity')) >= 0.5; };
  const out = [];
  document.querySelectorAll('.vega-embed').forEach((e, ci) => {
    const svg = e.querySelector('svg.marks');
    if (!svg || !svg.checkVisibility() || !svg.getBoundingClientRect().width) return;
    const title = [...svg.querySelectorAll('.role-title-text text')].map(t => t.textContent).join(' ') || e.getAttribute('aria-label') || '';
    const rects = [];
    svg.querySelectorAll('g.role-mark').forEach(g => {
      if (!/\bmark-(rect|bar|area|symbol|arc)\b/.test(g.getAttribute('class'))) return;
      for (const item of g.children) {
        const fill = hex(item.getAttribute('fill'));
        if (!fill || !opaque(item)) continue;
        const r = item.getBoundingClientRect(); if (r.width < 3 || r.height < 3) continue;
        rects.push({r, fill});
      }
    });
    const texts = [];
    svg.querySelectorAll('g.role-mark.mark-text text').forEach(t => {
      const s = (t.textContent || '').trim(); if (!s) return;
      const r = t.getBoundingClientRect(); if (r.width < 1) return;
      const cx = (r.left + r.right) / 2, cy = (r.top + r.bottom) / 2;
      let under = null;
      for (const q of rects) if (cx >= q.r.left && cx <= q.r.right && cy >= q.r.top && cy <= q.r.bottom) under = q;
      const fill = hex(t.getAttribute('fill')) || [0, 0, 0];
      texts.push({s, r, under});
      if (under) { const c = contrast(fill, under.fill);
        if (c < 4.5) out.push({chart: ci + 1, title, kind: 'contrast', text: s, ratio: +c.toFixed(2),
                               ink: t.getAttribute('fill'), cell: under.fill.join(',')});
        const u = under.r;
        if (r.width > u.width + 2 && u.width < 200)
          out.push({chart: ci + 1, title, kind: 'overflow', text: s, text_w: Math.round(r.width), cell_w: Math.round(u.width)});
      }
    });
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i].r, b = texts[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 2 && h > 2) out.push({chart: ci + 1, title, kind: 'text overlap', text: texts[i].s + ' | ' + texts[j].s});
    }
    // axis labels on one axis overlapping
    svg.querySelectorAll('g.role-axis').forEach(ax => {
      const labels = [...ax.querySelectorAll('g.role-axis-label text')].filter(t => t.textContent && Number(t.getAttribute('opacity') ?? 1) > 0)
        .map(t => ({s: t.textContent, r: t.getBoundingClientRect()}));
      for (let i = 0; i + 1 < labels.length; i++) for (let j = i + 1; j < labels.length; j++) {
        const a = labels[i].r, b = labels[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) out.push({chart: ci + 1, title, kind: 'tick overlap', text: labels[i].s + ' | ' + labels[j].s});
      }
    });
    svg.querySelectorAll('g.role-legend-label text').forEach(t => {
      if (/\d\.\d{5,}/.test(t.textContent)) out.push({chart: ci + 1, title, kind: 'legend digits', text: t.textContent});
    });
  });
  return out;
}"""
# Developer text a visitor should never read (an exception's name, a traceback)
DEVELOPER_TEXT = re.compile(r"Traceback|No module named|\b[A-Z][A-Za-z]+(Error|Exception)\b")


@pytest.mark.parametrize("name,profile,talk", _profile_matrix(),
                         ids=lambda v: v if isinstance(v, str) else ("talk" if v else "default"))
def test_every_chart_draws_and_reads(browser, server, name, profile, talk):
    """At 1280×720 on a classroom profile, with and without talk mode: no Vega warning, no
    chart drawn without its marks, no heatmap text below 4.5:1 against its cell, no label
    overflowing its cell or lying on another, no crowded axis, no long-decimal legend, no
    exception text on the page."""
    from urllib.parse import quote
    query = f"?profile={quote(profile)}" + ("&talk=true" if talk else "")
    page = _new_page(browser, viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{server}/{PAGES[name][0]}{query}")
        page.wait_for_selector("h1", timeout=30000)
        _settle(page)
        where = f"/{PAGES[name][0]}{query}"
        assert page.locator('[data-testid="stException"]').count() == 0, where
        _assert_vega_clean(page, where)
        problems = page.evaluate(READABLE)
        assert not problems, f"{where}: {problems[:12]}"
        shown = page.locator('[data-testid="stMain"]').inner_text()
        assert not DEVELOPER_TEXT.search(shown), (
            f"{where}: developer text on screen: {DEVELOPER_TEXT.search(shown).group(0)!r}")
    finally:
        page.close()
