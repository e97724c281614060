"""Tensor-core backward kernel (kernels/flash_backward_mma.cu through
engine.gpu.launchers.backward_mma) on a GPU: dQ, dK, dV and delta against float64 gradients
derived here by hand and against torch.autograd, every output poisoned before launch.

O and lse are the float64 forward's (O rounded to the dtype, lse to float32), so these tests
see the backward kernel alone."""
import numpy as np
import pytest

import engine
from engine.config import ConfigError
from engine.gpu import catalog
from engine.gpu.launchers import backward_mma
from engine.inputs import make_dout
from reference import attention64, rel_err, scores64
import seeds

pytestmark = pytest.mark.gpu
RNG = seeds.rng(10_3)
GRAD_TOL = 1e-2        # float16 / bfloat16 gradients against float64 (issue 10)


def config(**changes):
    base = dict(batch=2, heads=2, seq_q=128, seq_k=128, head_dim=64, block_q=64, block_k=64,
                dtype="float16", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


def gradients64(q, k, v, dout, scale, causal):
    """dQ, dK, dV (B, H, N, d) and D (B, H, Nq) in float64, from the closed forms:
    P = softmax(S), dV = Pᵀ dO, dP = dO Vᵀ, D = rowsum(dO ∘ O), dS = P ∘ (dP − D),
    dQ = scale · dS K, dK = scale · dSᵀ Q."""
    B, H = q.shape[:2]
    S = scores64(q, k, scale, causal)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    Q, K, V, dO = (x.reshape(B * H, *x.shape[2:]).astype(np.float64) for x in (q, k, v, dout))
    O = P @ V
    D = (dO * O).sum(-1)
    dS = P * (dO @ V.transpose(0, 2, 1) - D[..., None])
    grads = {"dQ": scale * dS @ K, "dK": scale * dS.transpose(0, 2, 1) @ Q,
             "dV": P.transpose(0, 2, 1) @ dO}
    return ({name: g.reshape(B, H, *g.shape[1:]) for name, g in grads.items()},
            D.reshape(B, H, -1))


def run_backward(cfg, q, k, v, dout, flat=False):
    """The launcher's outputs as NumPy (B, H, N, ·) arrays; O and lse from float64."""
    import cupy
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
    O = O64.astype(cfg.dtype)
    arrays = [q, k, v, O, lse64.astype(np.float32), dout]
    if flat:
        arrays = [x.reshape(cfg.bh, *x.shape[2:]) for x in arrays]
    out = backward_mma.launch_backward(cfg, *(cupy.asarray(np.ascontiguousarray(x))
                                             for x in arrays), poison=True)
    lead = (cfg.batch, cfg.heads)
    got = {name: out[name].get().reshape(*lead, *out[name].shape[(1 if flat else 2):])
           for name in ("dQ", "dK", "dV", "delta")}
    return got, O, out["info"]


# (head_dim, block_q, block_k, seq_q, seq_k, causal): exact and ragged tiles, seq_q < seq_k
# and seq_q > seq_k under causal, one row and many tiles, every catalogued shape.
CASES = [
    (64, 64, 64, 256, 256, False),
    (64, 64, 64, 300, 257, True),
    (64, 64, 128, 200, 450, True),
    (64, 64, 128, 70, 513, False),
    (64, 128, 128, 333, 100, True),
    (64, 128, 128, 1, 1, False),
    (128, 64, 128, 190, 190, True),
    (128, 64, 128, 129, 65, False),
    (128, 64, 128, 1000, 1100, True),
    (128, 64, 128, 500, 700, False),
]


@pytest.mark.parametrize("dtype", catalog.BACKWARD_MMA.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal", CASES)
def test_gradients_match_float64(d, bq, bk, nq, nk, causal, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, O, info = run_backward(cfg, q, k, v, dout)
    assert info["threads_per_block"] == bk // 16 * 32
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, causal)
    for name in ("dQ", "dK", "dV"):
        assert got[name].dtype == np.dtype(dtype), name
        assert not np.isnan(got[name]).any(), (name, "unwritten or NaN", cfg)
        err = rel_err(got[name], want[name])
        assert err <= GRAD_TOL, (name, err, cfg)
    # delta from the O the kernel was given: only float32 summation order differs
    D = (dout.astype(np.float64) * O.astype(np.float64)).sum(-1)
    assert got["delta"].dtype == np.float32 and not np.isnan(got["delta"]).any()
    assert rel_err(got["delta"], D) <= 1e-5, cfg


@pytest.mark.parametrize("dtype", catalog.BACKWARD_MMA.dtypes)
@pytest.mark.parametrize("d,bq,bk", catalog.BACKWARD_MMA.shapes)
def test_builds_keep_everything_in_registers(d, bq, bk, dtype):
    # as compiled here (NVRTC), not only by nvcc (tests/test_kernel_sources.py)
    facts = backward_mma.kernel_facts(config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype))
    assert facts["local_bytes_per_thread"] == 0, facts


def test_flat_layout_gives_the_same_gradients():
    cfg = config(head_dim=128, block_q=64, block_k=128, seq_q=150, seq_k=220, causal=True,
                 dtype="bfloat16")
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    four, _, _ = run_backward(cfg, q, k, v, dout)
    flat, _, _ = run_backward(cfg, q, k, v, dout, flat=True)
    for name in four:
        # dQ sums key tiles in whatever order the blocks run: equal up to float32 rounding
        tol = 1e-2 if name == "dQ" else 0.0
        assert np.allclose(flat[name].astype(np.float32), four[name].astype(np.float32),
                           rtol=tol, atol=tol), name


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d,bk", [(64, 64), (128, 128)])
def test_gradients_match_torch_autograd(d, bk, causal):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    cfg = config(head_dim=d, block_q=64, block_k=bk, seq_q=333, seq_k=290, causal=causal,
                 scale=0.2)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, _, _ = run_backward(cfg, q, k, v, dout)
    tq, tk, tv = (torch.tensor(x.astype(np.float32), device="cuda", requires_grad=True)
                  for x in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=causal, scale=cfg.softmax_scale)
    out.backward(torch.tensor(dout.astype(np.float32), device="cuda"))
    for name, t in (("dQ", tq), ("dK", tk), ("dV", tv)):
        err = rel_err(got[name], t.grad.double().cpu().numpy())
        assert err <= GRAD_TOL, (name, err, cfg)


def test_no_nan_at_logit_scale_1e4():
    cfg = config(head_dim=64, block_q=64, block_k=64, seq_q=300, seq_k=260, causal=True,
                 logit_scale=1e4)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, _, _ = run_backward(cfg, q, k, v, dout)
    for name in ("dQ", "dK", "dV", "delta"):
        assert np.isfinite(got[name].astype(np.float32)).all(), (name, cfg)
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, True)
    assert rel_err(got["dV"], want["dV"]) <= GRAD_TOL, cfg


def test_wrong_operands_are_refused():
    import cupy
    cfg = config()
    q, k, v = (cupy.asarray(x) for x in engine.make_inputs(cfg))
    lse = cupy.zeros((cfg.batch, cfg.heads, cfg.seq_q), dtype=cupy.float32)
    with pytest.raises(ConfigError, match="dO must be a C-contiguous CuPy array of shape"):
        backward_mma.launch_backward(cfg, q, k, v, q, lse, q[:, :, :-1])
    with pytest.raises(ConfigError, match="lse must be .* dtype float32"):
        backward_mma.launch_backward(cfg, q, k, v, q, lse.astype(cupy.float16), q)
    with pytest.raises(ConfigError, match="It supports dtype float16 or bfloat16"):
        backward_mma.launch_backward(cfg.with_(head_dim=32), q, k, v, q, lse, q)
