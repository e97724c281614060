"""Error metrics of a forward output against exact attention: the float64 reference, the
error per query tile and the RMSE (docs/DESIGN.md, "The FP8 forward contract"). The
Precision lesson compares FP8 and 16-bit runs with them; any dtype's output is taken.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.config import AttentionConfig

ROWS_PER_CHUNK = 512      # query rows of the float64 reference at a time (its S and P)


def reference(cfg: AttentionConfig, q, k, v) -> tuple[np.ndarray, np.ndarray]:
    """Exact attention of q, k, v as given (upcast to float64: the inputs' own values, not
    quantized, not rotated), with the config's scale and top-left causal mask: (output
    (B, H, seq_q, d), lse (B, H, seq_q)), float64. Computed ROWS_PER_CHUNK query rows at a
    time, so it holds at most that many rows of S and P."""
    B, H, nq, d = np.shape(q)
    Q, K, V = (np.asarray(x, dtype=np.float64).reshape(B * H, -1, d) for x in (q, k, v))
    nk = K.shape[1]
    O = np.empty((B * H, nq, d))
    lse = np.empty((B * H, nq))
    for r0 in range(0, nq, ROWS_PER_CHUNK):
        r1 = min(r0 + ROWS_PER_CHUNK, nq)
        S = cfg.softmax_scale * (Q[:, r0:r1] @ K.transpose(0, 2, 1))
        if cfg.causal:
            S[:, np.arange(nk)[None, :] > np.arange(r0, r1)[:, None]] = -np.inf
        m = S.max(axis=-1, keepdims=True)
        P = np.exp(S - m)
        l = P.sum(axis=-1, keepdims=True)
        O[:, r0:r1] = (P @ V) / l
        lse[:, r0:r1] = (m + np.log(l))[..., 0]
    return O.reshape(B, H, nq, d), lse.reshape(B, H, nq)


def rmse(output, reference) -> float:
    """sqrt(mean((output - reference)²)), in float64."""
    diff = np.asarray(output, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    return float(np.sqrt(np.mean(diff * diff)))


@dataclass
class TileErrors:
    """The error of an output per (batch, head, query tile): arrays (B, H, Tr), float64."""

    rmse: np.ndarray          # sqrt(mean of the squared error over the tile's rows and d)
    max_abs: np.ndarray       # the largest |error| in the tile
    rel: np.ndarray           # ‖error‖ / ‖reference‖ over the tile (Frobenius)


def tile_errors(cfg: AttentionConfig, output, reference) -> TileErrors:
    """The error of `output` against `reference` (both (B, H, seq_q, d)) per query tile of
    block_q rows (the last may be short)."""
    out = np.asarray(output, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    B, H, nq, d = ref.shape
    Tr, Br = cfg.Tr, cfg.block_q
    pad = Tr * Br - nq
    err = np.pad(out - ref, ((0, 0), (0, 0), (0, pad), (0, 0))).reshape(B, H, Tr, Br * d)
    refs = np.pad(ref, ((0, 0), (0, 0), (0, pad), (0, 0))).reshape(B, H, Tr, Br * d)
    counts = (np.minimum((np.arange(Tr) + 1) * Br, nq) - np.arange(Tr) * Br) * d
    sq = (err * err).sum(axis=-1)
    norm = np.sqrt((refs * refs).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(norm > 0, np.sqrt(sq) / norm, np.sqrt(sq))
    return TileErrors(rmse=np.sqrt(sq / counts), max_abs=np.abs(err).max(axis=-1), rel=rel)
