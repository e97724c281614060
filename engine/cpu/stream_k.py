"""NumPy emulation of the stream-K forward (engine/stream_k.py): each block's runs of key tiles
with the online softmax, the parts of cut items posted as unnormalised (O, m, l), and their
merge by the maxima in block order, as the part drawing an item's last ticket does it on the
GPU (whichever part that is). float32 throughout, as in the kernel.
"""
from __future__ import annotations

import numpy as np

from ..config import AttentionConfig
from ..results import Result
from ..stream_k import blocks, item_tiles, runs


def run_state(cfg: AttentionConfig, Q, K, V, bh: int, i: int, j_lo: int, j_hi: int):
    """(m, l, O) of query tile i of batch·head bh over key tiles [j_lo, j_hi): running max of
    the scaled scores, running sum and unnormalised output, tile by tile."""
    r0, r1 = i * cfg.block_q, min((i + 1) * cfg.block_q, cfg.seq_q)
    Qi = Q[bh, r0:r1] * np.float32(cfg.softmax_scale)
    m = np.full(r1 - r0, -np.inf, np.float32)
    l = np.zeros(r1 - r0, np.float32)
    O = np.zeros((r1 - r0, cfg.head_dim), np.float32)
    for j in range(j_lo, j_hi):
        k0, k1 = j * cfg.block_k, min((j + 1) * cfg.block_k, cfg.seq_k)
        S = Qi @ K[bh, k0:k1].T
        if cfg.causal:
            S[np.arange(k0, k1)[None, :] > np.arange(r0, r1)[:, None]] = -np.inf
        m_new = np.maximum(m, S.max(axis=1))
        with np.errstate(invalid="ignore"):
            rescale = np.where(m_new == m, np.float32(1), np.exp(m - m_new)).astype(np.float32)
        P = np.exp(S - np.where(np.isneginf(m_new), np.float32(0), m_new)[:, None])
        l = rescale * l + P.sum(axis=1)
        O = rescale[:, None] * O + P @ V[bh, k0:k1]
        m = m_new
    return m, l, O


def merge(a, b):
    """Two parts' (m, l, O) as one: each rescaled by exp(its m - the larger m)."""
    (m_a, l_a, O_a), (m_b, l_b, O_b) = a, b
    m = np.maximum(m_a, m_b)
    with np.errstate(invalid="ignore"):
        w_a = np.where(m_a == m, np.float32(1), np.exp(m_a - m)).astype(np.float32)
        w_b = np.where(m_b == m, np.float32(1), np.exp(m_b - m)).astype(np.float32)
    return m, w_a * l_a + w_b * l_b, w_a[:, None] * O_a + w_b[:, None] * O_b


def flash(cfg: AttentionConfig, q, k, v, sms: int) -> Result:
    """The forward pass as the stream-K kernel runs it on `sms` SMs."""
    Q, K, V = (np.ascontiguousarray(x.reshape(-1, *x.shape[2:]), dtype=np.float32)
               for x in (q, k, v))
    bh = Q.shape[0]
    O = np.zeros_like(Q)
    lse = np.zeros(Q.shape[:2], np.float32)
    parts: dict[int, list] = {}
    for block in runs(cfg, bh, blocks(cfg, bh, sms)):
        for r in block:
            parts.setdefault(r.k, []).append(run_state(cfg, Q, K, V, r.bh, r.i, r.j_lo, r.j_hi))
            n = item_tiles(cfg, r.i)
            if r.j_hi < n:
                continue                  # the item's last part (and its merge) comes later
            m, l, acc = _merged(parts.pop(r.k))
            rows = slice(r.i * cfg.block_q, min((r.i + 1) * cfg.block_q, cfg.seq_q))
            O[r.bh, rows] = acc / l[:, None]
            lse[r.bh, rows] = m + np.log(l)
    B, H = cfg.batch, cfg.heads
    return Result(output=O.reshape(B, H, cfg.seq_q, cfg.head_dim).astype(q.dtype),
                  lse=lse.reshape(B, H, cfg.seq_q), backend="numpy", algorithm="flash")


def _merged(states: list):
    """The parts of one item merged in the order they ran."""
    out = states[0]
    for s in states[1:]:
        out = merge(out, s)
    return out
