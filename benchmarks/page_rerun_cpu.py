"""How long a changed control takes to re-run each page's Python on this machine's CPU: every
page opened through Streamlit's AppTest with the CPU emulation, then seq_q, block_k and causal
changed one after another (a new config each time, nothing cached for it), each re-run timed.
The unit suite checks what a re-run computes (tests/pages/test_every_page.py counts the engine's
calls); this script measures how long it takes and keeps the figures. Target: under 2 s each.

  python -m benchmarks.page_rerun_cpu      # writes lab/records/page_rerun_cpu.json
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import time
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from app import page_list
from benchmarks.recording import LAB_RECORDS, ROOT

OUT = LAB_RECORDS / "page_rerun_cpu.json"
PAGES = tuple(row.feature for row in page_list.PAGES)
CHANGES = (("seq_q", 320), ("block_k", 32), ("causal", True))
TARGET_S = 2.0


def page_reruns(page: str) -> list[float]:
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    at.query_params["backend"] = "numpy"
    at.run()
    if page != "overview":
        at.switch_page(f"features/{page}/page.py").run()
    times = []
    for name, value in CHANGES:
        widget = at.checkbox(key=name) if name == "causal" else (
            at.number_input(key=name) if name == "seq_q" else at.selectbox(key=name))
        widget.set_value(value)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        assert not at.exception, [e.value for e in at.exception]
    return times


def main() -> None:
    argparse.ArgumentParser(prog="python -m benchmarks.page_rerun_cpu", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    by_page = {page: page_reruns(page) for page in PAGES}
    worst = max(max(t) for t in by_page.values())
    result = {
        "what": "re-run of each page's script after one control change (seq_q 320, block_k 32, "
                "causal), CPU emulation, through streamlit.testing AppTest",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or
                    platform.machine(), "python": platform.python_version()},
        "rerun_s": {p: [round(t, 3) for t in ts] for p, ts in by_page.items()},
        "median_s": round(statistics.median(t for ts in by_page.values() for t in ts), 3),
        "worst_s": round(worst, 3), "target_s": TARGET_S, "met": worst < TARGET_S}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    for page, ts in by_page.items():
        print(f"{page:15s} " + "  ".join(f"{t:5.2f} s" for t in ts))
    print(f"worst {worst:.2f} s (target {TARGET_S} s): {'met' if result['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
