"""Precision: the number formats side by side and what overflows where in attention, FP8's
per-tile scales, the error of fp16, bf16 and FP8 attention against float64 on three input
presets, why P is formed from the running max before its FP8 cast (and what skipping
rescales does to it), and where naive softmax overflows in each format."""
import math

import streamlit as st

from app.core import runner
from app.core.deck_view import takeaway
from app.core.takeaways import precision as precision_takeaway
from app.core.ui import (chart, guarded, linked_choice, linked_number, linked_radio,
                         on_stage, stage, usable_settings)
from app.features.precision import charts, data

st.title("Precision")
s = usable_settings()
slot = stage()
cfg = s.cfg

E4M3, FP16, BOUND = data.E4M3, data.FP16, data.E4M3_SATURATES_ABOVE
st.markdown(
    f"**fp16** and **bf16** halve float32's bytes; **FP8** (e4m3: {E4M3.mantissa_bits} "
    f"mantissa bits, largest number {E4M3.max:g}) halves them again and doubles Hopper's "
    "tensor-core rate, once each tile of "
    "Q, K and V is **scaled** into e4m3's range (a random **Hadamard rotation** of Q and K, "
    "which leaves QKᵀ as it was, spreads rare large entries first). The kernels keep S, exp "
    "and the running max and sum in **float32** and form P = exp(s − running max) ≤ 1 before "
    "P is cast.")
st.caption(f"Shapes, tiles, mask, logit scale and seed from the sidebar ({cfg.batch} × "
           f"{cfg.heads} heads, N_q = {cfg.seq_q:,}, N_k = {cfg.seq_k:,}, d = {cfg.head_dim}, "
           f"{cfg.block_q} × {cfg.block_k} tiles); every format runs here whatever the "
           f"sidebar's dtype, from the same float32 draws, against float64 attention of them.")

problem = data.size_problem(cfg)
if problem:
    st.error(problem)
    st.subheader("The number formats")
    st.dataframe(data.shown_numbers(data.formats_table()), hide_index=True)
    st.stop()

# ---- the runs: every variant on every preset --------------------------------------------
errors_by_preset, fp8_runs, backends, refusals = {}, {}, {}, {}
compared = guarded(runner.compare,
                   tuple(data.source_config(cfg, p) for p in data.PRESETS),
                   tuple(data.variant_configs(cfg, p) for p in data.PRESETS),
                   s.backend, s.kernel)
if compared is None:
    st.stop()
for preset, runs in zip(data.PRESETS, compared):
    errors_by_preset[preset] = {v: (r.tile_errors, r.rmse) for v, r in zip(data.VARIANTS, runs)}
    fp8_runs[preset] = {v: r.fp8 for v, r in zip(data.VARIANTS, runs) if r.fp8 is not None}
    for variant, run in zip(data.VARIANTS, runs):
        backends.setdefault(variant, run.backend)
        if run.refusal:
            refusals.setdefault(variant, run.refusal)
errors, rmse_rows = data.error_tables(cfg, errors_by_preset)
where = data.where_text(backends, refusals, s.device.name, data.fp8_kernel_note(cfg))

# ---- 3. the main chart: error against float64 -------------------------------------------
with on_stage(slot, "error"):
    if not s.talk:
        st.subheader("Error against float64")
    takeaway(precision_takeaway(rmse_rows, cfg.inputs), "error")
    chart(charts.error_chart, errors, **(dict(width=260) if s.talk else {}))
st.caption(
    "RMSE against float64 per query tile: fp16 and bf16 round the inputs and the output; FP8 "
    f"also rounds Q, K, V to {E4M3.mantissa_bits} mantissa bits after their scale, and P "
    "before P·V. On "
    "**outliers** inputs (0.1% of entries about 10× larger) one scale per tensor is set by "
    "the outliers, so the ordinary entries fall onto e4m3's coarse low end: a scale per tile "
    "confines that to the tiles holding outliers, and the rotation spreads each outlier over "
    "the head dimension before the scale is taken.")
st.info(where)
chart(charts.rmse_chart, rmse_rows)
st.dataframe(data.rmse_table(rmse_rows))
st.caption(precision_takeaway(rmse_rows, cfg.inputs) + f" (the sidebar's preset). RMSE = "
           f"sqrt(mean((O − O_float64)²)) over every batch, head, row and column.")

# ---- 1. the formats ---------------------------------------------------------------------
st.subheader("The number formats")
st.dataframe(data.shown_numbers(data.formats_table()), hide_index=True)
st.caption("From NumPy's and ml_dtypes' finfo (engine.model.formats). Epsilon is the gap "
           "from 1 to the next number: a rounding errs by up to half of it, relative. e4m3 "
           f"has no infinity: the FP8 kernels' cast saturates at {E4M3.max:g} instead.")

c1, c2, _ = st.columns([1, 1, 2])
b = linked_number(c1, "batch index", "pr_batch", 0, cfg.batch - 1, 0)
h = linked_number(c2, "head index", "pr_head", 0, cfg.heads - 1, 0)
source = data.source_config(cfg)
q, k, v = runner.inputs(source)
st.markdown(f"**What overflows where**, batch {b}, head {h} of this config ({cfg.inputs} "
            f"inputs): the largest magnitude of each stage of attention against each format.")
st.dataframe(data.shown_numbers(data.stages_table(data.stage_values(cfg, q, k, v, b, h)),
                                ("largest here",)), hide_index=True)
st.caption(f"fp16's scores overflow past {FP16.max:g}, e4m3 saturates at {E4M3.max:g}. exp(s) "
           f"without the max would need far more range than e4m3 or fp16 have, which is why "
           f"every kernel here takes exp in float32, after subtracting the running max: "
           f"P ≤ 1 then fits e4m3 whatever the scores.")

# ---- 2. the per-tile scales -------------------------------------------------------------
st.subheader("FP8 scales of this config")
shown = linked_radio("scales shown", "pr_scales", data.SCALE_CHOICES, "tile")
info = fp8_runs[cfg.inputs][data.SCALE_CHOICES[shown]]
scales = data.scales_table(cfg, info, b, h)
chart(charts.scales_chart, scales,
      f"Scales of batch {b}, head {h}: {data.SCALE_CHOICES[shown]} ({cfg.inputs} inputs)")
st.caption(f"scale = amax / {E4M3.max:g} of each tile (x ≈ scale · x8): "
           f"{data.scales_text(scales, info.scaling)}. Q has a scale per query tile of "
           f"{cfg.block_q} rows, K and V one per key tile of {cfg.block_k} rows; a tile "
           f"with an outlier gets a larger scale, which coarsens only its own entries."
           + (" The rotation leaves V alone." if info.rotation else ""))

# ---- 4. saturation: P from the running max ------------------------------------------------
st.subheader("P from the running max, then FP8")
threshold_choice = linked_choice(st.columns([2, 3])[0], "rescale-skip threshold (log2)",
                                 "pr_threshold", list(data.THRESHOLD_CHOICES), "off")
threshold = None if threshold_choice == "off" else float(threshold_choice)
fp8_cfg = data.source_config(cfg).with_(**data.VARIANTS["FP8 per-tile"])
head_runs = guarded(runner.fp8_head, fp8_cfg, b, h, (None, *map(float, data.THRESHOLDS)))
if head_runs is None:
    st.stop()
kernel_run, chosen = head_runs[None], head_runs[threshold]
s_head = data.head_scores(cfg, q, k, b, h)
ranges = data.p_ranges(cfg, s_head, kernel_run, None if threshold is None else chosen,
                       threshold)
m1, m2, m3 = st.columns(3)
m1.metric("rescales saved", f"{max(kernel_run.fp8.rescales - chosen.fp8.rescales, 0):,}",
          help=f"of {kernel_run.fp8.rescales:,} rescales with the kernels' rule (the max "
               f"moves whenever a tile's max passes it); {chosen.fp8.rescales:,} done here")
m2.metric(f"P elements past {E4M3.max:g}", f"{chosen.fp8.saturated['p']:,}",
          help=f"elements of P above {BOUND:g}, which the saturating "
               f"cast clamps to {E4M3.max:g} (up to {BOUND:g} they "
               f"round to {E4M3.max:g} anyway)")
m3.metric("largest P", f"2^{ranges.hi.iloc[-1]:.2f}",
          help="log2 of the largest P this head formed")
chart(charts.p_range_chart, ranges, data.e4m3_band())
st.markdown(data.threshold_text(kernel_run, chosen if threshold is not None else None,
                                threshold))
st.caption(
    "Without the max subtracted, exp(s) spans far more than e4m3 holds: large scores "
    f"saturate at {E4M3.max:g} and small ones round to 0. With the running max, P ≤ 1, the "
    "top of e4m3's range; what the max leaves tiny goes subnormal or to 0, where it adds little "
    "to the sum. FlashAttention-4's conditional rescaling skips the rescale unless the max "
    "rose by more than a threshold, saving the multiply of O and l; P may then reach "
    f"2^threshold, so with FP8's P the threshold has to stay below log2 {BOUND:g} ≈ "
    f"{math.log2(BOUND):.2f}. "
    "The threshold is the CPU emulation's option (engine.facade.fp8_emulate), on this one "
    "head; the kernels always rescale (with a threshold of 8, the Hopper FP8 kernel measured "
    "no faster on an H200: docs/RESULTS.md).")
sweep = {t: r for t, r in head_runs.items() if t is not None}
chart(charts.threshold_chart, data.threshold_sweep(sweep, kernel_run), threshold,
      bound=BOUND)

# ---- 5. overflow of naive softmax in every format -----------------------------------------
st.subheader("Naive softmax in each format: where exp overflows")
row_max = data.row_maxima(cfg, q, k, b, h)
st.markdown(data.overflow_text(data.overflow_onsets(row_max), float(row_max.max()),
                               cfg.logit_scale))
chart(charts.overflow_chart, data.overflow_sweep(row_max))
st.caption("Each line: the share of this head's query rows whose softmax would overflow if "
           "exp(s) were taken in that format without subtracting the max (e4m3 has no exp "
           "of its own: exp in float32, then the cast). The Online softmax page shows the "
           "same for one row, key by key.")
