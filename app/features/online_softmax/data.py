"""Tables for the online-softmax page, for one query row: the run's trace over key tiles, the
partial output after each tile against the exact answer, the row of scores, and float16's
overflow when the max is not subtracted."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import engine
from engine.model.tiles import hidden, key_tile_ends, visible_in_tiles

MAX_SCORE_POINTS = 2000
FP16_MAX = float(np.finfo(np.float16).max)


def _finite_or_nan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), x, np.nan)


def row_trace(trace: engine.Trace, cfg: engine.AttentionConfig, b: int, h: int,
              r: int) -> pd.DataFrame:
    """One row of the trace per key tile j; -inf (nothing visible yet) becomes NaN."""
    j = np.arange(cfg.Tc)
    k0, k1 = j * cfg.block_k, key_tile_ends(cfg)
    visible = visible_in_tiles(cfg, r)
    return pd.DataFrame({
        "tile": j, "k0": k0, "k1": k1, "visible_keys": visible,
        "processed": trace.processed[r // cfg.block_q],
        "tile_max": _finite_or_nan(trace.tile_max[b, h, r]),
        "running_max": _finite_or_nan(trace.running_max[b, h, r]),
        "rescale": np.asarray(trace.rescale[b, h, r], dtype=np.float64),
        "running_sum": np.asarray(trace.running_sum[b, h, r], dtype=np.float64),
    })


def scores(cfg: engine.AttentionConfig, q: np.ndarray, k: np.ndarray, b: int, h: int,
           r: int) -> tuple[np.ndarray, np.ndarray]:
    """Scaled scores s[r, :] in float64 and the mask of keys row r may see."""
    s = cfg.softmax_scale * (k[b, h].astype(np.float64) @ q[b, h, r].astype(np.float64))
    mask = hidden(cfg, r, r + 1, 0, cfg.seq_k)
    visible = np.ones(cfg.seq_k, dtype=bool) if mask is None else ~mask[0]
    return s, visible


@dataclass(frozen=True)
class Convergence:
    table: pd.DataFrame      # tile, rel_error of the partial output after that tile
    sum_agreement: float     # max relative gap between the trace's l_j and float64's
    output_error: float      # relative error of the run's output row against float64


def convergence(cfg: engine.AttentionConfig, q, k, v, output: np.ndarray,
                trace: engine.Trace, b: int, h: int, r: int) -> Convergence:
    """Partial output after key tile j = (Σ_{c < end of tile j} p_c v_c) / (Σ p_c), computed
    in float64 from the inputs, against the exact row; plus how well the run's trace and
    output agree with float64."""
    s, visible = scores(cfg, q, k, b, h, r)
    V = v[b, h].astype(np.float64)
    M = s[visible].max()
    p = np.where(visible, np.exp(s - M), 0.0)
    ends = key_tile_ends(cfg)
    P = np.cumsum(p[:, None] * V, axis=0)[ends - 1]        # (Tc, d)
    L = np.cumsum(p)[ends - 1]                               # (Tc,)
    exact = P[-1] / L[-1]
    norm = np.linalg.norm(exact) or 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        partial = P / L[:, None]
        err = np.linalg.norm(partial - exact, axis=1) / norm
        m = trace.running_max[b, h, r].astype(np.float64)
        l_f64 = L * np.exp(M - m)
        gap = np.abs(trace.running_sum[b, h, r] - l_f64) / l_f64
    out_err = np.linalg.norm(output[b, h, r].astype(np.float64) - exact) / norm
    return Convergence(
        table=pd.DataFrame({"tile": np.arange(cfg.Tc), "rel_error": _finite_or_nan(err)}),
        sum_agreement=float(np.nanmax(gap[np.isfinite(gap)])) if np.isfinite(gap).any()
        else float("nan"),
        output_error=float(out_err))


def score_row(cfg: engine.AttentionConfig, q, k, b: int, h: int, r: int) -> pd.DataFrame:
    """The row's scores by key, binned to at most MAX_SCORE_POINTS points (keeping each
    bin's largest visible score, so peaks survive); `keys` is the number of visible keys a
    point stands for (1 unless binned)."""
    s, visible = scores(cfg, q, k, b, h, r)
    keys = np.arange(cfg.seq_k)
    count = visible.astype(np.int64)
    width = -(-cfg.seq_k // MAX_SCORE_POINTS)
    if width > 1:
        pad = -cfg.seq_k % width
        ss = np.pad(np.where(visible, s, -np.inf), (0, pad), constant_values=-np.inf)
        s_bin = ss.reshape(-1, width).max(axis=1)
        count = np.pad(count, (0, pad)).reshape(-1, width).sum(axis=1)
        keys = keys[::width]
        visible = np.isfinite(s_bin)
        s = np.where(visible, s_bin, np.nan)
    return pd.DataFrame({"key": keys, "score": np.where(visible, s, np.nan),
                         "tile": keys // cfg.block_k, "visible": visible, "keys": count})


# Every kernel of the project, and the emulation, computes S_ij, its exp and P_ij in float32
# whatever the input dtype (kernels/teaching/flash_teaching.cu: expf on float S_row).
EXP_DTYPE = "float32"


def exp_limit(dtype: str) -> float:
    """ln of the largest finite number of `dtype`: exp(s) is inf in it once s passes this
    (float16: 11.09; bfloat16 and float32: 88.72)."""
    import ml_dtypes
    return float(np.log(float(ml_dtypes.finfo(np.dtype(dtype)).max)))


@dataclass(frozen=True)
class Overflow:
    naive_inf: int           # entries of exp(s) that are inf in `dtype`
    safe_inf: int            # entries of exp(s - max) that are inf in `dtype`
    visible: int
    max_score: float
    overflow_at: float       # smallest logit multiplier that overflows exp(s) in `dtype`
    dtype: str = "float16"   # the arithmetic exp was taken in
    limit: float = float("nan")   # exp_limit(dtype)


def exp_overflow(cfg: engine.AttentionConfig, q, k, b: int, h: int, r: int,
                 dtype: str = EXP_DTYPE) -> Overflow:
    """Real arithmetic in `dtype` on this row: exp without and with max subtraction."""
    s, visible = scores(cfg, q, k, b, h, r)
    sd = s[visible].astype(np.dtype(dtype))
    with np.errstate(over="ignore"):
        naive = np.exp(sd)
        safe = np.exp(sd - sd.max())
    top = float(s[visible].max())
    limit = exp_limit(dtype)
    return Overflow(naive_inf=int(np.isinf(naive).sum()), safe_inf=int(np.isinf(safe).sum()),
                    visible=int(visible.sum()), max_score=top,
                    overflow_at=limit / top if top > 0 else float("inf"), dtype=dtype,
                    limit=limit)


def fp16_overflow(cfg: engine.AttentionConfig, q, k, b: int, h: int, r: int) -> Overflow:
    """Real float16 arithmetic on this row: exp without and with max subtraction."""
    return exp_overflow(cfg, q, k, b, h, r, "float16")


def overflow_text(cfg: engine.AttentionConfig, kernel: Overflow, inputs: Overflow) -> str:
    """The overflow lesson for this row: exp in float32, as the kernels take it, and in the
    config's own dtype, as it would go if exp were taken there."""
    def count(o: Overflow) -> str:
        return (f"**{o.naive_inf}** inf among the row's {o.visible:,} visible keys"
                + (" (softmax then returns NaN)" if o.naive_inf else "")
                + f"; with the max subtracted, **{o.safe_inf}**")
    text = (f"The kernels here keep S_ij in float32 and take exp in **float32** whatever the "
            f"input dtype ({cfg.dtype} here): float32's largest number is 3.4·10³⁸ = "
            f"e^{kernel.limit:.2f}, so exp(s) overflows once a score passes "
            f"{kernel.limit:.2f}. This row's largest score is **{kernel.max_score:.3f}**: exp(s) "
            f"in float32 without subtracting it gives {count(kernel)}.")
    if inputs.dtype != kernel.dtype:
        largest = float(np.exp(inputs.limit))
        text += (f" Taken in {inputs.dtype} instead (largest number {largest:,.6g} = "
                 f"e^{inputs.limit:.2f}), exp(s) would give {count(inputs)}.")
    if kernel.naive_inf == 0 and kernel.overflow_at != float("inf"):
        text += (f" Scores {kernel.overflow_at:.2f}× larger would overflow float32 — raise "
                 f"the logit scale or use the slider below.")
    return text
