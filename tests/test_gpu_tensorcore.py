"""Tensor-core kernel: the support check (any machine) and, on a GPU, output, lse, trace and
block schedule against float64 and NumPy references, every output poisoned before launch."""
import pytest

import engine
from engine.cpu import stream_k as stream_k_emulation
from engine.gpu import catalog
from engine.gpu.launchers import mma as tensorcore
from kernel_checks import (TRACE_NAMES, check_float64, check_output, check_stream_k,
                           check_trace, to_gpu)
from reference import rel_err
import seeds

RNG = seeds.rng(6267)


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=128, seq_k=128, head_dim=64, block_q=64, block_k=64,
                dtype="float16", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


# ---- on the GPU -----------------------------------------------------------------------------
# (head_dim, block_q, block_k, seq_q, seq_k, causal, inputs): exact and ragged tiles,
# seq_q < seq_k and seq_q > seq_k under causal, one tile and many.
CASES = [
    (64, 64, 64, 256, 256, False, "normal"),
    (64, 64, 32, 300, 257, False, "rising"),
    (64, 64, 32, 300, 257, True, "rising"),
    (64, 128, 32, 200, 450, True, "normal"),
    (64, 128, 64, 1000, 1100, False, "rising"),
    (64, 128, 64, 333, 100, True, "rising"),
    (64, 64, 128, 70, 513, False, "normal"),
    (128, 64, 64, 190, 190, True, "normal"),
    (128, 128, 32, 129, 65, False, "rising"),
    (128, 128, 32, 1024, 1024, True, "normal"),
    (128, 64, 32, 1, 1, False, "normal"),
    (128, 64, 64, 500, 700, False, "rising"),
]


def run_kernel(cfg, q, k, v, trace):
    out = tensorcore.launch(cfg, to_gpu(cfg, q), to_gpu(cfg, k), to_gpu(cfg, v), trace,
                            poison=True)
    assert out["info"]["threads_per_block"] == 128
    return {name: arr.get() for name, arr in out.items() if name != "info"}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
def test_output_and_lse_match_float64(d, bq, bk, nq, nk, causal, inputs, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, batch=2, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_output(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
def test_trace_matches_numpy_backend_and_float64(d, bq, bk, nq, nk, causal, inputs, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, heads=3, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_trace(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=True),
                run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
def test_custom_scale_and_large_logits():
    cfg = config(head_dim=64, block_q=64, block_k=32, seq_q=250, seq_k=300, scale=0.3,
                 logit_scale=20.0, causal=True)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(cfg, q, k, v, trace=False)
    check_float64(cfg, q, k, v, got)


@pytest.mark.gpu
def test_engine_run_and_benchmark_reach_the_kernel():
    cfg = config(head_dim=64, block_q=128, block_k=64, seq_q=400, seq_k=300, causal=True,
                 inputs="rising")
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", kernel="tensorcore", trace=True)
    ref = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    assert res.kernel == "tensorcore" and res.schedule is not None
    assert rel_err(res.output, ref.output) <= 2e-3
    for name in TRACE_NAMES:
        assert rel_err(getattr(res.trace, name), getattr(ref.trace, name)) <= 1e-3, name
    big = config(head_dim=128, block_q=128, block_k=32, seq_q=2048, seq_k=2048, heads=8)
    t = engine.benchmark(big, backend="cupy", kernel="tensorcore", reps=20, warmup=1)
    assert t.reps == 20 and 0 < t.median_ms and 10 < t.tflops < 1000


# ---- stream-K (the STREAM_K build) ------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("d,bq,bk,n,heads,causal", [
    (128, 128, 32, 4096, 4, True),    # the shape: rows of 4 to 128 tiles, shares of 32
    (128, 64, 64, 1000, 2, True),     # ragged last tiles, block_q 64
    (64, 128, 64, 1100, 3, True),     # odd Tr (9): the middle level ends the line
    (64, 64, 32, 3000, 1, False),     # few items: every item cut into parts
    (128, 128, 32, 777, 3, False),
])
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
def test_stream_k_matches_float64_its_emulation_and_whole_items(d, bq, bk, n, heads, causal,
                                                                dtype, monkeypatch):
    """The STREAM_K build forced on (whatever the cost model says): O and lse against float64
    and the NumPy emulation of the same schedule; relaunched bit for bit (the ticket counters
    are back at 0, the merge order is fixed); against one block per item within rounding; no
    local memory."""
    monkeypatch.setattr(tensorcore, "use_stream_k", lambda *_: True)   # whatever the model says
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=n, seq_k=n, heads=heads,
                 causal=causal, dtype=dtype)
    if tensorcore.chosen(cfg) is not catalog.MMA_SYNC:
        pytest.skip("another build runs this shape here")
    facts = tensorcore.kernel_facts(cfg, trace=False)
    G = int(facts["grid"].split(" × ")[0])
    assert facts["stream_k"] and "-DSTREAM_K=1" in facts["compile_options"]
    assert facts["local_bytes_per_thread"] == 0
    q, k, v = engine.make_inputs(cfg)
    check_stream_k(cfg, q, k, v, lambda: run_kernel(cfg, q, k, v, trace=False),
                   stream_k_emulation.flash(cfg, q, k, v, G), tensorcore, monkeypatch)


@pytest.mark.gpu
def test_the_launcher_picks_stream_k_for_a_causal_one_wave_launch():
    """B·H = 4, N = 4096, d = 128, 128×32, causal: the cost model picks the STREAM_K build,
    as many blocks as fit on the GPU at once; traced, the same config takes whole items."""
    cfg = config(head_dim=128, block_q=128, block_k=32, seq_q=4096, seq_k=4096, heads=4,
                 causal=True)
    facts = tensorcore.kernel_facts(cfg, trace=False)
    assert facts["stream_k"] and facts["local_bytes_per_thread"] == 0
    assert int(facts["grid"].split(" × ")[0]) >= tensorcore.live_gpu().sms
    assert not tensorcore.kernel_facts(cfg, trace=True)["stream_k"]
