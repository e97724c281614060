"""Charts of the Kernel page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.style import finish


def timeline_chart(schedule: pd.DataFrame, title: str, width: int = 900) -> alt.Chart:
    """Each thread block as a bar on the SM that ran it, from its start to its end,
    coloured by its query tile i."""
    sms = int(schedule.sm.max()) + 1 if len(schedule) else 1
    data = schedule.assign(sm_top=schedule.sm + 0.85)
    chart = alt.Chart(data).mark_rect().encode(
        x=alt.X("start_us:Q", title="time since the first block started (µs)"),
        x2="end_us:Q",
        y=alt.Y("sm:Q", title="SM (%smid)", scale=alt.Scale(domain=[0, sms], nice=False)),
        y2="sm_top:Q",
        color=alt.Color("q_tile:Q", title="query tile i", scale=alt.Scale(scheme="viridis")),
        tooltip=["sm:Q", "q_tile:Q", "bh:Q", alt.Tooltip("start_us:Q", format=".2f"),
                 alt.Tooltip("end_us:Q", format=".2f")])
    height = min(max(4 * sms, 200), 600)
    return finish(chart.properties(height=height, title=title), width=width)
