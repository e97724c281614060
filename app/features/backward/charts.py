"""Charts of the Backward-pass page. Pure functions: DataFrames in, Altair charts out.

The loop animation sends every step once; a Vega slider bound to the `step` param picks the
step in the browser, so moving it never re-runs Python.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from app.features.sram_tiling.charts import STATE_COLORS, STATES, step_param
from app.core.style import ALARM, DONE, FONT, INK, PENDING, TILE_COLORS, finish

STEP = "(step - 1)"      # the slider counts steps from 1; `order` counts from 0
GRADIENT_COLORS = {"dQ_i": TILE_COLORS["Q_i"], "dO_i": TILE_COLORS["O_i"],
                   "dK_j": TILE_COLORS["K_j"], "dV_j": TILE_COLORS["V_j"]}
ALGORITHM_COLORS = alt.Scale(domain=["naive backward", "flash backward"],
                             range=[ALARM, TILE_COLORS["Q_i"]])


def _layer(data: pd.DataFrame, mark: dict, box: dict, transform: list[dict],
           **encoding) -> alt.Chart:
    """One layer of the board from plain Vega-Lite dicts: rectangles (or text) placed by the
    x0..x1, y0..y1 fields its `transform` computes. (Altair's typed channels cost tens of
    milliseconds each to build; this chart has a dozen layers and is rebuilt per config.)"""
    return alt.Chart(data, mark=mark, transform=transform,
                     encoding=alt.FacetedEncoding(**box, **encoding))


def _calc(**fields: str) -> list[dict]:
    return [{"calculate": expr, "as": name} for name, expr in fields.items()]


def loop_chart(tiles: pd.DataFrame, steps: pd.DataFrame, rows: int, cols: int,
               start: int = 0, size: int = 540) -> alt.VConcatChart:
    """The Tr×Tc grid of P in FA2 backward order (key tile j outer): K_j and V_j stay on chip
    for a whole column while Q_i and dO_i stream past; dK_j and dV_j fill up on chip and are
    written when the column ends; dQ_i grows in HBM. All driven by one step slider."""
    n = len(steps)
    t = max(1.0, 0.07 * max(rows, cols))          # strip thickness in cell units
    x_dom, y_dom = [-2.8 * t, cols + 1.6 * t], [-3.4 * t, rows + 3.0 * t]
    unit = size / max(x_dom[1] - x_dom[0], y_dom[1] - y_dom[0])
    box = {"x": {"field": "x0", "type": "quantitative", "axis": None,
                 "scale": {"domain": x_dom, "nice": False, "zero": False}},
           "x2": {"field": "x1"},
           "y": {"field": "y0", "type": "quantitative", "axis": None,
                 "scale": {"domain": y_dom, "reverse": True, "nice": False, "zero": False}},
           "y2": {"field": "y1"}}
    rect = {"type": "rect", "stroke": "white", "strokeWidth": 0.5}
    now = [{"filter": f"datum.order == {STEP}"}]
    rows_data = pd.DataFrame({"row": range(rows)})

    state = (f"datum.order < 0 ? '{STATES[3]}' : datum.order < {STEP} ? '{STATES[1]}' : "
             f"datum.order == {STEP} ? '{STATES[0]}' : '{STATES[2]}'")
    grid = _layer(
        tiles, {**rect, "stroke": "#BBBBBB"}, box,
        _calc(x0="datum.col", x1="datum.col + 1", y0="datum.row", y1="datum.row + 1",
              state=state),
        color={"field": "state", "type": "nominal",
               "scale": {"domain": STATES, "range": STATE_COLORS},
               "legend": {"title": "tile of P", "orient": "bottom"}},
        tooltip=[{"field": "label", "type": "nominal", "title": "tile"},
                 {"field": "order", "type": "quantitative", "title": "step"},
                 {"field": "p_mass", "type": "quantitative", "format": ".4f",
                  "title": "mean row sum of P"}])

    # Each column is contiguous in the loop order, so its state follows from its steps.
    per_col = tiles[tiles.order >= 0].groupby("col").order.agg(["min", "max"]).reset_index()

    def col_strip(y0: float, name: str, current: str):
        """A strip of key tiles: done (grey), the one on chip now (`current`), to come."""
        fill = (f"datum.max < {STEP} ? '{DONE}' : datum.min <= {STEP} ? '{current}' : "
                f"'{PENDING}'")
        return _layer(per_col, rect, box, _calc(x0="datum.col", x1="datum.col + 1",
                                                y0=f"{y0}", y1=f"{y0 + t}", fill=fill),
                      color={"field": "fill", "type": "nominal", "scale": None})

    def row_strip(x0: float, name: str):
        where = _calc(x0=f"{x0}", x1=f"{x0 + t}", y0="datum.row", y1="datum.row + 1")
        color = GRADIENT_COLORS.get(name) or TILE_COLORS[name]
        return [_layer(rows_data, {**rect, "color": PENDING}, box, where),
                _layer(steps, {**rect, "color": color}, box, now + where)]

    def accumulating(data, transform: list[dict], name: str, frac: str):
        """A gradient tile, as full as its norm is of its final norm."""
        return _layer(data, {**rect, "color": GRADIENT_COLORS[name]}, box, transform,
                      opacity={"field": frac, "type": "quantitative", "legend": None,
                               "scale": {"domain": [0, 1], "range": [0.12, 1]}},
                      tooltip=[{"field": frac, "type": "quantitative", "format": ".0%",
                                "title": f"{name}: share of its final norm"}])

    # dQ_i in HBM: each row shows the latest step that added to it.
    dq_x = cols + 0.4 * t
    dq_at = _calc(x0=f"{dq_x}", x1=f"{dq_x + t}", y0="datum.row", y1="datum.row + 1")
    dq_base = _layer(rows_data, {**rect, "color": PENDING}, box, dq_at)
    dq = accumulating(tiles, [
        {"filter": f"datum.order >= 0 && datum.order <= {STEP}"},
        {"joinaggregate": [{"op": "max", "field": "order", "as": "last"}], "groupby": ["row"]},
        {"filter": "datum.order == datum.last"}, *dq_at], "dQ_i", "dq_frac")

    # dK_j, dV_j on chip: the current column, as full as after this step's query tile.
    dk_y, dv_y = rows + 0.4 * t, rows + 1.6 * t
    dk = accumulating(steps, now + _calc(x0="datum.col", x1="datum.col + 1", y0=f"{dk_y}",
                                         y1=f"{dk_y + t}"), "dK_j", "dk_frac")
    dv = accumulating(steps, now + _calc(x0="datum.col", x1="datum.col + 1", y0=f"{dv_y}",
                                         y1=f"{dv_y + t}"), "dV_j", "dv_frac")

    band = _layer(steps, {"type": "rect", "fillOpacity": 0, "stroke": TILE_COLORS["K_j"],
                          "strokeWidth": 3}, box,
                  now + _calc(x0="datum.col", x1="datum.col + 1", y0="0", y1=f"{rows}"))
    q_x, do_x = -2.6 * t, -1.4 * t
    k_y, v_y = -3.2 * t, -1.9 * t
    labels = pd.DataFrame([
        (q_x + t / 2, -0.5 * t, "Q_i", TILE_COLORS["Q_i"]),
        (do_x + t / 2, -0.5 * t, "dO_i", GRADIENT_COLORS["dO_i"]),
        (-1.2 * t, k_y + t / 2, "K_j", TILE_COLORS["K_j"]),
        (-1.2 * t, v_y + t / 2, "V_j", TILE_COLORS["V_j"]),
        (cols + 0.9 * t, -0.5 * t, "dQ_i", GRADIENT_COLORS["dQ_i"]),
        (-1.2 * t, dk_y + t / 2, "dK_j", GRADIENT_COLORS["dK_j"]),
        (-1.2 * t, dv_y + t / 2, "dV_j", GRADIENT_COLORS["dV_j"])],
        columns=["x0", "y0", "t", "c"])
    text = _layer(labels, {"type": "text", "fontSize": FONT["text"], "fontWeight": "bold"},
                  {"x": box["x"], "y": box["y"]}, [],
                  text={"field": "t", "type": "nominal"},
                  color={"field": "c", "type": "nominal", "scale": None})
    board = alt.LayerChart(
        layer=[grid, band, *row_strip(q_x, "Q_i"), *row_strip(do_x, "dO_i"),
               col_strip(k_y, "K_j", TILE_COLORS["K_j"]),
               col_strip(v_y, "V_j", TILE_COLORS["V_j"]), dq_base, dq,
               col_strip(dk_y, "dK_j", PENDING), col_strip(dv_y, "dV_j", PENDING), dk, dv,
               text],
        width=unit * (x_dom[1] - x_dom[0]), height=unit * (y_dom[1] - y_dom[0]))

    def line(expr: str, dy: int):
        return _layer(steps, {"type": "text", "fontSize": FONT["text"], "align": "left",
                              "color": INK, "dy": dy}, {}, now + _calc(text=expr),
                      text={"field": "text", "type": "nominal"}, x={"value": 0},
                      y={"value": 12})

    caption = alt.LayerChart(layer=[
        line(f"'Step ' + (datum.order + 1) + ' of {n}: ' + datum.label", 0),
        line("'P_ij rebuilt from lse_i: its rows sum to ' + format(datum.p_mass, '.3f') + "
             "' on average;'", 20),
        line("'dQ_i now ' + format(datum.dq_frac, '.0%') + ', dK_j ' + "
             "format(datum.dk_frac, '.0%') + ', dV_j ' + format(datum.dv_frac, '.0%') + "
             "' of their final norms'", 40)], height=60, width=size)
    chart = alt.VConcatChart(vconcat=[caption, board], spacing=10)
    return finish(chart, params=[step_param(n, start)])


def rowsum_chart(mass: pd.DataFrame, width: int = 440) -> alt.LayerChart:
    """Σ_{j' ≤ j} of each query row's P, rebuilt from lse alone, reaching 1 at the last key
    tile: thin lines for sampled rows, the chosen row bold with its per-tile sums as bars."""
    tiles = int(mass.tile.max()) + 1
    x = alt.X("tile:Q", title="key tile j", scale=alt.Scale(domain=[-0.5, tiles - 0.5]),
              axis=alt.Axis(tickMinStep=1, format="d"))
    y = alt.Y("p_cumulative:Q", title="Σ of P over key tiles 0..j",
              scale=alt.Scale(domain=[0, 1.1]))
    mine = mass[mass.chosen]
    others = alt.Chart(mass[~mass.chosen]).mark_line(color=DONE, strokeWidth=1,
                                                     opacity=0.6).encode(
        x=x, y=y, detail="row:N")
    bars = alt.Chart(mine).mark_bar(color=TILE_COLORS["S_ij"], opacity=0.45, size=18).encode(
        x=x, y=alt.Y("p_tile:Q"),
        tooltip=["row:Q", "tile:Q", alt.Tooltip("p_tile:Q", format=".4f",
                                                title="Σ P over the tile")])
    bold = alt.Chart(mine).mark_line(color=INK, strokeWidth=3,
                                     point=alt.OverlayMarkDef(size=80, color=INK)).encode(
        x=x, y=y, tooltip=["row:Q", "tile:Q", alt.Tooltip("p_cumulative:Q", format=".6f")])
    one = alt.Chart(pd.DataFrame({"v": [1.0]})).mark_rule(
        color=ALARM, strokeDash=[6, 4], strokeWidth=2).encode(y="v:Q")
    row = int(mine.row.iloc[0]) if len(mine) else 0
    chart = alt.layer(others, bars, bold, one).properties(
        height=300, title=f"Row {row}: P rebuilt from lse sums to 1 over the key tiles")
    return finish(chart, width=width)


def norm_domain(norms: pd.Series) -> list[float]:
    """A panel's norm axis, [0, a little over the largest finite norm] ([0, 1] when there is
    none): set, so Vega never takes the extent of an empty layer (the hollow points where the
    mask skipped nothing) and warns of an infinite one."""
    top = float(norms[np.isfinite(norms)].max()) if np.isfinite(norms).any() else 0.0
    return [0.0, top * 1.05 if top > 0 else 1.0]


def growth_chart(dq: pd.DataFrame, dkv: pd.DataFrame, width: int = 280) -> alt.HConcatChart:
    """‖dQ_r‖ as the key tiles add to it, beside ‖dK_c‖ and ‖dV_c‖ as the query tiles do;
    hollow points mark tiles the causal mask skipped (the value carries). Rows without a
    finite norm are left out; the hollow points are drawn only where some tile was skipped."""
    dq, dkv = (t[np.isfinite(t.norm)] for t in (dq, dkv))

    def panel(data: pd.DataFrame, axis: str, title: str, names: dict):
        n = int(data.tile.max()) + 1 if len(data) else 1
        x = alt.X("tile:Q", title=axis, scale=alt.Scale(domain=[-0.5, n - 0.5]),
                  axis=alt.Axis(tickMinStep=1, format="d"))
        y = alt.Y("norm:Q", title="norm", scale=alt.Scale(domain=norm_domain(data.norm)))
        color = alt.Color("what:N", title=None, legend=alt.Legend(orient="bottom"),
                          scale=alt.Scale(domain=list(names), range=list(names.values())))
        line = alt.Chart(data).mark_line(strokeWidth=3, point=alt.OverlayMarkDef(
            size=90, filled=True)).encode(
            x=x, y=y, color=color,
            tooltip=["what:N", "tile:Q", alt.Tooltip("norm:Q", format=".5g"), "processed:N"])
        skipped = data[~data.processed.astype(bool)]
        if len(skipped):
            line += alt.Chart(skipped).mark_point(
                size=160, color=INK, shape="circle", filled=False).encode(x=x, y=y)
        return line.properties(width=width, height=260, title=title)

    left = panel(dq, "key tile j", ["dQ_r grows in HBM,", "one key-tile block at a time"],
                 {"‖dQ_r‖": GRADIENT_COLORS["dQ_i"]})
    right = panel(dkv, "query tile i", ["dK_c, dV_c grow on chip", "as query tiles pass"],
                  {"‖dK_c‖": GRADIENT_COLORS["dK_j"], "‖dV_c‖": GRADIENT_COLORS["dV_j"]})
    return finish(alt.hconcat(left, right, spacing=40).resolve_scale(color="independent"))


def hbm_parts_chart(parts: pd.DataFrame, width: int = 300) -> alt.Chart:
    """HBM bytes of naive and flash backward, every part of the IO model stacked; reads
    and writes told apart."""
    names = list(dict.fromkeys(parts.part))
    chart = alt.Chart(parts).transform_calculate(
        order=f"indexof({names}, datum.part)").mark_bar(
        height=34, stroke="white", strokeWidth=1).encode(
        x=alt.X("sum(MiB):Q", title="HBM traffic (MiB)"),
        y=alt.Y("algorithm:N", title=None, sort=list(ALGORITHM_COLORS.domain)),
        color=alt.Color("way:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=["read", "write"],
                                        range=[TILE_COLORS["O_i"], TILE_COLORS["K_j"]])),
        order=alt.Order("order:Q"),
        tooltip=["algorithm:N", "part:N", alt.Tooltip("MiB:Q", format=",.3f")])
    return finish(chart.properties(height=alt.Step(56),
                                   title="HBM bytes of one backward pass (model)"), width=width)


def price_chart(table: pd.DataFrame, width: int = 300) -> alt.Chart:
    """The least time the matrix products and the HBM traffic of each backward take at the
    GPU's datasheet rates: flash pays a fifth product to move far fewer bytes."""
    chart = alt.Chart(table.assign(us=table.ms * 1e3)).mark_bar(height=22).encode(
        x=alt.X("us:Q", title="least time at the GPU's datasheet rate (µs)",
                axis=alt.Axis(format=",~g")),
        y=alt.Y("algorithm:N", title=None, sort=list(ALGORITHM_COLORS.domain)),
        yOffset=alt.YOffset("resource:N"),
        color=alt.Color("resource:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=["matrix products", "HBM traffic"],
                                        range=[TILE_COLORS["S_ij"], TILE_COLORS["O_i"]])),
        tooltip=["algorithm:N", "resource:N", "amount:N", alt.Tooltip("us:Q", format=",.4g",
                                                                       title="µs")])
    return finish(chart.properties(height=alt.Step(28),
                                   title=["The price: compute against",
                                          "memory traffic"]),
                  width=width)


def peak_chart(peak: pd.DataFrame, width: int = 300) -> alt.Chart:
    """Device bytes held at the backward's peak, naive against flash."""
    data = peak.assign(MiB=peak["bytes"] / 2**20)
    chart = alt.Chart(data).mark_bar(height=34).encode(
        x=alt.X("MiB:Q", title="peak device memory (MiB)",
                scale=alt.Scale(domain=[0, float(data.MiB.max()) * 1.2])),
        y=alt.Y("algorithm:N", title=None, sort=list(ALGORITHM_COLORS.domain)),
        color=alt.Color("algorithm:N", legend=None, scale=ALGORITHM_COLORS),
        tooltip=["algorithm:N", alt.Tooltip("MiB:Q", format=",.3f")])
    label = alt.Chart(data).mark_text(align="left", dx=6, fontSize=FONT["text"]).encode(
        x="MiB:Q", y=alt.Y("algorithm:N", sort=list(ALGORITHM_COLORS.domain)),
        text=alt.Text("MiB:Q", format=",.3g"))
    return finish(alt.layer(chart, label).properties(
        height=alt.Step(56), title="Peak memory of the backward (model)"), width=width)
