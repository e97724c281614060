"""Server load at CI size, without browsers: sessions speak Streamlit's websocket protocol to
one server (tests/server_load.py; its full size is 30 sessions for 60 s). No exception,
every visitor's own config in its controls and URL, memory bounded."""
import pytest

pytestmark = pytest.mark.slow


def test_protocol_sessions_stay_correct():
    import server_load
    out = server_load.run(sessions=6, seconds=20, seed=3)
    assert out["errors"] == [], out
    assert out["exceptions"] == 0, out
    assert out["wrong"] == [], out
    assert out["requests"]["load"] > 0 and out["requests"]["control"] > 0, out
    assert out["server_rss_peak_mb"] < 2048, out
