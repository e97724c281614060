"""Hypothesis fuzzing of URL parameters: any link gives either a valid view or a clear
message, never an exception."""
from pathlib import Path

import pytest
import streamlit as st
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_h
from streamlit.testing.v1 import AppTest

from app import page_list
from app.core.controls import CONTROLS
from app.core.url_params import PAGE_CONTROLS, control, parse_value

pytestmark = pytest.mark.slow

MAIN = Path(__file__).resolve().parent.parent / "app" / "main.py"
# the pages a link is switched to after it opened the Overview: every other page of the list
PAGES = [row.script for row in page_list.PAGES if row.url_path != page_list.OVERVIEW]
NASTY = ["1e12", "-3", "evil", "", "nan", "inf", "-inf", "0", "64.5", "0x40", "true", "None",
         "<script>alert(1)</script>", "../../etc/passwd", "9" * 40, "1,2", " 64 ", "float16",
         "¹", "٣", "६४"]
raw_values = st_h.one_of(st_h.sampled_from(NASTY), st_h.text(max_size=20),
                         st_h.integers(-10**15, 10**15).map(str),
                         st_h.floats(allow_nan=True, allow_infinity=True).map(repr))


@settings(max_examples=400, deadline=None)
@given(name=st_h.sampled_from(sorted([*CONTROLS, *PAGE_CONTROLS])), raw=raw_values)
def test_parse_value_accepts_or_explains(name, raw):
    ctl = control(name)
    try:
        value = parse_value(name, raw)
    except ValueError as exc:
        assert name in str(exc) and ctl.allowed() in str(exc)
        return
    if ctl.kind == "choice":
        assert value in ctl.choices
    elif ctl.kind in ("int", "float"):
        assert ctl.low <= value <= ctl.high


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=st_h.dictionaries(
    st_h.sampled_from(sorted(CONTROLS) + ["unknown", "page"]), raw_values, max_size=4))
def test_any_link_renders_without_exception(params):
    st.cache_data.clear()
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _assert_explained(at, params)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=st_h.sampled_from(PAGES),
       params=st_h.dictionaries(
           st_h.sampled_from(sorted(PAGE_CONTROLS) + ["heads", "batch", "seq_q"]), raw_values,
           max_size=4))
def test_any_page_control_link_renders_without_exception(page, params):
    st.cache_data.clear()
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update(params)
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    _assert_explained(at, params)


def _assert_explained(at, params):
    """Every bad or unknown parameter is named in an error message."""
    known = {*CONTROLS, *PAGE_CONTROLS}
    bad = [k for k, v in params.items() if k in known and _invalid(k, v)]
    if bad or set(params) - known:
        shown = " ".join(e.value for e in at.error)
        assert shown, f"no message for {params}"
        for k in bad:
            assert k in shown


def _invalid(name, raw) -> bool:
    try:
        parse_value(name, raw)
    except ValueError:
        return True
    return False
