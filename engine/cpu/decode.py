"""NumPy emulation of Flash-Decoding: the KV cache cut into splits, each split's online softmax
over its key tiles (as one thread block of the split kernel runs it), then the log-sum-exp
merge of the splits (as the last block of each KV head group runs it). Keys are read through
the block table when the cache is paged; query head h reads KV head h // (heads / kv_heads),
so the heads / kv_heads query heads of a group share every K_j, V_j tile. float32 arithmetic, as in the kernel; the trace
is the one docs/DESIGN.md defines (engine.results.DecodeTrace).
"""
from __future__ import annotations

import numpy as np

from ..model.decode_config import (DecodeConfig, decode_block_k, key_positions, split_bounds,
                                   visible_until)
from ..results import DecodeResult, DecodeTrace


def read_keys(cfg: DecodeConfig, cache: np.ndarray, table: np.ndarray,
              keys: np.ndarray) -> np.ndarray:
    """Rows `keys` (consecutive positions) of every sequence and KV head, (B, kv_heads, T, d)
    float32: a slice of a contiguous cache, or a gather through the block table."""
    if not cfg.paged:
        return cache[:, :, keys[0]:keys[-1] + 1].astype(np.float32)
    page, row = key_positions(cfg, table, keys)
    return cache[page, :, row[None, :], :].transpose(0, 2, 1, 3).astype(np.float32)


def split_partials(cfg: DecodeConfig, Q: np.ndarray, k_cache, v_cache, table, k0: int,
                   k1: int, last: np.ndarray):
    """One split's thread block: keys [k0, k1) in tiles of decode_block_k keys, online softmax
    per query row. Q: (B, kv_heads, rows, d) float32, already scaled; last: (rows,) the last
    key each row sees. Returns m_s, l_s (B, kv_heads, rows) and O_s (..., d), O_s normalised
    by l_s (0 for a row that sees no key of the split, whose m_s is -inf and l_s 0)."""
    B, kv, R, d = Q.shape
    Bc = decode_block_k(cfg.head_dim)
    m_i = np.full((B, kv, R), -np.inf, dtype=np.float32)     # running max
    l_i = np.zeros((B, kv, R), dtype=np.float32)             # running sum
    O_i = np.zeros((B, kv, R, d), dtype=np.float32)          # unnormalised output
    for j0 in range(k0, k1, Bc):
        keys = np.arange(j0, min(j0 + Bc, k1))
        K_j = read_keys(cfg, k_cache, table, keys)
        V_j = read_keys(cfg, v_cache, table, keys)
        S_ij = np.matmul(Q, K_j.transpose(0, 1, 3, 2))           # (B, kv, R, T)
        S_ij[..., keys[None, :] > last[:, None]] = -np.inf       # causal among the new tokens
        m_new = np.maximum(m_i, S_ij.max(axis=-1))
        with np.errstate(invalid="ignore"):                      # -inf - -inf: rows seeing none
            rescale = np.where(m_new == m_i, np.float32(1), np.exp(m_i - m_new))
        m_safe = np.where(np.isneginf(m_new), np.float32(0), m_new)
        P_ij = np.exp(S_ij - m_safe[..., None])                  # hidden keys -> 0
        l_i = (rescale * l_i + P_ij.sum(axis=-1)).astype(np.float32)
        O_i = (O_i * rescale[..., None] + np.matmul(P_ij, V_j)).astype(np.float32)
        m_i = m_new.astype(np.float32)
    seen = l_i > 0
    O_s = np.where(seen[..., None], O_i / np.where(seen, l_i, 1)[..., None], np.float32(0))
    return m_i, l_i, O_s.astype(np.float32)


def merge_splits(m_s: np.ndarray, l_s: np.ndarray, O_s: np.ndarray):
    """The log-sum-exp merge over the last split axis of m_s, l_s (..., S) and O_s (..., S, d):
    m_final = max_s m_s; rescale_s = exp(m_s - m_final) (0 for a split that saw no key);
    l_final = Σ_s rescale_s · l_s; O = Σ_s rescale_s · l_s · O_s / l_final;
    lse = m_final + log l_final. Returns (O, lse, m_final, rescale, l_final), float32."""
    m_final = m_s.max(axis=-1)
    with np.errstate(invalid="ignore"):
        rescale = np.where(np.isneginf(m_s), np.float32(0),
                           np.exp(m_s - m_final[..., None])).astype(np.float32)
    weight = rescale * l_s
    l_final = weight.sum(axis=-1).astype(np.float32)
    O = (np.einsum("...s,...sd->...d", weight, O_s) / l_final[..., None]).astype(np.float32)
    lse = (m_final + np.log(l_final)).astype(np.float32)
    return O, lse, m_final.astype(np.float32), rescale, l_final


def decode(cfg: DecodeConfig, q, k_cache, v_cache, table: np.ndarray, num_splits: int,
           trace: bool = False) -> DecodeResult:
    """The split kernel (one pass per split; here a loop) and its merge, as the GPU runs
    them; q (B, H, seq_q, d), caches in cfg.cache_shape, table from block_table(cfg)."""
    B, kv, R, d, S = cfg.batch, cfg.kv_heads, cfg.rows, cfg.head_dim, num_splits
    # The rows of one KV head: query heads g·group .. g·group + group - 1, each seq_q tokens.
    Q = q.astype(np.float32).reshape(B, kv, R, d) * np.float32(cfg.softmax_scale)
    last = np.tile(visible_until(cfg), cfg.group)                # (R,): row r is token r % seq_q
    bounds = split_bounds(cfg.seq_k, S)
    m_s = np.empty((B, kv, R, S), np.float32)
    l_s = np.empty((B, kv, R, S), np.float32)
    O_s = np.empty((B, kv, R, S, d), np.float32)
    for s in range(S):
        m_s[..., s], l_s[..., s], O_s[..., s, :] = split_partials(
            cfg, Q, k_cache, v_cache, table, int(bounds[s]), int(bounds[s + 1]), last)
    O, lse, m_final, rescale, l_final = merge_splits(m_s, l_s, O_s)

    def heads(x):      # (B, kv, R, ...) -> (B, H, seq_q, ...): h = g·group + i, r = i·seq_q + t
        return x.reshape(B, cfg.heads, cfg.seq_q, *x.shape[3:])

    tr = None
    if trace:
        tr = DecodeTrace(split_max=heads(m_s), split_sum=heads(l_s), split_out=heads(O_s),
                         m_final=heads(m_final), rescale=heads(rescale),
                         l_final=heads(l_final))
    return DecodeResult(output=heads(O).astype(cfg.dtype), lse=heads(lse), num_splits=S,
                        bounds=bounds, block_table=table, backend="numpy", trace=tr,
                        info={"block_k": decode_block_k(d)})
