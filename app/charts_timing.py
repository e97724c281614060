"""Charts of the Timings page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.style import ALARM, FONT, INK, TILE_COLORS, finish, kernel_scale

METRICS = {"median_ms": "time (ms, median)", "tflops": "TFLOP/s", "speedup": "speedup over naive",
           "peak_MB": "peak memory (MB)"}


def config_chart(timings: pd.DataFrame, width: int = 520) -> alt.LayerChart:
    """Median time per kernel, with a whisker from the 10th to the 90th percentile."""
    color = alt.Color("kernel:N", legend=None, scale=kernel_scale(timings.kernel))
    y = alt.Y("kernel:N", title=None, sort=list(timings.kernel))
    bars = alt.Chart(timings).mark_bar(height=30).encode(
        x=alt.X("median_ms:Q", title="time (ms): median, whisker p10–p90"), y=y, color=color,
        tooltip=["kernel:N", alt.Tooltip("median_ms:Q", format=".4f"),
                 alt.Tooltip("p10_ms:Q", format=".4f"), alt.Tooltip("p90_ms:Q", format=".4f"),
                 "reps:Q", alt.Tooltip("tflops:Q", format=".3f")])
    spread = alt.Chart(timings).mark_rule(color=INK, strokeWidth=3).encode(
        x="p10_ms:Q", x2="p90_ms:Q", y=y)
    label = alt.Chart(timings).mark_text(align="left", dx=6, fontSize=FONT["text"]).encode(
        x="p90_ms:Q", y=y, text=alt.Text("median_ms:Q", format=".3g"))
    return finish(alt.layer(bars, spread, label).properties(height=alt.Step(48)), width=width)


def stages_chart(stages: pd.DataFrame, width: int = 520) -> alt.Chart:
    """Naive attention's stages, stacked in order."""
    names = list(stages.stage)
    colors = [TILE_COLORS["S_ij"], ALARM, TILE_COLORS["V_j"], TILE_COLORS["Q_i"]]
    chart = alt.Chart(stages.assign(what="naive")).mark_bar(height=36).encode(
        x=alt.X("sum(ms):Q", title="time (ms)"), y=alt.Y("what:N", title=None),
        color=alt.Color("stage:N", sort=names, title="stage", scale=alt.Scale(
            domain=names, range=(colors * (len(names) // len(colors) + 1))[:len(names)])),
        order=alt.Order("order:Q"), tooltip=["stage:N", alt.Tooltip("ms:Q", format=".4f")],
    ).transform_calculate(order=f"indexof({names}, datum.stage)")
    return finish(chart.properties(height=80), width=width)


def _wall(wall: int | None, text: str):
    data = pd.DataFrame({"seq": [wall] if wall else [], "t": [text] if wall else []})
    rule = alt.Chart(data).mark_rule(color=ALARM, strokeWidth=3, strokeDash=[8, 4]).encode(
        x="seq:Q")
    label = alt.Chart(data).mark_text(color=ALARM, align="right", dx=-6, baseline="top",
                                      fontSize=FONT["text"]).encode(
        x="seq:Q", y=alt.value(4), text="t:N")
    return rule + label


def sweep_chart(sweep: pd.DataFrame, metric: str, wall: int | None = None,
                width: int = 420) -> alt.LayerChart:
    """One metric against sequence length on log axes, one line per kernel; naive's memory
    wall (predicted) as a red rule."""
    data = sweep.dropna(subset=[metric])
    data = data[data[metric] > 0]
    seqs = list(sweep.seq) + ([wall] if wall else [])
    x = alt.X("seq:Q", title="sequence length N (log)",
              scale=alt.Scale(type="log", base=2, domain=[min(seqs), max(seqs)]),
              axis=alt.Axis(format="d"))
    lines = alt.Chart(data).mark_line(point=alt.OverlayMarkDef(size=80), strokeWidth=3).encode(
        x=x, y=alt.Y(f"{metric}:Q", title=METRICS[metric], scale=alt.Scale(type="log")),
        color=alt.Color("kernel:N", scale=kernel_scale(sweep.kernel),
                        legend=alt.Legend(orient="bottom", columns=3)),
        tooltip=["kernel:N", "seq:Q", alt.Tooltip(f"{metric}:Q", format=".4g")])
    if metric == "median_ms" and {"p10_ms", "p90_ms"} <= set(data):
        lines += alt.Chart(data).mark_rule(strokeWidth=2).encode(
            x=x, y="p10_ms:Q", y2="p90_ms:Q",
            color=alt.Color("kernel:N", scale=kernel_scale(sweep.kernel)))
    chart = alt.layer(lines, _wall(wall, "naive's memory wall")).properties(
        height=300, title=METRICS[metric])
    return finish(chart, width=width)


def memory_chart(memory: pd.DataFrame, gpu_bytes: float, gpu_name: str, wall: int | None,
                 width: int = 440) -> alt.LayerChart:
    """Peak device memory of naive and flash against N (model), with the GPU's memory."""
    x = alt.X("seq:Q", title="sequence length N (log)", scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(format="d"))
    color = alt.Color("algorithm:N", legend=alt.Legend(orient="bottom"), scale=alt.Scale(
        domain=["naive", "FlashAttention"], range=[ALARM, TILE_COLORS["Q_i"]]))
    lines = alt.Chart(memory).mark_line(point=True, strokeWidth=3, clip=True).encode(
        x=x, y=alt.Y("peak_GB:Q", title="peak memory (GB, log)", scale=alt.Scale(type="log")),
        color=color, tooltip=["algorithm:N", "seq:Q", alt.Tooltip("peak_GB:Q", format=".4g")])
    cap = pd.DataFrame({"GB": [gpu_bytes / 1e9],
                        "t": [f"{gpu_name}: {gpu_bytes / 2**30:.0f} GiB"]})
    limit = (alt.Chart(cap).mark_rule(color=INK, strokeDash=[4, 4], strokeWidth=2)
             .encode(y="GB:Q")
             + alt.Chart(cap).mark_text(align="left", dy=-10, x=6, fontSize=FONT["text"])
             .encode(y="GB:Q", text="t:N"))
    chart = alt.layer(lines, limit, _wall(wall, "naive would not fit")).properties(
        height=300, title="Peak memory (model): naive's N² wall")
    return finish(chart, width=width)


def hbm_chart(memory: pd.DataFrame, width: int = 440) -> alt.Chart:
    """Modelled HBM bytes moved by naive and flash against N."""
    chart = alt.Chart(memory).mark_line(point=True, strokeWidth=3).encode(
        x=alt.X("seq:Q", title="sequence length N (log)", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(format="d")),
        y=alt.Y("hbm_GB:Q", title="HBM traffic (GB, log)", scale=alt.Scale(type="log")),
        color=alt.Color("algorithm:N", legend=alt.Legend(orient="bottom"), scale=alt.Scale(
            domain=["naive", "FlashAttention"], range=[ALARM, TILE_COLORS["Q_i"]])),
        tooltip=["algorithm:N", "seq:Q", alt.Tooltip("hbm_GB:Q", format=".4g")])
    return finish(chart.properties(height=300, title="HBM bytes moved (model)"), width=width)
