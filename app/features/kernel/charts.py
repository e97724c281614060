"""Charts of the Kernel page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.core.style import finish


def timeline_chart(schedule: pd.DataFrame, title: str | list[str], width: int = 900,
                   height: int = 420) -> alt.Chart:
    """Each thread block (or each run of a block, in a run schedule) as a bar on the SM that
    ran it, from its start to its end, coloured by its query tile i; blocks resident on one SM
    at once share its row in lanes (the "slot" column of data.schedule_table), so
    waves read left to right."""
    sms = int(schedule.sm.max()) + 1 if len(schedule) else 1
    lanes = int(schedule.slot.max()) + 1 if "slot" in schedule and len(schedule) else 1
    slot = schedule.slot if "slot" in schedule else 0
    data = schedule.assign(sm_lane=schedule.sm + slot / lanes,
                           sm_top=schedule.sm + (slot + 0.85) / lanes)
    chart = alt.Chart(data).mark_rect().encode(
        x=alt.X("start_us:Q", title="time since the first block started (µs)"),
        x2="end_us:Q",
        y=alt.Y("sm_lane:Q", title="SM (%smid)", scale=alt.Scale(domain=[0, sms], nice=False)),
        y2="sm_top:Q",
        color=alt.Color("q_tile:Q", title="query tile i", scale=alt.Scale(scheme="viridis"),
                        legend=alt.Legend(orient="bottom", gradientLength=240)),
        tooltip=[alt.Tooltip("sm:Q", title="SM"), alt.Tooltip("q_tile:Q", title="query tile i"),
                 alt.Tooltip("bh:Q", title="batch·head"),
                 alt.Tooltip("start_us:Q", title="start (µs)", format=".2f"),
                 alt.Tooltip("end_us:Q", title="end (µs)", format=".2f"),
                 *([alt.Tooltip("block:Q", title="block"),
                    alt.Tooltip("j_lo:Q", title="first key tile j"),
                    alt.Tooltip("j_hi:Q", title="key tiles up to (not incl.)"),
                    alt.Tooltip("outcome:N", title="item")] if "block" in schedule else [])])
    return finish(chart.properties(height=height, title=title), width=width)
