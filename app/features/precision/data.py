"""Tables of the Precision page: the number formats side by side and what overflows where in
attention, the overflow of naive softmax in each format over a growing logit scale. Pure: NumPy
and pandas in, DataFrames out."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

import engine
from app.features.online_softmax.data import EXP_DTYPE, exp_limit, exp_overflows
from engine.model import formats

# The formats side by side, as the page names them, and their names in engine.model.formats
FORMATS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "e4m3": "float8_e4m3",
           "e5m2": "float8_e5m2"}
# The formats of the overflow demo: the input dtypes and FP8's e4m3 (e5m2 is the gradients')
OVERFLOW_FORMATS = ("fp32", "fp16", "bf16", "e4m3")
KERNEL_SERIES = "kernel: exp in float32 of s − running max"
E4M3 = formats.number_format("float8_e4m3")
FP16 = formats.number_format("float16")


# where each format appears in attention here (the kernels and the FP8 path of this project)
ROLES = {
    "fp32": "the kernels' arithmetic: S_ij, exp, P, the running max and sum, O's accumulator",
    "fp16": "inputs Q, K, V and the output O of the 16-bit kernels",
    "bf16": "inputs Q, K, V and the output O; FP8 attention's inputs and output",
    "e4m3": "FP8 attention's Q, K, V (scaled per tile) and P, on the tensor cores",
    "e5m2": "gradients in FP8 training (wider range, fewer digits); not used here",
}


def formats_table() -> pd.DataFrame:
    """One row per format (engine.model.formats' facts): bits, range (largest, smallest
    normal and subnormal), precision (mantissa bits, epsilon: the gap above 1), whether it
    holds inf, ln of the largest number (exp(s) overflows once s passes it) and where it is
    used in attention."""
    rows = []
    for name, engine_name in FORMATS.items():
        f = formats.number_format(engine_name)
        rows.append({"format": name, "bits": f.bits, "exponent bits": f.exponent_bits,
                     "mantissa bits": f.mantissa_bits, "largest": f.max,
                     "smallest normal": f.smallest_normal,
                     "smallest subnormal": f.smallest_subnormal, "epsilon": f.epsilon,
                     "inf": "yes" if f.has_inf else "no: saturates",
                     "exp(s) overflows past s =": math.log(f.max),
                     "used for": ROLES[name]})
    return pd.DataFrame(rows)


NUMBER_COLUMNS = ("largest", "smallest normal", "smallest subnormal", "epsilon",
                  "exp(s) overflows past s =")


def shown_numbers(table: pd.DataFrame, columns=NUMBER_COLUMNS) -> pd.DataFrame:
    """A table with its numbers as text of four significant digits (65504, 448, 3.403e+38,
    1.953e-03), so a table of widely spread magnitudes reads without scrolling."""
    def text(x: float) -> str:
        return f"{x:.4g}" if 1e-3 <= abs(x) < 1e6 or x == 0 else f"{x:.3e}"
    return table.assign(**{c: table[c].map(text) for c in columns if c in table})


def _spare(x: float) -> str:
    """A factor of headroom in a few characters: 7.2, 448, 15,200, 7.9e+37."""
    if x < 10:
        return f"{x:.2g}"
    if x < 1e5:
        return f"{float(f'{x:.3g}'):,.0f}"
    return f"{x:.1e}"


def _verdict(value: float, name: str) -> str:
    """Whether `value` (a magnitude) fits format `name`: with its headroom, or how it fails
    (inf in the 16- and 32-bit floats; e4m3 has no inf: a saturating cast, as the FP8
    kernels use, clips it to 448)."""
    f = formats.number_format(FORMATS[name])
    if not math.isfinite(value):
        return "inf"
    if value <= f.max:
        return f"fits (×{_spare(f.max / value)} spare)" if value > 0 else "fits"
    return "overflows (inf)" if f.has_inf else f"saturates at {f.max:g}"


def stage_values(cfg: engine.AttentionConfig, q, k, v, b: int, h: int) -> dict[str, float]:
    """The largest magnitude of each stage of attention for batch b, head h of this config's
    inputs, in float64: the scaled scores s, exp(s) without the max subtracted, P = exp(s − m)
    with the row's max m, and the output O."""
    from engine.model.tiles import hidden
    s = cfg.softmax_scale * (q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T)
    mask = hidden(cfg, 0, cfg.seq_q, 0, cfg.seq_k)
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    o = (p @ v[b, h].astype(np.float64)) / p.sum(axis=1, keepdims=True)
    with np.errstate(over="ignore"):
        top = float(np.max(s))
        naive = float(np.exp(top))
    return {"S = scale·QKᵀ": float(np.max(np.abs(s[np.isfinite(s)]))),
            "exp(s), max not subtracted": naive,
            "P = exp(s − running max)": float(p.max()),
            "output O": float(np.abs(o).max())}


def stages_table(values: dict[str, float]) -> pd.DataFrame:
    """What overflows where: one row per stage of attention (its largest magnitude in this
    config), one column per format saying whether it fits, overflows or saturates."""
    rows = []
    for stage, value in values.items():
        row = {"stage": stage, "largest here": value}
        row |= {name: _verdict(value, name) for name in FORMATS}
        rows.append(row)
    return pd.DataFrame(rows)


# ---- the overflow demo: naive softmax in each format over a growing logit scale ----------
MULTIPLIERS = tuple(float(2 ** (e / 4)) for e in range(-8, 29))     # ×1/4 to ×128


def row_maxima(cfg: engine.AttentionConfig, q, k, b: int, h: int) -> np.ndarray:
    """Each query row's largest visible scaled score (float64), batch b, head h."""
    from engine.model.tiles import hidden
    s = cfg.softmax_scale * (q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T)
    mask = hidden(cfg, 0, cfg.seq_q, 0, cfg.seq_k)
    if mask is not None:
        s = np.where(mask, -np.inf, s)
    return s.max(axis=1)


def overflow_sweep(row_max: np.ndarray, formats=OVERFLOW_FORMATS,
                   multipliers=MULTIPLIERS) -> pd.DataFrame:
    """For each multiplier of the scores (a growing logit scale) and format: the share of
    query rows whose naive softmax overflows, exp(mult·s) taken in that format without
    subtracting the max (real arithmetic on each row's largest score: exp rises with s, so a
    row overflows exactly when its largest score does); and the kernels' way, exp in float32
    of mult·(s − running max), which never passes 1."""
    rows = len(row_max)
    out = []
    for mult in multipliers:
        x = mult * row_max
        for name in formats:
            out.append((mult, name, float(exp_overflows(x, FORMATS[name]).sum()) / rows))
        kernel = exp_overflows(mult * (row_max - row_max), EXP_DTYPE)
        out.append((mult, KERNEL_SERIES, float(kernel.sum()) / rows))
    return same_curves_merged(pd.DataFrame(out, columns=["multiplier", "format",
                                                         "rows_overflowing"]))


def same_curves_merged(sweep: pd.DataFrame) -> pd.DataFrame:
    """The sweep with formats whose curves are identical drawn as one, named together
    ("fp32 = bf16": the same exponent range), so no line hides another."""
    curves = {name: tuple(part.rows_overflowing) for name, part in
              sweep.groupby("format", sort=False)}
    groups: dict[tuple, list[str]] = {}
    for name, curve in curves.items():
        if name == KERNEL_SERIES:
            continue
        groups.setdefault(curve, []).append(name)
    rename = {names[0]: " = ".join(names) for names in groups.values()}
    dropped = {n for names in groups.values() for n in names[1:]}
    kept = sweep[~sweep.format.isin(dropped)]
    return kept.assign(format=kept.format.map(lambda n: rename.get(n, n))).reset_index(
        drop=True)


def overflow_onsets(row_max: np.ndarray, formats=OVERFLOW_FORMATS) -> dict[str, float]:
    """The smallest multiplier of the scores at which naive softmax overflows in each format:
    ln(largest) over the largest score (inf when no score is positive)."""
    top = float(np.max(row_max))
    return {name: exp_limit(FORMATS[name]) / top if top > 0 else math.inf
            for name in formats}


def overflow_text(onsets: dict[str, float], top: float, logit_scale: float) -> str:
    """The overflow demo in words, from its numbers."""
    parts = [f"{name} at ×{at:.3g}" if math.isfinite(at) else f"{name} never"
             for name, at in onsets.items()]
    already = [name for name, at in onsets.items() if at <= 1]
    return (f"This head's largest score is **{top:.3g}** (logit scale {logit_scale:g}). Naive "
            f"softmax, exp(s) taken in the format without subtracting the max, overflows once "
            f"the scores grow: {', '.join(parts)} (ln of the largest number over the largest "
            f"score; e4m3 reaches only {E4M3.max:g} = e^{math.log(E4M3.max):.2f})"
            + (f"; in {' and '.join(already)} it overflows already at this config's scores. "
               if already else ". ") +
            f"The kernels take exp in **float32** and subtract the running max first, so every "
            f"exponent is ≤ 0 and P ≤ 1 at any scale: nothing overflows.")


# ---- the runs compared: 16-bit and FP8 attention against float64 ---------------------------
# Each variant as config changes, in the order the charts list them
VARIANTS = {
    "fp16": dict(dtype="float16"),
    "bf16": dict(dtype="bfloat16"),
    "FP8 per-tensor": dict(dtype="float8_e4m3", fp8_scaling="tensor", fp8_rotation=False),
    "FP8 per-tile": dict(dtype="float8_e4m3", fp8_scaling="tile", fp8_rotation=False),
    "FP8 per-tile + rotation": dict(dtype="float8_e4m3", fp8_scaling="tile",
                                    fp8_rotation=True),
}
PRESETS = ("normal", "rising", "outliers")     # the app's input presets, outliers last
# The page runs every variant on every preset, plus float64 references and a sweep of the
# rescale threshold on one head: a cap on the scores so the CPU emulation stays quick on a
# shared two-core server (about a second for the default config's eighteen runs)
MAX_SCORES = 1 << 19


def size_problem(cfg: engine.AttentionConfig) -> str | None:
    """Why this page does not run the config (over its cap), or None."""
    scores = cfg.bh * cfg.seq_q * cfg.seq_k
    if scores <= MAX_SCORES:
        return None
    return (f"The Precision page runs attention {len(VARIANTS) * len(PRESETS)} times (fp16, "
            f"bf16 and three FP8 scalings on the {', '.join(PRESETS)} inputs) plus float64 "
            f"references on the CPU, so it takes configs of at most {MAX_SCORES:,} scores "
            f"(batch × heads × N_q × N_k); this one has {scores:,} "
            f"({cfg.batch} × {cfg.heads} × {cfg.seq_q:,} × {cfg.seq_k:,}). Use smaller "
            f"sizes, e.g. N = 512 with batch × heads = 2, or N = 256 with up to 8 heads.")


def source_config(cfg: engine.AttentionConfig, preset: str | None = None
                  ) -> engine.AttentionConfig:
    """The float32 config whose inputs every variant starts from (the sidebar's shapes,
    tiles, mask, seed and logit scale; `preset`'s inputs)."""
    return cfg.with_(dtype="float32", inputs=preset or cfg.inputs)


def variant_configs(cfg: engine.AttentionConfig, preset: str) -> tuple:
    """The configs of VARIANTS on `preset`'s inputs, in order."""
    source = source_config(cfg, preset)
    return tuple(source.with_(**changes) for changes in VARIANTS.values())


def fp8_kernel_note(cfg: engine.AttentionConfig) -> str:
    """Whether a Hopper GPU would run this config's FP8 runs on the FP8 kernel (the catalog's
    fp8_build), in words: its name, or the catalog's reason it would not."""
    from engine.model import catalog
    fp8 = source_config(cfg).with_(**VARIANTS["FP8 per-tile"])
    try:
        build = catalog.fp8_build(fp8, hopper=True)
    except ValueError as exc:
        return f"A Hopper GPU would run the emulation too: {exc}"
    return f"On a Hopper GPU the FP8 runs of this config take the {build.chart_name} kernel."


def where_text(backends: dict[str, str], refusals: dict[str, str], device: str,
               kernel_note: str) -> str:
    """Where the compared runs ran, in words: backends (variant -> "numpy" or "cupy"),
    refusals (variant -> why the GPU did not run it, when it was asked to), the device's name
    and fp8_kernel_note."""
    gpu = [v for v, b in backends.items() if b == "cupy"]
    cpu = [v for v, b in backends.items() if b != "cupy"]
    if not gpu and not refusals:
        return (f"Computed by the CPU emulation (NumPy), emulating "
                f"{device.removeprefix('CPU emulation of ')}: fp16 and bf16 by the flash "
                f"loop's emulation, FP8 by the emulation of the Hopper FP8 kernel (its "
                f"quantization bit for bit, its order of operations). {kernel_note}")
    text = (f"Computed on the GPU, {device}: {', '.join(gpu)}"
            + (" (FP8 on the Hopper FP8 kernel)." if any("FP8" in v for v in gpu) else ".")
            if gpu else f"The GPU ({device}) ran none of these runs.")
    if cpu:
        why = next(iter(refusals.values()), "")
        text += (f" {', '.join(cpu)}: the CPU emulation (NumPy) instead, which quantizes as the "
                 f"FP8 kernel does and follows its order of operations"
                 + (f", since the GPU refused: {why}" if why else "."))
    return text


def error_tables(cfg: engine.AttentionConfig,
                 errors_by_preset: dict[str, dict[str, tuple]]) -> tuple[pd.DataFrame,
                                                                         pd.DataFrame]:
    """(per query tile, whole output) error tables from each preset's variants'
    (TileErrors, RMSE) (engine.facade.tile_errors and rmse against the float64 reference):
    errors (preset, variant, tile, rmse: over every batch·head, row and column of the
    tile) and rmse (preset, variant, rmse)."""
    tiles, whole = [], []
    for preset, by_variant in errors_by_preset.items():
        for variant, (per_tile, total) in by_variant.items():
            # every (batch, head) holds the same rows of a tile: the mean of the squares
            per = np.sqrt(np.mean(np.square(per_tile.rmse), axis=(0, 1)))
            tiles += [(preset, variant, i, float(e)) for i, e in enumerate(per)]
            whole.append((preset, variant, float(total)))
    return (pd.DataFrame(tiles, columns=["preset", "variant", "tile", "rmse"]),
            pd.DataFrame(whole, columns=["preset", "variant", "rmse"]))


def rmse_table(rmse: pd.DataFrame) -> pd.DataFrame:
    """The RMSE as a table: a row per variant, a column per input preset (scientific
    notation, three digits)."""
    wide = rmse.pivot(index="variant", columns="preset", values="rmse")
    wide = wide.reindex(index=[v for v in VARIANTS if v in wide.index],
                        columns=[p for p in PRESETS if p in wide.columns])
    return wide.map(lambda x: f"{x:.2e}").rename_axis(index=None, columns="inputs")


# ---- the per-tile scales -----------------------------------------------------------------
def scales_table(cfg: engine.AttentionConfig, fp8: engine.Fp8Info, b: int,
                 h: int) -> pd.DataFrame:
    """The FP8 scales of batch b, head h: tensor (Q per query tile, K and V per key tile),
    tile, rows (the tile's rows in words), scale (amax / 448: x ≈ scale · x8) and amax."""
    parts = []
    for tensor, scales, block, n in (("Q", fp8.q_scale, cfg.block_q, cfg.seq_q),
                                     ("K", fp8.k_scale, cfg.block_k, cfg.seq_k),
                                     ("V", fp8.v_scale, cfg.block_k, cfg.seq_k)):
        values = np.asarray(scales[b, h], dtype=np.float64)
        tiles = np.arange(len(values))
        rows = [f"{'rows' if tensor == 'Q' else 'keys'} {t * block}–{min((t + 1) * block, n) - 1}"
                for t in tiles]
        parts.append(pd.DataFrame({"tensor": tensor, "tile": tiles, "rows": rows,
                                   "scale": values, "amax": values * E4M3.max}))
    return pd.concat(parts, ignore_index=True)


def scales_text(scales: pd.DataFrame, scaling: str) -> str:
    """The scales in words: each tensor's range of scales over its tiles."""
    parts = []
    for tensor, part in scales.groupby("tensor", sort=False):
        lo, hi = float(part.scale.min()), float(part.scale.max())
        parts.append(f"{tensor} {lo:.3g}" if lo == hi or scaling != "tile" else
                     f"{tensor} {lo:.3g} to {hi:.3g} ({hi / lo:.2g}× apart)")
    return ", ".join(parts)


# ---- the saturation lesson: P from the running max ---------------------------------------
LOG2E = 1.0 / math.log(2.0)
THRESHOLDS = tuple(range(0, 13))          # the sweep of the rescale-skip threshold, log2 units
THRESHOLD_CHOICES = ("off", *THRESHOLDS)  # the page's control: off = the kernel's rule
E4M3_SATURATES_ABOVE = formats.E4M3_SATURATES_ABOVE
E4M3_ZERO_BELOW = E4M3.smallest_subnormal / 2   # rounds to 0 at or below (ties to even 0)


def head_scores(cfg: engine.AttentionConfig, q, k, b: int, h: int) -> np.ndarray:
    """The scaled scores of batch b, head h in float64 (N_q, N_k), -inf where the causal
    mask hides a key."""
    from engine.model.tiles import hidden
    s = cfg.softmax_scale * (q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T)
    mask = hidden(cfg, 0, cfg.seq_q, 0, cfg.seq_k)
    return s if mask is None else np.where(mask, -np.inf, s)


def _p_row(way: str, logp: np.ndarray, saturated: int) -> dict:
    """One way of forming P: the log2 range of its positive values (logp: log2 of P, -inf
    for hidden keys), elements past e4m3's saturation bound and elements that round to 0."""
    finite = logp[np.isfinite(logp)]
    return {"way": way, "lo": float(finite.min()) if finite.size else 0.0,
            "hi": float(finite.max()) if finite.size else 0.0, "saturated": int(saturated),
            "to_zero": int(np.count_nonzero(finite <= math.log2(E4M3_ZERO_BELOW)))}


def running_max_by_key(cfg: engine.AttentionConfig, trace: engine.Trace) -> np.ndarray:
    """(N_q, N_k) float64: the running max (natural log units) each key's P was formed
    with, from a one-head trace: key c of tile j takes running_max[r, j]."""
    m = np.asarray(trace.running_max[0, 0], dtype=np.float64)          # (N_q, Tc)
    return np.repeat(m, cfg.block_k, axis=1)[:, :cfg.seq_k]


def p_ranges(cfg: engine.AttentionConfig, s: np.ndarray, kernel: engine.Result,
             skipping: engine.Result | None, threshold: float | None) -> pd.DataFrame:
    """How P's values spread (log2 units) for one head: exp(s) without the max subtracted,
    P = exp(s − running max) as the kernels form it (one-head FP8 emulation, `kernel`), and,
    with a rescale-skip threshold, P from the max the conditional rescaling kept
    (`skipping`). s: the head's scores (head_scores); the maxima come from the runs' traces
    (their own quantized scores), the counts past 448 from the runs (Fp8Info.saturated)."""
    with np.errstate(over="ignore"):
        raw = s * LOG2E
    rows = [_p_row("exp(s), max not subtracted", raw,
                   np.count_nonzero(np.exp(np.where(np.isfinite(s), s, -np.inf))
                                    > E4M3_SATURATES_ABOVE))]
    for way, run in (("P = exp(s − running max)", kernel),
                     (f"P with rescales skipped up to {threshold:g}"
                      if threshold is not None else "", skipping)):
        if run is None or not way:
            continue
        m = running_max_by_key(cfg, run.trace)
        logp = (s - m) * LOG2E
        tr = run.trace
        top = (np.asarray(tr.tile_max[0, 0], dtype=np.float64)
               - np.asarray(tr.running_max[0, 0], dtype=np.float64)) * LOG2E
        row = _p_row(way, logp, run.fp8.saturated["p"])
        row["hi"] = float(np.max(top[np.isfinite(top)])) if np.isfinite(top).any() else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def threshold_sweep(results: dict[float, engine.Result], kernel: engine.Result
                    ) -> pd.DataFrame:
    """Per rescale-skip threshold (log2 units) of one head's FP8 emulation: rescales done,
    saved (the share of the kernel rule's rescales not done) and P elements saturating."""
    base = max(kernel.fp8.rescales, 1)
    rows = [(float(t), r.fp8.rescales, r.fp8.rescales_skipped,
             max(0.0, 1 - r.fp8.rescales / base) if kernel.fp8.rescales else 0.0,
             r.fp8.saturated["p"]) for t, r in sorted(results.items())]
    return pd.DataFrame(rows, columns=["threshold", "rescales", "skipped", "saved",
                                       "saturated"])


def threshold_text(kernel: engine.Result, chosen: engine.Result | None,
                   threshold: float | None) -> str:
    """The threshold's effect on this head in words."""
    done = kernel.fp8.rescales
    bound = math.log2(E4M3_SATURATES_ABOVE)
    if chosen is None or threshold is None:
        return (f"Without a threshold (the kernels' rule) this head rescales **{done:,}** "
                f"times after the first key tile, and P never passes 1.")
    r = chosen.fp8
    saved = done - r.rescales
    text = (f"With a threshold of **{threshold:g}** (log2 units: the max moves only when a "
            f"tile's max passes it by more than ×{2 ** threshold:g}) this head rescales "
            f"**{r.rescales:,}** times instead of {done:,} "
            f"({max(saved, 0):,} saved; {r.rescales_skipped:,} updates kept the old max), and "
            f"P reaches up to 2^{threshold:g} = {2 ** threshold:g}: ")
    if r.saturated["p"]:
        n = r.saturated["p"]
        one = n == 1
        text += (f"**{n:,}** element{'' if one else 's'} of P pass{'es' if one else ''} "
                 f"{E4M3_SATURATES_ABOVE:g} and saturate{'s' if one else ''} to "
                 f"{E4M3.max:g} in e4m3, while the running sum l adds "
                 f"{'it' if one else 'them'} unclipped, so the output is wrong. ")
    else:
        text += "none of P's elements saturates in e4m3 here. "
    text += (f"Past log2 {E4M3_SATURATES_ABOVE:g} = {bound:.2f} a skipped rescale can push P "
             f"beyond e4m3's range: the threshold must stay below it.")
    return text


# the scales the heatmap shows (the page's control: its value -> the variant)
SCALE_CHOICES = {"tile": "FP8 per-tile", "rotation": "FP8 per-tile + rotation",
                 "tensor": "FP8 per-tensor"}


def e4m3_band() -> dict:
    """e4m3's range as the P chart draws it: largest, smallest normal and subnormal."""
    return {"largest": E4M3.max, "smallest_normal": E4M3.smallest_normal,
            "smallest_subnormal": E4M3.smallest_subnormal}
