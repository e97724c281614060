"""The GPU backward pass (engine.gpu.backend.run_backward): naive (cuBLAS + the fused softmax
backward), the teaching flash kernel and, where its launcher exists, the tensor-core one —
against float64 analytic gradients and torch.autograd, with every output written (poisoned
first), the trace against the NumPy emulation, the block schedule, huge logits and the timing
of the backward alone."""
import numpy as np
import pytest

import engine
from engine.model.config import ConfigError
from engine.gpu import backend
from engine.model import catalog
from engine.gpu import naive as gpu_naive
from engine.gpu.launchers import backward_teaching
from engine.results import BACKWARD_TRACE_FIELDS
from kernel_checks import check_schedule, to_gpu
from reference import attention64, attention_grads64, rel_err, scores64
import seeds

RNG = seeds.rng(8101)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]

# Relative (Frobenius) error of dq, dk, dv against float64, by dtype.
GRAD_TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
TRACE_RTOL = 1e-4


def config(**kw):
    base = dict(batch=2, heads=2, seq_q=200, seq_k=150, head_dim=64, block_q=64, block_k=32,
                dtype="float16", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **kw})


def inputs(cfg):
    return (*engine.make_inputs(cfg), engine.make_dout(cfg))


def tensorcore_backward():
    """The tensor-core backward launcher, or a skip while engine.gpu.launchers.backward_mma is
    not part of this build."""
    try:
        return backend.backward_launcher("tensorcore")
    except ConfigError as exc:
        pytest.skip(str(exc))


# (algorithm, kernel, config changes): dtypes, causal and not, sizes off the tile grid,
# seq_k above and below seq_q.
CASES = [
    ("naive", None, dict(causal=True)),
    ("naive", None, dict(dtype="bfloat16", seq_q=130, seq_k=257, head_dim=32)),
    ("naive", None, dict(dtype="float32", seq_q=77, seq_k=100, head_dim=16, causal=True)),
    ("flash", "teaching", dict(causal=True)),
    ("flash", "teaching", dict(dtype="bfloat16", seq_q=97, seq_k=190, head_dim=128,
                               block_q=32, block_k=64)),
    ("flash", "teaching", dict(dtype="float32", seq_q=77, seq_k=77, head_dim=16, block_q=16,
                               block_k=16, causal=True)),
    ("flash", "teaching", dict(seq_q=65, seq_k=300, head_dim=32, block_q=16, block_k=64,
                               causal=True)),
]
# Every catalogued backward shape, each run after the forward of its own kernel family
# (catalog.forward_for_backward picks the forward's tiles where they differ).
TENSORCORE_CASES = [dict(dtype=dt, head_dim=d, causal=c, seq_q=300, seq_k=200, block_q=bq,
                         block_k=bk)
                    for dt in ("float16", "bfloat16") for d, bq, bk in catalog.BACKWARD_MMA.shapes
                    for c in (False, True)]


def check_against_float64(cfg, g, q, k, v, dout):
    want = attention_grads64(q, k, v, dout, cfg.softmax_scale, cfg.causal)
    for name, got, ref in zip(("dq", "dk", "dv"), (g.dq, g.dk, g.dv), want):
        assert got.dtype == np.dtype(cfg.dtype) and got.shape == ref.shape, (name, cfg)
        err = rel_err(got, ref)
        assert err <= GRAD_TOL[cfg.dtype], f"{name}: relative error {err:.3g}, {cfg}"
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
    assert rel_err(g.lse, lse64) <= 1e-4, cfg
    D64 = (O64 * dout.astype(np.float64)).sum(-1)
    assert g.delta.dtype == np.float32 and rel_err(g.delta, D64) <= GRAD_TOL[cfg.dtype], cfg


@pytest.mark.parametrize("algorithm,kernel,changes", CASES)
def test_gradients_match_float64(algorithm, kernel, changes):
    cfg = config(**changes)
    q, k, v, dout = inputs(cfg)
    g = engine.run_backward(cfg, q, k, v, dout, backend="cupy", algorithm=algorithm,
                            kernel=kernel or "teaching")
    assert (g.backend, g.algorithm, g.kernel) == ("cupy", algorithm, kernel)
    assert g.trace is None and g.schedule is None
    check_against_float64(cfg, g, q, k, v, dout)


@pytest.mark.parametrize("changes", TENSORCORE_CASES)
def test_tensorcore_gradients_match_float64(changes):
    tensorcore_backward()
    cfg = config(**changes)
    q, k, v, dout = inputs(cfg)
    g = backend.run_backward(cfg, q, k, v, dout, "flash", "tensorcore")
    assert g.kernel == "tensorcore"
    check_against_float64(cfg, g, q, k, v, dout)


# The build with one buffer each of Q_i, dO_i, lse_i and D_i (what a 64 KiB or 99 KiB block
# gets where two do not fit), forced here on a GPU that holds two: every catalogued shape.
ONE_BUFFER_CASES = [dict(dtype=dt, head_dim=d, causal=c, seq_q=q, seq_k=k, block_q=bq, block_k=bk)
                    for d, bq, bk in catalog.BACKWARD_MMA.shapes
                    for dt, c, q, k in (("float16", True, 300, 200), ("bfloat16", False, 130, 333))]


@pytest.mark.parametrize("changes", ONE_BUFFER_CASES)
def test_one_query_buffer_gradients_match_float64(monkeypatch, changes):
    from engine.gpu.launchers import backward_mma
    tensorcore_backward()
    monkeypatch.setattr(backward_mma, "QUERY_STAGES", 1)
    monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", 0)
    cfg = config(**changes)
    assert "-DQUERY_STAGES=1" in backward_mma.build(cfg).options
    q, k, v, dout = inputs(cfg)
    g = backend.run_backward(cfg, q, k, v, dout, "flash", "tensorcore")
    check_against_float64(cfg, g, q, k, v, dout)


def test_tensorcore_refuses_the_trace():
    tensorcore_backward()
    cfg = config(**TENSORCORE_CASES[0])
    with pytest.raises(ConfigError, match="trace"):
        backend.run_backward(cfg, *inputs(cfg), "flash", "tensorcore", trace=True)


def test_unknown_backward_kernel_is_refused():
    with pytest.raises(ConfigError, match="teaching"):
        backend.backward_launcher("wgmma")


@pytest.mark.parametrize("algorithm,kernel", [("naive", "teaching"), ("flash", "teaching"),
                                              ("flash", "tensorcore")])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_torch_autograd(algorithm, kernel, causal):
    torch = pytest.importorskip("torch")
    if kernel == "tensorcore":
        tensorcore_backward()
    cfg = config(causal=causal, seq_q=128, seq_k=192, block_q=64, block_k=64)
    q, k, v, dout = inputs(cfg)
    t = [torch.tensor(x.astype(np.float64), requires_grad=True) for x in (q, k, v)]
    S = cfg.softmax_scale * t[0] @ t[1].transpose(-1, -2)
    if causal:
        hidden = torch.ones(cfg.seq_q, cfg.seq_k, dtype=torch.bool).triu(1)
        S = S.masked_fill(hidden, float("-inf"))
    O = torch.softmax(S, dim=-1) @ t[2]
    want = torch.autograd.grad(O, t, torch.tensor(dout.astype(np.float64)))
    g = backend.run_backward(cfg, q, k, v, dout, algorithm, kernel)
    for name, got, ref in zip(("dq", "dk", "dv"), (g.dq, g.dk, g.dv), want):
        err = rel_err(got, ref.numpy())
        assert err <= GRAD_TOL[cfg.dtype], f"{name} vs torch.autograd: {err:.3g}, {cfg}"
    # The float64 reference (tests/reference.py) agrees with autograd to rounding.
    for ref, auto in zip(attention_grads64(q, k, v, dout, cfg.softmax_scale, causal), want):
        assert rel_err(ref, auto.numpy()) <= 1e-12


def teaching_outputs(cfg, trace):
    q, k, v, dout = inputs(cfg)
    Q, K, V, dO = (to_gpu(cfg, x) for x in (q, k, v, dout))
    fwd = backend.launcher("teaching").launch(cfg, Q, K, V, False)
    out = backward_teaching.launch(cfg, Q, K, V, fwd["O"], fwd["lse"], dO, trace, poison=True)
    return {key: arr.get() for key, arr in out.items() if key != "info"}, out["info"]


@pytest.mark.parametrize("trace", [False, True])
@pytest.mark.parametrize("changes", [dict(causal=True, seq_q=100, seq_k=260),
                                     dict(seq_q=33, seq_k=70, block_q=16, block_k=64),
                                     dict(dtype="bfloat16", causal=True)])
def test_teaching_writes_every_output(trace, changes):
    cfg = config(**changes)
    got, info = teaching_outputs(cfg, trace)
    for key, arr in got.items():
        if arr.dtype.kind not in "iu":         # float32, float16 and bfloat16 (poison = NaN)
            assert not np.isnan(arr.astype(np.float32)).any(), f"unwritten {key}, {cfg}"
    if trace:
        check_schedule(got["sm_id"], got["start_ns"], got["end_ns"], cfg.bh * cfg.Tc)
    assert info["local_bytes_per_thread"] == 0, info   # no spills
    if cfg.causal and cfg.seq_k > cfg.seq_q:          # keys no query sees get zero gradients
        for key in ("dK", "dV"):
            assert not got[key][:, cfg.seq_q:].astype(np.float32).any(), (key, cfg)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_naive_writes_every_output(dtype):
    cfg = config(dtype=dtype, seq_q=90, seq_k=131, causal=True)
    q, k, v, dout = inputs(cfg)
    Q, K, V, dO = (to_gpu(cfg, x) for x in (q, k, v, dout))
    fwd = gpu_naive.forward(cfg, Q, K, V)
    stages, out = gpu_naive.prepare_backward(cfg, Q, K, V, dO, fwd, poison=True)
    assert [name for name, _ in stages] == list(gpu_naive.BACKWARD_STAGES)
    for _, fn in stages:
        fn()
    for key, arr in out.items():
        assert not np.isnan(arr.get()).any(), f"unwritten {key}, {cfg}"
    # D from the fused kernel (sum of P ∘ dP) equals rowsum(dO ∘ O) up to rounding.
    D = (dO.astype(np.float32) * fwd["O"].astype(np.float32)).sum(-1)
    assert rel_err(out["delta"].get(), D.get()) <= GRAD_TOL[dtype]


def assert_close(got, want, name, cfg, rtol=TRACE_RTOL):
    """|got - want| <= rtol·|want| + 1e-5·max|want|, element by element."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    atol = 1e-5 * max(1.0, float(np.abs(want).max(initial=0)))
    bad = np.abs(got - want) > rtol * np.abs(want) + atol
    assert not bad.any(), (f"{name}: {int(bad.sum())} of {bad.size} elements off; worst "
                           f"{np.abs(got - want).max():.3g}; seed {seeds.SEED}", cfg)


@pytest.mark.parametrize("changes", [dict(dtype="float32", causal=True, seq_q=150, seq_k=130),
                                     dict(dtype="float32", seq_q=70, seq_k=200, block_q=32,
                                          block_k=16)])
def test_trace_matches_the_numpy_emulation(changes):
    cfg = config(**changes)
    q, k, v, dout = inputs(cfg)
    g = backend.run_backward(cfg, q, k, v, dout, "flash", "teaching", trace=True)
    ref = engine.run_backward(cfg, q, k, v, dout, backend="numpy", algorithm="flash",
                              trace=True)
    assert np.array_equal(g.trace.processed, ref.trace.processed)
    for name in BACKWARD_TRACE_FIELDS:
        got = getattr(g.trace, name)
        assert got.dtype == np.float32
        assert_close(got, getattr(ref.trace, name), name, cfg)


@pytest.mark.parametrize("changes", [dict(causal=True), dict(dtype="bfloat16", seq_q=130,
                                                             seq_k=90, block_q=32)])
def test_trace_semantics(changes):
    """What the trace means, checked on the kernel's own numbers in the 16-bit dtypes."""
    cfg = config(**changes)
    q, k, v, dout = inputs(cfg)
    g = backend.run_backward(cfg, q, k, v, dout, "flash", "teaching", trace=True)
    tr, B, H = g.trace, cfg.batch, cfg.heads
    assert tr.p_rowsum.shape == tr.dq_norm.shape == (B, H, cfg.seq_q, cfg.Tc)
    assert tr.dk_norm.shape == tr.dv_norm.shape == (B, H, cfg.seq_k, cfg.Tr)
    # P rebuilt from lse alone: every row sums to 1 over the key tiles; per tile it is the
    # float64 softmax's mass there, 0 on skipped tiles.
    assert np.abs(tr.p_rowsum.sum(-1) - 1).max() <= 1e-4
    S = scores64(q, k, cfg.softmax_scale, cfg.causal)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    pad = np.zeros((*P.shape[:2], cfg.Tc * cfg.block_k))
    pad[..., :cfg.seq_k] = P
    mass = pad.reshape(*P.shape[:2], cfg.Tc, cfg.block_k).sum(-1).reshape(tr.p_rowsum.shape)
    assert np.abs(tr.p_rowsum - mass).max() <= 1e-4
    rows_tile = np.arange(cfg.seq_q) // cfg.block_q
    assert (tr.p_rowsum[..., ~tr.processed[rows_tile]] == 0).all()
    # The last columns are the final gradients' norms (dq from the float32 accumulator).
    for norm, grad in ((tr.dq_norm, g.dq), (tr.dk_norm, g.dk), (tr.dv_norm, g.dv)):
        final = np.linalg.norm(grad.astype(np.float64), axis=-1)
        assert np.abs(norm[..., -1] - final).max() <= 1e-2 * max(1.0, final.max())
    # Norms start at 0 before any contribution: dK, dV of keys that causal query tile 0 does
    # not reach are 0 in column 0.
    if cfg.causal:
        assert (tr.dk_norm[:, :, cfg.block_q:, 0] == 0).all()
    # The block schedule: one record per (bh, key tile j), block index bh·Tc + j.
    s = g.schedule
    assert len(s.sm_id) == cfg.bh * cfg.Tc
    assert (s.block_q_tile == np.arange(cfg.bh * cfg.Tc) % cfg.Tc).all()
    assert (s.block_bh == np.arange(cfg.bh * cfg.Tc) // cfg.Tc).all()
    assert (s.end_ns >= s.start_ns).all() and (s.sm_id >= 0).all()


@pytest.mark.parametrize("algorithm,kernel", [("naive", "teaching"), ("flash", "teaching"),
                                              ("flash", "tensorcore")])
def test_no_nan_at_logit_scale_1e4(algorithm, kernel):
    if kernel == "tensorcore":
        tensorcore_backward()
    cfg = config(seq_q=192, seq_k=192, block_q=64, block_k=64, logit_scale=1e4, causal=True)
    g = backend.run_backward(cfg, *inputs(cfg), algorithm, kernel)
    for name in ("dq", "dk", "dv", "delta", "lse"):
        assert np.isfinite(getattr(g, name)).all(), (name, cfg)


@pytest.mark.parametrize("algorithm", ["naive", "flash"])
def test_benchmark_times_the_backward_alone(algorithm):
    from engine.gpu.timing import benchmark_gpu
    cfg = config(seq_q=512, seq_k=512, block_q=64, block_k=64)
    t = benchmark_gpu(cfg, algorithm, "teaching", False, reps=20, warmup=1,
                      direction="backward")
    assert t.median_ms > 0 and t.p10_ms <= t.median_ms <= t.p90_ms and t.reps == 20
    assert t.tflops == pytest.approx(cfg.flops_of("backward") / (t.median_ms * 1e-3) / 1e12,
                                     rel=1e-6)
    assert "backward" in t.method
    if algorithm == "naive":
        assert list(t.stages) == list(gpu_naive.BACKWARD_STAGES)


def test_naive_backward_is_fair_against_pytorch_math():
    """The naive backward keeps up with PyTorch's math-backend SDPA backward (same inputs,
    same harness)."""
    from engine.gpu import torch_reference
    from engine.gpu.timing import benchmark_gpu
    try:
        torch_reference.torch_module()
    except torch_reference.TorchUnavailableError as exc:
        pytest.skip(str(exc))
    cfg = torch_reference.FAIRNESS_CONFIG
    qkv = engine.make_inputs(cfg)
    naive = benchmark_gpu(cfg, "naive", "teaching", False, 20, 2,
                          inputs=(*qkv, engine.make_dout(cfg)), direction="backward")
    torch_reference.release_memory()
    ref = torch_reference.benchmark_torch(cfg, "torch_math", 20, 2, inputs=qkv,
                                          direction="backward")
    ratio = naive.median_ms / ref.median_ms
    print(f"naive backward {naive.median_ms:.4f} ms {naive.stages}; PyTorch math backward "
          f"{ref.median_ms:.4f} ms; ratio {ratio:.3f}")
    assert ratio <= 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_backward_lines_take_every_16_bit_dtype(dtype):
    from engine.gpu import torch_reference
    try:
        torch_reference.torch_module()
    except torch_reference.TorchUnavailableError as exc:
        pytest.skip(str(exc))
    cfg = config(dtype=dtype, seq_q=512, seq_k=512, block_q=64, block_k=64)
    t = torch_reference.benchmark_torch(cfg, "torch_flash", 20, 1, direction="backward")
    assert t.median_ms > 0 and t.tflops > 0, (cfg, t)


@pytest.mark.parametrize("line", ["naive", "tensorcore", "torch_flash", "torch_cudnn"])
def test_the_sweep_validates_each_backward_line_against_float64(line):
    """benchmarks.bench_sweep.validate_backward, as a backward sweep runs it before timing a
    line: our builds and PyTorch's pass, with every gradient's error recorded."""
    from benchmarks.bench_sweep import BACKWARD_VALIDATION_LIMITS, validate_backward
    from engine.gpu import torch_reference
    if line.startswith("torch"):
        try:
            torch_reference.torch_module()
        except torch_reference.TorchUnavailableError as exc:
            pytest.skip(str(exc))
    cfg = engine.AttentionConfig(batch=2, heads=4, seq_q=2048, seq_k=2048, head_dim=128,
                                 block_q=64, block_k=128, dtype="bfloat16", causal=True)
    try:
        checked = validate_backward(cfg, line)
    except torch_reference.TorchUnavailableError as exc:
        pytest.skip(str(exc))
    assert checked["seq"] == 1024 and checked["limit"] == BACKWARD_VALIDATION_LIMITS["bfloat16"]
    assert 0 < checked["rel_err"] <= checked["limit"], checked
