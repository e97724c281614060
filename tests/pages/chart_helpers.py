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
