"""The page list (app/page_list.py) against app/features/, and what reads it: every folder in
app/features/ has a row and every row a folder with its script, names and URLs are unique, the
page controls belong to their rows, and navigation and the Overview's guide follow the list in
order."""
from __future__ import annotations

import re
from pathlib import Path

from app import page_list
from app.core import navigation
from app.core.controls import CONTROLS
from app.core.figures import PAGE_GUIDE
from app.core.url_params import PAGE_CONTROLS

APP_DIR = Path(__file__).resolve().parent.parent / "app"
FEATURES_DIR = APP_DIR / "features"


def test_every_page_folder_has_a_row_and_every_row_a_script():
    folders = {p.name for p in FEATURES_DIR.iterdir() if (p / "__init__.py").exists()}
    rows = {row.feature for row in page_list.PAGES}
    assert not folders - rows, f"folders in app/features/ without a row: {sorted(folders - rows)}"
    assert not rows - folders, f"rows without a folder in app/features/: {sorted(rows - folders)}"
    for row in page_list.PAGES:
        assert (APP_DIR / row.script).is_file(), row.script
    assert navigation.APP_DIR == APP_DIR


def test_no_pages_folder_beside_the_main_script():
    """Streamlit would take a pages/ folder beside the main script for pages of its own."""
    assert not (APP_DIR / "pages").exists()
    assert not (APP_DIR.parent / "pages").exists()


def test_scripts_titles_and_url_paths_are_unique():
    for field in ("feature", "title", "url_path", "guide"):
        values = [getattr(row, field) for row in page_list.PAGES]
        assert len(set(values)) == len(values), f"{field} repeats: {values}"
    for row in page_list.PAGES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", row.url_path), row.url_path
        assert row.url_path != navigation.ROOT_PATH
        assert row.charts >= 0, row


def test_the_overview_comes_first():
    assert page_list.PAGES[0].url_path == page_list.OVERVIEW
    assert page_list.by_url(page_list.OVERVIEW).script == "features/overview/page.py"


def test_page_controls_belong_to_pages_of_the_list():
    urls = {row.url_path for row in page_list.PAGES}
    names = [ctl.name for row in page_list.PAGES for ctl in row.controls]
    assert len(set(names)) == len(names), f"a page control repeats: {names}"
    assert not set(names) & set(CONTROLS), "a page control has a sidebar control's name"
    assert sorted(PAGE_CONTROLS) == sorted(names)
    for name, (url_path, ctl) in PAGE_CONTROLS.items():
        assert url_path in urls, f"page control {name} names no page: {url_path!r}"
        assert ctl.name == name and ctl in page_list.by_url(url_path).controls


def test_navigation_and_the_overview_guide_follow_the_list():
    assert navigation.url_paths() == [""] + [row.url_path for row in page_list.PAGES]
    assert [title for title, _ in PAGE_GUIDE] == [row.title for row in page_list.PAGES]
    assert all(line.endswith(".") for _, line in PAGE_GUIDE)
