"""NumPy backend against a float64 reference: output, lse and every trace array."""
import numpy as np
import pytest

import engine
from engine.model.tiles import processed_tiles
from reference import attention64, rel_err, trace64
import seeds

RNG = seeds.rng(6379)
# Output tolerance by input dtype: the rounding of the output itself dominates (float16 keeps
# 11 significant bits, bfloat16 8).
TOL_OUT = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 4e-3}


def random_config(rng, dtype, causal):
    return engine.AttentionConfig(
        batch=int(rng.integers(1, 3)), heads=int(rng.integers(1, 4)),
        seq_q=int(rng.integers(1, 300)), seq_k=int(rng.integers(1, 300)),
        head_dim=int(rng.choice([16, 32, 64])),
        block_q=int(rng.choice(engine.BLOCK_SIZES)), block_k=int(rng.choice(engine.BLOCK_SIZES)),
        dtype=dtype, causal=causal, seed=int(rng.integers(0, 2**31)),
        inputs=str(rng.choice(engine.INPUT_PRESETS)))


CASES = [(dtype, causal, i) for dtype in engine.DTYPES for causal in (False, True)
         for i in range(6)]


@pytest.mark.parametrize("dtype,causal,i", CASES)
def test_flash_matches_float64_reference(dtype, causal, i):
    cfg = random_config(RNG, dtype, causal)
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", algorithm="flash", trace=True)
    O, lse = attention64(q, k, v, cfg.softmax_scale, causal)
    assert res.output.dtype == np.dtype(dtype) and res.output.shape == q.shape
    assert res.lse.dtype == np.float32 and res.lse.shape == q.shape[:3]
    assert rel_err(res.output, O) <= TOL_OUT[dtype], cfg
    assert rel_err(res.lse, lse) <= 1e-5, cfg
    want = trace64(q, k, cfg.softmax_scale, causal, cfg.block_k)
    for name, arr in want.items():
        got = getattr(res.trace, name)
        assert got.dtype == np.float32 and got.shape == (*q.shape[:3], cfg.Tc)
        assert rel_err(got, arr) <= 1e-5, (name, cfg)


@pytest.mark.parametrize("dtype,causal", [(d, c) for d in engine.DTYPES
                                          for c in (False, True)])
def test_naive_matches_float64_reference(dtype, causal):
    cfg = random_config(RNG, dtype, causal)
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", algorithm="naive")
    O, lse = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(res.output, O) <= TOL_OUT[dtype]
    assert rel_err(res.lse, lse) <= 1e-5
    assert res.trace is None


def test_explicit_scale_and_unequal_lengths():
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=300, seq_k=257, head_dim=64,
                                 block_q=64, block_k=32, scale=0.3, seed=int(RNG.integers(1e9)))
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    O, lse = attention64(q, k, v, 0.3, False)
    assert rel_err(res.output, O) <= 1e-5 and rel_err(res.lse, lse) <= 1e-5
    assert res.trace.running_max.shape == (1, 2, 300, 9)


@pytest.mark.parametrize("causal", [False, True])
def test_trace_invariants(causal):
    cfg = random_config(RNG, "float32", causal)
    q, k, v = engine.make_inputs(cfg)
    tr = engine.run(cfg, q, k, v, backend="numpy", trace=True).trace
    m, l, r, t = tr.running_max, tr.running_sum, tr.rescale, tr.tile_max
    assert np.all(np.diff(m, axis=-1) >= 0), "running max decreased"
    assert np.all((r >= 0) & (r <= 1))
    assert np.all(r[..., 0] == 0)
    prev = m[..., :-1]
    same = prev == m[..., 1:]
    assert np.all(r[..., 1:][same] == 1)
    assert np.all(r[..., 1:][~same] < 1)
    # final running_sum · exp(running_max) equals the row's total of exp(s)
    from reference import scores64
    S = scores64(q, k, cfg.softmax_scale, causal)
    total = np.exp(S).sum(-1).reshape(l.shape[:3])
    got = l[..., -1].astype(np.float64) * np.exp(m[..., -1].astype(np.float64))
    assert rel_err(got, total) <= 1e-5
    assert np.all(t <= m)


def test_causal_skipping_carries_values_forward():
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=130, seq_k=200, head_dim=32,
                                 block_q=32, block_k=16, causal=True,
                                 seed=int(RNG.integers(1e9)))
    proc = processed_tiles(cfg)
    assert proc.shape == (cfg.Tr, cfg.Tc)
    # tile (i, j) runs iff j·Bc <= last row of query tile i
    for i in range(cfg.Tr):
        last = min((i + 1) * 32, 130) - 1
        for j in range(cfg.Tc):
            assert proc[i, j] == (j * 16 <= last)
    tr = engine.run(cfg, backend="numpy", trace=True).trace
    for i in range(cfg.Tr):
        rows = slice(i * 32, min((i + 1) * 32, 130))
        for j in np.flatnonzero(~proc[i]):
            assert np.all(np.isneginf(tr.tile_max[0, 0, rows, j]))
            assert np.all(tr.rescale[0, 0, rows, j] == 1)
            assert np.array_equal(tr.running_sum[0, 0, rows, j], tr.running_sum[0, 0, rows, j - 1])
            assert np.array_equal(tr.running_max[0, 0, rows, j], tr.running_max[0, 0, rows, j - 1])


def test_rising_preset_moves_the_max_every_tile():
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=64, seq_k=512, head_dim=64,
                                 block_q=64, block_k=64, inputs="rising",
                                 seed=int(RNG.integers(1e9)))
    tr = engine.run(cfg, backend="numpy", trace=True).trace
    frac_below_one = (tr.rescale[..., 1:] < 1).mean()
    assert frac_below_one > 0.9


def test_inputs_are_deterministic_and_follow_dtype():
    cfg = engine.AttentionConfig(dtype="float16", seed=7, logit_scale=3.0)
    a, b = engine.make_inputs(cfg), engine.make_inputs(cfg)
    for x, y in zip(a, b):
        assert x.dtype == np.float16 and np.array_equal(x, y)
    other = engine.make_inputs(cfg.with_(seed=8))
    assert not np.array_equal(a[0], other[0])
    base = engine.make_inputs(cfg.with_(logit_scale=1.0, dtype="float32"))
    assert rel_err(a[0], 3.0 * base[0]) < 1e-3


def test_extreme_logit_scale_float16_stays_finite():
    cfg = engine.AttentionConfig(seq_q=100, seq_k=100, dtype="float16", logit_scale=1e4,
                                 causal=True, seed=int(RNG.integers(1e9)))
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    assert np.all(np.isfinite(res.output)) and np.all(np.isfinite(res.lse))
    O, _ = attention64(q, k, v, cfg.softmax_scale, True)
    assert rel_err(res.output, O) <= 2e-3


def test_seq_one_and_constant_rows():
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=1, seq_k=1, head_dim=16,
                                 block_q=8, block_k=8, seed=int(RNG.integers(1e9)))
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    assert rel_err(res.output, v) <= 1e-6
    cfg = cfg.with_(seq_q=40, seq_k=70)
    q, k, v = engine.make_inputs(cfg)
    k[:] = k[:, :, :1]                                   # every score of a row is equal
    res = engine.run(cfg, q, k, v, backend="numpy")
    want = np.broadcast_to(v.mean(axis=2, keepdims=True), res.output.shape)
    assert rel_err(res.output, want) <= 1e-5
