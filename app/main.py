"""FlashAttention Lab: `python -m streamlit run app/main.py` from the repository root."""
from pathlib import Path

import streamlit as st

from app import sidebar
from app.style import TALK_CSS
from app.ui import SETTINGS_KEY

PAGES = Path(__file__).resolve().parent.parent / "pages"

talk = sidebar.talk_requested()
st.set_page_config(page_title="FlashAttention Lab", page_icon="⚡", layout="wide",
                   initial_sidebar_state="collapsed" if talk else "auto")
page = st.navigation([
    st.Page(PAGES / "overview.py", title="Overview", url_path="overview", default=True),
    st.Page(PAGES / "sram_tiling.py", title="SRAM tiling", url_path="sram-tiling"),
    st.Page(PAGES / "online_softmax.py", title="Online softmax", url_path="online-softmax"),
    st.Page(PAGES / "timings.py", title="Timings", url_path="timings"),
    st.Page(PAGES / "tile_sizes.py", title="Tile sizes", url_path="tile-sizes"),
    st.Page(PAGES / "kernel.py", title="Kernel", url_path="kernel"),
    st.Page(PAGES / "downloads.py", title="Downloads", url_path="downloads"),
    st.Page(PAGES / "backward.py", title="Backward pass", url_path="backward"),
    st.Page(PAGES / "decoding.py", title="Decoding", url_path="decoding"),
])
st.session_state[sidebar.PAGE_KEY] = page.url_path
st.session_state[SETTINGS_KEY] = sidebar.render()
if talk:
    st.html(TALK_CSS)
page.run()
