"""Tensor-core backward kernels through engine.gpu.launchers.backward_mma on a GPU — the
mma.sync build (kernels/ampere/flash_backward_mma.cu) everywhere and, on Hopper, the wgmma build
(kernels/hopper/flash_backward_wgmma.cu) for its shapes: dQ, dK, dV and delta against float64
gradients derived here by hand and against torch.autograd, every output poisoned before
launch, and each test asserting which kernel ran.

O and lse are the float64 forward's (O rounded to the dtype, lse to float32), so these tests
see the backward kernel alone."""
import numpy as np
import pytest

import engine
from engine.model.config import ConfigError
from engine.model import catalog
from engine.gpu.launchers import backward_mma, backward_wgmma, core
from engine.gpu.runtime import device_is_hopper
from engine.inputs import make_dout
from reference import attention64, rel_err, scores64
import seeds

pytestmark = pytest.mark.gpu
RNG = seeds.rng(10_3)
GRAD_TOL = 1e-2        # float16 / bfloat16 gradients against float64 (the backward's target)
BUILDS = {"mma.sync": catalog.BACKWARD_MMA, "wgmma": catalog.BACKWARD_WGMMA}


@pytest.fixture(params=list(BUILDS))
def build(request, monkeypatch):
    """Each backward build in turn, chosen as benchmarks choose it (backward_mma.HOPPER_WGMMA
    0 or 1); the wgmma one only on Hopper. A test skips the build where it does not take its
    config (uses(build, cfg)) and asserts the kernel that ran (ran(build, info))."""
    want = BUILDS[request.param]
    if want.hopper_only and not device_is_hopper():
        pytest.skip(f"the {want.name} backward needs a GPU of compute capability 9.x")
    monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", int(want is catalog.BACKWARD_WGMMA))
    return want


def uses(build, cfg):
    """Skip unless `build` takes cfg (the mma.sync build takes every catalogued shape)."""
    if not build.takes(cfg):
        pytest.skip(f"the {build.name} backward does not take {cfg.head_dim}, {cfg.block_q}×"
                    f"{cfg.block_k}, {cfg.dtype}")
    assert backward_mma.chosen(cfg) is build


def ran(build, info):
    """The compile facts `info` name the build's source: that build ran."""
    assert info["kernel_source"] == f"kernels/{build.source}", info
    return info


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


def threads_of(build, cfg):
    """Threads per block: block_k / 16 warps (mma.sync); one producer and block_k / 64
    consumer warpgroups (wgmma)."""
    return backward_wgmma.threads(cfg) if build is catalog.BACKWARD_WGMMA else \
        cfg.block_k // 16 * 32


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
    (64, 128, 128, 200, 328, False),
    (64, 128, 128, 200, 328, True),
    (64, 128, 128, 1, 1, False),
    (128, 64, 128, 190, 190, True),
    (128, 64, 128, 129, 65, False),
    (128, 64, 128, 1000, 1100, True),
    (128, 64, 128, 500, 700, False),
]


@pytest.mark.parametrize("dtype", catalog.BACKWARD_MMA.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal", CASES)
def test_gradients_match_float64(build, d, bq, bk, nq, nk, causal, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 dtype=dtype)
    uses(build, cfg)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, O, info = run_backward(cfg, q, k, v, dout)
    assert ran(build, info)["threads_per_block"] == threads_of(build, cfg)
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
def test_builds_keep_everything_in_registers(build, d, bq, bk, dtype):
    # as compiled here (NVRTC), not only by nvcc (tests/test_kernel_sources.py)
    cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
    uses(build, cfg)
    facts = ran(build, backward_mma.kernel_facts(cfg))
    assert facts["local_bytes_per_thread"] == 0, facts
    assert facts["threads_per_block"] == threads_of(build, cfg), facts


def test_flat_layout_gives_the_same_gradients(build):
    cfg = config(head_dim=128, block_q=64, block_k=128, seq_q=150, seq_k=220, causal=True,
                 dtype="bfloat16")
    uses(build, cfg)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    four, _, info = run_backward(cfg, q, k, v, dout)
    flat, _, _ = run_backward(cfg, q, k, v, dout, flat=True)
    ran(build, info)
    for name in four:
        # dQ sums key tiles in whatever order the blocks run: equal up to float32 rounding
        tol = 1e-2 if name == "dQ" else 0.0
        assert np.allclose(flat[name].astype(np.float32), four[name].astype(np.float32),
                           rtol=tol, atol=tol), name


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d,bq,bk", [(64, 64, 64), (64, 128, 128), (128, 64, 128)])
def test_gradients_match_torch_autograd(build, d, bq, bk, causal):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    from torch.nn.attention import SDPBackend, sdpa_kernel
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=333, seq_k=290, causal=causal,
                 scale=0.2)
    uses(build, cfg)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, _, info = run_backward(cfg, q, k, v, dout)
    ran(build, info)
    tq, tk, tv = (torch.tensor(x.astype(np.float32), device="cuda", requires_grad=True)
                  for x in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=causal, scale=cfg.softmax_scale)
    out.backward(torch.tensor(dout.astype(np.float32), device="cuda"))
    for name, t in (("dQ", tq), ("dK", tk), ("dV", tv)):
        err = rel_err(got[name], t.grad.double().cpu().numpy())
        assert err <= GRAD_TOL, (name, err, cfg)


@pytest.mark.parametrize("d,bq,bk", [(64, 64, 64), (64, 128, 128), (128, 64, 128)])
def test_no_nan_at_logit_scale_1e4(build, d, bq, bk):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=300, seq_k=260, causal=True,
                 logit_scale=1e4)
    uses(build, cfg)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, _, info = run_backward(cfg, q, k, v, dout)
    ran(build, info)
    for name in ("dQ", "dK", "dV", "delta"):
        assert np.isfinite(got[name].astype(np.float32)).all(), (name, cfg)
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, True)
    assert rel_err(got["dV"], want["dV"]) <= GRAD_TOL, cfg


@pytest.mark.parametrize("d,bq,bk", catalog.BACKWARD_WGMMA.shapes)
def test_launches_of_a_few_batch_heads_each_index_the_right_ones(build, monkeypatch, d, bq, bk):
    """B·H = 9 distinct batch·heads cut into launches of 4, 4 and 1 (core.MAX_GRID_Y lowered):
    each batch·head's gradients match its own float64 ones, and dK, dV equal a single launch's
    bit for bit (one block writes each), dQ up to the order of the float32 additions."""
    cfg = config(batch=3, heads=3, head_dim=d, block_q=bq, block_k=bk, seq_q=200, seq_k=328,
                 causal=True, dtype="bfloat16")
    uses(build, cfg)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    whole, _, _ = run_backward(cfg, q, k, v, dout)
    monkeypatch.setattr(core, "MAX_GRID_Y", 4)
    cut, _, info = run_backward(cfg, q, k, v, dout)
    ran(build, info)
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, True)
    for name in ("dQ", "dK", "dV"):
        for b in range(cfg.batch):
            for h in range(cfg.heads):
                err = rel_err(cut[name][b, h], want[name][b, h])
                assert err <= GRAD_TOL, (name, b, h, err, cfg)
    for name in ("dK", "dV", "delta"):
        assert np.array_equal(cut[name], whole[name]), (name, cfg)
    assert rel_err(cut["dQ"], whole["dQ"]) <= 1e-2, cfg


@pytest.mark.parametrize("d,bq,bk", catalog.BACKWARD_WGMMA.shapes)
def test_wgmma_causal_order_in_groups_of_two_batch_heads(monkeypatch, d, bq, bk):
    """The wgmma backward's launch order (grid_key_tile: key tiles heaviest first within
    groups of batch·heads) with groups of 2 over B·H = 9, so the last group is partial: every
    batch·head's gradients match float64, and dK, dV equal those of the default groups bit
    for bit."""
    if not device_is_hopper():
        pytest.skip("the wgmma backward needs a GPU of compute capability 9.x")
    monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", 1)
    cfg = config(batch=3, heads=3, head_dim=d, block_q=bq, block_k=bk, seq_q=300, seq_k=420,
                 causal=True)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    whole, _, _ = run_backward(cfg, q, k, v, dout)
    monkeypatch.setattr(core, "group_for", lambda slots, sms: 2)
    grouped, _, info = run_backward(cfg, q, k, v, dout)
    assert ran(catalog.BACKWARD_WGMMA, info)["grid"] == f"2 × {cfg.Tc} × 5", info
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, True)
    for name in ("dQ", "dK", "dV"):
        for b in range(cfg.batch):
            for h in range(cfg.heads):
                err = rel_err(grouped[name][b, h], want[name][b, h])
                assert err <= GRAD_TOL, (name, b, h, err)
    for name in ("dK", "dV"):
        assert np.array_equal(grouped[name], whole[name]), name


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("dq_writer", [0, 1])
@pytest.mark.parametrize("d,bq,bk", catalog.BACKWARD_WGMMA.shapes)
def test_both_dq_writers_of_the_wgmma_backward(monkeypatch, d, bq, bk, dq_writer, dtype):
    """backward_wgmma.DQ_WRITER 0 (red.add from the consumers) and 1 (staged dQ_i, bulk
    reductions): the build takes -DDQ_WRITER, and dQ, dK, dV are within GRAD_TOL of float64,
    ragged and causal (tiles with and without the mask's tests)."""
    if not device_is_hopper():
        pytest.skip("the wgmma backward needs a GPU of compute capability 9.x")
    monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", 1)
    monkeypatch.setattr(backward_wgmma, "DQ_WRITER", {d: dq_writer})
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=333, seq_k=290, causal=True,
                 dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got, _, info = run_backward(cfg, q, k, v, dout)
    assert f"-DDQ_WRITER={dq_writer}" in ran(catalog.BACKWARD_WGMMA, info)["compile_options"]
    want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, True)
    for grad in ("dQ", "dK", "dV"):
        err = rel_err(got[grad], want[grad])
        assert err <= GRAD_TOL, (grad, err, cfg)


def test_wgmma_agrees_with_mma_sync_at_n_1024(monkeypatch):
    """The two builds on the same problem, N = 1024, B·H = 4: within 2e-2 of each other."""
    if not device_is_hopper():
        pytest.skip("the wgmma backward needs a GPU of compute capability 9.x")
    cfg = config(head_dim=64, block_q=128, block_k=128, seq_q=1024, seq_k=1024, causal=False)
    q, k, v = engine.make_inputs(cfg)
    dout = make_dout(cfg)
    got = {}
    for flag, want in ((1, catalog.BACKWARD_WGMMA), (0, catalog.BACKWARD_MMA)):
        monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", flag)
        got[want.name], _, info = run_backward(cfg, q, k, v, dout)
        ran(want, info)
    for name in ("dQ", "dK", "dV", "delta"):
        err = rel_err(got["backward wgmma"][name], got["backward mma.sync"][name])
        assert err <= 2e-2, (name, err, cfg)


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
