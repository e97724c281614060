"""Downloads: the run's trace (NPZ, CSV) and timing results (JSON, CSV); an uploaded trace is
checked, summarised and kept for replay on SRAM tiling and Online softmax."""
import functools

import streamlit as st

from app.core import runner
from app.features.downloads.data import results_csv, results_json, trace_summary
from app.features.downloads.replay import PAGES, keep, replay_choice, uploaded
from app.core.results_dir import bench_dir
from app.features.timings.data import recorded_table
from app.core.ui import guarded, source_line, usable_settings
from engine.facade import recorded, trace_io
from engine.model.units import format_bytes

st.title("Downloads")
s = usable_settings()
cfg = s.cfg
stem = f"fa_lab_B{cfg.batch}_H{cfg.heads}_N{cfg.seq_q}x{cfg.seq_k}_d{cfg.head_dim}"

st.subheader("Trace of this run")
res = guarded(runner.flash, cfg, s.backend, s.kernel)
if res is not None:
    st.caption(source_line(s, res.backend) + " NPZ holds the config, output, lse and the "
               f"trace arrays; CSV has one line per (batch, head, row, key tile): "
               f"{cfg.bh * cfg.seq_q * cfg.Tc:,} lines. Files are made when you click.")
    c1, c2 = st.columns(2)
    c1.download_button("Trace (NPZ)", functools.partial(trace_io.to_npz_bytes, cfg, res),
                       file_name=f"{stem}_trace.npz", mime="application/octet-stream")
    c2.download_button("Trace (CSV)", functools.partial(trace_io.to_csv, cfg, res),
                       file_name=f"{stem}_trace.csv", mime="text/csv")

st.subheader("Timing results")
timings = st.session_state.get("timing_results")
if timings is None or timings.empty:
    st.info("No timings in this session yet: open the Timings page (and run a sweep) first.")
else:
    st.caption(f"{len(timings)} timings from this session ({s.device.name}).")
    c1, c2 = st.columns(2)
    c1.download_button("Timings (JSON)", results_json(timings, s.device, cfg),
                       file_name=f"{stem}_timings.json", mime="application/json")
    c2.download_button("Timings (CSV)", results_csv(timings),
                       file_name=f"{stem}_timings.csv", mime="text/csv")

st.subheader("GPU results recorded in benchmarks/")
files = recorded.load_benchmarks(bench_dir(), fp8=None)      # the FP8 runs too
if not files:
    st.info("No GPU results are recorded in benchmarks/ yet.")
else:
    table = recorded_table(files)
    st.download_button("Recorded GPU results (CSV)", results_csv(table),
                       file_name="recorded_gpu_results.csv", mime="text/csv")
    for f in files:
        path = bench_dir() / f["file"]
        st.download_button(f"{f['file']} (JSON, {f.get('device', {}).get('name', '?')}, "
                           f"{f.get('date', '?')})", path.read_bytes(), file_name=f["file"],
                           mime="application/json", key=f"dl_{f['file']}")

st.subheader("Open a trace file")
st.caption("A trace NPZ saved here or by `python -m engine trace` (for example recorded on a GPU "
           "and opened on a laptop). The file is checked before use: no pickles, at most "
           f"{format_bytes(trace_io.MAX_UPLOAD_BYTES)}, every array's shape and dtype against the "
           "config stored in it.")
upload = st.file_uploader("Trace (NPZ)", type=["npz"], key="trace_upload")
if upload is not None:
    loaded = guarded(trace_io.from_npz_bytes, upload.getvalue())
    if loaded is not None:
        ucfg, ures = loaded
        st.success(f"{upload.name}: a valid trace from the {ures.backend} backend of "
                   f"B={ucfg.batch}, H={ucfg.heads}, N_q={ucfg.seq_q}, N_k={ucfg.seq_k}, "
                   f"d={ucfg.head_dim}, tiles {ucfg.block_q}×{ucfg.block_k}, {ucfg.dtype}"
                   + (", causal" if ucfg.causal else "") + ".")
        st.dataframe(trace_summary(ures), hide_index=True)
        keep(upload.name, ucfg, ures)
if uploaded() is not None:
    st.caption(f"Kept for this session: the {uploaded().label}. With **Replay the uploaded "
               f"trace** on, {PAGES} animate it with its own config.")
    replay_choice("downloads")
