"""Charts of the online-softmax page. Pure functions: DataFrames in, Altair charts out.

The per-tile panels share one Vega slider (`upto`, the key tile the loop has reached), so
stepping through the tiles happens in the browser without re-running Python.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from app.core.specs import Hole, TemplateChart
from app.core.style import (ALARM, DONE, FONT, INK, LABEL_NAMES, PENDING, TILE_COLORS, finish,
                            slider)

UPTO = "upto"
LN10 = math.log(10)


def tile_param(n_tiles: int) -> alt.VariableParameter:
    top = max(n_tiles - 1, 0)
    return slider(UPTO, top, 0, top, 1, "after key tile j = ")


def _panel(data: pd.DataFrame, title: str, width: int, height: int = 190):
    return alt.Chart(data, title=title).properties(width=width, height=height)


def _x(n_tiles: int, field: str = "tile"):
    return alt.X(f"{field}:Q", title="key tile j", scale=alt.Scale(domain=[-0.5, n_tiles - 0.5]),
                 axis=alt.Axis(tickMinStep=1, format="d"))


UNSEEN_OPACITY = 0.4     # what the loop has not reached: lighter, still legible on a projector


def _seen(chart):
    """Lighten what the loop has not reached yet."""
    return chart.encode(opacity=alt.condition(f"datum.tile <= {UPTO}", alt.value(1),
                                              alt.value(UNSEEN_OPACITY)))


def _skipped(skipped: pd.DataFrame, n_tiles: int, width: int):
    """Key tiles the causal mask skips for this row's query tile: a hatched-grey band, so
    they read as not computed."""
    return alt.Chart(skipped).transform_calculate(t0="datum.tile - 0.5",
                                                  t1="datum.tile + 0.5").mark_rect(
        color=PENDING, stroke=DONE, strokeDash=[3, 3]).encode(
        x=_x(n_tiles, "t0"), x2="t1:Q",
        tooltip=[alt.Tooltip("tile:Q", title="key tile j (skipped by the causal mask)")])


def _now(n_tiles: int):
    return alt.Chart(pd.DataFrame({"t": [0]})).transform_calculate(tile=UPTO).mark_rule(
        color=INK, strokeDash=[4, 4], strokeWidth=2).encode(x=_x(n_tiles))


def _long_max(kept: pd.DataFrame) -> pd.DataFrame:
    """The tile max and the running max of the processed tiles as one long table (tile,
    series in words, value), the tile max first, missing values left out: pandas' melt and
    dropna without their per-call cost."""
    value = np.concatenate([kept.tile_max.to_numpy(), kept.running_max.to_numpy()])
    ok = ~np.isnan(value)
    series = np.repeat([LABEL_NAMES["tile_max"], LABEL_NAMES["running_max"]], len(kept))
    return pd.DataFrame({"tile": np.tile(kept.tile.to_numpy(), 2)[ok],
                         "series": pd.array(series[ok].tolist(), dtype="str"),
                         "value": value[ok]})


def _stats_split(rows: pd.DataFrame, errors: pd.DataFrame, width: int = 280,
                 height: int = 190):
    ran = rows.processed.to_numpy(dtype=bool)
    kept = rows[ran]
    rescale = kept.rescale.to_numpy()
    frames = {
        "skipped": rows.loc[~ran, ["tile"]],
        "long_max": _long_max(kept),
        "flagged": kept.assign(moved=rescale < 1,
                               fill=np.where(rescale < 1, ALARM, DONE).tolist()),
        "rows": kept,
        "errors": errors[errors.tile.isin(rows.tile[ran])],
    }
    return frames, (len(rows), bool((~ran).any()), width, height)


def _stats_draw(frames: dict[str, pd.DataFrame], n: int, any_skipped: bool,
                width: int, height: int) -> alt.VConcatChart:
    x = _x(n)
    skipped = frames["skipped"]
    maxes = _panel(frames["long_max"], "tile max vs running max m_i", width, height)
    max_color = alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom"),
                          scale=alt.Scale(domain=[LABEL_NAMES["tile_max"],
                                                  LABEL_NAMES["running_max"]],
                                          range=[TILE_COLORS["K_j"], TILE_COLORS["m_i"]]))
    maxes = (_seen(maxes.mark_line(point=alt.OverlayMarkDef(size=90), strokeWidth=3).encode(
        x=x, y=alt.Y("value:Q", title="score (scaled)", scale=alt.Scale(zero=False)),
        color=max_color, tooltip=["tile:Q", "series:N", alt.Tooltip("value:Q", format=".4f")]))
        + _now(n))
    if any_skipped:
        maxes = _skipped(skipped, n, width) + maxes

    rescale = (_seen(_panel(frames["flagged"], "rescale factor exp(m_old − m_new)",
                            width, height).mark_bar(
        size=max(4, 0.6 * width / max(n, 1))).encode(
        x=x, y=alt.Y("rescale:Q", title="factor", scale=alt.Scale(domain=[0, 1.05])),
        color=alt.Color("fill:N", scale=None),
        tooltip=["tile:Q", alt.Tooltip("rescale:Q", format=".6f"), "moved:N"]))
        + _now(n))
    if any_skipped:
        rescale = _skipped(skipped, n, width) + rescale

    sums = (_seen(_panel(frames["rows"], "running sum l_i", width, height).mark_line(
        point=alt.OverlayMarkDef(size=90), strokeWidth=3, color=TILE_COLORS["l_i"]).encode(
        x=x, y=alt.Y("running_sum:Q", title="l_i"),
        tooltip=["tile:Q", alt.Tooltip("running_sum:Q", format=".6g")])) + _now(n))
    if any_skipped:
        sums = _skipped(skipped, n, width) + sums

    err = (_seen(_panel(frames["errors"], "error of the partial output vs exact",
                        width, height).mark_line(
        point=alt.OverlayMarkDef(size=90), strokeWidth=3, color=TILE_COLORS["O_i"]).encode(
        x=x, y=alt.Y("rel_error:Q", title="relative error"),
        tooltip=["tile:Q", alt.Tooltip("rel_error:Q", format=".3e")])) + _now(n))
    if any_skipped:
        err = _skipped(skipped, n, width) + err

    chart = alt.vconcat(alt.hconcat(maxes, rescale), alt.hconcat(sums, err))
    return finish(chart, params=[tile_param(n)])


# stats_chart(rows, errors, width=280, height=190): tile max vs running max, rescale factor
# (below 1 in red), running sum, and the partial output's error against the exact answer, over
# key tiles. Key tiles the row's query tile skips (causal) are drawn as grey bands, not as
# computed values.
stats_chart = TemplateChart("stats_chart", _stats_split, _stats_draw)


def _scores_split(scores: pd.DataFrame, tiles: pd.DataFrame, width: int = 640):
    return ({"bands": tiles.assign(odd=tiles.tile % 2 == 1),
             "scores": scores.dropna(subset=["score"])}, (width,))


def _scores_draw(frames: dict[str, pd.DataFrame], width: int) -> alt.LayerChart:
    bands = alt.Chart(frames["bands"]).mark_rect(opacity=0.25).encode(
        x=alt.X("k0:Q", title="key index"), x2="k1:Q",
        color=alt.Color("odd:N", legend=None,
                        scale=alt.Scale(domain=[False, True],
                                        range=[TILE_COLORS["K_j"], "#FFFFFF"])),
        tooltip=[alt.Tooltip("tile:Q", title="key tile j"), "k0:Q", "k1:Q"])
    line = alt.Chart(frames["scores"]).mark_line(
        color=TILE_COLORS["S_ij"], strokeWidth=2).encode(
        x="key:Q", y=alt.Y("score:Q", title="score s = scale·q·k"),
        tooltip=["key:Q", alt.Tooltip("score:Q", format=".4f"), "tile:Q"])
    chart = alt.layer(bands, line).properties(
        height=220, title="The row of scores; shaded bands are the key tiles K_j")
    return finish(chart, width=width)


# scores_chart(scores, tiles, width=640): the row's scores by key with its key tiles marked as
# alternating bands.
scores_chart = TemplateChart("scores_chart", _scores_split, _scores_draw)


def _safe_split(scores: pd.DataFrame, dtype: str = "float16",
                limit: float = math.log(65504.0), width: int = 290):
    """dtype: the arithmetic exp is taken in; limit: ln of its largest number."""
    top = float(scores.score.max()) if scores.score.notna().any() else 0.0
    return {"scores": scores.dropna(subset=["score"])}, (Hole(top), width, dtype,
                                                         round(limit / LN10, 6))


def _safe_draw(frames: dict[str, pd.DataFrame], top: float, width: int, dtype: str,
               log10_max: float) -> alt.HConcatChart:
    mult = slider("mult", 1, 1, 40, 0.5, "multiply the scores by ")
    base = alt.Chart(frames["scores"]).transform_calculate(
        naive="mult * datum.score / " + repr(LN10),
        safe="mult * (datum.score - " + repr(top) + ") / " + repr(LN10),
        overflow=f"datum.naive > {log10_max!r}",
    )
    color = alt.Color("overflow:N", title=f"exp in {dtype}",
                      scale=alt.Scale(domain=[True, False], range=[ALARM, TILE_COLORS["Q_i"]]),
                      legend=alt.Legend(orient="bottom", labelExpr=(
                          "datum.value ? 'inf (overflow)' : 'finite'")))
    limit = alt.Chart(pd.DataFrame({"y": [log10_max]})).mark_rule(
        color=ALARM, strokeDash=[6, 4], strokeWidth=2).encode(y="y:Q")
    count = base.transform_calculate(ov="datum.overflow ? datum.keys : 0").transform_aggregate(
        n="sum(ov)", total="sum(keys)", binned="max(keys)").transform_calculate(
        text=("(datum.binned > 1 ? 'up to ' : '') + datum.n + ' of ' + datum.total + "
              f"' keys overflow to inf in {dtype}'"),
    ).mark_text(align="left", fontSize=FONT["text"], color=ALARM, fontWeight="bold").encode(
        text="text:N", x=alt.value(6), y=alt.value(208))
    naive = alt.layer(base.mark_circle(size=30).encode(
        x=alt.X("key:Q", title="key index"),
        y=alt.Y("naive:Q", title="log10 exp(s)"), color=color), limit, count).properties(
        width=width, height=220, title="without max subtraction")
    safe = alt.layer(base.mark_circle(size=30, color=TILE_COLORS["Q_i"]).encode(
        x=alt.X("key:Q", title="key index"), y=alt.Y("safe:Q", title="log10 exp(s − max)")),
        limit).properties(width=width, height=220, title="with max subtraction (safe)")
    return finish(alt.hconcat(naive, safe), params=[mult])


# safe_softmax_chart(scores, dtype, limit, width=290): exp(k·s) without and with the max
# subtracted, as log10, against the largest number of `dtype` (the arithmetic exp is taken
# in; limit = its ln); a browser slider multiplies the scores (a temperature) to show the
# overflow.
safe_softmax_chart = TemplateChart("safe_softmax_chart", _safe_split, _safe_draw)
