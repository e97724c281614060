"""Charts of the Precision page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import math

import altair as alt
import pandas as pd

from app.core.legible import fit_label, ink_on, log_ticks, scale_position, scheme_color
from app.core.style import ALARM, DONE, FONT, INK, PENDING, TILE_COLORS, finish, wrap_title
from engine.model.formats import E4M3_MAX, E4M3_SATURATES_ABOVE

TOP = f"{E4M3_MAX:g}"         # e4m3's largest number, as the charts write it: 448

# one colour per variant of the error charts, the same on every chart of the page
VARIANT_COLORS = {
    "fp16": TILE_COLORS["Q_i"],
    "bf16": TILE_COLORS["O_i"],
    "FP8 per-tensor": ALARM,
    "FP8 per-tile": TILE_COLORS["K_j"],
    "FP8 per-tile + rotation": TILE_COLORS["V_j"],
}
FORMAT_COLORS = {"fp32": INK, "fp16": TILE_COLORS["Q_i"], "bf16": TILE_COLORS["O_i"],
                 "e4m3": ALARM, "e5m2": TILE_COLORS["S_ij"]}
TENSOR_SCHEMES = {"Q": "blues", "K": "oranges", "V": "greens"}
PANEL = 195             # plot width of one of three panels side by side at 1280 px
HALF = 290              # plot width of one of two charts side by side at 1280 px
LABEL_PX = 12


def _log_scale(values, pad: float = 1.6) -> alt.Scale:
    """A log scale over the positive `values`, widened a little (a set domain, so Vega never
    sees log(0))."""
    positive = [float(v) for v in values if v == v and v > 0]
    lo, hi = (min(positive), max(positive)) if positive else (1e-3, 1.0)
    return alt.Scale(type="log", domain=[lo / pad, hi * pad], nice=False)


def _log_axis(values, title: str, fmt: str = ".0e") -> alt.Axis:
    positive = [float(v) for v in values if v == v and v > 0]
    lo, hi = (min(positive), max(positive)) if positive else (1e-3, 1.0)
    return alt.Axis(title=title, values=log_ticks(lo / 1.6, hi * 1.6, 5), format=fmt,
                    labelOverlap=True)


# ---- 2. the per-tile scales ------------------------------------------------------------
def scale_cells(scales: pd.DataFrame, width: int) -> pd.DataFrame:
    """scales (tensor "Q"/"K"/"V", tile, rows: the tile's rows in words, scale) with what the
    heatmap draws: each tensor's cells coloured on its own scheme over its own log range
    (`fill`, as Vega draws it), black or white `ink` by contrast, and a `label` shortened to
    fit the cell."""
    out = []
    for tensor, part in scales.groupby("tensor", sort=False):
        values = part.scale.to_numpy()
        positive = values[values > 0]
        domain = (float(positive.min()), float(positive.max())) if len(positive) else (1, 1)
        n = max(int(scales.tile.max()) + 1, 1)
        fill = [scheme_color(TENSOR_SCHEMES[tensor], 0.15 + 0.85 * scale_position(
            v, domain, log=True)) for v in values]
        label = [fit_label([f"{v:.3g}", f"{v:.1g}", ""], width / n, LABEL_PX) for v in values]
        out.append(part.assign(fill=fill, ink=[ink_on(f) for f in fill], label=label))
    return pd.concat(out, ignore_index=True) if out else scales.assign(fill=[], ink=[],
                                                                       label=[])


def scales_chart(scales: pd.DataFrame, title: str, width: int = 760) -> alt.LayerChart:
    """The FP8 scales of one batch·head: a row per tensor (Q by query tile, K and V by key
    tile), a cell per tile, its colour the scale amax / 448 on a log range of its own row
    (each tensor in its own colours), its value written in it."""
    cells = scale_cells(scales, width)
    x = alt.X("tile:O", title="tile (Q: query tile i; K, V: key tile j)",
              axis=alt.Axis(labelAngle=0, labelOverlap=True))
    y = alt.Y("tensor:N", title=None, sort=["Q", "K", "V"])
    base = alt.Chart(cells).encode(x=x, y=y)
    rects = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color("fill:N", scale=None),
        tooltip=[alt.Tooltip("tensor:N"), alt.Tooltip("tile:O"), alt.Tooltip("rows:N"),
                 alt.Tooltip("scale:Q", format=".4g", title=f"scale = amax / {TOP}"),
                 alt.Tooltip("amax:Q", format=".4g", title="largest |x| (amax)")])
    text = base.mark_text(fontSize=LABEL_PX, baseline="middle").encode(
        text="label:N", color=alt.Color("ink:N", scale=None))
    chart = alt.layer(rects, text, width=width, height=150,
                      title=wrap_title(title, width))
    return finish(chart)


# ---- 3. error against float64 -----------------------------------------------------------
def _variant_color(variants) -> alt.Scale:
    names = [v for v in VARIANT_COLORS if v in set(variants)]
    return alt.Scale(domain=names, range=[VARIANT_COLORS[v] for v in names])


def error_chart(errors: pd.DataFrame, width: int = PANEL) -> alt.FacetChart:
    """RMSE of the output against float64 per query tile (errors: preset, variant, tile,
    rmse), one panel per input preset, a line per variant on a shared log axis."""
    color = alt.Color("variant:N", title=None, scale=_variant_color(errors.variant),
                      legend=alt.Legend(orient="bottom", columns=3, labelLimit=260))
    lines = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=50), strokeWidth=2.5).encode(
        x=alt.X("tile:Q", title="query tile i", axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("rmse:Q", scale=_log_scale(errors.rmse),
                axis=_log_axis(errors.rmse, "RMSE against float64")),
        color=color,
        tooltip=[alt.Tooltip("preset:N"), alt.Tooltip("variant:N"), alt.Tooltip("tile:Q"),
                 alt.Tooltip("rmse:Q", format=".3e", title="RMSE")])
    presets = list(dict.fromkeys(errors.preset))
    chart = alt.layer(lines, data=errors).properties(width=width, height=210).facet(
        column=alt.Column("preset:N", title=None, sort=presets,
                          header=alt.Header(labelFontSize=FONT["title"],
                                            labelExpr="'inputs: ' + datum.value")),
        title="Error of the output per query tile, against float64")
    return finish(chart)


def rmse_chart(rmse: pd.DataFrame, width: int = 440) -> alt.LayerChart:
    """RMSE of the whole output against float64 (rmse: preset, variant, rmse): a row per
    variant, a point per input preset, on a log axis."""
    presets = list(dict.fromkeys(rmse.preset))
    shapes = ["circle", "square", "triangle-up", "diamond"]
    points = alt.Chart(rmse).mark_point(filled=True, size=170, opacity=0.9).encode(
        y=alt.Y("variant:N", title=None, sort=list(VARIANT_COLORS),
                axis=alt.Axis(labelLimit=240)),
        x=alt.X("rmse:Q", scale=_log_scale(rmse.rmse), axis=_log_axis(rmse.rmse, "RMSE")),
        color=alt.Color("preset:N", title="inputs",
                        scale=alt.Scale(domain=presets,
                                        range=[TILE_COLORS["Q_i"], TILE_COLORS["K_j"], ALARM,
                                               INK][:len(presets)]),
                        legend=alt.Legend(orient="bottom")),
        shape=alt.Shape("preset:N", title="inputs",
                        scale=alt.Scale(domain=presets, range=shapes[:len(presets)])),
        tooltip=[alt.Tooltip("variant:N"), alt.Tooltip("preset:N", title="inputs"),
                 alt.Tooltip("rmse:Q", format=".3e", title="RMSE")])
    chart = alt.layer(points, width=width, height=190,
                      title="RMSE of the output, against float64")
    return finish(chart)


# ---- 4. saturation: P from the running max ------------------------------------------------
def p_range_chart(ranges: pd.DataFrame, e4m3: dict, width: int = 500) -> alt.LayerChart:
    """The range of P's values (ranges: way, lo, hi as log2 of the smallest positive and the
    largest value, saturated: elements past e4m3's largest) against e4m3's range: its normal
    numbers (dark band), subnormals (light band), and 448, past which the cast saturates."""
    top = math.log2(e4m3["largest"])
    normal = math.log2(e4m3["smallest_normal"])
    sub = math.log2(e4m3["smallest_subnormal"])
    lo = min(float(ranges.lo.min()), sub) - 1
    hi = max(float(ranges.hi.max()), top) + 1
    x_scale = alt.Scale(domain=[math.floor(lo), math.ceil(hi)], nice=False)
    bands = pd.DataFrame({"x0": [sub, normal], "x1": [normal, top],
                          "what": ["e4m3 subnormals", "e4m3 normal numbers"]})
    band = alt.Chart(bands).mark_rect(opacity=0.55).encode(
        x=alt.X("x0:Q", scale=x_scale, title="log2 of P's values (0 is P = 1)"),
        x2="x1:Q",
        color=alt.Color("what:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=list(bands.what), range=[PENDING, "#BFD8EE"])),
        tooltip=[alt.Tooltip("what:N")])
    said = pd.DataFrame({"x": [top], "text": [f"{e4m3['largest']:g}"]})
    limit = alt.Chart(said).mark_rule(color=ALARM, strokeDash=[6, 4], strokeWidth=2).encode(
        x="x:Q", tooltip=[alt.Tooltip("text:N", title="e4m3 saturates at")])
    limit_text = alt.Chart(said).mark_text(
        color=INK, fontSize=FONT["text"], fontWeight="bold", align="right", dx=-4,
        baseline="top", dy=2).encode(x="x:Q", y=alt.value(0), text="text:N")
    y = alt.Y("way:N", title=None, sort=list(ranges.way), axis=alt.Axis(labelLimit=300))
    bars = alt.Chart(ranges).mark_bar(height=18, color=TILE_COLORS["S_ij"]).encode(
        x=alt.X("lo:Q", scale=x_scale), x2="hi:Q", y=y,
        tooltip=[alt.Tooltip("way:N", title="P"),
                 alt.Tooltip("lo:Q", format=".2f", title="log2 of the smallest P > 0"),
                 alt.Tooltip("hi:Q", format=".2f", title="log2 of the largest P"),
                 alt.Tooltip("saturated:Q", format=",", title=f"elements past {TOP}")])
    over = alt.Chart(ranges).transform_filter("datum.saturated > 0").mark_point(
        shape="triangle-right", filled=True, size=160, color=ALARM).encode(
        x=alt.X("hi:Q", scale=x_scale), y=y)
    chart = alt.layer(band, bars, over, limit, limit_text, width=width,
                      height=40 * max(len(ranges), 1),
                      title="The values of P against e4m3's range")
    return finish(chart)


def threshold_chart(sweep: pd.DataFrame, chosen: float | None, width: int = HALF,
                    bound: float = E4M3_SATURATES_ABOVE) -> alt.HConcatChart:
    """Over the rescale-skip threshold (sweep: threshold in log2 units, saved: the share of
    rescales skipped, saturated: P elements past 448): left, the rescales saved; right, the P
    elements that saturate when cast to e4m3; the chosen threshold and log2 of `bound` (P
    past it saturates: 464, what rounds to 448 anyway ends there) as rules."""
    x = alt.X("threshold:Q", title="threshold (log2 units)",
              scale=alt.Scale(domain=[float(sweep.threshold.min()),
                                      float(sweep.threshold.max())], nice=False))
    rules = [alt.Chart(pd.DataFrame({"threshold": [math.log2(bound)],
                                     "what": [f"log2 {bound:g} = {math.log2(bound):.2f}: "
                                              f"beyond, P may saturate"]}))
             .mark_rule(color=ALARM, strokeDash=[6, 4], strokeWidth=2)
             .encode(x="threshold:Q", tooltip=[alt.Tooltip("what:N", title="")])]
    if chosen is not None:
        rules.append(alt.Chart(pd.DataFrame({"threshold": [chosen]})).mark_rule(
            color=INK, strokeWidth=2).encode(x="threshold:Q"))
    saved = alt.Chart(sweep).mark_line(point=True, color=TILE_COLORS["V_j"],
                                       strokeWidth=2.5).encode(
        x=x, y=alt.Y("saved:Q", title="rescales skipped", axis=alt.Axis(format="%"),
                     scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("threshold:Q"), alt.Tooltip("saved:Q", format=".1%"),
                 alt.Tooltip("rescales:Q", format=",", title="rescales done")])
    top = max(float(sweep.saturated.max()), 1.0)
    sat = alt.Chart(sweep).mark_line(point=True, color=ALARM, strokeWidth=2.5).encode(
        x=x, y=alt.Y("saturated:Q", title=f"P elements past {TOP}",
                     scale=alt.Scale(domain=[0, top]),
                     axis=alt.Axis(format=",d", tickMinStep=1)),
        tooltip=[alt.Tooltip("threshold:Q"), alt.Tooltip("saturated:Q", format=",")])
    left = alt.layer(saved, *rules, width=width, height=200,
                     title="Rescales skipped")
    right = alt.layer(sat, *rules, width=width, height=200,
                      title=f"P saturating at {TOP} in e4m3")
    return finish(alt.hconcat(left, right))


# ---- 5. overflow of naive softmax in each format ----------------------------------------
def overflow_chart(sweep: pd.DataFrame, width: int = 560) -> alt.LayerChart:
    """The share of query rows whose naive softmax overflows, over a growing multiplier of
    the scores (sweep: multiplier, format, rows_overflowing), a line per format (formats with
    the same curve drawn as one, named together), and the kernels' exp in float32 of
    s − running max, flat at 0; the config itself at ×1."""
    names = list(dict.fromkeys(sweep.format))
    colors = [FORMAT_COLORS.get(n.split(" = ")[0], DONE if n.startswith("kernel") else INK)
              for n in names]
    dashes = [[1, 0] if not n.startswith("kernel") else [6, 3] for n in names]
    mults = sweep.multiplier
    line = alt.Chart(sweep).mark_line(strokeWidth=3, interpolate="step-after").encode(
        x=alt.X("multiplier:Q", title="scores multiplied by",
                scale=alt.Scale(type="log", domain=[float(mults.min()), float(mults.max())],
                                nice=False),
                axis=alt.Axis(values=log_ticks(float(mults.min()), float(mults.max()), 6),
                              format="~g")),
        y=alt.Y("rows_overflowing:Q", title="rows whose softmax overflows",
                axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1.02])),
        color=alt.Color("format:N", title="exp taken in",
                        scale=alt.Scale(domain=names, range=colors),
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=320)),
        strokeDash=alt.StrokeDash("format:N", title="exp taken in",
                                  scale=alt.Scale(domain=names, range=dashes)),
        tooltip=[alt.Tooltip("format:N"), alt.Tooltip("multiplier:Q", format=".3g"),
                 alt.Tooltip("rows_overflowing:Q", format=".1%")])
    here = alt.Chart(pd.DataFrame({"multiplier": [1.0], "what": ["this config (×1)"]})
                     ).mark_rule(color=INK, strokeDash=[2, 2]).encode(
        x="multiplier:Q", tooltip=[alt.Tooltip("what:N", title="")])
    chart = alt.layer(line, here, width=width, height=220,
                      title="Naive softmax: where exp overflows each format")
    return finish(chart)
