"""Overview: what FlashAttention changes, the headline measurement, what each page shows,
the device in use, the config's key figures."""
import streamlit as st

from app.features.timings.charts import headline_chart
from app.core.controls import PRESETS
from app.core.figures import PAGE_GUIDE, device_sentence, device_table, hbm_text, key_figures
from engine.model.units import format_bytes
from app.core.sidebar import apply_preset
from app.core.results_dir import bench_dir
from app.features.timings.data import recorded_headline
from app.core.ui import chart, on_stage, settings, stage, usable_settings
from app.core.deck_view import takeaway
from app.core.takeaways import headline

st.title("FlashAttention Lab")
slot = stage()
st.markdown(
    "Attention computes **O = softmax(QKᵀ·scale)·V**. Done naively, the N×N score matrix S "
    "and its softmax P are written to the GPU's large, slow **HBM** and read back. "
    "FlashAttention cuts Q, K and V into tiles small enough for the fast on-chip **SRAM** "
    "(shared memory), computes each tile of S there, and keeps a *running* max and sum per "
    "row (the online softmax) so S and P never leave the chip. The answer is the same up to "
    "rounding; the memory drops from N² to N, and the HBM traffic shrinks but, as K and V "
    "are read once per query tile, still grows as N² (see the config's figures below).")

rows, subtitle, shown = recorded_headline(bench_dir(), settings().device)
with on_stage(slot):
    if rows.empty:
        st.info("No GPU results are recorded in benchmarks/ yet: the headline chart appears "
                "once `python -m benchmarks.bench_sweep` has written one there.")
    else:
        talk = dict(width=400, height=300) if settings().talk else {}
        takeaway(headline(rows))
        chart(headline_chart, rows, subtitle, **talk)
        st.caption(f"Recorded, not live ({', '.join(sorted(rows.file.unique()))} in "
                   f"benchmarks/results/): medians of CUDA-event timings, non-causal; the "
                   f"Timings page has the method, every recorded file and the causal runs."
                   + (" Batch shrinks as N grows, so the flash kernels' peak memory stays flat "
                      "while naive's S and P grow as N²." if rows.batch.nunique() > 1 else ""))
        st.caption(shown.label)

st.subheader("The pages")
st.markdown("\n".join(f"- **{name}**: {line}" for name, line in PAGE_GUIDE))

st.subheader("Presets for talks")
cols = st.columns(len(PRESETS))
for col, name in zip(cols, PRESETS):
    col.button(name, on_click=apply_preset, args=(name,), width="stretch")

s = usable_settings()
cfg, dev = s.cfg, s.device

st.subheader("Device")
if dev.kind == "gpu":
    st.success(f"Running live on **{dev.name}** (compute capability "
               f"{dev.gpu.compute_capability}, driver {dev.driver}, CUDA runtime "
               f"{dev.cuda_runtime}, CuPy {dev.cupy_version}).")
else:
    st.info(f"**{dev.name}.** {device_sentence(dev.reason)} The NumPy emulation runs the "
            f"kernel's loop and writes the same trace; sizes below are the emulated GPU's.")
    with st.expander("Why no GPU (details for developers)"):
        st.code(dev.reason, language=None)
g = dev.gpu
c1, c2, c3, c4 = st.columns(4)
c1.metric("SMs", g.sms)
c2.metric("shared memory per SM", format_bytes(g.smem_per_sm))
c3.metric("shared memory per block", format_bytes(g.smem_per_block_optin))
c4.metric("GPU memory", format_bytes(g.memory_bytes))
with st.expander("Every figure of this GPU, with its source"):
    st.caption("Sizes in binary units (KiB, MiB, GiB: CUDA reports them as powers of two), "
               "rates in decimal units (GB/s, TB/s, TFLOP/s) as datasheets give them; dense "
               "rates, no sparsity. Kind: datasheet, CUDA attribute (cudaGetDeviceProperties), "
               "CUDA guide, or measured on the project's machines. The models use datasheet "
               "rates; measured figures only check and explain timings.")
    st.dataframe(device_table(g), hide_index=True, width="stretch")

st.subheader(f"This config: B={cfg.batch}, H={cfg.heads}, N_q={cfg.seq_q}, N_k={cfg.seq_k}, "
             f"d={cfg.head_dim}, tiles {cfg.block_q}×{cfg.block_k}, {cfg.dtype}"
             + (", causal" if cfg.causal else ""))
figures = key_figures(cfg, g)
for row in (figures[:4], figures[4:]):
    for col, (label, value, note) in zip(st.columns(4), row):
        col.metric(label, value, help=note)
        col.caption(note)
st.caption(hbm_text(cfg, g))
