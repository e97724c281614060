"""The app's pages for st.navigation (the rows of app/page_list.py, each page's script in its
folder of app/features/), built once per process and copied for each run."""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import streamlit as st

from app.page_list import OVERVIEW, PAGES, by_url

APP_DIR = Path(__file__).resolve().parents[1]     # app/: the main script's folder, which
                                                  # the rows' scripts are relative to


# Streamlit serves the default page at "/" and answers its own pathname with "Page not found",
# so the default page is a hidden one that sends the visitor on to "/overview" with the link's
# query parameters (app/main.py does so before anything is drawn): "/" and "/overview" both
# open the Overview page, and every page has a URL that works.
ROOT_PATH = "start"


def url_paths() -> list[str]:
    """Every URL path the app serves a page at: the root and each page's own."""
    return [""] + [row.url_path for row in PAGES]


@functools.cache
def _built() -> tuple:
    """The Page objects (st.Page needs a running script, so they are built on the first run)."""
    return (st.Page(_to_overview, title="FlashAttention Lab", url_path=ROOT_PATH, default=True,
                    visibility="hidden"),
            *(st.Page(APP_DIR / row.script, title=row.title, url_path=row.url_path)
              for row in PAGES))


def _to_overview() -> None:
    """The default page's body; app/main.py redirects before it would run."""
    redirect_root(ROOT_PATH)


def redirect_root(url_path: str) -> None:
    """If this run's page is the root's, switch to the Overview page, keeping the link's
    query parameters (talk mode, the config)."""
    if url_path == ROOT_PATH:
        st.switch_page(APP_DIR / by_url(OVERVIEW).script,
                       query_params=st.query_params.to_dict())


def pages() -> list:
    """This run's pages: copies, since st.navigation marks the page it picks as callable and
    its run() unmarks it, so sessions running at the same time must not share them."""
    return [copy.copy(page) for page in _built()]
