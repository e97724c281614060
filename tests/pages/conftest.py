"""The page tests (tests/pages/, one file per page of app/page_list.py, and
test_every_page.py for what every page does) read recorded GPU results from tests/data and
start each test with empty caches."""
import pytest
import streamlit as st

from app.core.results_dir import BENCH_DIR_ENV
from apptest_helpers import FIXTURES


@pytest.fixture(autouse=True)
def fresh_app_state(monkeypatch):
    """Recorded GPU results come from tests/data; no cached run leaks between tests."""
    monkeypatch.setenv(BENCH_DIR_ENV, str(FIXTURES))
    st.cache_data.clear()
    yield
    st.cache_data.clear()
