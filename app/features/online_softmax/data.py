"""Tables for the online-softmax page, for one query row: the run's trace over key tiles (from a
traced run, or the emulation of that one row alone, O(N·d), so the page draws a row at any
N), the partial output after each tile against the exact answer, the row of scores, and
float16's overflow when the max is not subtracted."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

import engine
from engine.model import formats
from engine.model.tiles import (hidden, key_rows, key_tile_ends, seen_key_tiles,
                                visible_in_tiles)

MAX_SCORE_POINTS = 2000
FP16_MAX = float(np.finfo(np.float16).max)


def _finite_or_nan(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isfinite(x), x, np.nan)


@dataclass(frozen=True)
class RowRun:
    """One query row's online softmax: its trace fields after each key tile j, (Tc,) float32
    as engine.Trace defines them, whether its query tile processes tile j, and the output row
    (d,) in the input dtype (empty when not known)."""
    running_max: np.ndarray
    running_sum: np.ndarray
    rescale: np.ndarray
    tile_max: np.ndarray
    processed: np.ndarray
    output: np.ndarray


def row_of(trace: engine.Trace, cfg: engine.AttentionConfig, b: int, h: int, r: int,
           output: np.ndarray | None = None) -> RowRun:
    """Row (b, h, r) of a traced run (with its output row when `output`, the run's
    (B, H, N_q, d) output, is given)."""
    return RowRun(running_max=trace.running_max[b, h, r], running_sum=trace.running_sum[b, h, r],
                  rescale=trace.rescale[b, h, r], tile_max=trace.tile_max[b, h, r],
                  processed=trace.processed[r // cfg.block_q],
                  output=np.empty(0) if output is None else output[b, h, r])


def emulate_row(cfg: engine.AttentionConfig, q, k, v, b: int, h: int, r: int) -> RowRun:
    """The flash loop of query row r alone, over every key tile, with the arithmetic of the
    CPU emulation (engine.cpu.forward.flash: float32, the scale folded into q; a tile its
    query tile skips keeps the state, rescale 1 and tile max -inf): O(N_k·d) time and memory,
    where a traced run of the whole config holds B·H·N_q·T_c values of each field."""
    Tc = cfg.Tc
    qr = q[b, h, r].astype(np.float32) * np.float32(cfg.softmax_scale)
    K, V = k[b, h], v[b, h]
    ran = np.arange(Tc) < seen_key_tiles(cfg)[r // cfg.block_q]
    fields = {name: np.empty(Tc, np.float32) for name in
              ("running_max", "running_sum", "rescale", "tile_max")}
    m, l = np.float32(-np.inf), np.float32(0)
    o = np.zeros(cfg.head_dim, np.float32)
    for j in range(Tc):
        tile_max, rescale = np.float32(-np.inf), np.float32(1)
        if ran[j]:
            k0, k1 = key_rows(cfg, j)
            s = K[k0:k1].astype(np.float32) @ qr
            mask = hidden(cfg, r, r + 1, k0, k1)
            if mask is not None:
                s[mask[0]] = -np.inf
            tile_max = s.max()
            m_new = max(m, tile_max)
            if m_new != m:
                rescale = np.exp(m - m_new, dtype=np.float32)
            p = np.exp(s - (np.float32(0) if np.isneginf(m_new) else m_new))
            l = rescale * l + p.sum(dtype=np.float32)
            o = o * rescale + p @ V[k0:k1].astype(np.float32)
            m = m_new
        fields["running_max"][j], fields["running_sum"][j] = m, l
        fields["rescale"][j], fields["tile_max"][j] = rescale, tile_max
    return RowRun(**fields, processed=ran, output=(o / l).astype(q.dtype))


def row_trace(trace, cfg: engine.AttentionConfig, b: int, h: int, r: int) -> pd.DataFrame:
    """One row of the trace per key tile j; -inf (nothing visible yet) becomes NaN. `trace` is
    a RowRun, or an engine.Trace whose row (b, h, r) is taken."""
    row = trace if isinstance(trace, RowRun) else row_of(trace, cfg, b, h, r)
    j = np.arange(cfg.Tc)
    k0, k1 = j * cfg.block_k, key_tile_ends(cfg)
    visible = visible_in_tiles(cfg, r)
    return pd.DataFrame({
        "tile": j, "k0": k0, "k1": k1, "visible_keys": visible,
        "processed": row.processed,
        "tile_max": _finite_or_nan(row.tile_max),
        "running_max": _finite_or_nan(row.running_max),
        "rescale": np.asarray(row.rescale, dtype=np.float64),
        "running_sum": np.asarray(row.running_sum, dtype=np.float64),
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


def convergence(cfg: engine.AttentionConfig, q, k, v, output: np.ndarray | None,
                trace, b: int, h: int, r: int) -> Convergence:
    """Partial output after key tile j = (Σ_{c < end of tile j} p_c v_c) / (Σ p_c), computed
    in float64 from the inputs, against the exact row; plus how well the run's trace and
    output agree with float64. `trace` is a RowRun with its output row (`output` None), or an
    engine.Trace with `output` the run's (B, H, N_q, d) output."""
    row = trace if isinstance(trace, RowRun) else row_of(trace, cfg, b, h, r, output)
    s, visible = scores(cfg, q, k, b, h, r)
    V = v[b, h].astype(np.float64)
    M = s[visible].max()
    p = np.where(visible, np.exp(s - M), 0.0)
    ends = key_tile_ends(cfg)
    P = np.cumsum(p[:, None] * V, axis=0)[ends - 1]        # (Tc, d)
    L = np.cumsum(p)[ends - 1]                               # (Tc,)
    exact = P[-1] / L[-1]
    norm = np.linalg.norm(exact) or 1.0
    # a run that overflowed (its running max inf) gives inf or nan here, filtered below
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        partial = P / L[:, None]
        err = np.linalg.norm(partial - exact, axis=1) / norm
        m = row.running_max.astype(np.float64)
        l_f64 = L * np.exp(M - m)
        gap = np.abs(row.running_sum - l_f64) / l_f64
    out_err = np.linalg.norm(row.output.astype(np.float64) - exact) / norm
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


def np_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype holding a format of engine.model.formats ("float16", "float8_e4m3":
    ml_dtypes' float8_e4m3fn, finite, max 448)."""
    return np.dtype(formats.numpy_type(dtype))


def largest(dtype: str) -> float:
    """The largest finite number of `dtype` (float16: 65504, e4m3: 448)."""
    return formats.number_format(dtype).max


def exp_limit(dtype: str) -> float:
    """ln of the largest finite number of `dtype`: exp(s) is inf in it once s passes this
    (float16: 11.09; bfloat16 and float32: 88.72; e4m3: 6.10)."""
    return float(np.log(largest(dtype)))


def exp_overflows(s: np.ndarray, dtype: str) -> np.ndarray:
    """Where exp(s) (s: float64 scores) overflows `dtype`, by real arithmetic: exp taken in
    `dtype` itself for the 16- and 32-bit floats (inf past its largest number); an 8-bit float
    has no exp of its own, so exp is taken in float32 and cast, overflowing where it passes
    the format's largest number (e4m3: NaN from a plain cast, 448 from the saturating cast the
    FP8 kernels use: either way the softmax is wrong)."""
    dt = np_dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if dt.itemsize >= 2:
            return np.isinf(np.exp(np.asarray(s).astype(dt)))
        return ~(np.exp(np.asarray(s, dtype=np.float32)) <= np.float32(largest(dtype)))


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
    sd = s[visible].astype(np_dtype(dtype)).astype(np.float64)   # the scores held in dtype
    top = float(s[visible].max())
    limit = exp_limit(dtype)
    return Overflow(naive_inf=int(exp_overflows(sd, dtype).sum()),
                    safe_inf=int(exp_overflows(sd - sd.max(), dtype).sum()),
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
