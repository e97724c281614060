"""What the page tests share: opening a page through Streamlit's AppTest (the Overview first,
as a link does, then the page's script from its row of app/page_list.py), reading what it
drew (charts' specs, texts, the URL), and the dates of the committed GPU recordings."""
from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

import engine
from app import page_list

ON_GPU = engine.probe_gpu()[0]      # backend "auto" runs the CuPy kernels there
ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"
FIXTURES = ROOT / "tests" / "data"
PAGES = [row.feature for row in page_list.PAGES]
# each page's heading: its title, but the Overview is headed with the app's name
HEADINGS = {row.feature: row.title for row in page_list.PAGES} | {"overview": "FlashAttention Lab"}
# charts drawn with the default config and the test fixtures (app/page_list.py's charts)
CHARTS = {row.feature: row.charts for row in page_list.PAGES}


def recorded_date(name: str) -> str:
    """The date of a committed file of benchmarks/results/, which the pages' captions name."""
    from engine import recorded
    return json.loads((recorded.BENCH_DIR / name).read_text())["date"]


def open_page(page: str, **params) -> AppTest:
    """The page of the feature folder `page` (app/features/<page>/), opened by a link with
    these query parameters."""
    at = AppTest.from_file(str(MAIN), default_timeout=120)
    at.query_params.update({k: str(v) for k, v in params.items()})
    at.run()
    if page != "overview":
        at.switch_page(next(row.script for row in page_list.PAGES if row.feature == page)).run()
    return at


def specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "error")
             for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(str(p) for p in parts)


def config_heading(at: AppTest) -> str:
    return next(h.value for h in at.main.subheader if h.value.startswith("This config"))


def assert_clean(at: AppTest):
    assert not at.exception, [e.value for e in at.exception]


def url(at: AppTest) -> dict:
    """The app's query parameters as name -> text."""
    return {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}


def color_domains(spec) -> list:
    """Every colour scale's domain in a chart spec (the legends' entries)."""
    if isinstance(spec, list):
        return [n for part in spec for n in color_domains(part)]
    if not isinstance(spec, dict):
        return []
    found = []
    if isinstance(spec.get("color"), dict):
        found += (spec["color"].get("scale") or {}).get("domain", [])
    return found + [n for v in spec.values() for n in color_domains(v)]


def player(at: AppTest) -> dict:
    """What the page sent its loop player (app/core/player/component.py): spec (the frames),
    sig and start (the 0-based step it opens at)."""
    element = next(e for e in at.get("component_instance")
                   if e.proto.component_name.endswith("loop_player"))
    return json.loads(element.proto.json_args)
