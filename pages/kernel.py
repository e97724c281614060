"""Kernel: the CUDA source of the flash kernel, its compile facts, and the block-to-SM
timeline the kernel recorded."""
import streamlit as st

from app import runner
from app.charts_kernel import timeline_chart
from app.controls import kernel_label
from app.kernel_data import (facts_table, kernel_source, recorded_config, schedule_summary,
                             schedule_table)
from app.timing_data import bench_dir
from app.ui import chart, guarded, usable_settings
from engine import recorded

st.title("Kernel")
s = usable_settings()
cfg = s.cfg
name = kernel_label(s.kernel)

res = None
if s.on_gpu:
    res = guarded(runner.flash, cfg, s.backend, s.kernel)
    if res is not None:
        st.success(f"The {name} ran on {s.device.name} for this config.")
else:
    st.info(f"No GPU is in use here, so no CUDA kernel ran: {s.device.reason} The pages show "
            f"the NumPy emulation of the same loop. Below is the source of the {name} that "
            f"runs on a GPU, and a schedule recorded on a real GPU if one is in benchmarks/.")

st.subheader("Compile facts")
if res is not None and res.info:
    facts = facts_table(res.info)
    st.dataframe(facts, hide_index=True)
else:
    st.caption("Registers, shared memory and threads per block come from CuPy's function "
               "attributes after the kernel compiles on a GPU" +
               (": this run reported none." if s.on_gpu else "; none here without a GPU."))

st.subheader("Block-to-SM timeline")
if res is not None and res.schedule is not None:
    sched = guarded(schedule_table, res.schedule)
    title = f"{s.device.name}: this config, {name}"
else:
    rec = recorded.load_schedule(bench_dir())
    sched = guarded(schedule_table, rec) if rec else None
    if rec and sched is not None:
        rc = recorded_config(rec)
        shape = (f"B={rc.batch}, H={rc.heads}, N={rc.seq_q}, d={rc.head_dim}, tiles "
                 f"{rc.block_q}×{rc.block_k}" if rc else "config not stated")
        dev = (rec.get("device") or {}).get("name", "unknown GPU")
        title = f"Recorded on {dev}, {rec.get('date', '?')}: {rec.get('kernel', '?')} kernel"
        st.caption(f"A schedule recorded on a real GPU ({shape}), not this config.")
if sched is None:
    st.info("No block-to-SM schedule to show: none was recorded by a GPU run here, and none is "
            "recorded in benchmarks/ yet.")
else:
    summary = schedule_summary(sched)
    c1, c2, c3 = st.columns(3)
    c1.metric("thread blocks drawn", f"{summary['blocks']:,}")
    c2.metric("SMs used", summary["sms"])
    c3.metric("span", f"{summary['span_us']:.1f} µs")
    chart(timeline_chart, sched, title)
    st.caption("Each bar is one thread block: the SM it ran on (%smid) and its start and end "
               "(%globaltimer), coloured by its query tile i.")

st.subheader("CUDA source")
path, text = kernel_source(s.kernel, res.info if res is not None else None)
if text is None:
    st.warning(f"The source file {path.name} is not in kernels/ in this checkout.")
else:
    st.caption(f"kernels/{path.name}")
    st.code(text, language="cpp", line_numbers=True, height=600)
