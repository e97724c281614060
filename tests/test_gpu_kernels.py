"""The teaching kernel and the naive baseline on a real GPU, against float64 and the NumPy
backend; the block schedule; shared-memory limits; the timing harness; fairness vs PyTorch.

Every test is gpu-marked and skips cleanly where CuPy finds no usable GPU."""
import numpy as np
import pytest

import engine
from engine.model import iomodel
from engine.gpu.launchers import teaching
from engine.model.config import BLOCK_SIZES, HEAD_DIMS
from engine.results import TRACE_FIELDS as TRACE_NAMES
import seeds
from kernel_checks import check_schedule, check_trace_values
from reference import attention64, rel_err

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]

RNG = seeds.rng(4012)   # the session seed (tests/seeds.py): fixed unless FA_LAB_TEST_SEED says
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}

# (head_dim, block_q, block_k, seq_q, seq_k, causal, dtype, inputs): exact and ragged tiles,
# seq_q < seq_k and seq_q > seq_k under causal, a single row, the smallest and largest tiles,
# and a block above 48 KB of shared memory (d=128, 128×64, float32: 230,400 bytes).
CASES = [
    (64, 64, 64, 256, 256, False, "float32", "normal"),
    (64, 64, 32, 300, 257, True, "float16", "rising"),
    (16, 8, 128, 37, 300, True, "float32", "normal"),
    (256, 32, 16, 100, 130, False, "float16", "rising"),
    (128, 128, 64, 333, 100, True, "float32", "rising"),
    (32, 16, 64, 1, 1, False, "float16", "normal"),
    (128, 64, 128, 200, 450, True, "float16", "normal"),
    (64, 128, 8, 129, 65, False, "float32", "rising"),
    (64, 64, 32, 300, 257, True, "bfloat16", "rising"),
    (128, 32, 64, 190, 513, False, "bfloat16", "normal"),
]


def gpu():
    from engine.gpu.runtime import live_gpu
    return live_gpu()


def random_case():
    """A fresh random shape whose tiles fit this GPU's shared memory."""
    while True:
        d = int(RNG.choice(HEAD_DIMS))
        bq, bk = (int(x) for x in RNG.choice(BLOCK_SIZES, 2))
        dtype = str(RNG.choice(engine.DTYPES))
        cfg = engine.AttentionConfig(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
        if iomodel.smem_bytes(cfg) <= gpu().smem_per_block_optin:
            return (d, bq, bk, int(RNG.integers(1, 600)), int(RNG.integers(1, 600)),
                    bool(RNG.integers(2)), dtype, str(RNG.choice(["normal", "rising"])))


def config(d, bq, bk, nq, nk, causal, dtype, inputs, **more):
    base = dict(batch=2, heads=2, seq_q=nq, seq_k=nk, head_dim=d, block_q=bq, block_k=bk,
                dtype=dtype, causal=causal, inputs=inputs, seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **more})


def on_gpu(cfg, *arrays):
    import cupy
    return [cupy.asarray(x.reshape(cfg.bh, -1, cfg.head_dim)) for x in arrays]


def launch_poisoned(cfg, q, k, v, trace):
    out = teaching.launch(cfg, *on_gpu(cfg, q, k, v), trace, poison=True)
    return {name: arr.get() for name, arr in out.items() if name != "info"}


def bhnt(cfg, arr):
    return arr.reshape(cfg.batch, cfg.heads, cfg.seq_q, -1)


@pytest.mark.parametrize("case", CASES + ["random"] * 4)
def test_teaching_kernel_matches_float64_and_numpy(case):
    cfg = config(*(random_case() if case == "random" else case))
    tol = TOL[cfg.dtype]
    q, k, v = engine.make_inputs(cfg)
    got = launch_poisoned(cfg, q, k, v, trace=True)

    # Every element written: the poison (NaN, -1, all-ones) is gone everywhere.
    for name in ("O", "lse", *TRACE_NAMES):
        assert not np.isnan(got[name]).any(), f"unwritten {name}: {cfg}"
    assert (got["sm_id"] >= 0).all() and (got["start_ns"] != np.iinfo(np.uint64).max).all()

    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
    assert got["O"].dtype == np.dtype(cfg.dtype) and got["lse"].dtype == np.float32
    assert rel_err(got["O"].reshape(O64.shape), O64) <= tol, cfg
    assert rel_err(got["lse"].reshape(lse64.shape), lse64) <= 1e-5, cfg

    ref = engine.run(cfg, q, k, v, backend="numpy", algorithm="flash")
    assert rel_err(got["O"].reshape(O64.shape), ref.output) <= tol, cfg
    check_trace_values(cfg, q, k, v, got)

    # The untraced build computes the same output.
    plain = launch_poisoned(cfg, q, k, v, trace=False)
    assert set(plain) == {"O", "lse"}
    assert rel_err(plain["O"], got["O"]) <= tol / 10 and rel_err(plain["lse"], got["lse"]) <= 1e-6


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", engine.DTYPES)
def test_engine_run_on_cupy_returns_numpy_and_a_schedule(causal, dtype):
    cfg = config(128, 64, 64, 1000, 600, causal, dtype, "normal", heads=3)
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", algorithm="flash", trace=True)
    assert res.backend == "cupy" and res.kernel == "teaching"
    for arr in (res.output, res.lse, res.trace.running_max, res.schedule.sm_id):
        assert isinstance(arr, np.ndarray)
    O64, _ = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(res.output, O64) <= TOL[dtype]
    s = res.schedule
    check_schedule(s.sm_id, s.start_ns.astype(np.uint64), s.end_ns.astype(np.uint64),
                   cfg.bh * cfg.Tr)
    pairs = set(zip(s.block_bh.tolist(), s.block_q_tile.tolist()))
    assert pairs == {(b, i) for b in range(cfg.bh) for i in range(cfg.Tr)}, "one record a block"
    assert res.info["dynamic_smem_bytes"] == iomodel.smem_bytes(cfg)


def test_shared_memory_overflow_is_refused_with_bytes_and_best_tiles():
    cfg = engine.AttentionConfig(head_dim=256, block_q=128, block_k=128, dtype="float32",
                                 seq_q=300, seq_k=300)
    need, limit = iomodel.smem_bytes(cfg), gpu().smem_per_block_optin
    assert need > limit
    with pytest.raises(ValueError) as err:
        engine.run(cfg, backend="cupy", algorithm="flash")
    msg = str(err.value)
    best = iomodel.largest_fitting_tiles(cfg, gpu())
    assert f"{need:,} bytes" in msg and f"{limit:,} bytes" in msg
    assert best and all(f"block_q={bq}, block_k={bk}" in msg for bq, bk in best)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", engine.DTYPES)
def test_naive_gpu_matches_float64(causal, dtype):
    cfg = config(64, 64, 64, 300, 513 if not causal else 300, causal, dtype, "normal")
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", algorithm="naive")
    assert res.backend == "cupy" and res.algorithm == "naive" and res.trace is None
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(res.output, O64) <= TOL[dtype]
    assert rel_err(res.lse, lse64) <= TOL[dtype]


def test_benchmark_reports_a_sane_timing():
    cfg = config(64, 64, 64, 1024, 1024, False, "float16", "normal", batch=4, heads=8)
    for algorithm in ("naive", "flash"):
        t = engine.benchmark(cfg, algorithm=algorithm, backend="cupy", reps=20)
        assert t.backend == "cupy" and t.reps == 20 and len(t.samples_ms) == 20
        assert 0 < t.p10_ms <= t.median_ms <= t.p90_ms
        assert t.tflops == pytest.approx(cfg.flops / (t.median_ms * 1e-3) / 1e12)
        inputs = 3 * cfg.bh * cfg.seq_q * cfg.head_dim * cfg.itemsize
        assert t.peak_bytes >= inputs
        assert "L2" in t.method and "median" in t.method
        if algorithm == "flash":
            assert t.stages == {} and t.kernel == "teaching"
    naive = engine.benchmark(cfg, algorithm="naive", backend="cupy", reps=20)
    assert len(naive.stages) == 3
    assert 0.7 <= sum(naive.stages.values()) / naive.median_ms <= 1.3
    assert naive.peak_bytes >= 2 * cfg.bh * cfg.seq_q * cfg.seq_k * cfg.itemsize
    with pytest.raises(ValueError, match="reps must be"):
        engine.benchmark(cfg, backend="cupy", reps=5)


def test_figures_above_the_ceilings_are_refused():
    from engine.gpu.timing import ImplausibleTimingError, check_ceilings
    cfg = config(64, 64, 64, 4096, 4096, False, "float16", "normal", batch=4, heads=16)
    with pytest.raises(ImplausibleTimingError, match="bug"):
        check_ceilings(cfg, "flash", False, 1e-3, "test")
    check_ceilings(cfg, "flash", False, 1e3, "test")   # a slow figure passes


def test_out_of_memory_becomes_a_clear_error():
    import cupy
    from engine.gpu.runtime import GpuRunError, gpu_failures
    with pytest.raises(GpuRunError, match="ran out of memory"):
        with gpu_failures("test"):
            cupy.empty(1 << 50, dtype=cupy.uint8)


def test_compile_error_is_a_clear_value_error():
    from kernels.loader import KernelCompileError, load_module
    with pytest.raises(KernelCompileError, match="compile with"):
        load_module("teaching/flash_teaching.cu", ("-DBLOCK_Q=64",))


def test_naive_is_fair_against_pytorch():
    from engine.gpu import torch_reference
    try:
        torch_reference.torch_module()
    except torch_reference.TorchUnavailableError as exc:
        pytest.skip(str(exc))
    got = torch_reference.fairness(reps=20, warmup=2)
    print(f"naive {got['naive'].median_ms:.4f} ms {got['naive'].stages}; "
          f"PyTorch {got['torch'].median_ms:.4f} ms {got['torch'].stages}; "
          f"ratio {got['ratio']:.3f}")
    assert got["ratio"] <= torch_reference.FAIRNESS_LIMIT
