"""Charts of the Decoding page. Pure functions: DataFrames in, Altair charts out. (The merge,
split by split, is played in the browser by the loop player, app/core/player/, from
data.split_states.)
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.core.legible import POW2_LABEL, fit_label, ink_on, log_ticks, pow2_labels
from app.core.style import ALARM, DONE, FONT, INK, TILE_COLORS, finish, kernel_scale

SPLIT_COLORS = [TILE_COLORS["K_j"], TILE_COLORS["V_j"]]      # alternate, so splits stand apart
# Vega's tableau10, the sequences' colours (given here so that each label's ink can be chosen)
SEQUENCE_COLORS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
                   "#ff9da6", "#9d755d", "#bab0ac"]


def cache_chart(strip: pd.DataFrame, seq_k: int, page_size: int | None,
                width: int = 820) -> alt.LayerChart:
    """The KV cache of one sequence as a strip of seq_k keys, cut into splits (one thread
    block each), with the page boundaries of a paged cache as ticks."""
    px = (strip.k1 - strip.k0) * width / max(seq_k, 1)          # each split's width on screen
    data = strip.assign(parity=strip.split % 2, mid=(strip.k0 + strip.k1) / 2,
                        ink=[ink_on(SPLIT_COLORS[s % 2]) for s in strip.split],
                        label=[fit_label([str(s), ""], w, FONT["text"])
                               for s, w in zip(strip.split, px)])
    x = alt.X("k0:Q", title="key position in the cache", scale=alt.Scale(domain=[0, seq_k]),
              axis=alt.Axis(format="~s", tickCount=8))
    bars = alt.Chart(data).mark_rect(stroke="white", strokeWidth=1).encode(
        x=x, x2="k1:Q", color=alt.Color("parity:N", legend=None,
                                        scale=alt.Scale(domain=[0, 1], range=SPLIT_COLORS)),
        tooltip=[alt.Tooltip("split:Q"), alt.Tooltip("k0:Q", title="first key"),
                 alt.Tooltip("k1:Q", title="end"), alt.Tooltip("keys:Q")])
    layers = [bars]
    if len(data) <= 32:
        layers.append(alt.Chart(data).mark_text(fontSize=FONT["text"], fontWeight="bold")
                      .encode(x="mid:Q", text="label:N", color=alt.Color("ink:N", scale=None)))
    if page_size and seq_k // page_size <= 512:
        ticks = pd.DataFrame({"k": range(page_size, seq_k, page_size)})
        layers.append(alt.Chart(ticks).mark_tick(color=INK, thickness=1, size=14).encode(
            x="k:Q", y=alt.value(53)))          # along the bottom edge, clear of the labels
    title = (f"{len(data)} split{'s' if len(data) > 1 else ''} of the cache"
             + (f", pages of {page_size} keys (ticks)" if page_size else ", contiguous"))
    chart = alt.layer(*layers, height=60, title=title)
    return finish(chart, width)


def pool_chart(cells: pd.DataFrame, columns: int, width: int = 820) -> alt.LayerChart:
    """The paged pool: physical pages in order, coloured by the sequence that owns them and
    labelled with their logical page (the block table read backwards)."""
    rows = int(cells.row.max()) + 1
    enc = dict(x=alt.X("col:O", title=f"physical page mod {columns}",
                       axis=alt.Axis(labelAngle=0, values=list(range(0, columns, 4)))),
               y=alt.Y("row:O", title=f"physical page ÷ {columns}",
                       axis=alt.Axis(values=list(range(0, rows, max(1, rows // 8))))))
    cellsize = max(6, min(34, 600 // max(rows, 1)))
    cell_w = min(width, columns * 24) / max(columns, 1)
    seqs = sorted(cells.sequence.unique())
    fills = {q: SEQUENCE_COLORS[i % len(SEQUENCE_COLORS)] for i, q in enumerate(seqs)}
    cells = cells.assign(ink=[ink_on(fills[q]) for q in cells.sequence],
                         label=[fit_label([str(v), ""], cell_w, 12) if cellsize >= 14 else ""
                                for v in cells.logical])
    rects = alt.Chart(cells).mark_rect(stroke="white", strokeWidth=1).encode(
        **enc, color=alt.Color("sequence:N", title="sequence",
                               scale=alt.Scale(domain=seqs, range=[fills[q] for q in seqs]),
                               legend=alt.Legend(orient="top") if cells.sequence.max() < 16
                               else None),
        tooltip=[alt.Tooltip("page:Q", title="physical page"), "sequence",
                 alt.Tooltip("logical:Q", title="logical page"),
                 alt.Tooltip("k0:Q", title="first key"), alt.Tooltip("k1:Q", title="end"),
                 "split"])
    layers = [rects]
    if len(cells) <= 256:
        layers.append(alt.Chart(cells).mark_text(fontSize=12).encode(
            **enc, text="label:N", color=alt.Color("ink:N", scale=None)))
    chart = alt.layer(*layers, height=rows * cellsize,
                      title="Page pool: cell = physical page, number = logical page")
    return finish(chart, min(width, columns * 24))


def bytes_chart(table: pd.DataFrame, width: int = 200) -> alt.Chart:
    """K and V bytes read per generated token, by KV-head layout."""
    chart = alt.Chart(table, title="K, V bytes per token").mark_bar(
        color=TILE_COLORS["K_j"]).encode(
        y=alt.Y("layout:N", title=None, sort=None),
        x=alt.X("bytes_per_token:Q", title="bytes per token"),
        tooltip=["layout", alt.Tooltip("bytes_per_token:Q", format=",.0f"),
                 alt.Tooltip("floor_us:Q", title="HBM floor (µs)", format=".2f")])
    chart.height = 40 * len(table)
    return finish(chart, width)


def floor_chart(sweep: pd.DataFrame, width: int = 290) -> alt.Chart:
    """Time of one step against cache length: the HBM floor and the model with and without
    splitting (log–log)."""
    positive = sweep.ms[sweep.ms > 0]
    chart = alt.Chart(sweep, title="Step time vs HBM floor (model)").mark_line(
        point=True).encode(
        x=alt.X("seq_k:Q", title="cached keys seq_k", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(labelAngle=-45, values=pow2_labels(sweep.seq_k),
                              labelExpr=POW2_LABEL)),
        y=alt.Y("ms:Q", title="ms per step", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=log_ticks(positive.min(), positive.max()), format="~g")
                if len(positive) else alt.Axis(format="~g")),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom",
                                                                  direction="vertical",
                                                                  labelLimit=300),
                        scale=alt.Scale(range=[INK, TILE_COLORS["S_ij"], ALARM])),
        strokeDash=alt.condition("datum.series == 'HBM floor (K, V bytes ÷ bandwidth)'",
                                 alt.value([6, 4]), alt.value([1, 0])),
        tooltip=["series", "seq_k", alt.Tooltip("ms:Q", format=".4f")])
    chart.height = 280
    return finish(chart, width)


def splits_chart(table: pd.DataFrame, title: str | list, auto: int | None = None,
                 width: int = 290) -> alt.LayerChart:
    """Time of one step against the number of splits (log2 axis), one line per series
    (model, floor, measured kernels), with the auto rule's count marked."""
    names = list(dict.fromkeys(table.series))
    positive = table.ms[table.ms > 0]
    lines = alt.Chart(table).mark_line(point=True).encode(
        x=alt.X("num_splits:Q", title="num_splits", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=[1, 2, 4, 8, 16, 32, 64, 128])),
        y=alt.Y("ms:Q", title="ms per step", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=log_ticks(positive.min(), positive.max()), format="~g")
                if len(positive) else alt.Axis(format="~g")),
        color=alt.Color("series:N", title=None, scale=kernel_scale(names),
                        legend=alt.Legend(orient="bottom", direction="vertical",
                                          labelLimit=300)),
        tooltip=["series", "num_splits", alt.Tooltip("ms:Q", format=".4f")])
    layers = [lines]
    if auto is not None:
        layers.append(alt.Chart(pd.DataFrame({"num_splits": [auto], "label": [f"auto: {auto}"]}))
                      .mark_rule(color=DONE, strokeDash=[4, 4]).encode(x="num_splits:Q"))
    chart = alt.layer(*layers, height=280, title=title)
    return finish(chart, width)
