"""NumPy backend: naive attention and an emulation of the tiled FlashAttention forward loop.

The emulation follows the kernel's loop order, FlashAttention-2's by default (outer: query
tiles, here vectorised; inner: key tiles j = 0..Tc-1), or FlashAttention-1's (outer: key tiles;
inner: query tiles, whose O_i, m_i, l_i go back to HBM after every step), and writes the trace
exactly as docs/DESIGN.md defines it, the same in both orders. All arithmetic is float32, as in
the kernels' accumulators; the output is cast to the input dtype.
"""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig, ConfigError
from ..model.tiles import first_query_tile, hidden, key_rows, processed_tiles, query_rows
from ..results import Result, Trace


def _flat(x: np.ndarray) -> np.ndarray:
    """(B, H, N, d) -> (B·H, N, d) float32."""
    return np.ascontiguousarray(x.reshape(-1, *x.shape[2:]), dtype=np.float32)


def naive(cfg: AttentionConfig, q, k, v) -> Result:
    """Materialise S = scale·QKᵀ and P = softmax(S), then O = PV."""
    Q, K, V = _flat(q), _flat(k), _flat(v)
    S = np.matmul(Q, K.transpose(0, 2, 1)) * np.float32(cfg.softmax_scale)
    if cfg.causal:
        S[:, hidden(cfg, 0, cfg.seq_q, 0, cfg.seq_k)] = -np.inf
    m = S.max(axis=-1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(axis=-1, keepdims=True)
    O = np.matmul(P, V) / l
    lse = (m + np.log(l))[..., 0]
    B, H = cfg.batch, cfg.heads
    return Result(output=O.reshape(B, H, cfg.seq_q, cfg.head_dim).astype(q.dtype),
                  lse=lse.reshape(B, H, cfg.seq_q).astype(np.float32),
                  backend="numpy", algorithm="naive")


ORDERS = ("fa2", "fa1")


def flash(cfg: AttentionConfig, q, k, v, trace: bool = False, order: str = "fa2") -> Result:
    """Tiled forward pass with online softmax. order="fa2": query tiles outer (vectorised
    here), key tiles inner; order="fa1": key tiles outer, query tiles inner (_flash1)."""
    if order not in ORDERS:
        raise ConfigError(f"order must be 'fa2' (query tiles outer) or 'fa1' (key tiles "
                          f"outer); got {order!r}.")
    if order == "fa1":
        return _flash1(cfg, q, k, v, trace)
    Q, K, V = _flat(q), _flat(k), _flat(v)
    BH, Nq, d = Q.shape
    Br, Tc = cfg.block_q, cfg.Tc
    Q = Q * np.float32(cfg.softmax_scale)          # fold the scale into Q once

    m_i = np.full((BH, Nq), -np.inf, dtype=np.float32)   # running max
    l_i = np.zeros((BH, Nq), dtype=np.float32)           # running sum
    O_i = np.zeros((BH, Nq, d), dtype=np.float32)        # unnormalised output
    if trace:
        shape = (BH, Nq, Tc)
        t_m, t_l = np.empty(shape, np.float32), np.empty(shape, np.float32)
        t_r, t_t = np.empty(shape, np.float32), np.empty(shape, np.float32)

    first = first_query_tile(cfg)
    for j in range(Tc):
        k0, k1 = key_rows(cfg, j)
        # Causal: query tiles before the first that sees key tile j skip it entirely; they
        # keep their state (rescale 1, tile max -inf), which is what the untouched rows get.
        r0 = min(int(first[j]) * Br, Nq)
        Kj, Vj = K[:, k0:k1], V[:, k0:k1]
        S_ij = np.matmul(Q[:, r0:], Kj.transpose(0, 2, 1))           # (BH, Nq-r0, bc)
        if cfg.causal:
            S_ij[:, hidden(cfg, r0, Nq, k0, k1)] = -np.inf
        tile_max = np.full((BH, Nq), -np.inf, dtype=np.float32)
        tile_max[:, r0:] = S_ij.max(axis=-1)
        m_new = np.maximum(m_i, tile_max)
        # exp(m_old - m_new); exactly 1 where the max did not move (also all -inf rows).
        same = m_new == m_i
        with np.errstate(invalid="ignore"):
            rescale = np.where(same, np.float32(1), np.exp(m_i - m_new)).astype(np.float32)
        m_safe = np.where(np.isneginf(m_new), np.float32(0), m_new)[:, r0:, None]
        P_ij = np.exp(S_ij - m_safe)                                   # hidden -> 0
        l_i = rescale * l_i
        l_i[:, r0:] += P_ij.sum(axis=-1)
        O_i *= rescale[..., None]
        O_i[:, r0:] += np.matmul(P_ij, Vj)
        m_i = m_new
        if trace:
            t_m[..., j], t_l[..., j], t_r[..., j], t_t[..., j] = m_i, l_i, rescale, tile_max

    return _finish(cfg, q, O_i, m_i, l_i, (t_m, t_l, t_r, t_t) if trace else None)


def _finish(cfg: AttentionConfig, q, O_i, m_i, l_i, traced) -> Result:
    """Normalise O by l, lse = m + log l, and shape the trace arrays (B·H, Nq, Tc) as
    (B, H, Nq, Tc)."""
    BH, Nq, d = O_i.shape
    O = O_i / l_i[..., None]
    lse = m_i + np.log(l_i)
    B, H = cfg.batch, cfg.heads
    tr = None
    if traced is not None:
        shp = (B, H, Nq, cfg.Tc)
        t_m, t_l, t_r, t_t = (a.reshape(shp) for a in traced)
        tr = Trace(running_max=t_m, running_sum=t_l, rescale=t_r, tile_max=t_t,
                   processed=processed_tiles(cfg))
    return Result(output=O.reshape(B, H, Nq, d).astype(q.dtype),
                  lse=lse.reshape(B, H, Nq).astype(np.float32),
                  backend="numpy", algorithm="flash", trace=tr)


def _flash1(cfg: AttentionConfig, q, k, v, trace: bool) -> Result:
    """FlashAttention-1's order: for each key tile j (K_j, V_j loaded once), for each query
    tile i that sees it, read Q_i, O_i, m_i, l_i from "HBM" (the arrays below), update them
    with S_ij and write them back. Each (row, key tile) update is the FA2 loop's, so the
    output and the trace are the same."""
    Q, K, V = _flat(q), _flat(k), _flat(v)
    BH, Nq, d = Q.shape
    Q = Q * np.float32(cfg.softmax_scale)
    proc = processed_tiles(cfg)
    m = np.full((BH, Nq), -np.inf, dtype=np.float32)     # m, l, O: in HBM between steps
    l = np.zeros((BH, Nq), dtype=np.float32)
    O = np.zeros((BH, Nq, d), dtype=np.float32)
    traced = None
    if trace:
        shape = (BH, Nq, cfg.Tc)
        traced = tuple(np.empty(shape, np.float32) for _ in range(4))
    for j in range(cfg.Tc):
        k0, k1 = key_rows(cfg, j)
        Kj, Vj = K[:, k0:k1], V[:, k0:k1]                 # loaded once per outer step
        for i in range(cfg.Tr):
            r0, r1 = query_rows(cfg, i)
            if not proc[i, j]:
                # Skipped by the causal mask: the state stays (rescale 1, tile max -inf).
                if trace:
                    t_m, t_l, t_r, t_t = traced
                    t_m[:, r0:r1, j], t_l[:, r0:r1, j] = m[:, r0:r1], l[:, r0:r1]
                    t_r[:, r0:r1, j], t_t[:, r0:r1, j] = 1, -np.inf
                continue
            # Read Q_i, O_i, m_i, l_i; compute S_ij on chip.
            S_ij = np.matmul(Q[:, r0:r1], Kj.transpose(0, 2, 1))
            if cfg.causal:
                S_ij[:, hidden(cfg, r0, r1, k0, k1)] = -np.inf
            m_i = m[:, r0:r1]
            tile_max = S_ij.max(axis=-1)
            m_new = np.maximum(m_i, tile_max)
            with np.errstate(invalid="ignore"):
                rescale = np.where(m_new == m_i, np.float32(1),
                                   np.exp(m_i - m_new)).astype(np.float32)
            m_safe = np.where(np.isneginf(m_new), np.float32(0), m_new)[..., None]
            P_ij = np.exp(S_ij - m_safe)
            # Write O_i, m_i, l_i back.
            l[:, r0:r1] = rescale * l[:, r0:r1] + P_ij.sum(axis=-1)
            O[:, r0:r1] = O[:, r0:r1] * rescale[..., None] + np.matmul(P_ij, Vj)
            m[:, r0:r1] = m_new
            if trace:
                t_m, t_l, t_r, t_t = traced
                t_m[:, r0:r1, j], t_l[:, r0:r1, j] = m_new, l[:, r0:r1]
                t_r[:, r0:r1, j], t_t[:, r0:r1, j] = rescale, tile_max
    return _finish(cfg, q, O, m, l, traced)
