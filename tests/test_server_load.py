"""Server load at CI size, without browsers: sessions speak Streamlit's websocket protocol to
the app (tests/server_load.py, whose full sizes are the class of 100 and the talk of 200).
No exception, no error, every visitor's own config in its controls and URL and its own step in
the loop chart, memory bounded; and the same through nginx in front of two app processes
(scripts/serve.sh), where nginx is installed (CI installs it: .ci/run)."""
import os
import shutil

import pytest

pytestmark = pytest.mark.slow
HAVE_NGINX = bool(shutil.which("nginx") or os.path.exists("/usr/sbin/nginx"))


def assert_clean(out: dict) -> None:
    assert out["errors"] == [], out
    assert out["exceptions"] == 0, out
    assert out["wrong"] == [], out
    assert out["server_rss_peak_mb"] < 2048 * max(1, out["server_processes"] - 1), out


def test_protocol_sessions_stay_correct():
    import server_load
    out = server_load.run(sessions=6, seconds=6, seed=3)
    assert_clean(out)
    assert out["requests"]["load"] > 0 and out["requests"]["control"] > 0, out


def test_talk_visitors_step_the_animation():
    import server_load
    out = server_load.run(sessions=6, scenario="talk", arrive_s=3, seed=4)
    assert_clean(out)
    assert out["requests"] == {"load": 6, "step": 6 * server_load.TALK_STEPS, "control": 6}, out


@pytest.mark.skipif(not HAVE_NGINX and not os.environ.get("FA_LAB_REQUIRE_NGINX"),
                    reason="nginx is not installed (apt-get install nginx)")
def test_two_processes_behind_nginx():
    import server_load
    out = server_load.run(sessions=6, seconds=6, seed=5, replicas=2)
    assert_clean(out)
    assert out["server_processes"] >= 4, out      # serve.sh, 2 app processes, nginx
    assert out["requests"]["load"] > 0 and out["requests"]["control"] > 0, out
