"""Memory and IO model against values worked out by hand (see the comments)."""
import engine
from engine.model import iomodel

H200, T4 = engine.PROFILES["H200"], engine.PROFILES["T4"]


def test_config_a_float16_square():
    # B=H=1, N=128, d=64, tiles 64×64, fp16.
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=128, seq_k=128, head_dim=64,
                                 block_q=64, block_k=64, dtype="float16")
    b = iomodel.smem_budget(cfg, H200)
    # Q_i, K_j, V_j: 64·64·2 = 8192 each; S_ij, O_i: 64·64·4 = 16384 each; m_i, l_i: 256 each
    assert b.parts == {"Q_i": 8192, "K_j": 8192, "V_j": 8192, "S_ij": 16384, "O_i": 16384,
                       "m_i": 256, "l_i": 256}
    assert b.total == 57856 and b.fits
    assert b.blocks_per_sm == 3            # 228 KiB // (57856 + 1024 reserved)
    assert iomodel.smem_budget(cfg, T4).blocks_per_sm == 1
    nv = iomodel.naive_hbm(cfg)
    # read Q, K (16384 each), S, P (32768 each), V (16384); write S, P, O, lse (512)
    assert (nv.read, nv.written) == (114688, 82432)
    fl = iomodel.flash_hbm(cfg)
    # Q once, K and V twice each (Tr = 2), O and lse once
    assert (fl.read, fl.written) == (16384 + 2 * 2 * 16384, 16384 + 512)
    assert fl.total < nv.total


def test_config_b_float32_causal_ragged():
    # B=1, H=2, Nq=100, Nk=70, d=16, tiles 32×32, fp32, causal: Tr=4, Tc=3.
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=100, seq_k=70, head_dim=16,
                                 block_q=32, block_k=32, dtype="float32", causal=True)
    assert iomodel.smem_budget(cfg, H200).total == 2048 * 3 + 4096 + 2048 + 128 * 2
    # query tile 0 (rows 0-31) sees key tile 0; tile 1 sees 0-1; tiles 2, 3 see all three.
    # key rows per tile: 32, 32, 6 -> 32 + 64 + 70 + 70 = 236 per head.
    fl = iomodel.flash_hbm(cfg)
    kv = 2 * 236 * 16 * 4
    qo, lse = 2 * 100 * 16 * 4, 2 * 100 * 4
    assert (fl.read, fl.written) == (qo + 2 * kv, qo + lse)
    nv = iomodel.naive_hbm(cfg)
    s = 2 * 100 * 70 * 4
    assert (nv.read, nv.written) == (qo + 2 * (2 * 70 * 16 * 4) + 2 * s, 2 * s + qo + lse)
    assert iomodel.peak_memory(cfg, "flash") == 44320
    assert iomodel.peak_memory(cfg, "naive") == 44320 + 112000
    assert iomodel.peak_memory(cfg, "flash", trace=True) == 44320 + 16 * 2 * 100 * 3 + 12
    assert iomodel.flash_hbm(cfg, trace=True).written == qo + lse + 16 * 2 * 100 * 3


def test_too_big_tiles_and_largest_fitting():
    cfg = engine.AttentionConfig(head_dim=128, block_q=128, block_k=128, dtype="float32")
    b = iomodel.smem_budget(cfg, H200)
    assert not b.fits and b.blocks_per_sm == 0 and b.total > b.limit
    best = iomodel.largest_fitting_tiles(cfg, H200)
    assert best and all(iomodel.smem_budget(cfg.with_(block_q=x, block_k=y), H200).fits
                        for x, y in best)
    assert (128, 64) in best or (64, 128) in best


def test_paper_theta_orders():
    cfg = engine.AttentionConfig(seq_q=4096, seq_k=4096, head_dim=64, dtype="float16")
    th = iomodel.paper_theta_bytes(cfg, H200)
    assert th["M_elements"] == 228 * 1024 / 2
    assert th["flash"] < th["naive"]


def test_backward_wgmma_layout_worked_by_hand_fits_the_h200():
    # d = 64, 128×128: K_j, V_j 128·64·2 = 16,384 each; Q_i, dO_i two stages of 128·64·2 =
    # 32,768 each; dS_ij two buffers of 128·128·2 = 65,536; lse_i, D_i two stages of 128·4 =
    # 1,024 each; dQ_i staged as 128 · 64 float32 = 32,768 (tile order, no padding);
    # mbarriers 128 and swizzle alignment 1,024: 199,808 B.
    cfg = engine.AttentionConfig(head_dim=64, block_q=128, block_k=128, dtype="float16")
    b = iomodel.smem_budget(cfg, H200, "backward wgmma")
    assert b.parts == {"K_j": 16384, "V_j": 16384, "Q_i (2 buffers)": 32768,
                       "dO_i (2 buffers)": 32768, "dS_ij (2 buffers)": 65536,
                       "lse_i (2 buffers)": 1024, "D_i (2 buffers)": 1024,
                       "dQ_i (float32 staging)": 32768, "mbarriers": 128,
                       "swizzle alignment": 1024}
    assert b.total == 199_808 and b.fits and b.limit == 227 * 1024
    assert b.blocks_per_sm == 1
    # d = 128, 64×128: K_j, V_j 32,768 each; Q_i, dO_i 2 · 64·128·2 = 32,768 each; dS_ij
    # 2 · 64·128·2 = 32,768; lse_i, D_i 2 · 64·4 = 512 each: the mma.sync backward's
    # 164,864 B; plus dQ_i 64 · 128 · 4 = 32,768 and 128 + 1,024: 198,784 B.
    cfg = cfg.with_(head_dim=128, block_q=64, block_k=128, dtype="bfloat16")
    b = iomodel.smem_budget(cfg, H200, "backward wgmma")
    assert b.total == 198_784 and b.fits and b.blocks_per_sm == 1
    assert b.total == iomodel.smem_bytes(cfg, "backward mma.sync") + 32_768 + 128 + 1024
