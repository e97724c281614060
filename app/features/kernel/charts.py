"""Charts of the Kernel page. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import altair as alt
import pandas as pd

from app.core.style import finish

MIN_LANE_PX = 6         # a block's bar is never thinner than this (less than 3 px is unreadable)
MAX_LANE_PX = 14        # nor fatter, on a GPU of few SMs


def timeline_rows(sms: int, lanes: int, height: int) -> tuple[int, float]:
    """(SMs drawn, px per lane) for a timeline at most `height` px tall: every SM where each
    lane gets MIN_LANE_PX, else the first SMs that fit at MIN_LANE_PX."""
    per_sm = max(lanes, 1)
    shown = min(sms, max(1, height // (per_sm * MIN_LANE_PX)))
    return shown, min(MAX_LANE_PX, height / (shown * per_sm))


def timeline_chart(schedule: pd.DataFrame, title: str | list[str], width: int = 900,
                   height: int = 820) -> alt.Chart:
    """Each thread block (or each run of a block, in a run schedule) as a bar on the SM that
    ran it, from its start to its end, coloured by its query tile i; blocks resident on one SM
    at once share its row in lanes (the "slot" column of data.schedule_table), so
    waves read left to right. At most `height` px tall with every bar at least MIN_LANE_PX
    thick: where all SMs do not fit, the first ones are drawn and the SM axis's title says
    how many (the time axis still spans every block)."""
    sms = int(schedule.sm.max()) + 1 if len(schedule) else 1
    lanes = int(schedule.slot.max()) + 1 if "slot" in schedule and len(schedule) else 1
    shown, lane_px = timeline_rows(sms, lanes, height)
    slot = schedule.slot if "slot" in schedule else 0
    data = schedule.assign(sm_lane=schedule.sm + slot / lanes,
                           sm_top=schedule.sm + (slot + 0.85) / lanes)
    span = [0.0, float(data.end_us.max()) if len(data) else 1.0]
    data = data[data.sm < shown]
    y_title = "SM (%smid)" if shown == sms else f"SM (%smid): 0–{shown - 1} of {sms}"
    chart = alt.Chart(data).mark_rect().encode(
        x=alt.X("start_us:Q", title="time since the first block started (µs)",
                scale=alt.Scale(domain=span)),
        x2="end_us:Q",
        y=alt.Y("sm_lane:Q", title=y_title, scale=alt.Scale(domain=[0, shown], nice=False),
                axis=alt.Axis(format="d", tickMinStep=1)),
        y2="sm_top:Q",
        color=alt.Color("q_tile:Q", title="query tile i", scale=alt.Scale(scheme="viridis"),
                        legend=alt.Legend(orient="bottom", gradientLength=240, format="d")),
        tooltip=[alt.Tooltip("sm:Q", title="SM"), alt.Tooltip("q_tile:Q", title="query tile i"),
                 alt.Tooltip("bh:Q", title="batch·head"),
                 alt.Tooltip("start_us:Q", title="start (µs)", format=".2f"),
                 alt.Tooltip("end_us:Q", title="end (µs)", format=".2f"),
                 *([alt.Tooltip("block:Q", title="block"),
                    alt.Tooltip("j_lo:Q", title="first key tile j"),
                    alt.Tooltip("j_hi:Q", title="key tiles up to (not incl.)"),
                    alt.Tooltip("outcome:N", title="item")] if "block" in schedule else [])])
    return finish(chart.properties(height=round(shown * max(lanes, 1) * lane_px), title=title),
                  width=width)
