"""Backward pass: the FA2 backward loop from the run's trace, P rebuilt from lse, how the
gradients grow, bytes, FLOPs and peak memory of naive against flash backward, and times."""
import streamlit as st

from app.features.backward import cards
from app.core import runner
from app.features.backward.data import (dkv_growth, dq_growth, hbm_parts, loop_view, peak_table,
                                        price, price_verdict, row_mass, rowsum_gap)
from app.features.backward.charts import (growth_chart, hbm_parts_chart, peak_chart, price_chart,
                                          rowsum_chart)
from app.features.timings.charts import config_chart, memory_chart, sweep_chart
from app.core.controls import kernel_label
from app.core.figures import device_sentence
from app.core.recorded_gpu import closest_files
from app.core.results_dir import bench_dir
from app.features.timings.data import (memory_table, memory_wall, recorded_speedup, recorded_table,
                                       sweep_lengths, timing_table, with_builds)
from app.core.player.component import play_backward
from app.core.ui import (chart, guarded, linked_number, method_note, notes, on_stage, source_line,
                         stage, usable_settings)
from app.core.deck_view import takeaway
from app.core.takeaways import backward
from engine import check_limits
from engine.facade import recorded
from engine.model import iomodel

GPU_METHOD = ("CUDA events around the backward alone (the forward's O and lse are made "
              "before), warm-up runs first, the median of many repetitions with the 10th–90th "
              "percentile spread, L2 flushed between repetitions; FLOPs counted as 2.5× the "
              "forward's 4·B·H·N_q·N_k·d (halved for causal).")

st.title("Backward pass")
s = usable_settings()
slot = stage()
cfg, gpu = s.cfg, s.device.gpu

st.markdown(
    "The forward pass keeps only **O** and the row log-sum-exp **lse**, never the N×N matrix "
    "P. The backward pass rebuilds every tile **P_ij = exp(S_ij − lse_i)** on chip from Q_i "
    "and K_j, then: **dV_j += P_ijᵀ dO_i**, **dP_ij = dO_i V_jᵀ**, **dS_ij = P_ij ∘ (dP_ij − "
    "D_i)** with D_i = rowsum(dO_i ∘ O_i), **dQ_i += scale · dS_ij K_j**, **dK_j += scale · "
    "dS_ijᵀ Q_i**. In FlashAttention-2's order one thread block per key tile j keeps K_j, "
    "V_j, dK_j and dV_j on chip while the query tiles stream past; dQ is summed in float32 "
    "in HBM across the blocks.")

g = guarded(runner.backward, cfg, s.backend)

if g is not None:
    with on_stage(slot):
        if not s.talk:
            st.subheader("The loop, step by step")
        takeaway(backward(iomodel.naive_backward_hbm(cfg).total,
                          iomodel.flash_backward_hbm(cfg).total,
                          price(cfg, gpu, s.kernel).recompute_flops))
        above = st.container()
        view = loop_view(cfg, g.trace)
        play_backward("bw", view, "bw_step", compact=s.talk)
        with notes(above):
            st.info(source_line(s, g.backend) + (
                " The trace comes from the teaching backward kernel (the one built to write "
                "it)." if g.backend == "cupy" and s.kernel != "teaching" else ""))
            if view.group > 1:
                st.caption(f"The grid has {cfg.Tr}×{cfg.Tc} tiles; each cell here groups "
                           f"{view.group}×{view.group} of them, so a step covers that many "
                           f"tile steps.")
            st.caption("Play, step with ◀ ▶ (or the arrow keys once you click the board) or "
                       "drag the slider: it all runs in your browser. The orange frame is the "
                       "key tile j whose thread block holds K_j, V_j, dK_j and dV_j on chip; "
                       "the query tiles Q_i and dO_i stream past it. dK_j and dV_j fill up "
                       "(shade: share of the final norm, from the trace) and go to HBM when "
                       "the column ends (grey); dQ_i collects every block's part in HBM. "
                       "White tiles are skipped by the causal mask. Beside it, the backward "
                       "teaching kernel's lines that run in this step (the phase running now "
                       "while playing). On a GPU the key-tile blocks run at the same time; "
                       "the animation shows them one after another.")

    st.subheader("P rebuilt from lse alone")
    c1, c2 = st.columns(2)
    r = linked_number(c1, "query row", "bw_row", 0, cfg.seq_q - 1,
                      min(cfg.seq_q - 1, cfg.block_q + 5))
    c = linked_number(c2, "key row", "bw_key", 0, cfg.seq_k - 1, min(cfg.seq_k - 1, 3))
    left, right = st.columns([3, 2])
    with left:
        chart(rowsum_chart, row_mass(g.trace, cfg, 0, 0, r))
    with right:
        st.metric("largest |Σ_j rowsum(P_ij) − 1|", f"{rowsum_gap(g.trace):.1e}",
                  help="over every query row of every batch·head, from the trace")
        st.markdown(
            "Each tile's rows of P are rebuilt from Q_i, K_j and the saved lse_i alone. No "
            "tile knows the others, yet over all key tiles every row sums to 1, because lse "
            "is the log of the whole row's sum. Grey: other rows; bars: row "
            f"{r}'s share in each key tile (batch 0, head 0).")

    st.subheader("How the gradients grow")
    st.caption(f"Query row {r} and key row {c} (batch 0, head 0). dQ_r takes a part from "
               f"every key-tile block; dK_c and dV_c take one from every query tile that "
               f"passes key tile {c // cfg.block_k}. Hollow rings: tiles the causal mask "
               f"skipped (the value carries).")
    chart(growth_chart, dq_growth(g.trace, cfg, 0, 0, r), dkv_growth(g.trace, cfg, 0, 0, c))

st.subheader("HBM bytes and the price of recomputing P")
cost = price(cfg, gpu, s.kernel)
naive_io = iomodel.naive_backward_hbm(cfg).total
flash_io = iomodel.flash_backward_hbm(cfg).total
m1, m2, m3 = st.columns(3)
m1.metric("HBM traffic, naive backward", iomodel.format_bytes(naive_io),
          help="P read back; dP and dS written and read (engine.model.iomodel)")
m2.metric("HBM traffic, flash backward", iomodel.format_bytes(flash_io),
          help=f"{naive_io / flash_io:.1f}× less than the naive backward's")
m3.metric("extra FLOPs to rebuild P", f"{cost.recompute_flops / 1e9:.3g} GFLOP",
          help=f"one more QKᵀ: 2·B·H·N_q·N_k·d, halved when causal; it saves "
               f"{iomodel.format_bytes(max(cost.bytes_saved, 0))} of HBM traffic")
st.caption(f"Flash backward moves {naive_io / flash_io:.1f}× fewer HBM bytes than naive; "
           f"rebuilding P costs {cost.recompute_flops / 1e9:.3g} GFLOP and saves "
           f"{iomodel.format_bytes(max(cost.bytes_saved, 0))} of HBM traffic.")
left, right = st.columns(2)
with left:
    chart(hbm_parts_chart, hbm_parts(cfg))
with right:
    chart(price_chart, cost.table)
st.caption(f"Both from the IO model of this config (engine.model.iomodel), not measured. Times are "
           f"the least {gpu.name}'s datasheet rates allow for {cfg.dtype}: naive's products "
           f"through cuBLAS at {cost.rates['naive'].label}, flash's on the "
           f"{kernel_label(s.kernel)} at {cost.rates['flash'].label}, the traffic at "
           f"{cost.bandwidth}. Flash backward does five matrix products against naive's "
           f"four, and in exchange never writes P, dP or dS. " + price_verdict(cost))

st.subheader("Peak memory")
wall = memory_wall(cfg, gpu, direction="backward")
left, right = st.columns(2)
with left:
    chart(peak_chart, peak_table(cfg))
    guarded(check_limits, cfg, "naive", False, "backward", show=st.warning)
with right:
    ns = sweep_lengths(256, max(16384, 2 * wall if wall else 0))
    # Only the peak is drawn: tile sizes change the HBM column, not this chart (nor its cache).
    peaks = memory_table(cfg, [n for n in ns if n <= 2**20], "backward").drop(columns="hbm_GiB")
    chart(memory_chart, peaks, gpu.memory_bytes, gpu.name, wall)
st.caption("Naive backward holds P, dP and dS (N² each); flash backward holds Q, K, V, O, dO, "
           "their gradients, lse, D and a float32 dQ accumulator (N·d). Model figures.")

st.subheader("Measured times: naive against flash backward")
on_gpu = s.on_gpu
reps = 30 if on_gpu else 5
where = s.device.name if on_gpu else "this machine's CPU (NumPy emulation, not a GPU figure)"
kernels = runner.kernels_for(s.backend)
if on_gpu or st.button("Time the CPU emulation"):
    bar = st.progress(0.0, text="timing…")
    entries = []
    for n, (label, algorithm, kernel) in enumerate(kernels):
        bar.progress(n / len(kernels), text=f"timing {label} backward…")
        # A kernel that does not take this config is a note, not a failure of the page.
        t = guarded(runner.backward_timing, cfg, algorithm, s.backend, kernel, reps,
                    show=st.warning)
        if t is not None:
            entries.append((label, t))
    bar.empty()
    table = timing_table(entries)
    if not table.empty:
        left, right = st.columns([3, 2])
        with left:
            st.caption(f"Backward alone, measured on {where}.")
            chart(config_chart, table, width=360)
        with right:
            method_note(entries[0][1].method, GPU_METHOD if on_gpu else None)
else:
    st.caption(f"No GPU is in use here: {device_sentence(s.device.reason)} Press the button to "
               f"time the NumPy emulation on this CPU; the GPU figures below were recorded on a "
               f"real GPU.")

files, shown = closest_files(recorded.load_benchmarks(bench_dir(), direction="backward"),
                             s.device)
if not files:
    st.info("No recorded backward results are present in benchmarks/results/ yet (a file "
            "with \"direction\": \"backward\"); they will appear here once a GPU run is "
            "recorded.")
else:
    st.caption(shown.label)
    table = recorded_speedup(with_builds(recorded_table(files), files))
    names = [f"{f['file']}: {f.get('device', {}).get('name', '?')}, {f.get('date', '?')}"
             for f in files]
    pick = st.selectbox("recorded backward file", names, key="bw_rec_file")
    chosen = files[names.index(pick)]
    rows = table[table.file == chosen["file"]]
    if rows.empty:
        st.warning(f"{chosen['file']} holds no result with every field the charts need.")
    else:
        shape = st.selectbox("shape", sorted(rows["shape"].unique()), key="bw_rec_shape")
        rows = rows[rows["shape"] == shape]
        st.caption(f"Backward alone, recorded on **{chosen.get('device', {}).get('name', '?')}"
                   f"** on {chosen.get('date', '?')}. Method: "
                   f"{chosen.get('method', 'not stated')}")
        for col, metric in zip(st.columns(2), ("median_ms", "speedup")):
            with col:
                chart(sweep_chart, rows, metric, width=290)
        st.dataframe(rows.drop(columns=["file", "method"]), hide_index=True)

cards.show(cfg, gpu, g)      # the classroom lab's question cards
