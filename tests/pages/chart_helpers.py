"""What the page tests of data and chart builders share (no server): the configs they run,
a chart's datasets and params, the mark limit."""
from __future__ import annotations

from pathlib import Path

import engine
import seeds

H200 = engine.PROFILES["H200"]
FIXTURES = Path(__file__).resolve().parents[1] / "data"
MAX_MARKS = 20000


def datasets(chart) -> dict:
    return chart.to_dict()["datasets"]


def largest_dataset(chart) -> int:
    return max(len(rows) for rows in datasets(chart).values())


def params(chart) -> dict:
    return {p["name"]: p for p in chart.to_dict().get("params", [])}


def fresh_seed() -> int:
    return int(seeds.rng(7706).integers(0, 2**31))


CONFIGS = [
    engine.AttentionConfig(),
    engine.AttentionConfig(seq_q=300, seq_k=257, block_q=64, block_k=32, causal=True),
    engine.AttentionConfig(batch=2, heads=3, seq_q=129, seq_k=520, block_q=16, block_k=128,
                           dtype="float16"),
]


def color_domain(spec) -> list:
    """The first colour scale's domain anywhere in a chart spec."""
    if isinstance(spec, dict):
        domain = spec.get("color", {}).get("scale", {}).get("domain") if isinstance(
            spec.get("color"), dict) else None
        if domain:
            return domain
        spec = list(spec.values())
    for part in spec if isinstance(spec, list) else []:
        if (found := color_domain(part)):
            return found
    return []


# ---- a chart as the page sent it (AppTest), and whether it can draw any mark ---------------
def sent_frames(proto) -> dict:
    """A sent vega_lite_chart's datasets, name -> DataFrame (Arrow IPC as Streamlit sends)."""
    from app.core.st_internals import arrow_bytes_to_frame
    return {d.name: arrow_bytes_to_frame(d.data.data) for d in proto.datasets}


def _log_fields(spec, found: set) -> set:
    """(field) of every positional channel on a log scale anywhere in a spec."""
    if isinstance(spec, dict):
        for ch in ("x", "y", "x2", "y2"):
            enc = spec.get(ch)
            if isinstance(enc, dict) and (enc.get("scale") or {}).get("type") == "log" \
                    and isinstance(enc.get("field"), str):
                found.add(enc["field"])
        for v in spec.values():
            _log_fields(v, found)
    elif isinstance(spec, list):
        for v in spec:
            _log_fields(v, found)
    return found


def why_no_marks(spec: dict, frames: dict) -> str | None:
    """Why a sent chart would draw no mark, or None: every dataset empty, or a field on a
    log axis with no positive value (a bar from log(0) draws nothing, a point at log(0) is
    dropped)."""
    inline = [d for d in _inline_values(spec)]
    if not any(len(f) for f in frames.values()) and not any(inline):
        return "no data"
    for field in _log_fields(spec, set()):
        values = [f[field] for f in frames.values() if field in f]
        if values and not any((v.dropna() > 0).any() for v in values):
            return f"no positive {field} on a log axis"
    return _bar_from_zero_on_log(spec)


def _bar_from_zero_on_log(spec) -> str | None:
    """A bar, rect or area on a log axis that starts at 0: Vega-Lite's default baseline (and
    its stacking) start there, and log(0) draws the bar with no length."""
    if isinstance(spec, list):
        return next((w for w in map(_bar_from_zero_on_log, spec) if w), None)
    if not isinstance(spec, dict):
        return None
    mark = spec.get("mark")
    kind = mark.get("type") if isinstance(mark, dict) else mark
    enc = spec.get("encoding") or {}
    if kind in ("bar", "area"):
        for ch, end in (("x", "x2"), ("y", "y2")):
            e = enc.get(ch)
            if not (isinstance(e, dict) and (e.get("scale") or {}).get("type") == "log"):
                continue
            start = enc.get(end)
            if start is None or (isinstance(start, dict) and "datum" in start
                                 and not start["datum"] > 0):
                return f"a {kind} on a log {ch} axis starts at 0"
    return next((w for w in map(_bar_from_zero_on_log, (v for k, v in spec.items()
                                                         if k != "encoding")) if w), None)


def _inline_values(spec):
    if isinstance(spec, dict):
        if isinstance(spec.get("values"), list) and isinstance(spec.get("values")[:1], list):
            yield spec["values"]
        for v in spec.values():
            yield from _inline_values(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _inline_values(v)
