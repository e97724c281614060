"""Float64 reference for attention and for the online-softmax trace, written independently of
the engine: the trace is derived from the full score matrix in closed form, not by a loop that
carries state."""
from __future__ import annotations

import numpy as np


def scores64(q, k, scale, causal):
    """Scaled scores in float64, (BH, Nq, Nk), hidden keys at -inf."""
    Q = q.reshape(-1, *q.shape[2:]).astype(np.float64)
    K = k.reshape(-1, *k.shape[2:]).astype(np.float64)
    S = scale * Q @ K.transpose(0, 2, 1)
    if causal:
        nq, nk = S.shape[1:]
        S[:, np.arange(nk)[None, :] > np.arange(nq)[:, None]] = -np.inf
    return S


def attention64(q, k, v, scale, causal):
    """Output (B, H, Nq, d) and lse (B, H, Nq) in float64."""
    S = scores64(q, k, scale, causal)
    V = v.reshape(-1, *v.shape[2:]).astype(np.float64)
    m = S.max(-1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(-1, keepdims=True)
    O = (P @ V) / l
    B, H = q.shape[:2]
    return O.reshape(B, H, *O.shape[1:]), (m + np.log(l))[..., 0].reshape(B, H, -1)


def trace64(q, k, scale, causal, block_k):
    """tile_max, running_max, rescale, running_sum, each (B, H, Nq, Tc), float64.

    m_j is the max over all visible keys before the end of tile j; l_j is the sum of
    exp(s - m_j) over those same keys; rescale_j = exp(m_{j-1} - m_j), 1 when equal, 0 at j=0.
    """
    S = scores64(q, k, scale, causal)
    BH, nq, nk = S.shape
    Tc = -(-nk // block_k)
    padded = np.full((BH, nq, Tc * block_k), -np.inf)
    padded[..., :nk] = S
    tile_max = padded.reshape(BH, nq, Tc, block_k).max(-1)
    running_max = np.maximum.accumulate(tile_max, axis=-1)
    prev = np.concatenate([np.full((BH, nq, 1), -np.inf), running_max[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore"):
        rescale = np.where(prev == running_max, 1.0, np.exp(prev - running_max))
    running_sum = np.empty_like(running_max)
    for j in range(Tc):
        upto = min((j + 1) * block_k, nk)
        m = running_max[..., j:j + 1]
        running_sum[..., j] = np.exp(S[..., :upto] - m).sum(-1)
    B, H = q.shape[:2]
    shp = (B, H, nq, Tc)
    return {"tile_max": tile_max.reshape(shp), "running_max": running_max.reshape(shp),
            "rescale": rescale.reshape(shp), "running_sum": running_sum.reshape(shp)}


def rel_err(got, want) -> float:
    """Relative Frobenius error over finite entries; infinities must sit in the same places
    with the same sign (else returns inf)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    fin = np.isfinite(want)
    if not np.array_equal(fin, np.isfinite(got)) or not np.array_equal(got[~fin], want[~fin]):
        return float("inf")
    denom = np.linalg.norm(want[fin])
    diff = np.linalg.norm(got[fin] - want[fin])
    return float(diff / denom) if denom > 0 else float(diff)


def _p_dp64(q, k, v, dout, scale, causal):
    """P = softmax(S) and dP = dO Vᵀ in float64, batch·heads flattened."""
    S = scores64(q, k, scale, causal)
    V, dO = (x.reshape(-1, *x.shape[2:]).astype(np.float64) for x in (v, dout))
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    return P, dO @ V.transpose(0, 2, 1)


def attention_grads64(q, k, v, dout, scale, causal):
    """dq, dk, dv (shapes of q, k, v) of L = sum(O ∘ dout) in float64, from the chain rule
    through O = P V and P = softmax(S), S = scale · Q Kᵀ:
      dV = Pᵀ dO;  dP = dO Vᵀ;  dS_rc = P_rc (dP_rc - sum_c' P_rc' dP_rc')  (softmax Jacobian);
      dQ = scale · dS K;  dK = scale · dSᵀ Q.
    The row term is written as sum(P ∘ dP), not through O, so it shares nothing with the
    engine's D = rowsum(dO ∘ O)."""
    Q, K, dO = (x.reshape(-1, *x.shape[2:]).astype(np.float64) for x in (q, k, dout))
    P, dP = _p_dp64(q, k, v, dout, scale, causal)
    dV = P.transpose(0, 2, 1) @ dO
    dS = P * (dP - (P * dP).sum(-1, keepdims=True))
    dQ = scale * dS @ K
    dK = scale * dS.transpose(0, 2, 1) @ Q
    return dQ.reshape(q.shape), dK.reshape(k.shape), dV.reshape(v.shape)


def ds_cancellation64(q, k, v, dout, scale, causal) -> float:
    """How much the softmax Jacobian's row term cancels: ||P ∘ (|dP| + |D|)|| / ||dS||
    (Frobenius, float64) with D = sum_c P_c dP_c and dS = P ∘ (dP - D). A float computation of
    dS, by any algorithm (FlashAttention's D = rowsum(dO ∘ O) included), carries a relative
    error of up to about this factor times the unit roundoff: near 1 where softmax rows are
    spread out, large where they are peaked over few keys, so that dP - D nearly vanishes;
    infinite where every row sees one key (dS is then 0 exactly, and a float computation
    returns rounding noise in dq and dk)."""
    P, dP = _p_dp64(q, k, v, dout, scale, causal)
    D = (P * dP).sum(-1, keepdims=True)
    ds = np.linalg.norm(P * (dP - D))
    return float(np.linalg.norm(P * (np.abs(dP) + np.abs(D))) / ds) if ds > 0 else float("inf")


def loss64(q, k, v, dout, scale, causal) -> float:
    """sum(O ∘ dout) in float64: the scalar whose gradients attention_grads64 gives."""
    O, _ = attention64(q, k, v, scale, causal)
    return float((O * dout.astype(np.float64)).sum())


def decode64(q, k, v):
    """A decode step in float64, written from the definition: q (B, H, Nq, d) are the last Nq
    positions of a contiguous cache k, v (B, KVH, Nk, d); query head h uses KV head
    h // (H / KVH); token t sees keys c <= Nk - Nq + t. Scores are scale·q·k with scale
    1/sqrt(d). Returns output (B, H, Nq, d), lse (B, H, Nq) and the scores (B, H, Nq, Nk)
    with hidden keys at -inf (for traces)."""
    B, H, nq, d = q.shape
    group = H // k.shape[1]
    K = np.repeat(k.astype(np.float64), group, axis=1)
    V = np.repeat(v.astype(np.float64), group, axis=1)
    nk = K.shape[2]
    S = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), K) / np.sqrt(d)
    S[..., np.arange(nk)[None, :] > (nk - nq + np.arange(nq))[:, None]] = -np.inf
    m = S.max(-1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(-1, keepdims=True)
    return (P @ V) / l, (m + np.log(l))[..., 0], S


def fp8_attention64(q, k, v, scale, causal, block_k):
    """The FP8 forward in float64 and closed form, from the dequantized q, k, v (x8 · scale,
    as the tensor cores see them): P = exp(s - m_j), m_j the running max after the key tile
    of the key, rounded to e4m3 before P·V (as the kernel rounds it), carried to the final
    max by exp(m_j - m_last); l = Σ exp(s - m_last) of the unrounded P. Output (B, H, Nq, d)
    and lse (B, H, Nq), float64."""
    import ml_dtypes
    S = scores64(q, k, scale, causal)
    BH, nq, nk = S.shape
    Tc = -(-nk // block_k)
    padded = np.full((BH, nq, Tc * block_k), -np.inf)
    padded[..., :nk] = S
    running = np.maximum.accumulate(padded.reshape(BH, nq, Tc, block_k).max(-1), axis=-1)
    m_key = np.repeat(running, block_k, axis=-1)[..., :nk]        # m_j of each key's tile
    m_last = running[..., -1:]
    P8 = np.exp(S - m_key).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    weight = P8 * np.exp(m_key - m_last)
    l = np.exp(S - m_last).sum(-1, keepdims=True)
    V = v.reshape(-1, *v.shape[2:]).astype(np.float64)
    O = (weight @ V) / l
    B, H = q.shape[:2]
    return O.reshape(B, H, *O.shape[1:]), (m_last + np.log(l))[..., 0].reshape(B, H, -1)


def per_tensor_e4m3_64(x):
    """x rounded to e4m3 at one scale for the whole tensor (its largest magnitude to 448), as
    cuDNN's FP8 forward quantizes q, k, v and writes O; float64 in true units."""
    import ml_dtypes
    from engine.model.formats import E4M3_MAX
    x = np.asarray(x, dtype=np.float64)
    s = E4M3_MAX / np.abs(x).max()
    return (x * s).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) / s
