"""Charts of the Tile sizes page. Pure functions: DataFrames in, Altair charts out.

The heatmaps carry a point selection named `cell` (fields block_q, block_k) on a transparent
top layer, so a click anywhere in a cell selects it; the page turns the selection into the
sidebar's block_q and block_k.
"""
from __future__ import annotations

import math

import altair as alt
import pandas as pd

from app.core.legible import fit_label, ink_on, log_ticks, scale_position, scheme_color
from app.core.style import ALARM, FONT, HALF_COLUMN, INK, PENDING, TILE_COLORS, finish, wrap_title

SELECTION = "cell"
STATUS_COLORS = {"does not fit": "#F4C7B0", "not taken by this kernel": PENDING}
LEVEL_COLORS = {"registers": TILE_COLORS["S_ij"], "shared memory": TILE_COLORS["Q_i"],
                "HBM": ALARM}


HEATMAP_SIZE = 290      # plot width in px; two heatmaps side by side fit 1280 px
LABEL_PX = 12           # a cell's label
# shorter labels, by status or by text, for cells too narrow for the full one (in the tooltip)
SHORTER = {"does not fit": ["no fit"], "not taken by this kernel": ["—"],
           "not timed": ["untimed", "–"]}


def with_marks(texts: list[str], marks: str) -> list[str]:
    """A cell's label candidates (longest first) with its ★ / ▲ after each, and the marks
    alone last: the marks are part of the one centred label, so they can neither leave the
    cell nor overlap its text."""
    if not marks:
        return texts
    return [f"{t} {marks}" for t in texts] + [marks]


def cell_colors(cells: pd.DataFrame, scheme: str = "blues", log: bool = False,
                size: int = HEATMAP_SIZE) -> pd.DataFrame:
    """cells with what the heatmap draws: `fill` (the colour Vega gives the cell: the scheme's
    colour at its value on a scale over the grid's values, or its status's colour), `ink`
    (black or white, whichever reads on `fill`) and `label` (its text, shortened to fit the
    cell: the full text stays in the tooltip)."""
    values = cells.value[cells.value.notna() & (cells.value > 0 if log else True)]
    domain = (float(values.min()), float(values.max())) if len(values) else (1.0, 1.0)
    fill = [scheme_color(scheme, scale_position(v, domain, log)) if st == "fits" and v == v
            else STATUS_COLORS.get(st, PENDING) for v, st in zip(cells.value, cells.status)]
    width = size / max(cells.block_k.nunique(), 1)
    marks = cells.marks if "marks" in cells else [""] * len(cells)
    label = [fit_label(with_marks([t, *SHORTER.get(st, SHORTER.get(t, []))], m), width,
                       LABEL_PX) if isinstance(t, str) else m
             for t, st, m in zip(cells.text, cells.status, marks)]
    return cells.assign(fill=fill, ink=[ink_on(f) for f in fill], label=label)


def tile_heatmap(cells: pd.DataFrame, title: str, legend: str, scheme: str = "blues",
                 log: bool = False, size: int = HEATMAP_SIZE) -> alt.LayerChart:
    """block_k across, block_q down; colour = value (cells that do not fit or that the kernel
    does not take drawn in their own colour, with a word); ★ fastest measured, ▲ the paper's
    choice; the current config outlined in black. Text in black or white by the cell's
    colour, shortened where it would overflow its cell; the legend names the grid's one unit
    (a `unit` column, where the cells have one)."""
    if "unit" in cells and len(cells):
        legend = str(cells.unit.iloc[0])
    cells = cell_colors(cells, scheme, log, size)
    x = alt.X("block_k:O", title="block_k (Bc)", axis=alt.Axis(labelAngle=0))
    y = alt.Y("block_q:O", title="block_q (Br)")
    base = alt.Chart(cells).encode(x=x, y=y)
    valid = cells.value[cells.value.notna() & (cells.value > 0 if log else True)]
    has_values = bool(len(valid))
    layers = []
    if has_values:
        lo, hi = float(valid.min()), float(valid.max())
        scale = alt.Scale(scheme=scheme, type="log" if log else "linear", domain=[lo, hi],
                          nice=False, **({} if log else {"zero": False}))
        ticks = log_ticks(lo, hi, 4) if log else None
        layers.append(base.transform_filter("isValid(datum.value)").mark_rect(
            stroke="white", strokeWidth=1).encode(
            color=alt.Color("value:Q", title=legend, scale=scale,
                            legend=alt.Legend(orient="bottom", gradientLength=size - 80,
                                              format=",.3~r", labelOverlap=True,
                                              **({"values": ticks} if ticks else {})))))
    others = cells[cells.status != "fits"]
    if not others.empty:
        layers.append(alt.Chart(others).mark_rect(stroke="white", strokeWidth=1).encode(
            x=x, y=y, color=alt.Color("status:N", title=None,
                                      scale=alt.Scale(domain=list(STATUS_COLORS),
                                                      range=list(STATUS_COLORS.values())),
                                      legend=alt.Legend(orient="bottom", direction="vertical"))))
    ink = alt.Color("ink:N", scale=None)
    layers.append(base.mark_text(fontSize=LABEL_PX, baseline="middle").encode(
        text="label:N", color=ink))
    layers.append(base.transform_filter("datum.current").mark_rect(
        fill=None, stroke="black", strokeWidth=4))
    pick = alt.selection_point(name=SELECTION, fields=["block_q", "block_k"], on="click",
                               clear=False)
    hit = base.mark_rect(fill="white", fillOpacity=0.01).encode(
        tooltip=[alt.Tooltip("shape:N", title="block_q × block_k"),
                 alt.Tooltip("text:N", title=legend), alt.Tooltip("status:N", title="status")])
    hit.params = [pick.param]
    layers.append(hit)
    chart = alt.LayerChart(layer=layers, width=size, height=int(size * 0.8),
                           title=wrap_title(title, HALF_COLUMN),
                           resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="independent")))
    return finish(chart)


PYRAMID_WIDTH = 600     # fits the main column at 1280 px with its axis


def pyramid_chart(levels: pd.DataFrame) -> alt.LayerChart:
    """The memory pyramid: one bar per level, its width the logarithm of its capacity (host
    memory, whose size is the host's, drawn widest), labelled with capacity and bandwidth."""
    known = levels.capacity_bytes.dropna()
    lo, hi = float(known.min()), float(known.max())
    widths = [(math.log10(c) - math.log10(lo) + 1) if c == c and c else
              (math.log10(hi) - math.log10(lo) + 2) for c in levels.capacity_bytes]
    data = levels.assign(half=[w / 2 for w in widths], neg=[-w / 2 for w in widths],
                         label=[f"{lv}: {c}, {b}" for lv, c, b in
                                zip(levels.level, levels.capacity, levels.bandwidth)])
    top = max(widths) / 2 + 0.2
    y = alt.Y("level:N", sort=list(levels.level), title=None, axis=None)
    bars = alt.Chart(data).mark_bar(height=40, color=TILE_COLORS["Q_i"], opacity=0.35).encode(
        x=alt.X("neg:Q", scale=alt.Scale(domain=[-top, top]), axis=None), x2="half:Q", y=y,
        tooltip=["level:N", "capacity:N", "capacity source:N", "bandwidth:N",
                 "bandwidth source:N"])
    text = alt.Chart(data).mark_text(fontSize=FONT["text"], color=INK).encode(
        x=alt.value(PYRAMID_WIDTH / 2), y=y, text="label:N")
    chart = alt.layer(bars, text).properties(
        width=PYRAMID_WIDTH, height=alt.Step(52),
        title=wrap_title("The memory pyramid: small and fast on top (bar width: capacity, "
                         "log scale)", PYRAMID_WIDTH))
    return finish(chart)


# Axis labels in the binary units of engine.model.units (the page's sizes): 512 B, 32 KiB, 1 GiB
BYTE_LABELS = ("datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + ' GiB' : "
               "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + ' MiB' : "
               "datum.value >= 1024 ? format(datum.value / 1024, '~g') + ' KiB' : "
               "format(datum.value, '~g') + ' B'")   # the binary units of engine.model.units


def byte_axis_domain(sizes: pd.Series) -> list[float]:
    """A log axis's domain for these byte counts (all positive): from the power of two below
    the smallest, so its bar is never of zero length, to the power of two at or above the
    largest ([1, 2] for none)."""
    if not len(sizes):
        return [1.0, 2.0]
    low, high = float(sizes.min()), float(sizes.max())
    return [2.0 ** (math.ceil(math.log2(low)) - 1), 2.0 ** max(1, math.ceil(math.log2(high)))]


def byte_ticks(domain: list[float], most: int = 6) -> list[float]:
    """Round binary sizes across a byte_axis_domain: every power of two over a narrow one,
    else 1 B, 1 KiB, 1 MiB, 1 GiB (with 32 of each between them where few fit): at most
    `most` labels (more collide in 400 px)."""
    low, high = (round(math.log2(v)) for v in domain)
    for every in (1, 5, 10, 20, 40):
        ticks = [2.0 ** e for e in range(low, high + 1) if e % every == 0]
        if len(ticks) <= most:
            return ticks
    return ticks
def placement_chart(places: pd.DataFrame) -> alt.Chart:
    """Bytes of each array of this config by where it lives (log scale), naive and flash.
    Each bar runs from the axis's left end, a power of ten below the smallest array, to the
    array's bytes: a log scale has no zero to start a bar from (Vega-Lite's default baseline
    and its stacking both start at 0, and draw nothing)."""
    places = places[places.bytes > 0]
    domain = byte_axis_domain(places.bytes)
    chart = alt.Chart(places).mark_bar(height=18).encode(
        x=alt.X("bytes:Q", title="bytes (log scale)", stack=None,
                scale=alt.Scale(type="log", domain=domain, nice=False),
                axis=alt.Axis(labelExpr=BYTE_LABELS, values=byte_ticks(domain))),
        x2=alt.datum(domain[0]),
        y=alt.Y("what:N", title=None, sort=list(dict.fromkeys(places.what)),
                axis=alt.Axis(labelLimit=240)),
        color=alt.Color("where:N", title="kept in",
                        scale=alt.Scale(domain=list(LEVEL_COLORS),
                                        range=list(LEVEL_COLORS.values())),
                        legend=alt.Legend(orient="bottom")),
        row=alt.Row("algorithm:N", title=None, sort=list(dict.fromkeys(places.algorithm)),
                    header=alt.Header(labelAngle=0, labelAlign="left")),
        tooltip=["algorithm:N", "what:N", "where:N", "size:N"])
    return finish(chart.properties(width=400).resolve_scale(y="independent"))
