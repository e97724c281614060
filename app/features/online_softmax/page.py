"""Online softmax: one query row's running max, rescale factors, running sum and partial
output over the key tiles, straight from the run's trace."""
import streamlit as st

from app.features.online_softmax import cards
from app.core import runner
from app.features.online_softmax.charts import safe_softmax_chart, scores_chart, stats_chart
from app.features.online_softmax.data import convergence, fp16_overflow, row_trace, score_row
from app.features.sram_tiling.data import smem_layout
from app.core.ui import (chart, guarded, linked_number, notes, on_stage, source_line, stage,
                         usable_settings)
from engine.model import iomodel

st.title("Online softmax")
s = usable_settings()
slot = stage()
cfg = s.cfg
res = guarded(runner.flash, cfg, s.backend, s.kernel)
if res is None:
    st.stop()
q, k, v = runner.inputs(cfg)
st.info(source_line(s, res.backend))
budget = iomodel.smem_budget(cfg, s.device.gpu, smem_layout(cfg, s.device.gpu, s.kernel))
if not budget.fits:
    st.warning(f"The GPU cannot launch this config: its tiles need {budget.total / 1024:.1f} "
               f"KiB of shared memory per thread block and {s.device.gpu.name} allows "
               f"{budget.limit / 1024:.1f} KiB (the SRAM tiling page shows tiles that fit). "
               f"The values below come from the CPU emulation of the loop it would run.")

with on_stage(slot):
    c1, c2, c3 = st.columns(3)
    b = linked_number(c1, "batch index", "sm_batch", 0, cfg.batch - 1, 0)
    h = linked_number(c2, "head index", "sm_head", 0, cfg.heads - 1, 0)
    r = linked_number(c3, "query row", "sm_row", 0, cfg.seq_q - 1,
                      min(cfg.seq_q - 1, cfg.block_q + 5))
    i = r // cfg.block_q
    rows = row_trace(res.trace, cfg, b, h, r)
    conv = convergence(cfg, q, k, v, res.output, res.trace, b, h, r)
    skipped = int((~rows.processed).sum())
    above = st.container()
    chart(stats_chart, rows, conv.table, **(dict(width=400, height=130) if s.talk else {}))
    with notes(above):
        st.markdown(
            f"Row **{r}** sits in query tile **Q_{i}**. For each key tile K_j the kernel "
            f"computes the tile's max, raises the running max m_i if needed and multiplies the "
            f"old sum l_i and accumulator O_i by **exp(m_old − m_new)** — the rescale factor, "
            f"red when it is below 1 (the max moved). Division by l_i waits until the last "
            f"tile.")
        st.caption("Drag **after key tile j** below the charts (in your browser) to replay the "
                   "loop." + (f" The causal mask skips the last {skipped} key tile(s) for query "
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

st.subheader("Why subtract the max: float16 overflows")
o = fp16_overflow(cfg, q, k, b, h, r)
st.markdown(
    f"float16's largest number is 65504 = e^11.09. This row's largest score is "
    f"**{o.max_score:.3f}**: computing exp(s) in float16 without subtracting it gives "
    f"**{o.naive_inf}** inf among the row's {o.visible:,} visible keys"
    + (" (softmax then returns NaN)" if o.naive_inf else "") + f"; with the max "
    f"subtracted, **{o.safe_inf}**. "
    + (f"Scores {o.overflow_at:.2f}× larger would overflow — raise the logit scale or use "
       f"the slider below." if o.naive_inf == 0 and o.overflow_at != float("inf") else ""))
if scores["keys"].max() > 1:
    st.caption(f"Each point stands for {scores['keys'].max()} keys (their largest score), so "
               f"the chart's count of overflowing keys is an upper bound.")
chart(safe_softmax_chart, scores)

cards.show(cfg, res.trace, q, k, b, h, r)      # the classroom lab's question cards
