"""Each slide's point in words, computed from what its chart draws (app/core/deck.py's slides,
in order): pure functions of the page's data, tested on their own. Talk mode writes them on the
slide's chart (app.core.deck_view.takeaway)."""
from __future__ import annotations

import math

import pandas as pd

from engine.model.units import GiB, format_bytes

FLASH_KERNELS = ("tensorcore", "teaching")     # the project's own flash kernels
LISTED = 4                                    # key tiles named before "…"


def short_n(n: int) -> str:
    """A sequence length as a talk says it: 16384 -> "16k", 1000 -> "1,000"."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def _largest_shared_n(rows: pd.DataFrame) -> tuple[int, pd.Series, pd.DataFrame] | None:
    """(N, naive's row, the project's flash rows) at the largest N both were timed at."""
    timed = rows[rows.median_ms.notna()]
    naive = timed[timed.kernel == "naive"]
    flash = timed[timed.kernel.isin(FLASH_KERNELS)]
    shared = sorted(set(naive.seq) & set(flash.seq))
    if not shared:
        return None
    n = shared[-1]
    return n, naive[naive.seq == n].sort_values("median_ms").iloc[0], flash[flash.seq == n]


def headline(rows: pd.DataFrame) -> str:
    """The Overview's headline chart: how much faster the project's fastest flash kernel is
    than naive at the largest N both ran, and whether its peak memory stayed flat over N."""
    found = _largest_shared_n(rows)
    if found is None:
        return ""
    n, naive, flash = found
    best = flash.sort_values("median_ms").iloc[0]
    text = f"{naive.median_ms / best.median_ms:.1f}× faster than naive at N = {short_n(n)}"
    peaks = rows[rows.kernel == best.kernel].peak_bytes.dropna()
    naive_peaks = rows[rows.kernel == "naive"].peak_bytes.dropna()
    if len(peaks) > 1 and peaks.max() <= 1.1 * peaks.min():
        text += " · flash's memory flat"
        if len(naive_peaks) > 1:
            text += f", naive's ×{naive_peaks.max() / naive_peaks.min():.0f}"
    return text


def speed(rows: pd.DataFrame) -> str:
    """Timings' recorded headline: the project's fastest flash kernel at the largest N against
    each other kernel recorded there (naive and PyTorch's)."""
    found = _largest_shared_n(rows)
    if found is None:
        return ""
    n, _, flash = found
    best = flash.sort_values("median_ms").iloc[0]
    others = rows[(rows.seq == n) & ~rows.kernel.isin(FLASH_KERNELS) & rows.median_ms.notna()]
    names = others.name if "name" in others else others.kernel
    ratios = [f"{name} {ms / best.median_ms:.2g}×" for name, ms in zip(names, others.median_ms)]
    who = best["name"] if "name" in best else best.kernel
    text = f"N = {short_n(n)}: {who} in {best.median_ms:.3g} ms"
    return text + (f"; the others take {', '.join(ratios)} as long" if ratios else "")


def memory_wall(memory: pd.DataFrame, gpu_name: str, gpu_bytes: float,
                wall: int | None) -> str:
    """Timings' memory chart: where naive's peak passes the GPU's memory, and naive against
    flash at the chart's largest N."""
    n = int(memory.seq.max())
    at = memory[memory.seq == n].set_index("algorithm").peak_GiB * GiB
    naive, flash = at["naive"], at["FlashAttention"]
    tail = (f"at N = {short_n(n)} naive needs {format_bytes(naive)}, flash "
            f"{format_bytes(flash)} ({naive / flash:,.0f}× less)")
    if wall is None:
        return f"No memory wall on {gpu_name}: " + tail
    return (f"Naive hits {gpu_name}'s {format_bytes(gpu_bytes)} at N = {wall:,}; " + tail)


def tiling(total: int, limit: int, fits: bool, blocks_per_sm: int, gpu_name: str,
           computed: int, tiles: int) -> str:
    """SRAM tiling: whether one thread block's tiles fit the GPU's shared memory (a block's
    bytes against its limit), and the tiles a causal mask skips."""
    if fits:
        text = (f"{format_bytes(total)} of {format_bytes(limit)} shared memory a block: "
                f"{blocks_per_sm} block{'s' if blocks_per_sm != 1 else ''} share an SM")
    else:
        text = (f"These tiles need {format_bytes(total)}; {gpu_name} gives a block "
                f"{format_bytes(limit)}: cannot launch")
    if computed < tiles:
        text += f" · causal: {tiles - computed:,} of {tiles:,} tiles skipped"
    return text


def online_softmax(rescale) -> str:
    """Online softmax: the key tiles after the first whose rescale factor α is below 1 (the
    running max moved there), or that it never moved."""
    moved = [j for j, a in enumerate(rescale) if j > 0 and not math.isnan(a) and a < 1]
    if not moved:
        return "α = 1 at every key tile after the first: the max never moved"
    shown = ", ".join(str(j) for j in moved[:LISTED]) + (", …" if len(moved) > LISTED else "")
    where = f"key tile {shown}" if len(moved) == 1 else f"{len(moved)} key tiles ({shown})"
    return f"α < 1: the max moved at {where}, so l and O were rescaled"


def backward(naive_bytes: float, flash_bytes: float, recompute_flops: float) -> str:
    """Backward: the HBM traffic flash saves against the one extra product it pays."""
    return (f"{naive_bytes / flash_bytes:.1f}× fewer HBM bytes than naive backward, for one "
            f"extra QKᵀ ({recompute_flops / 1e9:.3g} GFLOP) to rebuild P")


def decoding(num_splits: int, blocks: int, sms: int, gap: float) -> str:
    """Decoding: how many thread blocks the splits give the SMs, and how exactly their
    log-sum-exp merge adds up."""
    split = "1 split" if num_splits == 1 else f"{num_splits} splits"
    match = "exactly" if gap == 0 else f"to {gap:.0e}"
    return (f"{split} → {blocks:,} thread block{'s' if blocks != 1 else ''} on {sms} SMs; "
            f"their merged sums match {match}")


def _against_base(best: float, base: float) -> str:
    """An RMSE against per-tensor scaling's, in words: "1.8× lower than per-tensor"."""
    if best <= 0 or base <= 0:
        return "as exact as per-tensor" if best == base else (
            "exact" if best == 0 else "while per-tensor is exact")
    if abs(best / base - 1) < 0.05:
        return "within 5% of per-tensor"
    if best < base:
        return f"{base / best:.1f}× lower than per-tensor"
    return f"{best / base:.1f}× higher than per-tensor"


PRECISION_BEST, PRECISION_BASE = "FP8 per-tile + rotation", "FP8 per-tensor"


def precision(rmse: pd.DataFrame, preset: str) -> str:
    """Precision: on `preset`'s inputs, FP8 per-tile + rotation's RMSE against per-tensor
    scaling's, bf16's beside them, and the same on the outliers preset where that is another
    (rmse: preset, variant, rmse, as the RMSE chart draws it): "FP8 per-tile + rotation:
    8.0e-03 RMSE on outliers inputs, 1.8× lower than per-tensor (bf16: 2.3e-04)"."""
    def at(name: str) -> pd.Series:
        return rmse[rmse.preset == name].set_index("variant").rmse
    rows = at(preset)
    if PRECISION_BEST not in rows or PRECISION_BASE not in rows:
        return ""
    best, base = float(rows[PRECISION_BEST]), float(rows[PRECISION_BASE])
    text = (f"FP8 per-tile + rotation: {best:.1e} RMSE on {preset} inputs, "
            f"{_against_base(best, base)}")
    if "bf16" in rows:
        text += f" (bf16: {float(rows['bf16']):.1e})"
    other = at("outliers")
    if preset != "outliers" and PRECISION_BEST in other and PRECISION_BASE in other:
        text += (f" · on outliers {float(other[PRECISION_BEST]):.1e}, "
                 f"{_against_base(float(other[PRECISION_BEST]), float(other[PRECISION_BASE]))}")
    return text
