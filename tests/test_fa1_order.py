"""FlashAttention-1's loop order (key tiles outer): the CPU emulation gives the output and the
trace of FlashAttention-2's order, and iomodel.flash1_hbm counts its HBM bytes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import engine
from app.features.sram_tiling import data as tiling_data
from engine.model import iomodel
from engine.cpu import forward
import seeds

FIELDS = ("running_max", "running_sum", "rescale", "tile_max")


def seed() -> int:
    return int(seeds.rng(1101).integers(0, 2**31))


CASES = [dict(), dict(causal=True), dict(seq_q=300, seq_k=257, block_q=64, block_k=32,
                                         causal=True),
         dict(batch=2, heads=3, seq_q=129, seq_k=520, block_q=16, block_k=128,
              dtype="float16"),
         dict(seq_q=100, seq_k=300, block_q=32, block_k=64, causal=True, dtype="bfloat16"),
         dict(seq_q=200, seq_k=200, causal=True, inputs="rising", logit_scale=30.0)]


def rel_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Largest gap between finite entries, relative to max(|a|, 1): scores near zero carry the
    absolute rounding of the larger ones, so their relative gap alone would be meaningless (the
    non-finite entries must be equal)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a)
    assert (np.isfinite(b) == finite).all() and (a[~finite] == b[~finite]).all()
    if not finite.any():
        return 0.0
    return float(np.max(np.abs(a[finite] - b[finite]) / np.maximum(np.abs(a[finite]), 1.0)))


@pytest.mark.parametrize("case", CASES)
def test_fa1_order_gives_fa2_output_and_trace(case):
    cfg = engine.AttentionConfig(**case, seed=seed())
    q, k, v = engine.make_inputs(cfg)
    fa2 = forward.flash(cfg, q, k, v, trace=True)
    fa1 = forward.flash(cfg, q, k, v, trace=True, order="fa1")
    where = f"{cfg} (FA_LAB_TEST_SEED={seeds.SEED})"
    np.testing.assert_array_equal(fa1.trace.processed, fa2.trace.processed)
    # Each (row, key tile) update is the same arithmetic; only the BLAS blocking of the
    # matrix products differs (FA2 multiplies all rows of a column at once), so the two agree
    # to float32 rounding of the scores, which exp() scales by the scores' size.
    eps32 = float(np.finfo(np.float32).eps)
    top = float(np.abs(fa2.trace.running_max[np.isfinite(fa2.trace.running_max)]).max())
    for name in FIELDS:
        gap = rel_gap(getattr(fa2.trace, name), getattr(fa1.trace, name))
        assert gap < 16 * eps32 * (1 + top), f"{name}: {gap:.2e}, {where}"
    eps = float(ml_dtypes.finfo(q.dtype).eps)
    out2 = fa2.output.astype(np.float64)
    gap = np.abs(fa1.output.astype(np.float64) - out2).max() / np.abs(out2).max()
    assert gap < 2 * eps + 16 * eps32 * (1 + top), f"output: {gap:.2e}, {where}"
    assert rel_gap(fa2.lse, fa1.lse) < 16 * eps32, where
    # and both are attention: against the naive float32 emulation
    ref = engine.run(cfg, q, k, v, backend="numpy", algorithm="naive").output.astype(np.float64)
    err = np.abs(fa1.output.astype(np.float64) - ref).max() / np.abs(ref).max()
    assert err < 4 * eps + 64 * eps32 * (1 + top), f"vs naive {err:.2e}, {where}"


def test_fa1_order_is_identical_when_not_causal():
    cfg = engine.AttentionConfig(seq_q=256, seq_k=256, block_q=64, block_k=64, seed=seed())
    q, k, v = engine.make_inputs(cfg)
    fa2 = forward.flash(cfg, q, k, v, trace=True)
    fa1 = forward.flash(cfg, q, k, v, trace=True, order="fa1")
    np.testing.assert_array_equal(fa1.output, fa2.output)
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fa1.trace, name), getattr(fa2.trace, name))


def test_unknown_order_is_refused():
    cfg = engine.AttentionConfig()
    with pytest.raises(ValueError, match="fa2.*fa1"):
        forward.flash(cfg, *engine.make_inputs(cfg), order="fa3")


def test_flash1_hbm_hand_worked():
    # 1 batch·head, N = 256, d = 64, float16 (2 bytes), 64×64 tiles: Tr = Tc = 4.
    # K, V: 256·64·2 = 32,768 bytes each, read once. Every one of the 16 tiles reads Q_i and
    # O_i (64·64·2 = 8,192 each) and m_i, l_i (64·8 = 512) and writes O_i, m_i, l_i back:
    # 16·8,192 = 131,072 per array, 16·512 = 8,192 for m, l. Initialising O, m, l: 256·(128+8).
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=256, seq_k=256, head_dim=64,
                                 block_q=64, block_k=64, dtype="float16")
    t = iomodel.flash1_hbm(cfg)
    assert t.read == 2 * 32768 + 2 * 131072 + 8192 == 335872
    assert t.written == 34816 + 131072 + 8192 == 174080
    assert sum(t.parts.values()) == t.total
    # FA2: Q read once (32,768), K and V once per query tile (4·32,768 each), O and lse once.
    t2 = iomodel.flash_hbm(cfg)
    assert (t2.read, t2.written) == (32768 + 2 * 131072, 32768 + 1024)


def test_flash1_hbm_hand_worked_causal():
    # Causal, N = 256 and 128×64 tiles (Tr = 2, Tc = 4), float32: query tile 0 (rows 0–127)
    # sees key tiles 0, 1; query tile 1 sees 0–3: 6 tiles, 128 query rows each.
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=256, seq_k=256, head_dim=64,
                                 block_q=128, block_k=64, dtype="float32", causal=True)
    t = iomodel.flash1_hbm(cfg)
    rows = 6 * 128
    assert t.parts["read K"] == 256 * 64 * 4
    assert t.parts["read Q_i"] == t.parts["read O_i"] == rows * 64 * 4
    assert t.parts["write m_i, l_i"] == rows * 8
    assert t.written == 256 * (256 + 8) + rows * 256 + rows * 8


@pytest.mark.parametrize("case", CASES)
def test_fa1_loop_view_follows_columns_and_adds_up(case):
    cfg = engine.AttentionConfig(**case)
    view = tiling_data.loop_view(cfg, "fa1")
    hbm = iomodel.flash1_hbm(cfg)
    assert view.steps.flash_read.iloc[-1] == hbm.read
    assert view.steps.flash_written.iloc[-1] == hbm.written
    keys = list(zip(view.steps.col, view.steps.row))
    assert keys == sorted(keys)                        # key tile major
    assert list(view.steps.order) == list(range(len(view.steps)))
    assert len(view.steps) == len(tiling_data.loop_view(cfg, "fa2").steps)


def test_which_order_moves_more_depends_on_the_tiles():
    # FA1 moves O_i, m_i, l_i through HBM twice per tile (about 3·block_q·d·bytes), FA2
    # K_j and V_j (2·block_k·d·bytes): tall query tiles favour FA2, wide key tiles FA1.
    tall = engine.AttentionConfig(seq_q=1024, seq_k=1024, block_q=64, block_k=64)
    wide = tall.with_(block_q=16, block_k=128)
    assert iomodel.flash1_hbm(tall).total > 1.4 * iomodel.flash_hbm(tall).total
    assert iomodel.flash1_hbm(wide).total < iomodel.flash_hbm(wide).total
