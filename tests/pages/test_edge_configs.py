"""Every page on the edge configs the sidebar offers (N = 1; causal with N_q ≠ N_k) on the
classroom profiles (H200, H100, A100, T4): no exception and no chart that could draw no mark
(no data, or nothing positive on a log axis), read from what the page sent.

The profiles are taken in turn over the pages; FA_LAB_BROWSER_EVERY_PROFILE=1 (the browser
test's switch) runs every page on every profile."""
from __future__ import annotations

import json
import os

import pytest

import engine
from apptest_helpers import CHARTS, PAGES, assert_clean, open_page
from chart_helpers import sent_frames, why_no_marks

CLASSROOM = tuple(next(k for k in engine.PROFILES if k.startswith(p))
                  for p in ("H200", "H100", "A100", "T4"))
EDGES = {"N=1": dict(seq_q=1, seq_k=1),
         "causal Nq<Nk": dict(link_seq="false", seq_q=300, seq_k=257 * 2, causal="true",
                              block_q=64, block_k=32),
         "causal Nq>Nk": dict(link_seq="false", seq_q=520, seq_k=129, causal="true")}


def _cases():
    if os.environ.get("FA_LAB_BROWSER_EVERY_PROFILE") == "1":
        return [(p, e, g) for p in PAGES for e in EDGES for g in CLASSROOM]
    return [(p, e, CLASSROOM[(i + j) % len(CLASSROOM)])
            for i, p in enumerate(PAGES) for j, e in enumerate(EDGES)]


@pytest.mark.parametrize("page,edge,profile", _cases())
def test_every_chart_has_marks_on_edge_configs(page, edge, profile):
    at = open_page(page, profile=profile, backend="numpy", **EDGES[edge])
    assert_clean(at)
    charts = at.get("vega_lite_chart")
    assert len(charts) >= min(CHARTS[page], 1), f"{page} {edge} on {profile}: no chart"
    for chart in charts:
        spec = json.loads(chart.proto.spec)
        why = why_no_marks(spec, sent_frames(chart.proto))
        title = json.dumps(spec.get("title", ""))[:80]
        assert why is None, f"{page} {edge} on {profile}: chart {title} draws nothing: {why}"
