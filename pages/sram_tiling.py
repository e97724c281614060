"""SRAM tiling: the kernel's loop over tiles of S, the shared-memory budget, HBM traffic and
thread blocks in waves over the SMs."""
import streamlit as st

from app.charts_tiling import loop_chart, smem_chart, waves_chart
from app.figures import kib
from app.tiling_data import loop_view, smem_table, waves
from app.ui import chart, loop_player, usable_settings
from engine import iomodel

st.title("SRAM tiling")
s = usable_settings()
cfg, gpu = s.cfg, s.device.gpu

st.markdown(
    f"One thread block per batch·head and query tile **Q_i** ({cfg.block_q} rows) loads Q_i "
    f"into shared memory once, then walks over the key tiles: load **K_j** and **V_j** "
    f"({cfg.block_k} rows each), compute **S_ij = Q_i K_jᵀ** on chip, update the running max "
    f"and sum, accumulate **O_i**. Only Q, K, V, O and the row log-sum-exp touch HBM.")

st.subheader("Shared memory of one thread block")
parts = smem_table(cfg, gpu)
chart(smem_chart, parts)
budget = iomodel.smem_budget(cfg, gpu)
if not budget.fits:
    best = iomodel.largest_fitting_tiles(cfg, gpu)
    shown = ", ".join(f"{bq}×{bk}" for bq, bk in best) or "none of the allowed sizes"
    st.error(
        f"These tiles need {kib(budget.total)} of shared memory per thread block, but "
        f"{gpu.name} gives one block at most {kib(budget.limit)}. The kernel could not "
        f"launch: shrink block_q or block_k, use float16, or a smaller head_dim. Largest tiles "
        f"(block_q×block_k) that fit for d={cfg.head_dim}, {cfg.dtype}: {shown}. "
        f"(The animation below still shows the loop they would run.)")
else:
    st.caption(f"{kib(budget.total)} of {kib(budget.limit)} per block; "
               f"shared memory alone lets {budget.blocks_per_sm} blocks share an SM.")

st.subheader("The loop, step by step")
view = loop_view(cfg)
n_steps = len(view.steps)
if view.group > 1:
    st.caption(f"The grid has {cfg.Tr}×{cfg.Tc} tiles; each cell here groups "
               f"{view.group}×{view.group} of them, so a step covers that many tile steps.")
st.caption("Drag the **loop step** slider under the chart (it runs in your browser), or play. "
           "Grey: done; purple: the tile S_ij on chip now; white: skipped by the "
           "causal mask. HBM bytes are counted from the tile sizes of this config.")
loop_player("sram", n_steps, loop_chart, view.tiles, view.steps, view.rows, view.cols)

st.subheader("Thread blocks in waves over the SMs")
w = waves(cfg, gpu)
if w.per_sm == 0:
    st.warning("No wave can run: the tiles do not fit in shared memory.")
else:
    st.markdown(
        f"{w.blocks:,} thread blocks; shared memory lets {w.per_sm} share an SM, so "
        f"{gpu.sms * w.per_sm:,} run at once on {gpu.sms} SMs: **{w.waves} wave(s)**. "
        f"(A model: registers and threads can lower residency further; the Kernel page shows "
        f"the schedule a GPU really ran.)" + (f" The first {w.shown} waves are drawn."
                                               if w.shown < w.waves else ""))
    chart(waves_chart, w.table, gpu.sms)
