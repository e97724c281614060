"""What keeps chart text readable, computed in Python so tests can check it: the colour a
Vega colour scheme gives a value, the ink (black or white) that reads on a colour at WCAG's
4.5:1, labels shortened to fit their cells, and tick values for log axes that never crowd.

The schemes are Vega's own colour lists (vega-scale's schemes.js, as Streamlit's bundled Vega
holds them); Vega interpolates them piecewise-linearly in RGB, and so does `scheme_color`.
"""
from __future__ import annotations

import math

# vega-scale's continuous schemes used by the app's charts, lightest first
SCHEMES = {
    "blues": "cfe1f2bed8eca8cee58fc1de74b2d75ba3cf4592c63181bd206fb2125ca40a4a90",
    "greens": "d3eecdc0e6baabdda594d3917bc77d60ba6c46ab5e329a512089430e7735036429",
    "greys": "e2e2e2d4d4d4c4c4c4b1b1b19d9d9d8888887575756262624d4d4d3535351e1e1e",
    "oranges": "fdd8b3fdc998fdb87bfda55efc9244f87f2cf06b18e4580bd14904b93d029f3303",
    "purples": "e2e1efd4d4e8c4c5e0b4b3d6a3a0cc928ec3827cb97566ae684ea25c3696501f8c",
}
DARK_INK = "#000000"     # black, not the page's #222 ink: black reads at 4.5:1 on every colour
LIGHT_INK = "#FFFFFF"    # that white does not
MIN_CONTRAST = 4.5       # WCAG AA for normal text
CHAR_EM = 0.62           # width of a digit or letter of chart text, as a fraction of its size


def _rgb(color: str) -> tuple[int, int, int]:
    c = color.lstrip("#")
    if len(c) == 3:
        c = "".join(ch * 2 for ch in c)
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)


def luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""
    def lin(v: int) -> float:
        v = v / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = _rgb(color)
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours, 1 to 21."""
    la, lb = luminance(a), luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def ink_on(fill: str) -> str:
    """The text colour that reads best on `fill`: white or black (one of them always reaches
    4.5:1)."""
    return LIGHT_INK if contrast(LIGHT_INK, fill) >= contrast(DARK_INK, fill) else DARK_INK


def scheme_color(scheme: str, t: float) -> str:
    """Vega's colour of scheme `scheme` at t in [0, 1]."""
    text = SCHEMES[scheme]
    stops = [_rgb(text[i:i + 6]) for i in range(0, len(text), 6)]
    t = min(max(float(t), 0.0), 1.0) * (len(stops) - 1)
    i = min(int(t), len(stops) - 2)
    f = t - i
    rgb = (round(a + (b - a) * f) for a, b in zip(stops[i], stops[i + 1]))
    return "#" + "".join(f"{v:02x}" for v in rgb)


def scale_position(value: float, domain: tuple[float, float], log: bool = False) -> float:
    """Where `value` sits in a continuous scale's domain, 0 to 1 (0.5 for a one-value domain,
    as Vega's scales do)."""
    lo, hi = domain
    if log:
        value, lo, hi = (math.log(max(v, 1e-300)) for v in (value, lo, hi))
    return 0.5 if hi == lo else (value - lo) / (hi - lo)


def text_width(text: str, font_px: float) -> float:
    """About how wide `text` is drawn at `font_px` (a generous estimate)."""
    return len(text) * CHAR_EM * font_px


def fit_label(candidates: list[str], width_px: float, font_px: float) -> str:
    """The first of `candidates` (longest first) that fits `width_px` with a little margin;
    the last one else."""
    for text in candidates:
        if text_width(text, font_px) <= width_px - 4:
            return text
    return candidates[-1]


def log_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Tick values for a log axis over [low, high]: 1, 2 and 5 times powers of ten where that
    gives enough ticks, powers of ten (every one or every few) where the range is wide; at most
    `most`, so no two labels touch."""
    if not (low > 0 and high > 0):
        return []
    low, high = min(low, high), max(low, high)
    k0, k1 = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1, 2, 5), (1, 3), (1,)):
        values = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in mantissas]
        values = [v for v in values if low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]
        if 2 <= len(values) <= most:
            return [float(f"{v:.12g}") for v in values]
    step = max(1, math.ceil((k1 - k0 + 1) / most))
    values = [10.0 ** k for k in range(k0, k1 + 1, step)]
    inside = [v for v in values if low <= v <= high]
    return inside if len(inside) >= 2 else [float(f"{low:.3g}"), float(f"{high:.3g}")]


def pow2_labels(values) -> list[float]:
    """Powers of two among `values`, thinned to at most 8 (log2 axes of N and seq_k)."""
    vals = sorted({float(v) for v in values if v and v > 0})
    every = max(1, -(-len(vals) // 8))
    return vals[::every]


# Axis labels of powers of two in binary thousands: 512, 1k, 2k, ..., 64k, 1M
POW2_LABEL = ("datum.value >= 1048576 ? format(datum.value / 1048576, '.3~g') + 'M' : "
              "datum.value >= 1024 ? format(datum.value / 1024, '.3~g') + 'k' : "
              "format(datum.value, '~g')")
