"""NumPy backward pass: naive (materialises P, dP and dS) and an emulation of the tiled
FlashAttention-2 backward loop that writes the backward trace (docs/DESIGN.md, "The backward
pass").

Both start from the forward emulation's O and lse for the same config (forward_state), as the
GPU kernels start from their own forward's. All arithmetic is float32, as in the kernels'
accumulators; dq, dk and dv are cast to the input dtype, delta and lse stay float32.
"""
from __future__ import annotations

import numpy as np

from . import forward
from ..model.config import AttentionConfig
from ..model.tiles import hidden, key_rows, processed_tiles, query_rows
from ..results import BackwardTrace, Gradients


def _flat(x: np.ndarray) -> np.ndarray:
    """(B, H, N, d) -> (B·H, N, d) float32."""
    return np.ascontiguousarray(x.reshape(-1, *x.shape[2:]), dtype=np.float32)


def forward_state(cfg: AttentionConfig, q, k, v, algorithm: str = "flash"):
    """O (B, H, seq_q, d) in the input dtype and lse (B, H, seq_q) float32, from the forward
    emulation of the same algorithm: all the backward keeps of the forward pass."""
    res = forward.naive(cfg, q, k, v) if algorithm == "naive" else forward.flash(cfg, q, k, v)
    return res.output, res.lse


def row_delta(dout, O) -> np.ndarray:
    """D_r = sum_d dO[r] · O[r], (B·H, seq_q) float32 (the GPU's first, small kernel)."""
    return np.einsum("bnd,bnd->bn", _flat(dout), _flat(O))


def _gradients(cfg, q, dQ, dK, dV, D, lse, algorithm, trace=None) -> Gradients:
    B, H, dt = cfg.batch, cfg.heads, q.dtype
    return Gradients(dq=dQ.reshape(B, H, cfg.seq_q, -1).astype(dt),
                     dk=dK.reshape(B, H, cfg.seq_k, -1).astype(dt),
                     dv=dV.reshape(B, H, cfg.seq_k, -1).astype(dt),
                     delta=D.reshape(B, H, cfg.seq_q).astype(np.float32),
                     lse=np.asarray(lse, dtype=np.float32).reshape(B, H, cfg.seq_q),
                     backend="numpy", algorithm=algorithm, trace=trace)


def naive(cfg: AttentionConfig, q, k, v, dout, O, lse) -> Gradients:
    """Materialise P = softmax(S), dP = dO Vᵀ and dS = P ∘ (dP - D), each (B·H, seq_q, seq_k)
    float32, then dV = Pᵀ dO, dQ = scale · dS K, dK = scale · dSᵀ Q."""
    Q, K, V, dO = _flat(q), _flat(k), _flat(v), _flat(dout)
    scale = np.float32(cfg.softmax_scale)
    # P: the scores, softmaxed in place (the forward's S and P, rebuilt)
    P = np.matmul(Q, K.transpose(0, 2, 1)) * scale
    if cfg.causal:
        P[:, hidden(cfg, 0, cfg.seq_q, 0, cfg.seq_k)] = -np.inf
    P -= P.max(axis=-1, keepdims=True)
    np.exp(P, out=P)
    P /= P.sum(axis=-1, keepdims=True)
    dV = np.matmul(P.transpose(0, 2, 1), dO)
    dP = np.matmul(dO, V.transpose(0, 2, 1))
    D = row_delta(dout, O)
    dS = np.subtract(dP, D[..., None])
    dS *= P
    dQ = np.matmul(dS, K) * scale
    dK = np.matmul(dS.transpose(0, 2, 1), Q) * scale
    return _gradients(cfg, q, dQ, dK, dV, D, lse, "naive")


def flash(cfg: AttentionConfig, q, k, v, dout, O, lse, trace: bool = False) -> Gradients:
    """FA2 backward order: key tile j outer (dK_j, dV_j accumulate "on chip"), query tile i
    inner; P_ij is rebuilt from lse alone, dQ accumulates in float32 across key tiles."""
    Q, K, V, dO = _flat(q), _flat(k), _flat(v), _flat(dout)
    BH, Nq, d = Q.shape
    Nk = K.shape[1]
    Tr, Tc = cfg.Tr, cfg.Tc
    scale = np.float32(cfg.softmax_scale)
    L = np.asarray(lse, dtype=np.float32).reshape(BH, Nq)
    Q_scaled = Q * scale                 # the scale folded into Q once, as the forward does
    processed = processed_tiles(cfg)

    # D = rowsum(dO ∘ O): the first pass, before any tile
    D = row_delta(dout, O)
    dQ = np.zeros((BH, Nq, d), dtype=np.float32)           # the float32 accumulator in HBM
    dK = np.empty((BH, Nk, d), dtype=np.float32)
    dV = np.empty((BH, Nk, d), dtype=np.float32)
    if trace:
        p_rowsum = np.zeros((BH, Nq, Tc), dtype=np.float32)
        dq_norm = np.empty((BH, Nq, Tc), dtype=np.float32)
        dk_norm = np.empty((BH, Nk, Tr), dtype=np.float32)
        dv_norm = np.empty((BH, Nk, Tr), dtype=np.float32)

    for j in range(Tc):
        # one thread block: load K_j, V_j; zero dK_j, dV_j in SRAM
        k0, k1 = key_rows(cfg, j)
        K_j, V_j = K[:, k0:k1], V[:, k0:k1]
        dK_j = np.zeros((BH, k1 - k0, d), dtype=np.float32)
        dV_j = np.zeros((BH, k1 - k0, d), dtype=np.float32)
        for i in range(Tr):
            if processed[i, j]:
                # load Q_i, dO_i, lse_i, D_i; rebuild P_ij = exp(S_ij - lse_i)
                r0, r1 = query_rows(cfg, i)
                Q_i, dO_i = Q[:, r0:r1], dO[:, r0:r1]
                S_ij = np.matmul(Q_scaled[:, r0:r1], K_j.transpose(0, 2, 1))
                if cfg.causal:
                    S_ij[:, hidden(cfg, r0, r1, k0, k1)] = -np.inf
                P_ij = np.exp(S_ij - L[:, r0:r1, None])                  # hidden -> 0
                # dV_j += P_ijᵀ dO_i; dP_ij = dO_i V_jᵀ; dS_ij = P_ij ∘ (dP_ij - D_i)
                dV_j += np.matmul(P_ij.transpose(0, 2, 1), dO_i)
                dP_ij = np.matmul(dO_i, V_j.transpose(0, 2, 1))
                dS_ij = P_ij * (dP_ij - D[:, r0:r1, None])
                # dQ_i += scale · dS_ij K_j (to HBM); dK_j += scale · dS_ijᵀ Q_i (on chip)
                dQ[:, r0:r1] += np.matmul(dS_ij, K_j) * scale
                dK_j += np.matmul(dS_ij.transpose(0, 2, 1), Q_i) * scale
                if trace:
                    p_rowsum[:, r0:r1, j] = P_ij.sum(axis=-1)
            if trace:                                      # a skipped tile carries the value
                dk_norm[:, k0:k1, i] = np.linalg.norm(dK_j, axis=-1)
                dv_norm[:, k0:k1, i] = np.linalg.norm(dV_j, axis=-1)
        # the block ends: write dK_j, dV_j once
        dK[:, k0:k1], dV[:, k0:k1] = dK_j, dV_j
        if trace:
            dq_norm[..., j] = np.linalg.norm(dQ, axis=-1)

    tr = None
    if trace:
        B, H = cfg.batch, cfg.heads
        tr = BackwardTrace(processed=processed,
                           p_rowsum=p_rowsum.reshape(B, H, Nq, Tc),
                           dq_norm=dq_norm.reshape(B, H, Nq, Tc),
                           dk_norm=dk_norm.reshape(B, H, Nk, Tr),
                           dv_norm=dv_norm.reshape(B, H, Nk, Tr))
    return _gradients(cfg, q, dQ, dK, dV, D, L, "flash", tr)


def run(cfg: AttentionConfig, q, k, v, dout, algorithm: str = "flash",
        trace: bool = False) -> Gradients:
    """The forward emulation of the same algorithm (for O and lse), then its backward."""
    O, lse = forward_state(cfg, q, k, v, algorithm)
    if algorithm == "naive":
        return naive(cfg, q, k, v, dout, O, lse)
    return flash(cfg, q, k, v, dout, O, lse, trace=trace)
