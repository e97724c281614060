"""Kernel: the CUDA source of every kernel of the project and its compile facts, and the
block-to-SM timelines kernels recorded (live on a GPU, recorded ones from benchmarks/)."""
import streamlit as st

from app.core import runner
from app.features.kernel.charts import timeline_chart
from app.features.kernel.hopper import section as hopper_section
from app.core.arch_notice import build_refusal
from app.core.controls import kernel_label
from app.core.figures import device_sentence
from app.features.kernel.data import (BY_KEY, KERNEL_SOURCES, facts_for_config, facts_table,
                                      kernel_that_runs, recorded_how, recorded_label,
                                      schedule_summary, schedule_table, source_text,
                                      timeline_caption)
from app.core.recorded_gpu import closest_files
from app.core.results_dir import bench_dir
from app.core.ui import chart, guarded, notes, on_stage, stage, usable_settings
from engine.facade import recorded

st.title("Kernel")
s = usable_settings()
slot = stage()
st.caption("Every CUDA kernel of the project: its source, its registers, spills and shared "
           "memory, and how its thread blocks spread over the GPU's SMs.")
cfg = s.cfg
name = kernel_label(s.kernel)

res = None
if s.on_gpu:
    res = guarded(runner.flash, cfg, s.backend, s.kernel)
    if res is not None:
        st.success(f"The {name} ran on {s.device.name} for this config.")
else:
    st.info(f"No GPU is in use here, so no CUDA kernel ran: {device_sentence(s.device.reason)} "
            f"The pages show the NumPy emulation of the same loop. Below: the source of any "
            f"kernel, compile facts and schedules recorded on a real GPU (benchmarks/results/).")
    with st.expander("Why no GPU: the technical detail"):
        st.caption(s.device.reason)

ran = kernel_that_runs(s.kernel, cfg, res.info if res is not None else None)
keys = [k.key for k in KERNEL_SOURCES]
key = st.selectbox("Kernel to show", keys, index=keys.index(ran), key=f"kernel_shown_{ran}",
                   format_func=lambda k: BY_KEY[k].label + (" ← runs this config" if k == ran
                                                           else ""))

st.subheader("Compile facts")
if res is not None and res.info and key == ran:
    st.caption(f"The build that just ran on {s.device.name}, read from the compiled module.")
    st.dataframe(facts_table(res.info), hide_index=True)
else:
    if s.on_gpu:
        from engine.facade import facts_of
        not_here = build_refusal(s.device.gpu, key, cfg.dtype)
        if not_here:
            st.caption(not_here)
        live = None if not_here else guarded(facts_of, key, cfg, False, show=st.caption)
        if live is not None:
            st.caption(f"Compiled now on {s.device.name} for this config (untraced build).")
            st.dataframe(facts_table(live), hide_index=True)
    facts_files, facts_gpu = closest_files(recorded.load_kernel_facts_files(bench_dir()),
                                           s.device)
    rec_facts = facts_files[0] if facts_files else None
    table, facts_note = facts_for_config(rec_facts, key, cfg, s.device.gpu)
    if table.empty:
        st.caption("No compile facts of this kernel are recorded in benchmarks/results/."
                   + (f" {facts_note}" if facts_note else ""))
    else:
        if rec_facts:
            dev = (rec_facts.get("device") or {}).get("name", "unknown GPU")
            st.caption(f"Recorded on {dev}, {rec_facts.get('date', '?')} "
                       f"({rec_facts['file']}), from the compiled module: spilled bytes are "
                       f"local memory per thread; blocks / SM from CUDA's occupancy "
                       f"calculator. Each build names its dtype.")
            st.caption(facts_gpu.label)
        if facts_note:
            st.caption(facts_note)
        st.dataframe(table, hide_index=True)

with on_stage(slot):
    if not s.talk:
        st.subheader("Block-to-SM timeline")
    options = {}
    if res is not None and res.schedule is not None:
        options[f"this config, live on {s.device.name} ({name})"] = ("live", res.schedule)
    schedules, schedules_gpu = closest_files(recorded.load_schedules(bench_dir()), s.device)
    for rec in schedules:
        options[recorded_label(rec)] = ("recorded", rec)
    if not options:
        st.info("No block-to-SM schedule to show: none was recorded by a GPU run here, and none "
                "is recorded in benchmarks/ yet.")
    else:
        picked = st.selectbox("Schedule", list(options), key="schedule_shown")
        kind, sched_src = options[picked]
        sched = guarded(schedule_table, sched_src)
        if sched is not None:
            above = st.container()
            summary = schedule_summary(sched)
            if kind == "live":
                title = f"{s.device.name}: this config, {name}"
            else:
                dev = (sched_src.get("device") or {}).get("name", "unknown GPU")
                title = [f"Recorded on {dev}, {sched_src.get('date', '?')}:",
                         f"{sched_src.get('label') or sched_src.get('kernel', '?')}"]
            chart(timeline_chart, sched, title, width=760, **(dict(height=330) if s.talk else {}))
            with notes(above):
                if kind == "recorded":
                    st.caption(recorded_how(sched_src))
                    st.caption(schedules_gpu.label)
                c1, c2, c3, c4 = st.columns(4)
                c1.metric("thread blocks drawn", f"{summary['blocks']:,}",
                          help=(f"in {summary['runs']:,} runs" if summary["runs"] !=
                                summary["blocks"] else None))
                c2.metric("SMs used", summary["sms"])
                c3.metric("waves", f"{summary['waves']:.1f}",
                          help=f"blocks ÷ (SMs × {summary['resident']} blocks resident per SM "
                               f"at once)")
                c4.metric("span", f"{summary['span_us']:,.1f} µs",
                          help=f"SMs sit idle {summary['idle_tail']:.0%} of it on average after "
                               f"their last block ends")
            st.caption(timeline_caption(summary, "block" in sched))

hopper_section(s)

st.subheader("CUDA source")
text = source_text(key)[1]
if text is None:
    st.warning(f"The source file kernels/{BY_KEY[key].source} is not in this checkout.")
else:
    st.caption(f"kernels/{BY_KEY[key].source}")
    st.code(text, language="cpp", line_numbers=True, height=600)
