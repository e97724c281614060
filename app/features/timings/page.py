"""Timings: naive vs flash for the chosen config, a sweep over sequence length with naive's
memory wall, and GPU results recorded in benchmarks/. On the CPU the timings are this
session's own (measured with a budget, interleaved, their spread shown); in talk mode the
recorded GPU results come first."""
import pandas as pd
import streamlit as st

from app.core import runner
from app.features.timings.charts import (config_chart, hbm_chart, memory_chart, stages_chart,
                                         sweep_chart)
from app.core.figures import hbm_text
from engine.model.units import format_bytes
from app.features.timings.measure import kept_cpu_timings, measure_cpu_timings
from app.features.timings.talk import talk_headline
from app.features.timings.sweep import cpu_point, each_point, run_sweep
from app.core.recorded_gpu import closest_files
from app.core.results_dir import bench_dir
from app.features.timings.data import (add_speedup, ceilings_note, fastest, in_kernel_order,
                                       memory_table, naive_walls, noisy_warning,
                                       recorded_table, spread_lines, stage_table, sweep_lengths,
                                       timing_table, with_builds, with_companions)
from app.core.ui import (chart, guarded, linked_choice, method_note, on_stage, stage,
                         usable_settings)
from app.core.deck_view import takeaway
from app.core.takeaways import memory_wall
from engine.facade import recorded

GPU_METHOD = ("CUDA events around the kernel(s), warm-up runs first (compile, module load and "
              "cuBLAS handles stay out), the median of many repetitions with the 10th–90th "
              "percentile spread, L2 flushed between repetitions, FLOPs counted as "
              "4·B·H·N_q·N_k·d (halved for causal).")
CPU_AUTO_FLOPS = 4e9     # on CPU, time the chosen config automatically below this many FLOPs

st.title("Timings")
s = usable_settings()
slot = stage()
cfg, gpu, on_gpu = s.cfg, s.device.gpu, s.on_gpu
reps = 30 if on_gpu else None       # CPU: adaptive, until a time budget is spent
where = s.device.name if on_gpu else "this machine's CPU (NumPy emulation, not a GPU figure)"
if slot is not None:    # talk mode opens on what real GPUs recorded, not on this machine's CPU
    with on_stage(slot, "speed"):
        talk_headline(s.device, on_gpu)

st.subheader("This config: naive against flash" if on_gpu else
             "This config on the CPU, not a GPU: naive against flash")
left = st.container()
auto = on_gpu or cfg.flops <= CPU_AUTO_FLOPS
kept = None if on_gpu else kept_cpu_timings(cfg)
again = not on_gpu and kept is not None and left.button(
    "Time again", help="This session's CPU timing of this config, measured anew.")
if kept is not None or auto or left.button("Time this config"):
    entries = []
    if on_gpu:
        for label, algorithm, kernel in runner.kernels_for(s.backend):
            # A kernel that does not take this config is a note, not a failure of the page.
            t = guarded(runner.timing, cfg, algorithm, s.backend, kernel, reps, show=st.warning)
            if t is not None:
                entries.append((label, t))
    elif kept is not None and not again:
        entries = kept          # this session's own timing, never another visitor's
    else:
        with st.spinner("Timing naive and flash on the CPU, interleaved…"):
            entries = guarded(measure_cpu_timings, cfg, show=st.warning) or []
    table = timing_table(entries)
    if not table.empty:
        st.session_state["config_timings"] = table
        with left:
            if not on_gpu:
                st.markdown("  \n".join(spread_lines(table)))
                warn = noisy_warning(table)
                if warn:
                    st.warning(warn)
            st.caption(f"Measured on {where}" + ("" if on_gpu else " in this session (not "
                       "shared with other visitors)") + ". Each box is the middle half of the "
                       "calls (interquartile range) with the median as a white tick; whiskers "
                       f"reach the furthest call within 1.5 box lengths, calls beyond are points "
                       f"(▸ on the edge when off the scale), so one slow call cannot stretch "
                       f"the chart.")
            chart(config_chart, table)
            naive = dict(entries).get("naive")
            if naive is not None and naive.stages:
                st.caption("Naive attention's stages")
                chart(stages_chart, stage_table(naive))
            with st.expander("How this was timed"):
                method_note(entries[0][1].method, GPU_METHOD if on_gpu else None)
else:
    left.info(f"This config is {cfg.flops / 1e9:.1f} GFLOP: on the CPU it takes a while, so "
              f"it is timed only when you press the button.")

st.subheader("Sweep over sequence length (N_q = N_k = N)")
walls = naive_walls(cfg, gpu)
wall, wall_text = walls["memory"], walls["memory_text"]
row_limit = (walls["row"], walls["row_text"]) if walls["row"] else None
choices = sweep_lengths(256, 65536 if on_gpu else 8192)
c1, c2 = st.columns([2, 3])
largest = linked_choice(c1, "largest N", "sweep_largest", choices, 16384 if on_gpu else 2048)
lengths = sweep_lengths(256, largest)
key = (cfg, s.backend, tuple(lengths))
if c1.button("Run sweep", type="primary"):
    bar = st.progress(0.0, text="starting…")
    time_point = each_point(runner.timing, s.backend, reps) if on_gpu else cpu_point
    result = guarded(run_sweep, cfg, s.backend, gpu, lengths, time_point,
                     lambda done, total, what: bar.progress(done / total, text=what))
    bar.empty()
    if result is not None:
        st.session_state["sweep"] = (key, result)
c2.caption(f"Times {len(lengths)} lengths × {len(runner.kernels_for(s.backend))} kernels on "
           f"{where}. Naive is never attempted where the memory model predicts it would not "
           f"fit in {gpu.name}'s {format_bytes(gpu.memory_bytes)}. " + walls["note"])
if not on_gpu:
    c2.caption("On the CPU, naive and flash are timed interleaved at each length, with the "
               "budget of this config's timing above, so that a busy machine slows both alike.")
stored = st.session_state.get("sweep")
if stored and stored[0] == key:
    sweep = stored[1]
    shown_wall = wall if wall and wall <= 4 * largest else None
    shown_row = row_limit if row_limit and row_limit[0] <= 4 * largest else None
    for metrics in (("median_ms", "tflops"), ("speedup", "peak_MiB")):
        for col, metric in zip(st.columns(2), metrics):
            with col:
                chart(sweep_chart, sweep, metric, shown_wall, width=290, wall_text=wall_text,
                      row_limit=shown_row)
    st.caption("Peak memory: " + ("the high-water mark of device allocations, measured."
                                  if on_gpu else "from the memory model (a CPU run has no "
                                  "device memory to measure)."))
    warn = noisy_warning(sweep[sweep.skipped == ""])
    if warn:
        st.warning(warn)
    skipped = sweep[sweep.skipped != ""]
    if not skipped.empty:
        st.caption("Not run: " + "; ".join(f"{r.kernel} at N = {r.seq}: {r.skipped}"
                                          for r in skipped.itertuples()))
else:
    st.caption("Press **Run sweep** to time every length (a progress bar shows each run).")

parts = [st.session_state.get("config_timings"), stored[1] if stored and stored[0] == key
         else None]
parts = [p for p in parts if p is not None and not p.empty]
st.session_state["timing_results"] = pd.concat(parts, ignore_index=True) if parts else None

model_ns = sweep_lengths(256, max(largest, 2 * wall if wall else 0, 1024))
memory = memory_table(cfg, [n for n in model_ns if n <= 2**20])
with on_stage(slot, "memory"):           # talk mode's memory-wall slide
    takeaway(memory_wall(memory, gpu.name, gpu.memory_bytes, wall), "memory")
    c1, c2 = st.columns(2)
    with c1:
        chart(memory_chart, memory, gpu.memory_bytes, gpu.name, wall, wall_text=wall_text,
              row_limit=row_limit)
    with c2:
        chart(hbm_chart, memory)
st.caption("Both from the memory and IO model of this exact config (engine.model.iomodel), not "
           "measured. Naive's peak grows as N², flash's as N. " + hbm_text(cfg, gpu))

st.subheader("Recorded on real GPUs")
files, shown = closest_files(recorded.load_benchmarks(bench_dir()), s.device)
if not files:
    st.info("No GPU results are recorded in benchmarks/ yet.")
else:
    st.caption(shown.label)
    table = with_builds(recorded_table(files), files)
    names = [f"{f['file']}: {f.get('device', {}).get('name', '?')}, {f.get('date', '?')}"
             for f in files]
    best = fastest(table)
    default = next((i for i, f in enumerate(files) if best is not None
                    and f["file"] == best.file), 0)
    pick = st.selectbox("recorded file", names, index=default, key="rec_file",
                        help="Shown first: the file and shape of the project's fastest kernel.")
    chosen = files[names.index(pick)]
    rows = with_companions(table, chosen["file"])
    shapes = sorted(rows["shape"].unique())
    shape = st.selectbox("shape", shapes, key="rec_shape", index=shapes.index(best["shape"])
                         if best is not None and best["shape"] in shapes else 0)
    rows = in_kernel_order(add_speedup(rows[rows["shape"] == shape]))
    tokens = sorted(rows.tokens.unique())
    held = (f" Batch shrinks as N grows so that B·N = {tokens[0]:,} tokens throughout."
            if len(tokens) == 1 and rows.batch.nunique() > 1 else "")
    joined = sorted(set(rows.file) - {chosen["file"]})
    also = (f" Lines this file lacks (same device, date and shape) come from "
            f"{', '.join(joined)}." if joined else "")
    st.caption(f"Recorded on **{chosen.get('device', {}).get('name', '?')}** on "
               f"{chosen.get('date', '?')}.{held}{also}")
    with st.expander("How these were timed"):
        st.write(chosen.get("method", "not stated"))
        st.caption(ceilings_note(chosen, gpu))
    plotted = rows.drop(columns=["stages", "method"], errors="ignore")   # cheap to hash
    for metrics in (("median_ms", "tflops"), ("speedup", "peak_MiB")):
        for col, metric in zip(st.columns(2), metrics):
            with col:
                chart(sweep_chart, plotted, metric, width=290)
    st.dataframe(rows.drop(columns=["method"]), hide_index=True)
