"""Charts of the SRAM-tiling page. Pure functions: DataFrames in, Altair charts out.

The page plays its loop in the browser with the loop player (app/core/player/); loop_chart
below draws the same loop as one Vega chart whose `step` param picks the step shown.
"""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.core.style import ALARM, DONE, FONT, INK, PENDING, SKIPPED, TILE_COLORS, finish

STATES = ["current S_ij", "done", "to do", "skipped (causal)"]
STATE_COLORS = [TILE_COLORS["S_ij"], DONE, PENDING, SKIPPED]
STEP = "(step - 1)"      # the slider counts steps from 1; `order` counts from 0


def step_value(n_steps: int, index: int) -> int:
    """The loop-step slider's value (1..n_steps) at step `index` (0-based)."""
    return min(max(index, 0), max(n_steps, 1) - 1) + 1


def step_param(n_steps: int, index: int = 0) -> alt.VariableParameter:
    """The loop step, 1..n_steps, at step `index` (0-based)."""
    return alt.VariableParameter(name="step", value=step_value(n_steps, index))


def _rect(data, color: str, **enc):
    return alt.Chart(data).mark_rect(color=color, stroke="white", strokeWidth=0.5).encode(**enc)


def _labels(rows: list[tuple[float, float, str, str]], x, y):
    """Bold text marks (x, y, text, colour) in the board's coordinates."""
    data = pd.DataFrame(rows, columns=["x0", "y0", "t", "c"])
    return alt.Chart(data).mark_text(fontSize=FONT["text"], fontWeight="bold").encode(
        x=x, y=y, text="t:N", color=alt.Color("c:N", scale=None))


def loop_chart(tiles: pd.DataFrame, steps: pd.DataFrame, rows: int, cols: int,
               start: int = 0, size: int = 380, order: str = "fa2",
               side: bool = False) -> alt.VConcatChart:
    """The Tr×Tc grid of S with the Q_i, K_j, V_j and O_i strips around it, and the HBM bytes
    moved so far (below the board, or beside it when `side`), all driven by one step param.
    order="fa2": a query tile's row is done in one run (Q_i, O_i stay on chip; K_j, V_j
    stream past); "fa1": a key tile's column is (K_j, V_j stay; Q_i and O_i, m_i, l_i stream
    in from HBM and back)."""
    n = len(steps)
    t = max(1.0, 0.07 * max(rows, cols))          # strip thickness in cell units
    x_dom, y_dom = [-2.2 * t, cols + 1.6 * t], [-3.4 * t, rows]
    unit = size / max(x_dom[1] - x_dom[0], y_dom[1] - y_dom[0])
    x = alt.X("x0:Q", scale=alt.Scale(domain=x_dom, nice=False, zero=False), axis=None)
    y = alt.Y("y0:Q", scale=alt.Scale(domain=y_dom, reverse=True, nice=False, zero=False),
              axis=None)
    now = f"datum.order == {STEP}"
    cur = steps.copy()

    grid = alt.Chart(tiles).transform_calculate(
        x0="datum.col", x1="datum.col + 1", y0="datum.row", y1="datum.row + 1",
        state=(f"datum.order < 0 ? '{STATES[3]}' : datum.order < {STEP} ? '{STATES[1]}' : "
               f"datum.order == {STEP} ? '{STATES[0]}' : '{STATES[2]}'"),
    ).mark_rect(stroke="#BBBBBB", strokeWidth=0.5).encode(
        x=x, x2="x1:Q", y=y, y2="y1:Q",
        color=alt.Color("state:N", scale=alt.Scale(domain=STATES, range=STATE_COLORS),
                        legend=alt.Legend(title="tile of S", orient="bottom")),
        tooltip=[alt.Tooltip("label:N", title="tile"), alt.Tooltip("order:Q", title="step")])

    # The outer loop's tiles (rows in FA2, columns in FA1) are contiguous in the loop order,
    # so an outer tile's state follows from its first and last step; an inner tile is lit
    # only while the current step uses it.
    ran = tiles[tiles.order >= 0]

    def outer_strip(axis: str, at: float, name: str, done_color: str):
        span = ran.groupby(axis).order.agg(["min", "max"]).reset_index()
        fill = (f"datum.max < {STEP} ? '{done_color}' : datum.min <= {STEP} ? "
                f"'{TILE_COLORS[name]}' : '{PENDING}'")
        return alt.Chart(span).transform_calculate(fill=fill, **_place(axis, at, t)).mark_rect(
            stroke="white", strokeWidth=0.5).encode(
            x=x, x2="x1:Q", y=y, y2="y1:Q", color=alt.Color("fill:N", scale=None))

    def inner_strip(axis: str, at: float, name: str):
        n_cells = rows if axis == "row" else cols
        base = alt.Chart(pd.DataFrame({axis: range(n_cells)})).transform_calculate(
            **_place(axis, at, t))
        hit = alt.Chart(cur).transform_filter(now).transform_calculate(**_place(axis, at, t))
        return (base.mark_rect(color=PENDING, stroke="#BBBBBB", strokeWidth=0.5)
                .encode(x=x, x2="x1:Q", y=y, y2="y1:Q")
                + hit.mark_rect(color=TILE_COLORS[name]).encode(x=x, x2="x1:Q", y=y, y2="y1:Q"))

    band = alt.Chart(cur).transform_filter(now)
    row_band = band.transform_calculate(x0="0", x1=f"{cols}", y0="datum.row",
                                        y1="datum.row + 1").mark_rect(
        fillOpacity=0, stroke=TILE_COLORS["Q_i"], strokeWidth=3).encode(
        x=x, x2="x1:Q", y=y, y2="y1:Q")
    col_band = band.transform_calculate(x0="datum.col", x1="datum.col + 1", y0="0",
                                        y1=f"{rows}").mark_rect(
        fillOpacity=0, stroke=TILE_COLORS["K_j"], strokeWidth=3).encode(
        x=x, x2="x1:Q", y=y, y2="y1:Q")

    q_x, o_x = -1.6 * t, cols + 0.4 * t
    k_y, v_y = -3.2 * t, -1.9 * t
    labels = _labels([(q_x + t / 2, -0.5 * t, "Q_i", TILE_COLORS["Q_i"]),
                      (cols + 0.9 * t, -0.5 * t, "O_i", TILE_COLORS["O_i"]),
                      (-1.2 * t, k_y + t / 2, "K_j", TILE_COLORS["K_j"]),
                      (-1.2 * t, v_y + t / 2, "V_j", TILE_COLORS["V_j"])], x, y)
    if order == "fa1":
        strips = [inner_strip("row", q_x, "Q_i"), inner_strip("row", o_x, "O_i"),
                  outer_strip("col", k_y, "K_j", DONE), outer_strip("col", v_y, "V_j", DONE)]
    else:
        strips = [outer_strip("row", q_x, "Q_i", "#A6C8E0"), outer_strip("row", o_x, "O_i", DONE),
                  inner_strip("col", k_y, "K_j"), inner_strip("col", v_y, "V_j")]
    board = alt.layer(
        grid, row_band, col_band, *strips, labels,
        width=unit * (x_dom[1] - x_dom[0]), height=unit * (y_dom[1] - y_dom[0]))

    caption = alt.Chart(cur).transform_filter(now).transform_calculate(
        text=f"'Step ' + step + ' of {n}: ' + datum.label",
    ).mark_text(fontSize=FONT["chart_title"], align="left", color=INK).encode(
        text="text:N", x=alt.value(0)).properties(height=30, width=size)

    bars = hbm_bars(steps, order)
    chart = (alt.vconcat(caption, alt.hconcat(board, bars, spacing=40), spacing=10) if side
             else alt.vconcat(caption, board, bars, spacing=10))
    return finish(chart, params=[step_param(n, start)])


def _place(axis: str, at: float, t: float) -> dict:
    """Rectangle corners of a strip cell beside row `datum.row` or above column `datum.col`."""
    if axis == "row":
        return dict(x0=f"{at}", x1=f"{at + t}", y0="datum.row", y1="datum.row + 1")
    return dict(x0="datum.col", x1="datum.col + 1", y0=f"{at}", y1=f"{at + t}")


def hbm_labels(order: str = "fa2") -> dict:
    name = "FlashAttention-1 order" if order == "fa1" else "FlashAttention-2 order"
    return {"flash_read": f"{name}: read so far", "flash_written": f"{name}: written so far",
            "naive_read": "naive: reads (whole pass)",
            "naive_written": "naive: writes (whole pass)"}


HBM_LABELS = hbm_labels()


def hbm_bars(steps: pd.DataFrame, order: str = "fa2") -> alt.Chart:
    """HBM bytes moved up to the current step in the loop order `order`, beside naive
    attention's whole pass. Needs the `step` param from the enclosing chart."""
    labels = hbm_labels(order)
    top = float(max(steps[list(labels)].max().max(), 1)) / 2**20
    data = steps[["order", *labels]]
    return alt.Chart(data).transform_filter(f"datum.order == {STEP}").transform_fold(
        list(labels), as_=["what", "bytes"],
    ).transform_calculate(
        MiB="datum.bytes / 1048576",
        label=" + ".join(f"(datum.what == '{k}' ? '{v}' : '')" for k, v in labels.items()),
        fill=f"indexof(datum.what, 'flash') == 0 ? '{TILE_COLORS['Q_i']}' : '{ALARM}'",
    ).mark_bar(height=22).encode(
        x=alt.X("MiB:Q", title="HBM traffic (MiB)", scale=alt.Scale(domain=[0, top])),
        y=alt.Y("label:N", title=None, sort=list(labels.values()),
                axis=alt.Axis(labelLimit=400)),
        color=alt.Color("fill:N", scale=None),
        tooltip=["label:N", alt.Tooltip("MiB:Q", format=",.3f")],
    ).properties(width=300, height=130, title="HBM bytes moved")


def smem_chart(parts: pd.DataFrame) -> alt.LayerChart:
    """One thread block's shared memory, tile by tile, against the GPU's per-block limit;
    the limit line and title turn red when the tiles do not fit."""
    fits = bool(parts.fits.iloc[0])
    limit_kb = float(parts.limit.iloc[0]) / 1024
    names = list(parts.part)
    data = parts.assign(KB=parts.bytes / 1024)
    bars = alt.Chart(data).mark_bar(height=36).encode(
        x=alt.X("sum(KB):Q", title="shared memory (KiB)",
                scale=alt.Scale(domain=[0, max(limit_kb, data.KB.sum()) * 1.05])),
        color=alt.Color("part:N", sort=names, title="tile",
                        scale=alt.Scale(domain=names,
                                        range=[TILE_COLORS.get(p, INK) for p in names]),
                        legend=alt.Legend(orient="bottom", columns=7)),
        order=alt.Order("order:Q"),
        tooltip=["part:N", alt.Tooltip("KB:Q", format=".1f", title="KiB")],
    ).transform_calculate(order=f"indexof({names}, datum.part)")
    rule = alt.Chart(pd.DataFrame({"KB": [limit_kb], "t": [f"limit {limit_kb:.0f} KiB"]}))
    limit = rule.mark_rule(color=ALARM if not fits else INK, strokeWidth=4,
                           strokeDash=[] if not fits else [6, 4]).encode(x="KB:Q")
    text = rule.mark_text(y=-10, align="right", fontSize=FONT["text"],
                          color=ALARM if not fits else INK).encode(x="KB:Q", text="t:N")
    title = ("The tiles fit in one thread block's shared memory" if fits else
             "Too big: these tiles do not fit in one thread block's shared memory")
    chart = alt.layer(bars, limit, text).properties(
        height=60, title=alt.Title(title, color=INK if fits else ALARM))
    return finish(chart, width=640)


def waves_chart(table: pd.DataFrame, sms: int, width: int = 640) -> alt.Chart:
    """Thread blocks resident on each SM, wave after wave: at least 120 px tall whatever the
    number of waves, the legend under the plot so the chart stays `width` wide."""
    n_waves = int(table.wave.nunique()) if len(table) else 1
    chart = alt.Chart(table).transform_calculate(sm1="datum.sm + 1").mark_rect(
        stroke="white", strokeWidth=0.3).encode(
        x=alt.X("sm:Q", title="SM", scale=alt.Scale(domain=[0, sms], nice=False)),
        x2="sm1:Q",
        y=alt.Y("wave:O", title="wave"),
        color=alt.Color("blocks:O", title="blocks per SM",
                        scale=alt.Scale(scheme="blues"),
                        legend=alt.Legend(orient="bottom", direction="horizontal")),
        tooltip=["wave:O", "sm:Q", "blocks:O"])
    return finish(chart.properties(height=max(120, min(22 * n_waves, 600))), width=width)
