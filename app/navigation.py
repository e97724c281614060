"""The app's pages for st.navigation, built once per process and copied for each run."""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"


@functools.cache
def _built() -> tuple:
    """The Page objects (st.Page needs a running script, so they are built on the first run)."""
    return (
        st.Page(PAGES_DIR / "overview.py", title="Overview", url_path="overview", default=True),
        st.Page(PAGES_DIR / "sram_tiling.py", title="SRAM tiling", url_path="sram-tiling"),
        st.Page(PAGES_DIR / "online_softmax.py", title="Online softmax",
                url_path="online-softmax"),
        st.Page(PAGES_DIR / "timings.py", title="Timings", url_path="timings"),
        st.Page(PAGES_DIR / "tile_sizes.py", title="Tile sizes", url_path="tile-sizes"),
        st.Page(PAGES_DIR / "kernel.py", title="Kernel", url_path="kernel"),
        st.Page(PAGES_DIR / "downloads.py", title="Downloads", url_path="downloads"),
        st.Page(PAGES_DIR / "backward.py", title="Backward pass", url_path="backward"),
        st.Page(PAGES_DIR / "decoding.py", title="Decoding", url_path="decoding"),
    )


def pages() -> list:
    """This run's pages: copies, since st.navigation marks the page it picks as callable and
    its run() unmarks it, so sessions running at the same time must not share them."""
    return [copy.copy(page) for page in _built()]
