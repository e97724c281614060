"""NumPy emulation of the stream-K forward (engine/model/stream_k.py): each block's runs of key tiles
with the online softmax, and the parts of a cut item merged by their log-sum-exps once its
last part has run (the merge of the decode emulation, engine/cpu/decode.merge_splits; the
kernels weight the parts' unnormalised sums by the row maximum instead, the same up to
rounding). float32 throughout, as in the kernels.
"""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig
from ..results import Result
from ..model.stream_k import blocks, key_tiles, runs
from ..model.tiles import hidden, key_rows, query_rows
from .decode import merge_splits


def run_state(cfg: AttentionConfig, Q, K, V, bh: int, i: int, j_lo: int, j_hi: int):
    """(m, l, O) of query tile i of batch·head bh over key tiles [j_lo, j_hi): running max of
    the scaled scores, running sum and unnormalised output, tile by tile."""
    r0, r1 = query_rows(cfg, i)
    Qi = Q[bh, r0:r1] * np.float32(cfg.softmax_scale)
    m = np.full(r1 - r0, -np.inf, np.float32)
    l = np.zeros(r1 - r0, np.float32)
    O = np.zeros((r1 - r0, cfg.head_dim), np.float32)
    for j in range(j_lo, j_hi):
        k0, k1 = key_rows(cfg, j)
        S = Qi @ K[bh, k0:k1].T
        if cfg.causal:
            S[hidden(cfg, r0, r1, k0, k1)] = -np.inf
        m_new = np.maximum(m, S.max(axis=1))
        with np.errstate(invalid="ignore"):
            rescale = np.where(m_new == m, np.float32(1), np.exp(m - m_new)).astype(np.float32)
        P = np.exp(S - np.where(np.isneginf(m_new), np.float32(0), m_new)[:, None])
        l = rescale * l + P.sum(axis=1)
        O = rescale[:, None] * O + P @ V[bh, k0:k1]
        m = m_new
    return m, l, O


def flash(cfg: AttentionConfig, q, k, v, slots: int, head: int = 0) -> Result:
    """The forward pass as a stream-K kernel runs it with `slots` blocks at once (the wgmma
    kernel: one per SM, no heads; the mma.sync kernel: as many as fit, heads of
    engine.model.stream_k.MMA_SYNC_HEAD)."""
    Q, K, V = (np.ascontiguousarray(x.reshape(-1, *x.shape[2:]), dtype=np.float32)
               for x in (q, k, v))
    bh = Q.shape[0]
    O = np.zeros_like(Q)
    lse = np.zeros(Q.shape[:2], np.float32)
    tiles = key_tiles(cfg)
    parts: dict[int, list] = {}
    for block in runs(cfg, bh, blocks(cfg, bh, slots, head), head):
        for r in block:
            parts.setdefault(r.k, []).append(run_state(cfg, Q, K, V, r.bh, r.i, r.j_lo, r.j_hi))
            if r.j_hi < tiles[r.i]:
                continue                  # the item's last part (and its merge) comes later
            m_s, l_s, O_s = (np.stack(x, axis=-1) for x in zip(*parts.pop(r.k)))
            seen = l_s > 0                # O_s normalised by l_s, 0 where a part saw no key
            O_s = np.where(seen[:, None], O_s / np.where(seen, l_s, 1)[:, None], 0)
            rows = slice(*query_rows(cfg, r.i))
            O[r.bh, rows], lse[r.bh, rows] = merge_splits(
                m_s, l_s, np.moveaxis(O_s, 1, 2).astype(np.float32))[:2]
    B, H = cfg.batch, cfg.heads
    return Result(output=O.reshape(B, H, cfg.seq_q, cfg.head_dim).astype(q.dtype),
                  lse=lse.reshape(B, H, cfg.seq_q), backend="numpy", algorithm="flash")
