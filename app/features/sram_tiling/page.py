"""SRAM tiling: the kernel's loop over tiles of S in FlashAttention-2's or FlashAttention-1's
order, the shared-memory budget of the kernel that runs, HBM traffic and thread blocks in waves
over the SMs."""
import dataclasses

import streamlit as st

from app.features.sram_tiling import cards
from app.features.sram_tiling.charts import smem_chart, waves_chart
from app.core.controls import kernel_label
from engine.model.units import format_bytes
from app.core.figures import theta_text
from app.features.sram_tiling.data import (ORDERS, grid_text, intro_text, l2_text, loop_player,
                                           loop_view, reread_text, smem_layout, smem_table,
                                           waves)
from app.core.player.component import loop_animation, play_animation_apart
from app.core.ui import chart, linked_radio, notes, on_stage, stage, usable_settings
from app.core.deck_view import takeaway
from app.core.takeaways import tiling
from engine.model.tiles import processed_count
from app.features.downloads.replay import replay_choice, with_trace_labels
from engine.model import iomodel

st.title("SRAM tiling")
s = usable_settings()
slot = stage()
replay = replay_choice("sram_tiling")        # a trace uploaded on Downloads, with its config
cfg, gpu = (replay.cfg if replay else s.cfg), s.device.gpu
if replay:
    st.info(f"Replaying the {replay.label}: the loop below walks its tiles, and each tile "
            f"says how many of its rows' running max rose there in the trace.")
fmt = iomodel.format_bytes

intro = st.container()       # filled once the loop order below is known

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
        f"These tiles need {format_bytes(budget.total)} of shared memory per thread block, but "
        f"{gpu.name} gives one block at most {format_bytes(budget.limit)}. The GPU cannot launch this "
        f"config: shrink block_q or block_k, use float16, or a smaller head_dim. Largest tiles "
        f"(block_q×block_k) that fit for d={cfg.head_dim}, {cfg.dtype}: {shown}. "
        f"(The animation below still shows the loop they would run; the other pages show "
        f"the CPU emulation of it.)")
else:
    st.caption(f"{format_bytes(budget.total)} of {format_bytes(budget.limit)} per block; "
               + (f"shared memory alone lets {budget.blocks_per_sm} blocks share an SM."
                  if budget.blocks_per_sm > 1 else "shared memory alone lets one block run on "
                  "an SM at a time."))

with on_stage(slot):
    takeaway(tiling(budget.total, budget.limit, budget.fits, budget.blocks_per_sm, gpu.name,
                    processed_count(cfg), cfg.Tr * cfg.Tc))
    if not s.talk:
        st.subheader("The loop, step by step")
    order = linked_radio("loop order", "sram_order", ORDERS, "fa2")
    intro.markdown(intro_text(cfg, order))
    view = loop_view(cfg, order)
    if replay:               # the trace's labels on the tiles: built for this run
        tiles, steps = with_trace_labels(view.tiles, view.steps, view.group, cfg,
                                         replay.res.trace)
        animation = loop_animation(dataclasses.replace(view, tiles=tiles, steps=steps),
                                   "sram_step", compact=s.talk)
    else:                    # built once per shape, whatever the seed
        animation = loop_player(cfg, order, "sram_step", s.talk)
    above = st.container()
    play_animation_apart("sram", animation)      # a stop reruns the board alone
    notes(above).caption(
        "Play, step with ◀ ▶ (or the arrow keys once you click the board) or drag the slider: "
        "it all runs in your browser. Grey: done; purple: the tile S_ij on chip now; light "
        "grey: still to do; white: skipped by the causal mask. Beside it, the teaching "
        "kernel's lines that run in this step (the phase running now while playing)."
        + (" The teaching kernel runs FlashAttention-2's order; in FlashAttention-1's the same "
           "phases run in another order." if order == "fa1" else "")
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
          help=f"{fa1.total / fa2.total:.2f}× FlashAttention-2's count for this config")
m3.metric("HBM traffic, naive", fmt(naive.total))
counted = fa1.total if order == "fa1" else fa2.total
st.caption(f"Counted exactly from this config's tiles (every load as if from HBM). "
           + reread_text(cfg, order) + " " + theta_text(cfg, gpu, counted) + " "
           + l2_text(order, gpu.name, format_bytes(gpu.l2_bytes)))

st.subheader("Thread blocks in waves over the SMs")
w = waves(cfg, gpu, layout, order)
if w.per_sm == 0:
    st.warning("No wave can run: the tiles do not fit in shared memory.")
else:
    st.markdown(
        f"{w.blocks:,} thread blocks ({grid_text(cfg, order)}); shared memory lets "
        f"{w.per_sm} share an SM, so {gpu.sms * w.per_sm:,} run at once on {gpu.sms} SMs: "
        f"**{w.waves} wave(s)**"
        + (f", {w.blocks / (gpu.sms * w.per_sm):.0%} of the slots busy" if w.waves == 1 else "")
        + ". (A model: registers and threads can lower residency further; the Kernel page "
          "shows the schedule a GPU really ran.)" + (f" The first {w.shown} waves are drawn."
                                                     if w.shown < w.waves else ""))
    chart(waves_chart, w.table, gpu.sms)

cards.show(cfg, gpu, layout)      # the classroom lab's question cards
