"""Talk mode's first screen on the Timings page: what a real GPU recorded (the Overview's
headline chart of benchmarks/results/, for the GPU closest to the sidebar's), so that a talk
never opens on the CPU emulation's timings, which come after it labelled as CPU figures."""
from __future__ import annotations

import streamlit as st

import engine
from app.core.deck_view import takeaway
from app.core.results_dir import bench_dir
from app.core.takeaways import speed
from app.core.ui import chart
from app.features.timings.charts import headline_chart
from app.features.timings.data import recorded_headline

HEADING = "Recorded on real GPUs"


def talk_headline(device: engine.DeviceInfo, on_gpu: bool) -> None:
    """The recorded headline chart, sized for 1280×720, with where it comes from."""
    rows, subtitle, shown = recorded_headline(bench_dir(), device)
    st.subheader(HEADING)
    if rows.empty:
        st.info("No GPU results are recorded in benchmarks/ yet; the timings below are "
                + ("this GPU's." if on_gpu else "the CPU emulation's, not GPU figures."))
        return
    takeaway(speed(rows), "speed")
    chart(headline_chart, rows, subtitle, width=400, height=300)
    st.caption(f"GPU figures, recorded ({', '.join(sorted(rows.file.unique()))}): medians of "
               f"CUDA-event timings. {shown.label} "
               + ("The live timings below are this GPU's." if on_gpu else
                  "The timings below are this machine's CPU running the NumPy emulation: CPU "
                  "figures, not a GPU's."))
