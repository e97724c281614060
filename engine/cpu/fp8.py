"""The FP8 forward on the CPU: a NumPy emulation of the Hopper FP8 kernel (registry row
"wgmma fp8") with its roundings, in its order of operations (docs/DESIGN.md, "The FP8
forward contract").

Quantization: float32 x (rotated by a random-signed Hadamard matrix for Q and K when
cfg.fp8_rotation), a scale per tile (cfg.fp8_scaling "tile"), per (batch, head) ("tensor") or
1 ("none"): scale = float32(amax / 448), inv = float32(448 / amax), x8 = e4m3(RNE(clip(x ·
inv, ±448))). Single IEEE float32 operations and one rounding to e4m3 each, so the bytes are
the kernel's bit for bit (rotation aside: its float64 product may differ in the last float64
bit).

Attention, per query tile i and key tile j (FA2 order, the key-tile loop vectorised over the
query rows as engine.cpu.forward does): S_raw = Q8 K8ᵀ; f_j = float32(scale·log2 e · q_scale_i
· k_scale_j); the running max m in log2 units; P = exp2(S_raw·f_j − m) in float32, summed into
l, rounded to e4m3 (P8) and multiplied with V8 into a float32 accumulator kept in units of the
current V tile's scale; O = bfloat16((O_acc · v_scale) / l). The products Q8 K8ᵀ and P8 V8 are
exact in float64 (e4m3 values have 4 significant bits: every product is a multiple of 2^-18
below 2^18, a sum of 256 of them, over head_dim or a key tile of up to 256, fits 44 bits), so
they are formed there and rounded once to float32: the correctly rounded sum, the same on every
processor. The kernel accumulates them in float32 on its tensor cores in its own order, so
the two agree to float32 rounding there, not bit for bit; the quantized bytes agree bit for bit.

`rescale_threshold` (emulation only, log2 units) is FA4's conditional rescaling: the running
max moves only when a tile's max exceeds it by more than the threshold, so P may exceed 1
(up to 2^threshold) and saturate at 448 when cast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..model.config import FP8_INPUT_DTYPES, AttentionConfig, ConfigError
from ..model.formats import E4M3_MAX, E4M3_SATURATES_ABOVE
from ..model.rotation import hadamard, rotation_matrix, rotation_signs  # noqa: F401
from ..model.tiles import first_query_tile, hidden, key_rows, processed_tiles
from ..results import Fp8Info, Result, Trace

E4M3 = ml_dtypes.float8_e4m3fn          # the format's NumPy type (engine.model.formats)
LIMIT = np.float32(E4M3_MAX)            # 448
# Saturation: what the clamp changes. |y| up to half the top step past 448 rounds to 448 in any
# case (RNE ties at 464 go to 448, the even mantissa); beyond it only the clamp gives 448.
SATURATES_ABOVE = np.float32(E4M3_SATURATES_ABOVE)    # 464
LOG2E = 1.4426950408889634
LOG2E32 = np.float32(LOG2E)


# ---- quantization ---------------------------------------------------------------------
def rotate(cfg: AttentionConfig, x: np.ndarray) -> np.ndarray:
    """x · R (engine.model.rotation.rotation_matrix) in float64, rounded to float32: ((x H) ·
    signs) / sqrt(d), the Hadamard product first (exact in float64 for 16-bit inputs: sums of
    ±x), then one rounding of the scale."""
    x64 = np.asarray(x, dtype=np.float64)
    signs = rotation_signs(cfg)
    y = (x64 @ hadamard(cfg.head_dim)) * signs / math.sqrt(cfg.head_dim)
    return y.astype(np.float32)


def tile_amax(x32: np.ndarray, rows: int) -> np.ndarray:
    """(BH, T) float32: max |x| over each tile of `rows` rows (the last may be short)."""
    BH, N, d = x32.shape
    T = -(-N // rows)
    padded = np.zeros((BH, T * rows, d), dtype=np.float32)
    padded[:, :N] = np.abs(x32)
    return padded.reshape(BH, T, rows * d).max(axis=-1)


def scales_of(amax: np.ndarray, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """(scale, inv) float32 from each amax: float32(amax / 448) and float32(448 / amax), both 1
    where amax is 0 or the scaling is "none"."""
    amax = np.asarray(amax, dtype=np.float32)
    if scaling == "none":
        one = np.ones_like(amax)
        return one, one.copy()
    zero = amax == 0
    safe = np.where(zero, np.float32(1), amax)
    with np.errstate(divide="ignore", over="ignore"):
        scale = np.where(zero, np.float32(1), safe / LIMIT).astype(np.float32)
        inv = np.where(zero, np.float32(1), LIMIT / safe).astype(np.float32)
    return scale, inv


def to_e4m3(y: np.ndarray) -> tuple[np.ndarray, int]:
    """(e4m3 of clip(y, ±448) rounded to nearest even, the count of |y| > 464): the saturating
    cast of cvt.rn.satfinite.e4m3x2.f32, and the elements it clamped (values up to 464 round
    to 448 without the clamp too, among them the tile's amax when amax · inv rounds a float32
    ulp above 448)."""
    y = np.asarray(y, dtype=np.float32)
    saturated = int(np.count_nonzero(np.abs(y) > SATURATES_ABOVE))
    return np.clip(y, -LIMIT, LIMIT).astype(E4M3), saturated


def quantize_rows(x32: np.ndarray, rows: int, scaling: str):
    """Quantize (BH, N, d) float32 in tiles of `rows` rows: (x8 (BH, N, d) e4m3,
    scale (BH, T) float32, saturated count)."""
    BH, N, d = x32.shape
    T = -(-N // rows)
    amax = tile_amax(x32, rows)
    if scaling == "tensor":
        amax = np.repeat(amax.max(axis=1, keepdims=True), T, axis=1)
    scale, inv = scales_of(amax, scaling)
    inv_rows = np.repeat(inv, rows, axis=1)[:, :N, None]
    x8, saturated = to_e4m3(x32 * inv_rows)            # one float32 multiply, one cast
    return x8, scale, saturated


@dataclass
class Quantized:
    """What the FP8 forward feeds its tensor cores, in the natural layout: q8 (B, H, seq_q, d),
    k8, v8 (B, H, seq_k, d) as ml_dtypes.float8_e4m3fn (the GPU launcher's V8 is transposed
    and permuted; compare after undoing that), the float32 scales q_scale (B, H, Tr), k_scale,
    v_scale (B, H, Tc) with x ≈ scale · x8 row tile by row tile, the saturated counts
    {"q", "k", "v"}, and the rotation's signs ((d,) float64, None without rotation)."""

    q8: np.ndarray
    k8: np.ndarray
    v8: np.ndarray
    q_scale: np.ndarray
    k_scale: np.ndarray
    v_scale: np.ndarray
    saturated: dict
    scaling: str
    rotation: bool
    signs: np.ndarray | None = None

    def dequantized(self, cfg: AttentionConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, k, v in float64 as the tensor cores see them: x8 · scale of its row tile (Q and
        K in the rotated basis when the config rotates)."""
        def back(x8, scale, rows):
            per_row = np.repeat(scale.astype(np.float64), rows, axis=-1)[..., :x8.shape[2]]
            return x8.astype(np.float64) * per_row[..., None]
        return (back(self.q8, self.q_scale, cfg.block_q), back(self.k8, self.k_scale, cfg.block_k),
                back(self.v8, self.v_scale, cfg.block_k))


def check_operands(cfg: AttentionConfig, q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as arrays of the config's shapes in one of FP8_INPUT_DTYPES each; ConfigError
    naming the shape and the dtypes allowed otherwise."""
    if not cfg.is_fp8:
        raise ConfigError(f"The FP8 emulation runs dtype float8_e4m3 configs; got "
                          f"dtype={cfg.dtype}.")
    want = {"q": (cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim),
            "k": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim),
            "v": (cfg.batch, cfg.heads, cfg.seq_k, cfg.head_dim)}
    out = []
    for name, x in zip("qkv", (q, k, v)):
        x = np.asarray(x)
        if x.shape != want[name]:
            raise ConfigError(f"{name} must have shape {want[name]} (batch, heads, seq, "
                              f"head_dim) for this config; got {x.shape}.")
        if x.dtype.name not in FP8_INPUT_DTYPES:
            raise ConfigError(f"{name} must have dtype {', '.join(FP8_INPUT_DTYPES)} for a "
                              f"float8_e4m3 run (it quantizes them itself); got {x.dtype}.")
        out.append(x)
    return tuple(out)


def quantize_inputs(cfg: AttentionConfig, q, k, v) -> Quantized:
    """Quantize q, k, v (float16, bfloat16 or float32, (B, H, seq, d)) as the FP8 kernel's
    quantize pass does, for the config's fp8_scaling and fp8_rotation."""
    q, k, v = check_operands(cfg, q, k, v)
    B, H = cfg.batch, cfg.heads
    flat = [np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim), dtype=np.float32)
            for x in (q, k, v)]
    signs = None
    if cfg.fp8_rotation:
        signs = rotation_signs(cfg)
        flat[0], flat[1] = rotate(cfg, flat[0]), rotate(cfg, flat[1])
    parts, saturated = [], {}
    for name, x32, rows in zip("qkv", flat, (cfg.block_q, cfg.block_k, cfg.block_k)):
        x8, scale, sat = quantize_rows(x32, rows, cfg.fp8_scaling)
        parts.append((x8.reshape(B, H, *x8.shape[1:]), scale.reshape(B, H, -1)))
        saturated[name] = sat
    (q8, qs), (k8, ks), (v8, vs) = parts
    return Quantized(q8=q8, k8=k8, v8=v8, q_scale=qs, k_scale=ks, v_scale=vs,
                     saturated=saturated, scaling=cfg.fp8_scaling, rotation=cfg.fp8_rotation,
                     signs=signs)


# ---- attention ------------------------------------------------------------------------
def check_threshold(rescale_threshold) -> float | None:
    """None, or a finite number ≥ 0 (log2 units) as float; ConfigError otherwise."""
    if rescale_threshold is None:
        return None
    if (isinstance(rescale_threshold, bool) or not isinstance(rescale_threshold, (int, float))
            or not math.isfinite(rescale_threshold) or rescale_threshold < 0):
        raise ConfigError(f"rescale_threshold must be None (rescale whenever the max moves, "
                          f"the kernel's rule) or a finite number ≥ 0 in log2 units (FA4 "
                          f"uses 8); got {rescale_threshold!r}.")
    return float(rescale_threshold)


ROWS_PER_CHUNK = 2048     # query rows emulated at a time (their S, P and float64 operands)


@dataclass
class _Counts:
    p_saturated: int = 0
    rescales: int = 0
    skipped: int = 0


def emulate(cfg: AttentionConfig, q, k, v, trace: bool = False,
            rescale_threshold: float | None = None) -> Result:
    """The FP8 forward of cfg (dtype float8_e4m3) on q, k, v (float16, bfloat16 or float32):
    Result with output bfloat16 (B, H, seq_q, d), lse float32, the trace when asked, and
    Result.fp8 (scales, saturated counts, rescale counts); Result.info holds the same
    (Fp8Info.as_info). rescale_threshold: see the module's docstring. Query rows are
    independent: they are emulated ROWS_PER_CHUNK at a time, which bounds the memory."""
    threshold = check_threshold(rescale_threshold)
    qz = quantize_inputs(cfg, q, k, v)
    BH, Nq, d, Tc = cfg.bh, cfg.seq_q, cfg.head_dim, cfg.Tc
    K8 = qz.k8.reshape(BH, cfg.seq_k, d).astype(np.float64)          # exact values of e4m3
    V8 = qz.v8.reshape(BH, cfg.seq_k, d).astype(np.float64)
    scale_log2 = np.float32(cfg.softmax_scale * LOG2E)
    # f of every row and key tile: (scale_log2 · q_scale of the row's tile) · k_scale_j
    qs_rows = np.repeat(qz.q_scale.reshape(BH, cfg.Tr), cfg.block_q, axis=1)[:, :Nq]
    k_scale = qz.k_scale.reshape(BH, Tc)
    out = np.empty((BH, Nq, d), dtype=np.float32)
    lse = np.empty((BH, Nq), dtype=np.float32)
    traced = tuple(np.empty((BH, Nq, Tc), np.float32) for _ in range(4)) if trace else None
    counts = _Counts()
    chunk = max(ROWS_PER_CHUNK // cfg.block_q, 1) * cfg.block_q
    for c0 in range(0, Nq, chunk):
        c1 = min(c0 + chunk, Nq)
        Q8 = qz.q8.reshape(BH, Nq, d)[:, c0:c1].astype(np.float64)
        f_rows = ((scale_log2 * qs_rows[:, c0:c1])[:, :, None]
                  * k_scale[:, None, :]).astype(np.float32)
        out[:, c0:c1], lse[:, c0:c1] = _attend(
            cfg, c0, c1, Q8, K8, V8, f_rows, qz.v_scale.reshape(BH, Tc), threshold, counts,
            None if traced is None else tuple(t[:, c0:c1] for t in traced))
    B, H = cfg.batch, cfg.heads
    tr = None
    if trace:
        shp = (B, H, Nq, Tc)
        t_m, t_l, t_r, t_t = (t.reshape(shp) for t in traced)
        tr = Trace(running_max=t_m, running_sum=t_l, rescale=t_r, tile_max=t_t,
                   processed=processed_tiles(cfg))
    info = Fp8Info(q_scale=qz.q_scale, k_scale=qz.k_scale, v_scale=qz.v_scale,
                   saturated={**qz.saturated, "p": counts.p_saturated},
                   scaling=cfg.fp8_scaling, rotation=cfg.fp8_rotation,
                   rescale_threshold=threshold, rescales=counts.rescales,
                   rescales_skipped=counts.skipped)
    return Result(output=out.reshape(B, H, Nq, d).astype(ml_dtypes.bfloat16),
                  lse=lse.reshape(B, H, Nq), backend="numpy", algorithm="flash", trace=tr,
                  info={"emulation": "FP8 (engine.cpu.fp8)", **info.as_info()}, fp8=info)


def _attend(cfg: AttentionConfig, c0: int, c1: int, Q8, K8, V8, f_rows, v_scale,
            threshold: float | None, counts: _Counts, traced):
    """The key-tile loop for the query rows [c0, c1) (Q8, f_rows: those rows only): their
    output before the bfloat16 cast and lse, float32; their trace columns into `traced`."""
    BH, n, d = Q8.shape
    m = np.full((BH, n), -np.inf, dtype=np.float32)    # running max, log2 units
    l = np.zeros((BH, n), dtype=np.float32)            # running sum
    O = np.zeros((BH, n, d), dtype=np.float32)         # in units of vs (the last V scale)
    vs = np.ones((BH, n), dtype=np.float32)
    started = np.zeros((BH, n), dtype=bool)
    first = first_query_tile(cfg)
    for j in range(cfg.Tc):
        k0, k1 = key_rows(cfg, j)
        # rows before the first query tile that sees key tile j skip it: their state stays
        r0 = min(max(int(first[j]) * cfg.block_q, c0), c1)
        rows = slice(r0 - c0, n)
        S = (Q8[:, rows] @ K8[:, k0:k1].transpose(0, 2, 1)).astype(np.float32)  # exact, 1 rounding
        if cfg.causal:
            S[:, hidden(cfg, r0, c1, k0, k1)] = -np.inf
        f = f_rows[:, rows, j]
        tile_max = np.full((BH, n), -np.inf, dtype=np.float32)
        if S.shape[-1] and S.shape[1]:
            row_max = S.max(axis=-1)
            with np.errstate(invalid="ignore"):
                tile_max[:, rows] = np.where(np.isneginf(row_max), -np.inf, row_max * f)
        m_old = m
        if threshold is None:
            m = np.maximum(m_old, tile_max)
        else:
            move = tile_max > m_old + np.float32(threshold)
            m = np.where(move, tile_max, m_old)
            counts.skipped += int(np.count_nonzero((tile_max > m_old) & ~move))
        same = m == m_old
        with np.errstate(invalid="ignore"):
            alpha = np.where(same, np.float32(1), np.exp2(m_old - m)).astype(np.float32)
        counts.rescales += int(np.count_nonzero(~same & np.isfinite(m_old)))
        m_safe = np.where(np.isneginf(m), np.float32(0), m)[:, rows, None]
        with np.errstate(invalid="ignore", over="ignore"):
            P = np.exp2((S * f[..., None]).astype(np.float32) - m_safe)      # hidden -> 0
        P8, sat = to_e4m3(P)
        counts.p_saturated += sat
        l = (alpha * l).astype(np.float32)
        l[:, rows] += P.astype(np.float64).sum(axis=-1).astype(np.float32)
        PV = (P8.astype(np.float64) @ V8[:, k0:k1]).astype(np.float32)    # exact, 1 rounding
        # The accumulator moves to V tile j's units: one factor per row, α · (vs_old / vs_j).
        vj = v_scale[:, j][:, None]
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            c = (alpha[:, rows] * (vs[:, rows] / vj)).astype(np.float32)
        c = np.where(started[:, rows], c, np.float32(0))
        O[:, rows] = (O[:, rows] * c[..., None]).astype(np.float32) + PV
        vs[:, rows] = vj
        started[:, rows] = True
        if traced is not None:
            t_m, t_l, t_r, t_t = traced
            t_m[..., j] = m / LOG2E32
            t_l[..., j] = l
            t_r[..., j] = alpha
            t_t[..., j] = tile_max / LOG2E32
    out = ((O * vs[..., None]).astype(np.float32) / l[..., None]).astype(np.float32)
    with np.errstate(divide="ignore"):
        lse = (m / LOG2E32 + np.log(l)).astype(np.float32)
    return out, lse


def run(cfg: AttentionConfig, q, k, v, trace: bool = False) -> Result:
    """engine.run's NumPy FP8 forward: the emulation with the kernel's rule (always rescale)."""
    return emulate(cfg, q, k, v, trace=trace)
