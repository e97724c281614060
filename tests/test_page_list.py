"""The page list (app/page_list.py) against pages/, and what reads it: every file in pages/ has
a row and every row a file, names and URLs are unique, the page controls name pages of the
list, and navigation and the Overview's guide follow it in order."""
from __future__ import annotations

import re
from pathlib import Path

from app import navigation, page_list
from app.controls import PAGE_CONTROLS
from app.figures import PAGE_GUIDE

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"


def test_every_page_file_has_a_row_and_every_row_a_file():
    files = {p.name for p in PAGES_DIR.glob("*.py")}
    rows = {row.script for row in page_list.PAGES}
    assert not files - rows, f"files in pages/ without a row: {sorted(files - rows)}"
    assert not rows - files, f"rows without a file in pages/: {sorted(rows - files)}"
    assert navigation.PAGES_DIR == PAGES_DIR


def test_scripts_titles_and_url_paths_are_unique():
    for field in ("script", "title", "url_path", "guide"):
        values = [getattr(row, field) for row in page_list.PAGES]
        assert len(set(values)) == len(values), f"{field} repeats: {values}"
    for row in page_list.PAGES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row.url_path), row.url_path
        assert row.url_path != navigation.ROOT_PATH
        assert row.charts >= 0, row


def test_the_overview_comes_first():
    assert page_list.PAGES[0].url_path == page_list.OVERVIEW
    assert page_list.by_url(page_list.OVERVIEW).script == "overview.py"


def test_page_controls_belong_to_pages_of_the_list():
    urls = {row.url_path for row in page_list.PAGES}
    for name, (url_path, ctl) in PAGE_CONTROLS.items():
        assert url_path in urls, f"page control {name} names no page: {url_path!r}"
        assert ctl.name == name


def test_navigation_and_the_overview_guide_follow_the_list():
    assert navigation.url_paths() == [""] + [row.url_path for row in page_list.PAGES]
    assert [title for title, _ in PAGE_GUIDE] == [row.title for row in page_list.PAGES]
    assert all(line.endswith(".") for _, line in PAGE_GUIDE)
