"""The Streamlit internals this project uses, imported here and nowhere else.

Streamlit's public API has no way to hand a worker thread the script's context, and none for
the Arrow conversion a chart's datasets go through; the app uses these (app/core/ui.py,
app/core/arrow_ipc.py), and the tests use a few more to read what a page sent. Any Streamlit
release may move them, so each is looked up by name here, and a missing one stops the import
with a message naming the installed Streamlit and the version the project is tested with
(requirements/app.lock), instead of an AttributeError deep in a page.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import streamlit

LOCK = Path(__file__).resolve().parents[2] / "requirements" / "app.lock"


def tested_version() -> str:
    """The Streamlit version(s) the lock pins (what the suite passed with), each with the
    Python versions it is for, or "unknown"."""
    try:
        lines = LOCK.read_text().splitlines()
    except OSError:
        return "unknown"
    pins = []
    for line in lines:
        if line.lower().startswith("streamlit=="):
            pin, _, marker = line.split("==", 1)[1].rstrip("\\ ").partition(";")
            pins.append(pin.strip() + (f" (where {marker.strip()})" if marker.strip() else ""))
    return " or ".join(pins) or "unknown"


def internal(module: str, name: str):
    """streamlit's `module.name`, or an ImportError that names both versions."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ImportError(
            f"FlashAttention Lab uses {module}.{name}, which Streamlit "
            f"{streamlit.__version__} does not have ({err}). The project is tested with "
            f"Streamlit {tested_version()} (requirements/app.lock): install the locked "
            "versions (bash scripts/start.sh does), or adapt app/core/st_internals.py to this "
            "release.") from err


# the app's own needs
add_script_run_ctx = internal("streamlit.runtime.scriptrunner", "add_script_run_ctx")
get_script_run_ctx = internal("streamlit.runtime.scriptrunner", "get_script_run_ctx")
dataframe_util = internal("streamlit", "dataframe_util")
for _name in ("convert_anything_to_arrow_bytes", "convert_anything_to_pandas_df",
              "convert_pandas_df_to_arrow_table", "convert_arrow_table_to_arrow_bytes"):
    internal("streamlit.dataframe_util", _name)


def stabilized_spec_text(text: str) -> str:
    """A Vega-Lite spec's JSON as Streamlit stabilises it before sending (tests only)."""
    return internal("streamlit.elements.vega_charts", "_stabilize_vega_json_spec")(text)


def arrow_bytes_to_frame(data: bytes):
    """A sent Arrow dataset as a DataFrame, as Streamlit's frontend reads it (tests only)."""
    return internal("streamlit.dataframe_util", "convert_arrow_bytes_to_pandas_df")(data)


def proto(name: str):
    """A message class of Streamlit's protocol, e.g. proto("BackMsg") (the load tests)."""
    return internal(f"streamlit.proto.{name}_pb2", name)
