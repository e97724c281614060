"""Load test at CI size: concurrent headless-Chromium sessions on one server; no exception,
every visitor sees its own config, memory bounded. The full size (20 sessions, 60 s) is
tests/load_test.py."""
import pytest

from app_server import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_concurrent_sessions_stay_correct():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
    pytest.importorskip("playwright.async_api", reason="playwright is not installed")
    import load_test
    out = load_test.run(sessions=4, seconds=10, seed=1)
    assert out["errors"] == [], out
    assert out["exceptions"] == 0, out
    assert out["wrong"] == [], out
    # every visitor loaded a page and changed its seed (load_test.FIRST_ACTIONS), each
    # change checked against its own config above
    assert out["requests"]["load"] >= 4 and out["requests"]["control"] >= 4, out
    assert out["server_rss_peak_mb"] < 2048, out
