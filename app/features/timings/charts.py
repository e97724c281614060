"""Charts of the Timings page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.core.legible import POW2_LABEL, log_ticks, pow2_labels
from app.core.style import ALARM, FONT, INK, TILE_COLORS, finish, kernel_name, named_scale
from engine.model.units import GiB, format_bytes

METRICS = {"median_ms": "time (ms, median)", "tflops": "TFLOP/s", "speedup": "speedup over naive",
           "peak_MiB": "peak memory (MiB)"}


def log_axis(values: pd.Series, **kw) -> alt.Axis:
    """A log axis labelled at a few round values of `values`' range, never crowded."""
    v = pd.to_numeric(values, errors="coerce")
    v = v[v > 0]
    ticks = log_ticks(float(v.min()), float(v.max())) if len(v) else []
    return alt.Axis(format="~g", **({"values": ticks} if ticks else {}), **kw)


def _names(df: pd.DataFrame) -> pd.DataFrame:
    """df with a `name` column (the kernel in words) when it has none."""
    return df if "name" in df else df.assign(name=[kernel_name(k) for k in df.kernel])


def config_chart(timings: pd.DataFrame, width: int = 520) -> alt.LayerChart:
    """One box per run, labelled by algorithm and backend: the interquartile range of the
    calls, the median as a white tick, whiskers to the furthest call within 1.5 IQR, slower or
    faster calls as points (data.spread). The axis ends just past the whiskers and the
    medians, so one slow call cannot squash the boxes: calls beyond it sit on the edge as ▸."""
    data = _names(timings)
    if "q1_ms" not in data:
        data = data.assign(q1_ms=data.p10_ms, q3_ms=data.p90_ms, lo_ms=data.p10_ms,
                           hi_ms=data.p90_ms, outliers_ms=[()] * len(data), spread="p10–p90")
    edge = 1.15 * float(max(data.hi_ms.max(), data.median_ms.max()))
    calls = [(r.name, float(c)) for r in data.itertuples() for c in r.outliers_ms]
    out = pd.DataFrame(calls, columns=["name", "ms"]).assign(
        shown_ms=lambda d: d.ms.clip(upper=edge), off=lambda d: d.ms > edge)
    # each median's label right of everything drawn on its row (whisker and outlying calls),
    # never on a point
    right = out.groupby("name").shown_ms.max() if len(out) else pd.Series(dtype=float)
    data = data.assign(label_ms=[max(float(h), float(right.get(n, h)))
                                 for n, h in zip(data.name, data.hi_ms)])
    names = list(data.name)
    y = alt.Y("name:N", title=None, sort=names, axis=alt.Axis(labelLimit=320))
    x_scale = alt.Scale(domain=[0, edge], zero=True, nice=False)
    spread = "p10–p90" if (data.spread == "p10–p90").all() else "box: interquartile range"
    color = alt.Color("name:N", legend=None, scale=named_scale(data.kernel, data.name))
    tips = ["name:N", alt.Tooltip("median_ms:Q", format=".4f"),
            alt.Tooltip("q1_ms:Q", format=".4f"), alt.Tooltip("q3_ms:Q", format=".4f"),
            alt.Tooltip("p10_ms:Q", format=".4f"), alt.Tooltip("p90_ms:Q", format=".4f"),
            "reps:Q", alt.Tooltip("tflops:Q", format=".3f")]
    base = alt.Chart(data)
    whisker = base.mark_rule(color=INK, strokeWidth=2).encode(
        x=alt.X("lo_ms:Q", scale=x_scale, title=f"time (ms): median, {spread}"), x2="hi_ms:Q",
        y=y)
    box = base.mark_bar(height=30).encode(x="q1_ms:Q", x2="q3_ms:Q", y=y, color=color,
                                          tooltip=tips)
    median = base.mark_tick(color="white", thickness=3, size=30).encode(x="median_ms:Q", y=y)
    label = base.mark_text(align="left", dx=10, fontSize=FONT["text"]).encode(
        x="label_ms:Q", y=y, text=alt.Text("median_ms:Q", format=".3g"))
    points = alt.Chart(out).mark_point(filled=True, size=90, color=INK).encode(
        x="shown_ms:Q", y=y,
        shape=alt.condition("datum.off", alt.value("triangle-right"), alt.value("circle")),
        tooltip=[alt.Tooltip("name:N", title="run"),
                 alt.Tooltip("ms:Q", format=".4f", title="an outlying call (ms)")])
    chart = alt.layer(whisker, box, median, label, points).properties(height=alt.Step(48))
    return finish(chart, width=width)


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


ROW_LIMIT_COLOR = "#555555"     # the naive softmax kernel's row limit: not memory, not red


def _wall(wall: int | None, text: str, y: int = 4, color: str = ALARM):
    """A dashed rule at N = wall (red: the memory wall), its text left of it at height y
    (pixels from the top)."""
    data = pd.DataFrame({"seq": [wall] if wall else [], "t": [text] if wall else []})
    rule = alt.Chart(data).mark_rule(color=color, strokeWidth=3, strokeDash=[8, 4]).encode(
        x="seq:Q")
    label = alt.Chart(data).mark_text(color=color, align="right", dx=-6, baseline="top",
                                      fontSize=FONT["text"]).encode(
        x="seq:Q", y=alt.value(y), text="t:N")
    return rule + label


def _row_limit(row: tuple[int, str] | None, y: int) -> list:
    """The naive softmax kernel's row limit (N, text) as a grey dashed rule: [layer], or []
    when not given."""
    return [_wall(row[0], row[1], y, ROW_LIMIT_COLOR)] if row else []


def sweep_chart(sweep: pd.DataFrame, metric: str, wall: int | None = None,
                width: int = 420, wall_text: str = "naive's memory wall",
                row_limit: tuple[int, str] | None = None) -> alt.LayerChart:
    """One metric against sequence length on log axes, one line per kernel (named in words);
    naive's memory wall (predicted: S and P outgrow the GPU's memory) as a red rule and, when
    given, the naive softmax kernel's row limit (N, text) as a grey one."""
    sweep = _names(sweep)
    data = sweep.dropna(subset=[metric])
    data = data[data[metric] > 0]
    seqs = list(sweep.seq) + ([wall] if wall else []) + ([row_limit[0]] if row_limit else [])
    x = alt.X("seq:Q", title="sequence length N (log)",
              scale=alt.Scale(type="log", base=2, domain=[min(seqs), max(seqs)]),
              axis=alt.Axis(values=pow2_labels(seqs), labelExpr=POW2_LABEL, labelAngle=-45))
    scale = named_scale(sweep.kernel if "build" not in sweep else sweep.build, sweep.name)
    lines = alt.Chart(data).mark_line(point=alt.OverlayMarkDef(size=80), strokeWidth=3).encode(
        x=x, y=alt.Y(f"{metric}:Q", title=METRICS[metric], scale=alt.Scale(type="log"),
                     axis=log_axis(data[metric])),
        color=alt.Color("name:N", scale=scale, title="kernel",
                        legend=alt.Legend(orient="bottom", columns=2 if width >= 420 else 1,
                                          labelLimit=320)),
        tooltip=[alt.Tooltip("name:N", title="kernel"), "seq:Q",
                 alt.Tooltip(f"{metric}:Q", format=".4g")])
    if metric == "median_ms" and {"p10_ms", "p90_ms"} <= set(data):
        lines += alt.Chart(data).mark_rule(strokeWidth=2).encode(
            x=x, y="p10_ms:Q", y2="p90_ms:Q", color=alt.Color("name:N", scale=scale))
    chart = alt.layer(lines, _wall(wall, wall_text), *_row_limit(row_limit, 24)).properties(
        height=300, title=METRICS[metric])
    return finish(chart, width=width)


def memory_chart(memory: pd.DataFrame, gpu_bytes: float, gpu_name: str, wall: int | None,
                 width: int = 290, wall_text: str = "naive would not fit",
                 row_limit: tuple[int, str] | None = None) -> alt.LayerChart:
    """Peak device memory of naive and flash against N (model), with the GPU's memory and
    naive's memory wall (where its peak passes it); when given, the naive softmax kernel's
    row limit (N, text) as a grey rule of its own."""
    x = alt.X("seq:Q", title="sequence length N (log)", scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(values=pow2_labels(memory.seq), labelExpr=POW2_LABEL,
                            labelAngle=-45))
    color = alt.Color("algorithm:N", legend=alt.Legend(orient="bottom"), scale=alt.Scale(
        domain=["naive", "FlashAttention"], range=[ALARM, TILE_COLORS["Q_i"]]))
    lines = alt.Chart(memory).mark_line(point=True, strokeWidth=3, clip=True).encode(
        x=x, y=alt.Y("peak_GiB:Q", title="peak memory (GiB, log)", scale=alt.Scale(type="log"),
                     axis=log_axis(pd.concat([memory.peak_GiB, pd.Series([gpu_bytes / GiB])]))),
        color=color, tooltip=["algorithm:N", "seq:Q", alt.Tooltip("peak_GiB:Q", format=".4g")])
    cap = pd.DataFrame({"GiB": [gpu_bytes / GiB], "t": [f"{gpu_name}: {format_bytes(gpu_bytes)}"]})
    limit = (alt.Chart(cap).mark_rule(color=INK, strokeDash=[4, 4], strokeWidth=2)
             .encode(y="GiB:Q")
             + alt.Chart(cap).mark_text(align="left", dy=-10, x=6, fontSize=FONT["text"])
             .encode(y="GiB:Q", text="t:N"))
    chart = alt.layer(lines, limit, _wall(wall, wall_text, y=270),
                      *_row_limit(row_limit, 250)).properties(
        height=300, title="Peak memory (model): naive's N² wall")
    return finish(chart, width=width)


def hbm_chart(memory: pd.DataFrame, width: int = 290) -> alt.Chart:
    """Modelled HBM bytes moved by naive and flash against N."""
    chart = alt.Chart(memory).mark_line(point=True, strokeWidth=3).encode(
        x=alt.X("seq:Q", title="sequence length N (log)", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=pow2_labels(memory.seq), labelExpr=POW2_LABEL,
                              labelAngle=-45)),
        y=alt.Y("hbm_GiB:Q", title="HBM traffic (GiB, log)", scale=alt.Scale(type="log"),
                axis=log_axis(memory.hbm_GiB)),
        color=alt.Color("algorithm:N", legend=alt.Legend(orient="bottom"), scale=alt.Scale(
            domain=["naive", "FlashAttention"], range=[ALARM, TILE_COLORS["Q_i"]])),
        tooltip=["algorithm:N", "seq:Q", alt.Tooltip("hbm_GiB:Q", format=".4g")])
    return finish(chart.properties(height=300, title="HBM bytes moved (model)"), width=width)


def headline_chart(rows: pd.DataFrame, subtitle: str, width: int = 300,
                   height: int = 260) -> alt.HConcatChart:
    """The Overview's picture: time and peak memory against N, one line per kernel in words
    (naive, the project's flash builds, PyTorch's flash and cuDNN), titled with the device and
    date of the recording."""
    rows = _names(rows).assign(peak_GiB=lambda d: d.peak_bytes / GiB)
    scale = named_scale(rows.build if "build" in rows else rows.kernel, rows.name)
    seqs = sorted(rows.seq.unique())
    x = alt.X("seq:Q", title="sequence length N (log)", axis=alt.Axis(
              values=pow2_labels(seqs), labelExpr=POW2_LABEL, labelAngle=-45),
              scale=alt.Scale(type="log", base=2))
    color = alt.Color("name:N", scale=scale, title=None,
                      legend=alt.Legend(orient="bottom", columns=2, labelLimit=320))

    def panel(field: str, title: str) -> alt.Chart:
        return alt.Chart(rows).mark_line(point=alt.OverlayMarkDef(size=80), strokeWidth=3).encode(
            x=x, y=alt.Y(f"{field}:Q", title=None, scale=alt.Scale(type="log"),
                         axis=log_axis(rows[field])), color=color,
            tooltip=[alt.Tooltip("name:N", title="kernel"), "seq:Q", "batch:Q",
                     alt.Tooltip(f"{field}:Q", format=".4g")]).properties(
            width=width, height=height, title=title)

    chart = alt.hconcat(panel("median_ms", "time (ms, median, log)"),
                        panel("peak_GiB", "peak memory (GiB, log)"), spacing=30).properties(
        title=alt.Title("Naive against flash against PyTorch", subtitle=subtitle,
                        subtitleFontSize=FONT["label"]))
    return finish(chart)
