"""The tile-size explorer's model (engine.model.tilemodel) against figures worked out by hand for
two configs on the H200 profile (228 KiB of shared memory per SM, 227 KiB per block, 132 SMs,
2048 threads and 32 blocks per SM, 64K registers, 4.8 TB/s, 67 TFLOP/s FP32), and the
per-query-tile key rows against the CPU emulation's own skipping rule on random configs."""
import math

import numpy as np
import pytest

import engine
from engine.model import tilemodel
from engine.model.tiles import processed_tiles
from engine.model.devices import PROFILES
from engine.model.iomodel import flash_hbm, key_rows_per_query_tile
from seeds import SEED, rng

H200 = PROFILES["H200"]
A100 = PROFILES["A100 80GB"]


def row(rows, kernel, bq, bk):
    return next(r for r in rows if r["kernel"] == kernel and (r["block_q"], r["block_k"]) == (bq, bk))


# Config A: B=2, H=4, N=1024, d=64, float16, not causal.
CFG_A = engine.AttentionConfig(batch=2, heads=4, seq_q=1024, seq_k=1024, head_dim=64,
                               dtype="float16", causal=False)


def test_config_a_teaching_64x64_by_hand():
    r = row(tilemodel.tile_rows(CFG_A, H200), "teaching", 64, 64)
    # Q_i, K_j, V_j: 64·64·2 B = 8 KiB each; S_ij, O_i: 64·64·4 B = 16 KiB each; m_i, l_i 256 B
    assert r["smem_bytes"] == 3 * 8192 + 2 * 16384 + 2 * 256 == 57856
    # (57856 + 1024 reserved) = 58880; 4 · 58880 = 235520 > 233472 (228 KiB), so 3 blocks
    # share an SM: m_i and l_i (512 B) and the runtime's 1 KiB push the fourth out
    assert (r["blocks_per_sm"], r["limited_by"]) == (3, "shared memory")
    # 8 batch·heads × 16 query tiles = 128 blocks, one wave over 132 SMs × 3
    assert (r["blocks"], r["waves"], r["kv_passes"]) == (128, 1, 16)
    # Q read and O written once (1 MiB each), K and V read 16 times (16 MiB each), lse 32 KiB
    assert r["hbm_bytes"] == 34 * 2**20 + 32768
    assert r["kv_bytes"] == 32 * 2**20
    # FLOPs 4·8·1024²·64 = 2^31 at 67 TFLOP/s (> bytes at 4.8 TB/s), 128 of 132 SMs busy
    expected_ms = 2**31 / 67e12 / (128 / 132) * 1e3
    assert math.isclose(r["model_ms"], expected_ms, rel_tol=1e-12)


def test_config_a_paper_choice_by_hand():
    p = tilemodel.paper_tiles(CFG_A, H200)
    # M = 233472 B / 2 B = 116736 elements; Bc = ⌈116736 / 256⌉ = 456; Br = min(456, 64) = 64
    assert (p.M, p.Bc_formula, p.Br_formula) == (116736, 456, 64)
    assert (p.block_q, p.block_k) == (64, 128)


def test_config_a_tensor_core_shapes_and_smem():
    hopper = {(r["block_q"], r["block_k"]) for r in tilemodel.tile_rows(CFG_A, H200)
              if r["kernel"] == "tensorcore"}
    ampere = {(r["block_q"], r["block_k"]) for r in tilemodel.tile_rows(CFG_A, A100)
              if r["kernel"] == "tensorcore"}
    assert ampere == {(64, 32), (64, 64), (64, 128), (128, 32), (128, 64)}
    assert hopper == ampere | {(128, 128)}          # the wgmma build, Hopper only
    r = row(tilemodel.tile_rows(CFG_A, H200), "tensorcore", 64, 64)
    # Q_i 8 KiB, K_j and V_j two 8 KiB buffers each: 40 KiB, 128 threads
    assert r["smem_bytes"] == 40960


def test_occupancy_with_registers_by_hand():
    # 134 registers · 32 lanes = 4288 → 4352 per warp (units of 256): 65536 // 4352 = 15
    # warps, 3 blocks of 4 warps; shared memory would allow 233472 // 41984 = 5
    occ = tilemodel.model_occupancy(H200, 40960, 128, registers=134)
    assert (occ.blocks_per_sm, occ.limited_by) == (3, "registers")
    assert tilemodel.model_occupancy(H200, 40960, 128).blocks_per_sm == 5
    # tiny blocks: 2048 threads // 128 = 16 before the 32-block limit
    assert tilemodel.model_occupancy(H200, 1024, 128) == tilemodel.Occupancy(16, "threads")
    assert tilemodel.model_occupancy(H200, 1024, 32) == tilemodel.Occupancy(32, "blocks per SM")


# Config B: B=1, H=2, N=256, d=128, float32, causal.
CFG_B = engine.AttentionConfig(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=128,
                               dtype="float32", causal=True)


def test_config_b_largest_tiles_do_not_fit_by_hand():
    r = row(tilemodel.tile_rows(CFG_B, H200), "teaching", 128, 128)
    # five 128×128 float32 tiles of 64 KiB each plus m_i, l_i: 321 KiB > 227 KiB
    assert r["smem_bytes"] == 5 * 65536 + 2 * 512
    assert not r["fits"] and r["blocks_per_sm"] == 0 and r["waves"] == 0
    assert math.isnan(r["model_ms"])
    assert not any(x["kernel"] == "tensorcore" for x in tilemodel.tile_rows(CFG_B, H200))


def test_config_b_causal_32x128_by_hand():
    r = row(tilemodel.tile_rows(CFG_B, H200), "teaching", 32, 128)
    # Q_i, S_ij, O_i 16 KiB each, K_j and V_j 64 KiB each, m_i and l_i 128 B each
    assert r["smem_bytes"] == 3 * 16384 + 2 * 65536 + 256 == 180480
    assert (r["blocks_per_sm"], r["limited_by"]) == (1, "shared memory")
    # 8 query tiles of 32 rows: tiles 0-3 (rows < 128) load key tile 0 only (128 rows),
    # tiles 4-7 key tiles 0 and 1 (256 rows): 1536 key rows per batch·head
    assert list(key_rows_per_query_tile(CFG_B.with_(block_q=32, block_k=128))) == \
        [128] * 4 + [256] * 4
    kv = 2 * 1536 * 128 * 4                  # 2 batch·heads, d = 128, 4 bytes
    assert r["kv_bytes"] == 2 * kv
    assert r["hbm_bytes"] == 2 * (2 * 256 * 128 * 4) + 2 * kv + 2 * 256 * 4
    assert (r["blocks"], r["waves"]) == (16, 1)


def test_config_b_paper_choice_by_hand():
    p = tilemodel.paper_tiles(CFG_B, H200)
    # M = 233472 / 4 = 58368; Bc = ⌈58368 / 512⌉ = 114 → 64; Br = min(114, 128) = 114 → 64
    assert (p.M, p.Bc_formula, p.Br_formula, p.block_q, p.block_k) == (58368, 114, 114, 64, 64)


def test_waves_and_busy_fraction_by_hand():
    cfg = engine.AttentionConfig(batch=4, heads=16, seq_q=4096, seq_k=4096, head_dim=64,
                                 block_q=64, block_k=64, dtype="float16")
    # 64 batch·heads × 64 query tiles = 4096 blocks over 132 SMs × 4 = 528 a wave: 8 waves,
    # the last with 4096 - 7·528 = 400 blocks, all 132 SMs busy
    assert tilemodel.waves(cfg, H200, 4) == 8
    assert tilemodel.busy_fraction(cfg, H200, 4) == 1.0
    # one block per SM: 32 waves, the last 4096 - 31·132 = 4 blocks on 4 SMs
    assert tilemodel.waves(cfg, H200, 1) == 32
    assert math.isclose(tilemodel.busy_fraction(cfg, H200, 1), (31 * 132 + 4) / (32 * 132))
    assert tilemodel.waves(cfg, H200, 0) == 0


def test_every_allowed_shape_has_a_teaching_row_and_bigger_query_tiles_move_fewer_bytes():
    rows = tilemodel.tile_rows(CFG_A, H200)
    teaching = {(r["block_q"], r["block_k"]): r for r in rows if r["kernel"] == "teaching"}
    assert set(teaching) == {(q, k) for q in engine.BLOCK_SIZES for k in engine.BLOCK_SIZES}
    for bk in engine.BLOCK_SIZES:
        moved = [teaching[(bq, bk)]["hbm_bytes"] for bq in engine.BLOCK_SIZES]
        assert moved == sorted(moved, reverse=True) and moved[0] > moved[-1]


@pytest.mark.parametrize("case", range(20))
def test_key_rows_agree_with_the_emulations_skipping_rule(case):
    g = rng(1100 + case)
    cfg = engine.AttentionConfig(
        batch=1, heads=1, seq_q=int(g.integers(1, 700)), seq_k=int(g.integers(1, 700)),
        head_dim=64, block_q=int(g.choice(engine.BLOCK_SIZES)),
        block_k=int(g.choice(engine.BLOCK_SIZES)), causal=bool(g.integers(0, 2)))
    proc = processed_tiles(cfg)
    tile_rows = np.minimum(np.arange(1, cfg.Tc + 1) * cfg.block_k, cfg.seq_k) - \
        np.arange(cfg.Tc) * cfg.block_k
    expected = (proc * tile_rows[None, :]).sum(axis=1)
    assert np.array_equal(key_rows_per_query_tile(cfg), expected), (SEED, cfg)
    hbm = flash_hbm(cfg)
    assert hbm.parts["read K"] == int(expected.sum()) * cfg.head_dim * cfg.itemsize
