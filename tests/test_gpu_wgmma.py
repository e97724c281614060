"""Hopper wgmma kernel: the shape check (any machine) and, on a GPU of compute capability 9.x,
output, lse, trace and block schedule against float64 and NumPy references, every output
poisoned before launch, and agreement with the mma.sync tensor-core kernel."""
import numpy as np
import pytest

import engine
from engine.gpu.launchers import mma as tensorcore
from engine.gpu.runtime import device_is_hopper
from engine.gpu.launchers import wgmma
from engine.model.config import ConfigError
from engine.model import stream_k
from engine.cpu import stream_k as stream_k_emulation
from engine.model import catalog
from kernel_checks import (OUT_TOL, TRACE_NAMES, check_schedule, check_float64, check_output,
                           check_stream_k, check_trace, to_gpu)
from reference import attention64, rel_err
import seeds

RNG = seeds.rng(2162)


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=128, block_q=128,
                block_k=128, dtype="float16", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


def hopper() -> bool:
    from engine.devices import probe_gpu
    usable, _ = probe_gpu()
    return usable and device_is_hopper()


needs_hopper = pytest.mark.skipif("not hopper()", reason="needs a GPU of compute capability 9.x")


# ---- on a Hopper GPU --------------------------------------------------------------------------
# (head_dim, block_q, block_k, seq_q, seq_k, causal, inputs): exact and ragged tiles,
# seq_q < seq_k and seq_q > seq_k under causal, one key, one tile and many.
CASES = [
    (128, 128, 128, 256, 256, False, "normal"),
    (128, 128, 128, 300, 257, False, "rising"),
    (128, 128, 128, 300, 257, True, "rising"),
    (128, 128, 128, 1024, 1024, True, "normal"),
    (128, 128, 128, 200, 450, True, "normal"),
    (128, 128, 128, 333, 100, True, "rising"),
    (128, 128, 128, 1, 1, False, "normal"),
    (128, 128, 64, 500, 700, False, "rising"),
    (128, 128, 64, 777, 777, True, "normal"),
    (128, 128, 64, 70, 513, False, "normal"),
    (64, 128, 128, 1000, 1100, False, "rising"),
    (64, 128, 128, 129, 65, True, "normal"),
]


VARIANTS = {"free_order": (0, 0), "pingpong": (1, 0), "persistent": (1, 1)}


@pytest.fixture(params=list(VARIANTS), ids=list(VARIANTS))
def pingpong(request, monkeypatch):
    """The builds: consumers issuing in free order or taking turns, one block per work item or
    (persistent) one per SM walking the items."""
    turns, persistent = VARIANTS[request.param]
    monkeypatch.setattr(wgmma, "PINGPONG", turns)
    monkeypatch.setattr(wgmma, "PERSISTENT", persistent)
    return request.param


def run_kernel(cfg, q, k, v, trace, module=wgmma):
    out = module.launch(cfg, to_gpu(cfg, q), to_gpu(cfg, k), to_gpu(cfg, v), trace, poison=True)
    return {name: arr.get() for name, arr in out.items() if name != "info"}


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
@pytest.mark.parametrize("dtype", catalog.WGMMA.dtypes)
def test_output_and_lse_match_float64(d, bq, bk, nq, nk, causal, inputs, dtype, pingpong):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, batch=2, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_output(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
@pytest.mark.parametrize("dtype", catalog.WGMMA.dtypes)
def test_trace_matches_numpy_backend_and_float64(d, bq, bk, nq, nk, causal, inputs, dtype, pingpong):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, heads=3, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_trace(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=True),
                run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
@needs_hopper
def test_custom_scale_and_large_logits():
    cfg = config(seq_q=250, seq_k=300, scale=0.3, logit_scale=20.0, causal=True)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(cfg, q, k, v, trace=False)
    check_float64(cfg, q, k, v, got)


@pytest.mark.gpu
@needs_hopper
def test_repeated_launches_are_identical(pingpong):
    cfg = config(seq_q=1500, seq_k=1500, causal=True, heads=4)
    q, k, v = engine.make_inputs(cfg)
    first = run_kernel(cfg, q, k, v, trace=False)
    for _ in range(3):
        again = run_kernel(cfg, q, k, v, trace=False)
        assert np.array_equal(first["O"], again["O"]), "a race: output changed between runs"
        assert np.array_equal(first["lse"], again["lse"])


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", catalog.WGMMA.dtypes)
def test_long_sequence_agrees_with_mma_sync_kernel(causal, dtype, pingpong):
    """N = 4096 (32 key tiles, the ring refilled many times) against float64 and against the
    mma.sync kernel on the same inputs, in each dtype."""
    cfg = config(seq_q=4096, seq_k=4096, causal=causal, heads=4, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(cfg, q, k, v, trace=False)
    other = run_kernel(cfg.with_(block_q=128, block_k=32), q, k, v, trace=False,
                       module=tensorcore)
    O64, _ = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(got["O"].reshape(O64.shape), O64) <= OUT_TOL[dtype]
    assert rel_err(got["O"], other["O"]) <= OUT_TOL[dtype]
    assert np.abs(got["lse"] - other["lse"]).max() <= 1e-3


@pytest.mark.gpu
@needs_hopper
def test_shapes_outside_the_catalog_are_refused():
    cfg = config()
    q, k, v = (to_gpu(cfg, x) for x in engine.make_inputs(cfg))
    with pytest.raises(ConfigError, match="does not take"):
        wgmma.launch(cfg.with_(block_k=32), q, k, v, trace=False)


@pytest.mark.gpu
@needs_hopper
def test_engine_run_and_benchmark_reach_wgmma_through_tensorcore():
    cfg = config(seq_q=700, seq_k=650, causal=True, inputs="rising")
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", kernel="tensorcore", trace=True)
    ref = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    assert res.kernel == "tensorcore" and res.schedule is not None
    assert res.info["kernel_source"] == "kernels/hopper/flash_wgmma.cu"
    assert res.info["threads_per_block"] == 384
    assert rel_err(res.output, ref.output) <= 2e-3
    for name in TRACE_NAMES:
        assert rel_err(getattr(res.trace, name), getattr(ref.trace, name)) <= 1e-3, name
    facts = tensorcore.kernel_facts(cfg, trace=False)
    assert facts["kernel_source"] == "kernels/hopper/flash_wgmma.cu"
    big = config(seq_q=2048, seq_k=2048, heads=8)
    t = engine.benchmark(big, backend="cupy", kernel="tensorcore", reps=20, warmup=1)
    assert t.reps == 20 and 0 < t.median_ms and 10 < t.tflops < 1000


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", catalog.WGMMA.dtypes)
def test_persistent_blocks_walking_many_items_match_one_block_per_item(causal, dtype,
                                                                        monkeypatch):
    """Several work items per persistent block (Tr · B·H = 8 · 64 = 512 items, ragged last
    tiles): every item computes exactly what its own block computes, bit for bit, traced
    and not, and every item's schedule record is written."""
    cfg = config(batch=4, heads=16, seq_q=1000, seq_k=1000, causal=causal, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    runs = {}
    for persistent in (0, 1):
        monkeypatch.setattr(wgmma, "PERSISTENT", persistent)
        runs[persistent] = (run_kernel(cfg, q, k, v, trace=False),
                            run_kernel(cfg, q, k, v, trace=True))
        sms = wgmma.live_gpu().sms
        group = -(-4 * sms // cfg.Tr) if causal else 1      # core.causal_bh_group
        want = (f"{min(cfg.Tr * cfg.bh, sms)} × 1" if persistent
                else f"{min(group, cfg.bh)} × {cfg.Tr} × {-(-cfg.bh // group)}")
        assert wgmma.kernel_facts(cfg, trace=False)["grid"] == want
    (plain0, traced0), (plain1, traced1) = runs[0], runs[1]
    check_output(cfg, q, k, v, plain1)
    for name in ("O", "lse"):
        assert np.array_equal(plain0[name], plain1[name]), name
        assert np.array_equal(traced0[name], traced1[name]), name
    for name in TRACE_NAMES:
        assert np.array_equal(traced0[name], traced1[name]), name
    check_schedule(traced1["sm_id"], traced1["start_ns"], traced1["end_ns"], cfg.bh * cfg.Tr)
    items_per_sm = np.bincount(traced1["sm_id"])
    assert items_per_sm[items_per_sm > 0].min() >= cfg.Tr * cfg.bh // sms, \
        "each persistent block (one per SM) walks several items"


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("d,bk,n,heads,causal", [
    (128, 128, 4096, 4, True),    # B·H = 4: rows of 32 tiles, shares of 16, tiny rows packed
    (128, 64, 1000, 2, True),     # ragged last tiles; rows of up to 16 tiles at block_k 64
    (64, 128, 1100, 3, True),     # odd Tr (9): the middle level ends the line of paired levels
    (64, 128, 3000, 1, False),    # fewer items (24) than SMs: every item cut into parts
    (128, 128, 777, 3, False),
])
@pytest.mark.parametrize("dtype", catalog.WGMMA.dtypes)
def test_stream_k_matches_float64_its_emulation_and_whole_items(d, bk, n, heads, causal, dtype,
                                                                monkeypatch):
    """The stream-K launch (items cut across blocks, parts merged by the last ticket; forced
    on, whatever the launcher's cost model would choose): O and
    lse against float64 and the NumPy emulation of the same schedule; relaunched bit for bit
    (the ticket counters are back at 0 and the merge order is fixed); and against the walk of
    whole items within rounding."""
    monkeypatch.setattr(wgmma, "PERSISTENT", 1)
    monkeypatch.setattr(wgmma, "STREAM_K", 1)
    monkeypatch.setattr(wgmma, "use_stream_k", lambda *_: True)   # whatever the cost model says
    cfg = config(seq_q=n, seq_k=n, heads=heads, head_dim=d, block_k=bk, causal=causal,
                 dtype=dtype)
    sms = wgmma.live_gpu().sms
    facts = wgmma.kernel_facts(cfg, trace=False)
    assert facts["stream_k"] and facts["grid"] == \
        f"{stream_k.blocks(cfg, cfg.bh, sms, stream_k.WGMMA_HEAD)} × 1"
    assert facts["local_bytes_per_thread"] == 0
    q, k, v = engine.make_inputs(cfg)
    check_stream_k(cfg, q, k, v, lambda: run_kernel(cfg, q, k, v, trace=False),
                   stream_k_emulation.flash(cfg, q, k, v, sms, stream_k.WGMMA_HEAD), wgmma,
                   monkeypatch)
