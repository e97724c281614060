"""Same charts, cheaper runs: what the pages send for their charts (spec and Arrow datasets,
through AppTest) equals what the app sent before charts were cached in their sent form
(tests/data/chart_specs.json.gz, recorded from commit 06def9b, which built every chart with
Altair on a cache miss; the Backward pass and Tile sizes pages' charts re-recorded on
2026-11-24, when their long titles were wrapped, and the Tile sizes page's again on 2026-11-25,
when the kernel registry named the placement chart's tensor-core row by its build, "flash,
tensor core (mma.sync)", and both pages' again later on 2026-11-25, when the placement chart's
bars got a set log domain and baseline and the gradient-growth chart a set norm domain (Vega
drew no bars, and warned of an infinite extent); every page's re-recorded on 2026-11-25 again,
when the charts took the project's binary byte units, text inked by contrast, one unit per
grid and round log ticks, the loop player replaced the SRAM tiling loop chart and the Kernel
page gained its Hopper section; the Backward pass, Decoding and Kernel pages' on 2026-11-27,
when the loop player took over their loop, merge and Hopper pipeline charts, each the charts
recorded before less that one; the
other pages' entries kept), and the cached and templated builds of
app.core.specs equal Altair's own spec for random inputs.

Re-record (only when a chart is meant to change): python tests/test_chart_specs.py, or
python tests/test_chart_specs.py <page> ... for those pages' entries alone (the Precision
page's recorded so on 2026-11-27, when it was added).
"""
from __future__ import annotations

import gzip
import io
import json
import math
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import engine
from app import page_list
from app.core import specs
from app.core.st_internals import dataframe_util, stabilized_spec_text
from app.features.online_softmax.charts import safe_softmax_chart, scores_chart, stats_chart
from app.features.online_softmax.data import convergence, row_trace, score_row
from app.core.results_dir import BENCH_DIR_ENV
from seeds import rng

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "data"
GOLDEN = FIXTURES / "chart_specs.json.gz"
# (page, query parameters): every page at the default config, the loop and softmax pages at a
# causal config whose row sees skipped key tiles, and talk mode's sizes
CASES = [(row.feature, {}) for row in page_list.PAGES] + [
    ("sram_tiling", {"seq_q": 320, "causal": "true", "seed": 7}),
    ("online_softmax", {"seq_q": 320, "causal": "true", "seed": 7, "sm_row": 100}),
    ("online_softmax", {"talk": "true", "seed": 5}),
    ("sram_tiling", {"talk": "true"}),
]
MEASURED = {"timings"}      # pages whose charts show this machine's wall-clock timings
# pages whose charts show float32 results rounded again to 16 or 8 bits (the Precision page's
# errors of bfloat16 and FP8 outputs, its counts of saturated P): a last-bit difference of
# float32 between processors (OpenBLAS's kernels, NumPy's SIMD exp2) can flip one of those
# roundings and move an RMSE by 1e-3 relative, so they are compared by form, as MEASURED
# pages are (tests/pages/test_precision.py checks their values)
ROUNDED = {"precision"}


def _no_floats(x):
    if isinstance(x, dict):
        return {k: _no_floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_floats(v) for v in x]
    return "a float" if isinstance(x, float) else x


def by_value(chart: dict) -> dict:
    """A chart with its datasets named by order of appearance ("dataset 0", ...) instead of by
    the hash of their bytes, which changes with the last bit of any float in them (float32
    sums differ in that bit between processors, since OpenBLAS picks its kernels by CPU)."""
    text = json.dumps(chart["spec"])
    for i, name in enumerate(chart["datasets"]):
        text = text.replace(json.dumps(name), json.dumps(f"dataset {i}"))
    return {"spec": json.loads(text), "data": chart["data"],
            "datasets": list(chart["datasets"].values())}


def measured_form(chart: dict) -> dict:
    """A chart of live timings compared by form: floats in the spec (scale domains) as
    "a float", and the number of datasets instead of their values (which rows exist depends
    on the timings too)."""
    chart = by_value(chart)
    return {"spec": _no_floats(chart["spec"]), "datasets": len(chart["datasets"])}


def decoded(buffer: bytes) -> list[dict]:
    return pa.ipc.open_stream(io.BytesIO(buffer)).read_all().to_pylist()


def sent_charts(page: str, params: dict) -> list[dict]:
    """Every chart a page sends: its spec (parsed) and its datasets (decoded from Arrow)."""
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.query_params.update({k: str(v) for k, v in params.items()})
    at.run()
    if page != "overview":
        at.switch_page(f"features/{page}/page.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return [{"spec": json.loads(c.proto.spec),
             "data": decoded(c.proto.data.data) if c.proto.data.data else None,
             "datasets": {d.name: decoded(d.data.data) for d in c.proto.datasets}}
            for c in at.get("vega_lite_chart")]


# Chart data comes from float32 runs of the emulation (and float64 summaries of them): the same
# code gives values that differ by a few units in float32's last place (2**-24 relative) from
# one processor to another, and quantities derived from differences of such values (errors
# against the float64 reference) differ by a few of the float32 ulps of the values they were
# taken from. REL allows about 170 float32 ulps; ABS covers errors near zero.
REL, ABS = 1e-5, 1e-9


def assert_same(got, want, where="chart", rel=0.0, abs_=0.0):
    """Equal structure and text; floats within rel relative or abs_ absolute (NaN equals
    NaN); exact (to 1e-12 relative) by default."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), \
            f"{where}: keys {list(got) if isinstance(got, dict) else got} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}", rel, abs_)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]", rel, abs_)
    elif isinstance(want, float) and not isinstance(want, bool):
        assert isinstance(got, (int, float)) and (
            math.isclose(got, want, rel_tol=max(rel, 1e-12), abs_tol=max(abs_, 1e-300))
            or (math.isnan(got) and math.isnan(want))), f"{where}: {got!r} != {want!r}"
    else:
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv(BENCH_DIR_ENV, str(FIXTURES))
    st.cache_data.clear()
    specs.clear()
    yield
    st.cache_data.clear()
    specs.clear()


@pytest.mark.slow
@pytest.mark.skipif(engine.probe_gpu()[0], reason="recorded from the CPU emulation")
@pytest.mark.parametrize("page,params", CASES, ids=[f"{p}-{q}" for p, q in CASES])
def test_pages_send_the_charts_they_sent_before(fresh, page, params):
    golden = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    want = golden[f"{page} {json.dumps(params, sort_keys=True)}"]
    form = measured_form if page in MEASURED | ROUNDED else by_value
    for when in ("built", "cached"):            # the second time from the caches
        got = sent_charts(page, params)
        assert len(got) == len(want), f"{page} {params}: {len(got)} charts, before {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(form(g), form(w), f"{page} {params} chart {i}, {when}", REL, ABS)


def altair_sent(chart) -> dict:
    """What Streamlit sends for an Altair chart given as a dict spec, built the plain way."""
    spec = chart.to_dict(validate=False)
    datasets = {name: decoded(dataframe_util.convert_anything_to_arrow_bytes(v))
                for name, v in spec.pop("datasets", {}).items()}
    return {"spec": json.loads(stabilized_spec_text(json.dumps(spec))),
            "datasets": datasets}


def cached_sent(builder, *args) -> dict:
    sent = specs.sent_chart(builder, *args)
    return {"spec": json.loads(stabilized_spec_text(json.dumps(sent.spec))),
            "datasets": {n: decoded(b) for n, b in sent.datasets.items()}}


@pytest.mark.parametrize("salt", range(6))
def test_templated_softmax_charts_equal_altairs(fresh, salt):
    """One template per layout, filled with each new row's data, gives Altair's spec: random
    configs (causal or not), seeds and rows, drawn after one another so templates are
    reused."""
    g = rng(salt)
    for _ in range(3):
        n = int(g.choice([128, 192, 320]))
        cfg = engine.AttentionConfig(seq_q=n, seq_k=n, causal=bool(g.integers(2)),
                                     seed=int(g.integers(1, 1000)))
        q, k, v = engine.make_inputs(cfg)
        res = engine.run(cfg, q, k, v, backend="numpy", algorithm="flash", trace=True)
        r = int(g.integers(cfg.seq_q))
        rows = row_trace(res.trace, cfg, 0, 0, r)
        conv = convergence(cfg, q, k, v, res.output, res.trace, 0, 0, r)
        scores = score_row(cfg, q, k, 0, 0, r)
        for builder, args in ((stats_chart, (rows, conv.table)),
                              (scores_chart, (scores, rows)), (safe_softmax_chart, (scores,))):
            want = altair_sent(builder(*args))
            assert_same(cached_sent(builder, *args), want,
                        f"{builder.__qualname__} salt={salt} cfg={cfg} row={r}")
            assert_same(cached_sent(builder, *args), want, "cached")


def test_altair_names_datasets_as_specs_does():
    """app.core.specs names a template's datasets the way Altair names inline data (a hash of the
    values); if an Altair release changes that, this says so plainly, before the chart
    comparisons below fail on names."""
    import altair as alt
    import pandas as pd

    frame = pd.DataFrame({"x": [1.5, 2.0, float("nan")], "s": ["a", None, "c"]})
    spec = alt.Chart(frame).mark_point().encode(x="x:Q").to_dict(validate=False)
    (name, values), = spec["datasets"].items()
    assert specs.dataset_name(values) == name, (
        f"Altair {alt.__version__} names inline datasets differently from "
        "app.core.specs.dataset_name; the project is tested with the Altair that "
        "requirements/app.lock pins: install the locked versions or adapt app/core/specs.py")


def test_records_are_altairs():
    """specs.records gives what Altair's data transformer gives: Python numbers, bools and
    strings, None for NaN, inf and missing values, for every dtype kind the charts use."""
    import altair as alt
    import numpy as np
    import pandas as pd
    g = rng(12)
    x = g.standard_normal(40)
    x[[3, 7]] = np.nan
    x[11] = np.inf
    frame = pd.DataFrame({"f": x, "f32": (-x).astype(np.float32), "i": g.integers(-9, 9, 40),
                          "u": g.integers(0, 9, 40).astype(np.uint8), "b": x > 0,
                          "s": [None if i % 5 == 0 else f"k{i}" for i in range(40)],
                          "c": pd.Categorical(["a", "b"] * 20)})
    for cols in (["f", "f32", "i", "u", "b", "s"], ["f", "c"], ["s"]):
        want = alt.data_transformers.get()(frame[cols])["values"]
        got = specs.records(frame[cols])
        assert got == want and all(type(got[r][c]) is type(want[r][c])
                                   for r in range(40) for c in cols), cols


def test_arrow_bytes_are_streamlits():
    """app.core.arrow_ipc gives the very bytes Streamlit's own conversion of the records gives, for
    datasets of every column kind the charts use (missing values in some, of several lengths,
    so that later ones take the fast path) and for records it leaves to Streamlit."""
    import numpy as np
    import pandas as pd
    from app.core.arrow_ipc import arrow_bytes
    g = rng(13)
    for n in (1, 7, 40, 7, 300):
        x = g.standard_normal(n)
        holed = x.copy()
        holed[g.random(n) < 0.2] = np.nan
        frame = pd.DataFrame({"f": x, "holed": holed, "i": g.integers(-9, 9, n),
                              "b": x > 0, "s": [f"k{i}" for i in range(n)],
                              "s_none": [None if i % 3 == 0 else "v" for i in range(n)]})
        for cols in (["f", "i", "b", "s"], ["holed", "s_none"], ["i"], ["f", "holed"]):
            values = specs.records(frame[cols])
            want = dataframe_util.convert_anything_to_arrow_bytes(values)
            for _ in range(2):            # the first call of a kind learns its schema
                assert arrow_bytes(values) == want, f"n={n} cols={cols}"
    odd = [[{"a": 1, "b": None}, {"a": 2, "b": None}],      # a column with no value at all
           [{"a": 1}, {"a": 2.5}], [{"a": 1}, {"b": 2}],       # mixed numbers, ragged rows
           [{"a": "x"}, {"a": 3}], []]
    for values in odd:
        assert arrow_bytes(values) == dataframe_util.convert_anything_to_arrow_bytes(values), \
            values


def test_cache_tells_inputs_apart(fresh):
    """Equal inputs share one SentChart; a changed value or kwarg draws a new one."""
    g = rng(11)
    cfg = engine.AttentionConfig(seq_q=128, seq_k=128, seed=int(g.integers(1, 1000)))
    q, k, v = engine.make_inputs(cfg)
    scores = score_row(cfg, q, k, 0, 0, 5)
    first = specs.sent_chart(safe_softmax_chart, scores)
    assert specs.sent_chart(safe_softmax_chart, scores.copy()) is first
    other = scores.assign(score=scores.score * 1.5)
    assert specs.sent_chart(safe_softmax_chart, other).datasets != first.datasets
    assert specs.sent_chart(safe_softmax_chart, scores, width=300).spec != first.spec


def record(pages: list[str] | None = None) -> None:
    """Record every case's charts, or only those of `pages` (feature names), keeping the
    other entries as they were."""
    import os
    os.environ[BENCH_DIR_ENV] = str(FIXTURES)
    out = json.loads(gzip.decompress(GOLDEN.read_bytes())) if pages else {}
    for page, params in CASES:
        if pages and page not in pages:
            continue
        st.cache_data.clear()
        out[f"{page} {json.dumps(params, sort_keys=True)}"] = sent_charts(page, params)
    GOLDEN.write_bytes(gzip.compress(json.dumps(out).encode(), mtime=0))
    print(f"{GOLDEN}: {sum(len(v) for v in out.values())} charts")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    record(sys.argv[1:] or None)      # python tests/test_chart_specs.py [page ...]


def test_chart_cache_is_bounded_by_bytes():
    """Entries leave oldest-used first, only as many as the byte and entry bounds need."""
    lru = specs._Lru(entries=10, max_bytes=100, size=len)
    lru.put("big", "x" * 60)
    lru.put("small1", "y" * 30)
    assert lru.get("big") is not None           # used: small1 is now the oldest
    lru.put("small2", "z" * 30)
    assert lru.get("small1") is None and lru.get("big") and lru.get("small2")
    assert lru.bytes == 90
    for i in range(12):
        lru.put(i, "")
    assert len(lru) == 10 and lru.bytes == 0 and lru.get(0) is None and lru.get(11) == ""
    lru.put("huge", "h" * 500)                  # over the bound alone: kept, the rest leave
    assert list(lru) == ["huge"] and lru.bytes == 500
    lru.put("huge", "h" * 5)                    # a new value for a key counts once
    assert lru.bytes == 5
    lru.clear()
    assert len(lru) == 0 and lru.bytes == 0 and lru.get("huge") is None
