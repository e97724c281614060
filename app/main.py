"""FlashAttention Lab: `python -m streamlit run app/main.py` from the repository root."""
import streamlit as st

from app.core import card_view, deck_view, navigation, sidebar
from app.core.style import TALK_CSS
from app.core.ui import SETTINGS_KEY

talk = sidebar.talk_requested()
st.set_page_config(page_title="FlashAttention Lab", page_icon="⚡", layout="wide",
                   initial_sidebar_state="collapsed" if talk else "auto")
page = st.navigation(navigation.pages())
navigation.redirect_root(page.url_path)
st.session_state[sidebar.PAGE_KEY] = page.url_path
lab = st.sidebar.container()      # the classroom lab's progress, above the controls
settings = st.session_state[SETTINGS_KEY] = sidebar.render()
card_view.sidebar_panel(lab)
slide_page = deck_view.follow(page.url_path, settings.talk)   # talk mode: the slide's page
if slide_page:
    sidebar.switch_page(slide_page)
if settings.talk:
    st.html(TALK_CSS)
    deck_view.bar()
try:
    page.run()
finally:                  # the URL follows the sidebar and the page's own controls
    sidebar.write_url()
