"""SRAM tiling: the kernel's loop over tiles of S in FlashAttention-2's or FlashAttention-1's
order, the shared-memory budget of the kernel that runs, HBM traffic and thread blocks in waves
over the SMs."""
import streamlit as st

from app.features.sram_tiling import cards
from app.features.sram_tiling.charts import loop_chart, smem_chart, waves_chart
from app.core.controls import kernel_label
from app.core.figures import kib
from app.features.sram_tiling.data import ORDERS, loop_view, smem_layout, smem_table, waves
from app.core.ui import chart, linked_radio, loop_player, notes, on_stage, stage, usable_settings
from engine.model import iomodel

st.title("SRAM tiling")
s = usable_settings()
slot = stage()
cfg, gpu = s.cfg, s.device.gpu
fmt = iomodel.format_bytes

st.markdown(
    f"One thread block per batch·head and query tile **Q_i** ({cfg.block_q} rows) loads Q_i "
    f"into shared memory once, then walks over the key tiles: load **K_j** and **V_j** "
    f"({cfg.block_k} rows each), compute **S_ij = Q_i K_jᵀ** on chip, update the running max "
    f"and sum, accumulate **O_i**. Only Q, K, V, O and the row log-sum-exp touch HBM.")

st.subheader("Shared memory of one thread block")
layout = smem_layout(cfg, gpu, s.kernel)
parts = smem_table(cfg, gpu, layout)
chart(smem_chart, parts)
budget = iomodel.smem_budget(cfg, gpu, layout)
st.caption(f"Layout of the {kernel_label(s.kernel)}" + (f" ({layout} build)" if
           layout != "teaching" else "") + ".  " + (
           "No tensor-core build takes this config, so the teaching kernel's layout is "
           "shown." if s.kernel == "tensorcore" and layout == "teaching" else ""))
if not budget.fits:
    best = iomodel.largest_fitting_tiles(cfg, gpu, layout)
    shown = ", ".join(f"{bq}×{bk}" for bq, bk in best) or "none of the allowed sizes"
    st.error(
        f"These tiles need {kib(budget.total)} of shared memory per thread block, but "
        f"{gpu.name} gives one block at most {kib(budget.limit)}. The GPU cannot launch this "
        f"config: shrink block_q or block_k, use float16, or a smaller head_dim. Largest tiles "
        f"(block_q×block_k) that fit for d={cfg.head_dim}, {cfg.dtype}: {shown}. "
        f"(The animation below still shows the loop they would run; the other pages show "
        f"the CPU emulation of it.)")
else:
    st.caption(f"{kib(budget.total)} of {kib(budget.limit)} per block; "
               f"shared memory alone lets {budget.blocks_per_sm} blocks share an SM.")

with on_stage(slot):
    if not s.talk:
        st.subheader("The loop, step by step")
    order = linked_radio("loop order", "sram_order", ORDERS, "fa2")
    view = loop_view(cfg, order)
    above = st.container()
    loop_player("sram", len(view.steps), loop_chart, view.tiles, view.steps, view.rows,
                view.cols, order=order, side=s.talk, size=330 if s.talk else 380)
    notes(above).caption(
        "Step with ◀ ▶ or the **loop step** slider, or play. Grey: done; purple: the tile "
        "S_ij on chip now; light grey: still to do; white: skipped by the causal mask."
        + (f" The grid has {cfg.Tr}×{cfg.Tc} tiles; each cell here groups "
           f"{view.group}×{view.group} of them." if view.group > 1 else ""))

fa2, fa1, naive = iomodel.flash_hbm(cfg), iomodel.flash1_hbm(cfg), iomodel.naive_hbm(cfg)
if order == "fa1":
    st.markdown(
        "**FlashAttention-1** (2022) puts the key tiles outside: a thread block loads **K_j**, "
        "**V_j** once, then every query tile comes in from HBM with its **O_i, m_i, l_i**, "
        "is updated with S_ij and written back — once per key tile.")
else:
    st.markdown(
        "**FlashAttention-2** (2023) puts the query tiles outside: **Q_i, O_i, m_i, l_i** stay "
        "on chip for the whole row and O_i is written once; **K_j, V_j** are read again by "
        "every query tile. The query tiles are independent, so they also run in parallel.")
m1, m2, m3 = st.columns(3)
m1.metric("HBM traffic, FlashAttention-2 order", fmt(fa2.total))
m2.metric("HBM traffic, FlashAttention-1 order", fmt(fa1.total),
          delta=f"{fa1.total / fa2.total:.2f}× FA2's", delta_color="off")
m3.metric("HBM traffic, naive", fmt(naive.total))
theta = iomodel.paper_theta_bytes(cfg, gpu)
st.caption(
    f"Counted exactly from this config's tiles (every load as if from HBM). FA2 still reads "
    f"K and V once per query tile, about 2·N²·d·bytes / block_q; the paper's order of "
    f"magnitude Θ(N²d²/M) gives {fmt(theta['flash'])} with M = {theta['M_elements']:,.0f} "
    f"elements of shared memory per SM. Query tiles that run at the same time ask for the "
    f"same K_j and V_j, which then often come from the L2 cache ({gpu.name}: "
    f"{gpu.l2_bytes / 2**20:.0f} MB) rather than HBM, so HBM sees fewer bytes than counted.")

st.subheader("Thread blocks in waves over the SMs")
w = waves(cfg, gpu, layout)
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

cards.show(cfg, gpu, layout)      # the classroom lab's question cards
