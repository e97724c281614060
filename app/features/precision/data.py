"""Tables of the Precision page: the number formats side by side and what overflows where in
attention, the overflow of naive softmax in each format over a growing logit scale. Pure: NumPy
and pandas in, DataFrames out."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

import engine
from app.features.online_softmax.data import (EXP_DTYPE, exp_limit, exp_overflows, largest,
                                              np_dtype)

# The formats side by side, as the page names them, and their dtypes
FORMATS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "e4m3": "float8_e4m3",
           "e5m2": "float8_e5m2"}
# The formats of the overflow demo: the input dtypes and FP8's e4m3 (e5m2 is the gradients')
OVERFLOW_FORMATS = ("fp32", "fp16", "bf16", "e4m3")
KERNEL_SERIES = "kernel: exp in float32 of s − running max"
E4M3 = "e4m3"


def format_facts(name: str) -> dict:
    """Bits, range and precision of a format of FORMATS (from NumPy's and ml_dtypes' finfo)."""
    import ml_dtypes
    info = ml_dtypes.finfo(np_dtype(FORMATS[name]))
    return {"bits": int(info.bits), "exponent_bits": int(info.nexp),
            "mantissa_bits": int(info.nmant), "largest": float(info.max),
            "smallest_normal": float(info.smallest_normal),
            "smallest_subnormal": float(info.smallest_subnormal), "epsilon": float(info.eps)}


# where each format appears in attention here (the kernels and the FP8 path of this project)
ROLES = {
    "fp32": "the kernels' arithmetic: S_ij, exp, P, the running max and sum, O's accumulator",
    "fp16": "inputs Q, K, V and the output O of the 16-bit kernels",
    "bf16": "inputs Q, K, V and the output O; FP8 attention's inputs and output",
    "e4m3": "FP8 attention's Q, K, V (scaled per tile) and P, on the tensor cores",
    "e5m2": "gradients in FP8 training (wider range, fewer digits); not used here",
}


def formats_table() -> pd.DataFrame:
    """One row per format: bits, range (largest, smallest normal and subnormal), precision
    (mantissa bits, epsilon: the gap above 1), ln of the largest number (exp(s) overflows once
    s passes it) and where it is used in attention."""
    rows = []
    for name in FORMATS:
        f = format_facts(name)
        rows.append({"format": name, "bits": f["bits"], "exponent bits": f["exponent_bits"],
                     "mantissa bits": f["mantissa_bits"], "largest": f["largest"],
                     "smallest normal": f["smallest_normal"],
                     "smallest subnormal": f["smallest_subnormal"], "epsilon": f["epsilon"],
                     "exp(s) overflows past s =": math.log(f["largest"]),
                     "used for": ROLES[name]})
    return pd.DataFrame(rows)


def _verdict(value: float, name: str) -> str:
    """Whether `value` (a magnitude) fits format `name`: with its headroom, or how it fails
    (inf in the 16- and 32-bit floats; e4m3 has no inf: a saturating cast, as the FP8
    kernels use, clips it to 448)."""
    top = format_facts(name)["largest"]
    if not math.isfinite(value):
        return "inf"
    if value <= top:
        return f"fits (×{top / value:.3g} headroom)" if value > 0 else "fits"
    if name.startswith("e4m3") or name == E4M3:
        return f"saturates at {top:g}"
    return "overflows (inf)"


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
    return (f"This head's largest score is **{top:.3g}** (logit scale {logit_scale:g}). Naive "
            f"softmax, exp(s) taken in the format without subtracting the max, overflows once "
            f"the scores grow: {', '.join(parts)} (ln of the largest number over the largest "
            f"score; e4m3 reaches only {largest('float8_e4m3'):g} = e^{exp_limit('float8_e4m3'):.2f}). "
            f"The kernels take exp in **float32** and subtract the running max first, so every "
            f"exponent is ≤ 0 and P ≤ 1 at any scale: nothing overflows.")
