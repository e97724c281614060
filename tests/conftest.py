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


def pytest_collection_modifyitems(config, items):
    """`exhaustive`-marked tests run only with FA_LAB_EXHAUSTIVE=1; `gpu`-marked tests only
    where CuPy finds a usable GPU."""
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


# Module-scoped, not session-scoped: Playwright's sync API keeps an event loop running in
# this thread while its browser is open, and the load tests after the browser files call
# asyncio.run(), which refuses to run inside one.
@pytest.fixture(scope="module")
def server():
    """The app, headless, for a browser test file (tests/test_browser*.py): one server for
    the file (each page a test opens is a session of its own there)."""
    from app_server import CHROMIUM, serve
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with serve() as (base, _proc):
        yield base


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
