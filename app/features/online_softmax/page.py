"""Online softmax: one query row's running max, rescale factors, running sum and partial
output over the key tiles: from the GPU's traced run, or the emulation of the row drawn alone
(any N the sidebar allows), or a trace file uploaded on the Downloads page."""
import streamlit as st

import engine
from app.features.online_softmax import cards
from app.core import runner
from app.core.player.component import play_row
from app.features.downloads.replay import replay_choice, row_fits_inputs
from app.features.online_softmax.charts import safe_softmax_chart, scores_chart, stats_chart
from app.features.online_softmax.data import (EXP_DTYPE, convergence, emulate_row, exp_overflow,
                                              overflow_text, row_of, row_trace, score_row)
from app.features.sram_tiling.data import smem_layout
from app.core.ui import (chart, guarded, linked_number, notes, on_stage, source_line, stage,
                         usable_settings)
from app.core.deck_view import takeaway
from app.core.takeaways import online_softmax
from engine.model import iomodel
from engine.model.units import format_bytes

st.title("Online softmax")
s = usable_settings()
slot = stage()
replay = replay_choice("online_softmax")
cfg = replay.cfg if replay else s.cfg
# The GPU's trace of the whole config when it runs one and the trace fits the server's limit;
# otherwise only the row drawn is computed, by the CPU emulation of its loop (O(N·d)).
whole = None
if replay:
    whole = replay.res
    st.info(f"Replaying the {replay.label}. The sidebar's config is set aside while "
            f"**Replay the uploaded trace** is on.")
elif s.backend == "cupy":
    try:
        engine.check_limits(cfg, algorithm="flash", trace=True)
    except engine.LimitError as exc:
        st.caption(f"The GPU's trace of every row would be over this server's limit: {exc} "
                   f"This page draws one row, so that row is computed alone by the CPU "
                   f"emulation of the kernel's loop.")
    else:
        whole = guarded(runner.flash, cfg, s.backend, s.kernel)
        if whole is None:
            st.stop()
if whole is None:
    try:
        engine.check_limits(cfg, algorithm="flash", trace=False)
    except engine.LimitError as exc:
        st.error(str(exc))
        st.stop()
q, k, v = runner.inputs(cfg)
if not replay:
    st.info(source_line(s, whole.backend if whole is not None else "numpy") + (
        "" if whole is not None else f" Only the row drawn is computed: its loop over all "
        f"{cfg.Tc:,} key tiles, {cfg.seq_k:,} keys × d = {cfg.head_dim}, at any N."))
budget = iomodel.smem_budget(cfg, s.device.gpu, smem_layout(cfg, s.device.gpu, s.kernel))
if not budget.fits and not replay:
    st.warning(f"The GPU cannot launch this config: its tiles need "
               f"{format_bytes(budget.total)} of shared memory per thread block and "
               f"{s.device.gpu.name} allows {format_bytes(budget.limit)} (the SRAM tiling "
               f"page shows tiles that fit). "
               f"The values below come from the CPU emulation of the loop it would run.")

with on_stage(slot):
    c1, c2, c3 = st.columns(3)
    b = linked_number(c1, "batch index", "sm_batch", 0, cfg.batch - 1, 0)
    h = linked_number(c2, "head index", "sm_head", 0, cfg.heads - 1, 0)
    r = linked_number(c3, "query row", "sm_row", 0, cfg.seq_q - 1,
                      min(cfg.seq_q - 1, cfg.block_q + 5))
    i = r // cfg.block_q
    run = (row_of(whole.trace, cfg, b, h, r, whole.output) if whole is not None
           else emulate_row(cfg, q, k, v, b, h, r))
    rows = row_trace(run, cfg, b, h, r)
    conv = convergence(cfg, q, k, v, None, run, b, h, r)
    misfit = row_fits_inputs(replay, b, h, r, conv.output_error) if replay else ""
    if misfit:
        st.warning(misfit)
    skipped = int((~rows.processed).sum())
    above = st.container()
    tile = st.container()          # the charts open on the tile the player stands on
    shown = play_row("softmax", rows, "sm_tile", compact=s.talk)
    with tile:
        takeaway(online_softmax(rows.rescale))
        chart(stats_chart, rows, conv.table, slider_values={"upto": shown},
              **(dict(width=400, height=130) if s.talk else {}))
    with notes(above):
        st.markdown(
            f"Row **{r}** sits in query tile **Q_{i}**. For each key tile K_j the kernel "
            f"computes the tile's max, raises the running max m_i if needed and multiplies the "
            f"old sum l_i and accumulator O_i by **exp(m_old − m_new)** — the rescale factor, "
            f"red when it is below 1 (the max moved). Division by l_i waits until the last "
            f"tile.")
        st.caption("Play the loop below the charts, step it with ◀ ▶ (or the arrow keys), or "
                   "drag **after key tile j** under the charts: both run in your browser; the "
                   "charts move to the player's tile when it stops."
                   + (f" The causal mask skips the last {skipped} key tile(s) for query "
                      f"tile Q_{i} (grey dashed bands): the kernel never computes them."
                      if skipped else ""))
m1, m2, m3 = st.columns(3)
m1.metric("rescales below 1", int((rows.rescale[1:] < 1).sum()), help="key tiles j ≥ 1 that "
          "raised this row's max")
m2.metric("trace's running sum vs float64", f"{conv.sum_agreement:.1e}",
          help="largest relative gap between l_j in the trace and l_j recomputed in float64")
m3.metric("output row vs float64", f"{conv.output_error:.1e}",
          help="relative error of the run's output row against the exact float64 answer")
st.caption("The error panel: the partial output after tile j, Σ p·v over the keys seen so far "
           "divided by their sum, against the exact row; it reaches 0 at the last tile "
           "(recomputed in float64 from the inputs).")

scores = score_row(cfg, q, k, b, h, r)
chart(scores_chart, scores, rows)

st.subheader("Why subtract the max: exp overflows")
kernel_exp = exp_overflow(cfg, q, k, b, h, r, EXP_DTYPE)
st.markdown(overflow_text(cfg, kernel_exp, exp_overflow(cfg, q, k, b, h, r, cfg.dtype)))
if scores["keys"].max() > 1:
    st.caption(f"Each point stands for {scores['keys'].max()} keys (their largest score), so "
               f"the chart's count of overflowing keys is an upper bound.")
chart(safe_softmax_chart, scores, EXP_DTYPE, kernel_exp.limit)

cards.show(cfg, run, q, k, b, h, r)      # the classroom lab's question cards
