"""GPU reliability (gpu-marked): concurrent requests, out-of-memory refusal and recovery."""
import threading

import numpy as np
import pytest

import engine
from reference import attention64, rel_err
import seeds

pytestmark = pytest.mark.gpu
RNG = seeds.rng(2365)


def test_two_threads_at_once_both_correct():
    cfgs = [engine.AttentionConfig(batch=1, heads=4, seq_q=int(RNG.integers(300, 900)),
                                   seq_k=int(RNG.integers(300, 900)), head_dim=64,
                                   dtype="float16", causal=bool(i), seed=int(RNG.integers(1e9)))
            for i in range(2)]
    results, errors = [None, None], []

    def work(i):
        try:
            results[i] = engine.run(cfgs[i], backend="cupy", trace=True)
        except Exception as exc:  # reported below, with its type
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for cfg, res in zip(cfgs, results):
        q, k, v = engine.make_inputs(cfg)
        O, _ = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
        assert res.backend == "cupy" and rel_err(res.output, O) <= 2e-3


def test_oversized_request_refused_then_next_succeeds(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_NAIVE_BYTES", str(10**15))
    monkeypatch.setenv("FA_LAB_MAX_QKV_ELEMENTS", str(10**12))
    huge = engine.AttentionConfig(batch=4, heads=16, seq_q=65536, seq_k=65536, head_dim=64,
                                  dtype="float16")
    with pytest.raises(engine.LimitError, match="for S and P.*GiB free"):
        engine.run(huge, backend="cupy", algorithm="naive")
    small = engine.AttentionConfig(seq_q=256, seq_k=256, dtype="float16",
                                   seed=int(RNG.integers(1e9)))
    res = engine.run(small, backend="cupy", algorithm="naive")
    q, k, v = engine.make_inputs(small)
    assert rel_err(res.output, attention64(q, k, v, small.softmax_scale, False)[0]) <= 2e-3


def test_real_out_of_memory_is_recovered(monkeypatch):
    """Bypass the pre-check so the allocation itself fails; the pool is freed and the next
    request works."""
    import cupy

    from engine.model import guards
    monkeypatch.setattr(guards, "check_device_memory", lambda *a, **k: None)
    cfg = engine.AttentionConfig(batch=1, heads=96, seq_q=32768, seq_k=32768, head_dim=16,
                                 dtype="float16")          # S alone: 96·32768²·2 B = 206 GB
    small = seeds.rng(2365).standard_normal((1, 1, 32768, 16)).astype(np.float16)
    q = np.broadcast_to(small, (1, 96, 32768, 16))
    monkeypatch.setenv("FA_LAB_MAX_NAIVE_BYTES", str(10**15))
    monkeypatch.setenv("FA_LAB_MAX_QKV_ELEMENTS", str(10**12))
    with pytest.raises(ValueError, match="out of memory"):
        engine.run(cfg, q, q, q, backend="cupy", algorithm="naive")
    assert cupy.get_default_memory_pool().used_bytes() < 1 << 30
    ok = engine.AttentionConfig(seq_q=512, seq_k=512, dtype="float16", causal=True,
                                seed=int(RNG.integers(1e9)))
    res = engine.run(ok, backend="cupy", trace=True)
    q2, k2, v2 = engine.make_inputs(ok)
    assert rel_err(res.output, attention64(q2, k2, v2, ok.softmax_scale, True)[0]) <= 2e-3


EXTREME = [
    dict(seq_q=300, seq_k=257, logit_scale=1e4, causal=True),       # huge scores in float16
    dict(seq_q=1, seq_k=1),                                          # one query, one key
    dict(seq_q=77, seq_k=200, logit_scale=1e4),
]


@pytest.mark.parametrize("kernel", ["teaching", "tensorcore"])
@pytest.mark.parametrize("changes", EXTREME)
def test_extreme_inputs_stay_finite_and_correct(kernel, changes):
    cfg = engine.AttentionConfig(batch=1, heads=2, head_dim=64, block_q=64, block_k=64,
                                 dtype="float16", seed=int(RNG.integers(1e9)), **changes)
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", kernel=kernel, trace=True)
    assert np.isfinite(res.output).all() and np.isfinite(res.lse).all()
    O, lse = attention64(q, k, v, cfg.softmax_scale, cfg.causal)
    assert rel_err(res.output, O) <= 2e-3
    assert rel_err(res.lse, lse) <= 1e-4


@pytest.mark.parametrize("kernel", ["teaching", "tensorcore"])
def test_constant_rows(kernel):
    """Every score of a row equal: the output is the mean of V, the max never moves."""
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=130, seq_k=190, head_dim=64,
                                 block_q=64, block_k=64, dtype="float16",
                                 seed=int(RNG.integers(1e9)))
    q, k, v = engine.make_inputs(cfg)
    k[:] = k[:, :, :1]
    res = engine.run(cfg, q, k, v, backend="cupy", kernel=kernel, trace=True)
    want = np.broadcast_to(v.astype(np.float64).mean(axis=2, keepdims=True), res.output.shape)
    assert rel_err(res.output, want) <= 2e-3
    assert (res.trace.rescale[..., 1:] == 1).all()
