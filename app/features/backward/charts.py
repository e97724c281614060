"""Charts of the Backward-pass page. Pure functions: DataFrames in, Altair charts out. (The
loop animation is played in the browser by the loop player, app/core/player/, from the
page's BackwardLoop.)
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from app.core.style import ALARM, DONE, FONT, INK, TILE_COLORS, finish

GRADIENT_COLORS = {"dQ_i": TILE_COLORS["Q_i"], "dO_i": TILE_COLORS["O_i"],
                   "dK_j": TILE_COLORS["K_j"], "dV_j": TILE_COLORS["V_j"]}
ALGORITHM_COLORS = alt.Scale(domain=["naive backward", "flash backward"],
                             range=[ALARM, TILE_COLORS["Q_i"]])


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
