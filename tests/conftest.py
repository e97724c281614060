import os

import pytest

from seeds import FUZZING, SEED

# Hypothesis draws its examples at random unless told otherwise; the unit suite must give the
# same verdict on every run, so its examples are fixed (derandomized) and no example database
# replays earlier failures from this machine's history. The fuzzing run (FA_LAB_TEST_SEED=random)
# draws fresh examples; a failure prints the example and the @seed that reproduces it.
# (A GPU machine's own Python may lack Hypothesis: the gpu-marked tests do not use it.)
try:
    from hypothesis import settings
except ImportError:
    settings = None
if settings is not None:
    settings.register_profile("fixed", derandomize=True, database=None, print_blob=True)
    settings.register_profile("fuzz", derandomize=False, database=None, print_blob=True)
    settings.load_profile("fuzz" if FUZZING else "fixed")


def pytest_configure(config):
    """The session's folder of compile outcomes (tests/compile_pool.py), made by the first
    process (pytest-xdist's workers inherit its environment, and so share it) and removed
    when that process ends."""
    import compile_pool
    if not os.environ.get(compile_pool.DIR_ENV):
        import tempfile
        config._fa_lab_compile_dir = tempfile.mkdtemp(prefix="fa-lab-compiles-")
        os.environ[compile_pool.DIR_ENV] = config._fa_lab_compile_dir


def pytest_unconfigure(config):
    folder = getattr(config, "_fa_lab_compile_dir", None)
    if folder:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
        import compile_pool
        os.environ.pop(compile_pool.DIR_ENV, None)


# ---- pytest-xdist: what a worker runs whole, and in what order -----------------------------
# scripts/test.sh runs the suite on two workers (--dist loadgroup), and a worker runs a group
# whole, in collection order. The groups are group_of's (pytest-xdist's own xdist_group
# marks do nothing under pytest 9, whose node ids it can no longer suffix). Every module is a
# group of its own: its tests keep their order in one process, so a module's random stream
# (seeds.rng) and its module fixtures are those of a serial run. The compile tests, which
# take no random input, go out one at a time. tests/test_browser.py splits into four groups
# by test, each run in the worker's server (one a process) and the file's browser; the two
# load test files are one group, so they never run at once. The groups of GROUP_ORDER go out
# first (the longest), then the other modules in collection order, and the compile tests
# last, so the builds they need (started in the background when the session begins:
# pytest_collection_finish) are most likely done.
BROWSER_GROUPS = {
    "test_page_renders_and_is_legible_at_projector_sizes": "browser-legible",
    "test_every_page_url_opens_its_page": "browser-talk-and-links",
    "test_talk_mode_fits_the_main_chart_on_one_screen": "browser-talk-and-links",
    "test_tampered_url_shows_error_not_exception": "browser-talk-and-links",
    "test_page_control_link_round_trip": "browser-talk-and-links",
    "test_tile_sizes_click_on_a_cell_sets_the_tiles": "browser-talk-and-links",
    "test_captures_stay_outside_the_repository": "browser-talk-and-links",
    "test_every_chart_draws_and_reads": "browser-every-chart",
}                                          # the rest of the file: "browser-players"
GROUP_ORDER = ("browser-legible", "browser-talk-and-links", "browser-every-chart",
               "browser-players", "tests/test_browser_deck.py", "load",
               "tests/test_browser_lab.py")
ONE_AT_A_TIME = ("tests/test_kernel_sources.py", "tests/test_nvrtc_builds.py")


def group_of(nodeid: str) -> str:
    """The group of a test, by its node id: what one worker runs whole."""
    path, _, rest = nodeid.partition("::")
    if path in ONE_AT_A_TIME:
        return nodeid
    if path == "tests/test_browser.py":
        return BROWSER_GROUPS.get(rest.split("[")[0], "browser-players")
    if path in ("tests/test_load.py", "tests/test_server_load.py"):
        return "load"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups of group_of, in the workers' collection order."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return Groups(config, log)


def _xdist_order(config, items) -> None:
    """On an xdist worker: the groups of GROUP_ORDER first, then the other modules' tests,
    then the compile tests, each part in collection order (every worker sorts alike)."""
    if not hasattr(config, "workerinput"):
        return

    def rank(pair):
        index, item = pair
        group = group_of(item.nodeid)
        if group == item.nodeid:
            return (2, 0, index)
        return (0 if group in GROUP_ORDER else 1,
                GROUP_ORDER.index(group) if group in GROUP_ORDER else 0, index)
    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


def pytest_collection_modifyitems(config, items):
    """`exhaustive`-marked tests run only with FA_LAB_EXHAUSTIVE=1; `gpu`-marked tests only
    where CuPy finds a usable GPU; under pytest-xdist, the groups and their order above."""
    _xdist_order(config, items)
    if os.environ.get("FA_LAB_EXHAUSTIVE") != "1":
        skip = pytest.mark.skip(reason="the rest of the compile matrix: FA_LAB_EXHAUSTIVE=1 "
                                       "runs it")
        for item in items:
            if "exhaustive" in item.keywords:
                item.add_marker(skip)
    if not any("gpu" in item.keywords for item in items):
        return
    from engine.devices import probe_gpu
    usable, reason = probe_gpu()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def server():
    """The app, headless, for the browser test files (tests/test_browser*.py): one server for
    the session's process (each pytest-xdist worker starts its own, when it first runs a
    browser test), each page a test opens a session of its own there."""
    from app_server import CHROMIUM, serve
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with serve() as (base, _proc):
        yield base


# Module-scoped, not session-scoped: Playwright's sync API keeps an event loop running in
# this thread while its browser is open, and the load tests after the browser files call
# asyncio.run(), which refuses to run inside one.
@pytest.fixture(scope="module")
def browser(server):
    """Debian's Chromium through Playwright, one for a browser test file, as one browser
    context that the file's pages open in (each test opens its own pages and closes them;
    each page is a Streamlit session of its own). The pages share the context's HTTP cache,
    so the app's scripts and styles are fetched and compiled once for the file, not once a
    page."""
    from app_server import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = b.new_context()
        yield context
        context.close()
        b.close()


def _skipped(item) -> bool:
    """Skipped for certain before it runs: a skip mark, or a skipif whose condition is True."""
    return any(m.name == "skip" or (m.name == "skipif" and m.args and m.args[0] is True)
               for m in item.iter_markers())


def pytest_collection_finish(session):
    """Start the compiles of the selected kernel compile tests in the background, in the
    order the tests run (tests/compile_pool.py): a module with compile tests names an item's
    builds in its `background_compiles(item)`."""
    if session.config.option.collectonly:
        return
    for item in session.items:
        start = getattr(getattr(item, "module", None), "background_compiles", None)
        if start is not None and not _skipped(item):
            start(item)


def pytest_sessionfinish(session):
    import compile_pool
    compile_pool.shutdown()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under FA_LAB_PTX_ARCH (an older GPU's code path on this GPU), a run the engine refuses
    for that GPU generation (what it lacks: bfloat16, wgmma, shared memory) is a skip that
    says so, not a failure: the refusal is the behaviour tests/test_arch.py checks."""
    outcome = yield
    report = outcome.get_result()
    if (report.when == "call" and report.failed and os.environ.get("FA_LAB_PTX_ARCH")
            and call.excinfo is not None
            and "(compute capability " in str(call.excinfo.value)
            and " cannot run " in str(call.excinfo.value)):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"refused on this generation: {call.excinfo.value}")


def pytest_report_header(config):
    how = ("FA_LAB_TEST_SEED=random: a fresh seed and fresh Hypothesis examples (replay with "
           f"FA_LAB_TEST_SEED={SEED})" if FUZZING else
           "fixed; FA_LAB_TEST_SEED=<n> for another, =random for the fuzzing run")
    return f"random inputs: seed {SEED} ({how})"


def pytest_terminal_summary(terminalreporter):
    """The seed again at the end, where -q (which hides the header) still shows it."""
    terminalreporter.write_line(pytest_report_header(None))
