"""The Downloads page (app/features/downloads/) through AppTest: its files follow the session
(the trace upload: tests/test_upload.py)."""
from __future__ import annotations

from apptest_helpers import assert_clean, open_page


def test_downloads_follow_the_session():
    at = open_page("downloads")
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Trace (NPZ)" in labels and "Trace (CSV)" in labels
    assert not any("Timings" in x for x in labels)
    assert any("bench_fixture.json" in x for x in labels)
    at.switch_page("features/timings/page.py").run()
    at.switch_page("features/downloads/page.py").run()
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert "Timings (JSON)" in labels and "Timings (CSV)" in labels
