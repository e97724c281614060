"""The kernel catalog (engine.model.catalog): which tensor-core build takes which config, the
refusal messages that quote it, and the shared memory of every catalogued build — no GPU
needed."""
import pytest

import engine
from engine.model import iomodel
from engine.model.config import AttentionConfig, ConfigError
from engine.model import catalog

H200 = engine.PROFILES["H200"]
BUILDS = (catalog.MMA_SYNC, catalog.WGMMA, catalog.BACKWARD_MMA, catalog.BACKWARD_WGMMA)


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=128, seq_k=128, head_dim=64, block_q=64, block_k=64,
                dtype="float16")
    return engine.AttentionConfig(**{**base, **changes})


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.name)
def test_every_catalogued_shape_fits_one_h200_block(build):
    for d, bq, bk in build.shapes:
        for dtype in build.dtypes:
            cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
            assert build.takes(cfg)
            assert iomodel.smem_budget(cfg, H200, build.name).fits, (build.name, cfg)


def test_shared_memory_of_two_builds_worked_by_hand():
    # mma.sync, d = 64, 64×64: Q_i 64·64·2 = 8,192 B plus two buffers each of K_j and V_j
    # (4 · 64·64·2 = 32,768 B): 40,960 B.
    assert iomodel.smem_bytes(config(), "mma.sync") == 40_960
    # wgmma, d = 128, 128×128: Q_i 128·128·2 = 32,768 once; K_j, V_j in three stages:
    # 6 · 32,768 = 196,608; 128 B of mbarriers (8 · (2 + 12) + 4 = 116 B) and 1,024 B of
    # swizzle alignment: 230,528 B, under the 232,448 B (227 KiB) block of an H100.
    assert iomodel.smem_bytes(config(head_dim=128, block_q=128, block_k=128), "wgmma") == 230_528
    # d = 64: Q_i twice, K_j and V_j in two stages each, 6 · 128·64·2 = 98,304 + 128 + 1,024.
    assert iomodel.smem_bytes(config(head_dim=64, block_q=128, block_k=128), "wgmma") == 99_456


@pytest.mark.parametrize("hopper", [False, True])
def test_mma_sync_shapes_run_on_mma_sync_on_every_gpu(hopper):
    for d, bq, bk in catalog.MMA_SYNC.shapes:
        for dtype in catalog.MMA_SYNC.dtypes:
            cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
            assert catalog.tensorcore_build(cfg, hopper) is catalog.MMA_SYNC


def test_hopper_shapes_run_on_wgmma_only_on_hopper():
    assert "128×64, 128×128 (wgmma kernel)" in catalog.supported_text()
    for d, bq, bk in catalog.WGMMA.shapes:
        cfg = config(head_dim=d, block_q=bq, block_k=bk)
        assert catalog.tensorcore_build(cfg, hopper=True) is catalog.WGMMA
        with pytest.raises(ConfigError, match="compute capability 9.x"):
            catalog.tensorcore_build(cfg, hopper=False)


@pytest.mark.parametrize("changes", [dict(head_dim=32), dict(block_q=32), dict(block_k=16),
                                     dict(dtype="float32"), dict(head_dim=128, block_k=128),
                                     dict(block_q=64, block_k=8)])
def test_unsupported_configs_are_refused_with_the_list(changes):
    with pytest.raises(ConfigError) as err:
        catalog.tensorcore_build(config(**changes), hopper=True)
    msg = str(err.value)
    assert catalog.supported_text() in msg
    assert "head_dim 128 with block_q×block_k 64×32, 64×64, 128×32;" in msg


def test_bfloat16_runs_on_wgmma_on_hopper_and_on_mma_sync_elsewhere():
    for d, bq, bk in catalog.WGMMA.shapes:
        cfg = config(dtype="bfloat16", head_dim=d, block_q=bq, block_k=bk)
        assert catalog.tensorcore_build(cfg, hopper=True) is catalog.WGMMA
        if (d, bq, bk) not in catalog.MMA_SYNC.shapes:
            with pytest.raises(ConfigError, match="in float16 or bfloat16, head_dim 64 with "
                                                  "block_q×block_k 128×128"):
                catalog.tensorcore_build(cfg, hopper=False)
    cfg = config(dtype="bfloat16", head_dim=128, block_q=128, block_k=32)
    assert catalog.tensorcore_build(cfg, hopper=True) is catalog.MMA_SYNC


# ---- the tensor-core backward (kernels/ampere/flash_backward_mma.cu,
#      kernels/hopper/flash_backward_wgmma.cu) ---------------------------------------------
def test_every_backward_shape_fits_one_h200_block_and_takes_both_dtypes():
    from engine.gpu.launchers import backward_mma
    for d, bq, bk in catalog.BACKWARD_MMA.shapes:
        for dtype in ("float16", "bfloat16"):
            cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
            assert catalog.backward_build(cfg, hopper=False) is catalog.BACKWARD_MMA
            assert backward_mma.supported(cfg)
            assert iomodel.smem_budget(cfg, H200, "backward mma.sync").fits, cfg
            assert backward_mma.build(cfg).threads == bk // 16 * 32


def test_the_backward_build_takes_one_query_buffer_where_two_do_not_fit():
    from engine.gpu.launchers import backward_mma
    from engine.model.devices import PROFILES
    l4 = PROFILES["L4"].smem_per_block_optin
    cfg = config(head_dim=128, block_q=64, block_k=64, dtype="bfloat16")
    two, one = backward_mma.build(cfg, H200.smem_per_block_optin), backward_mma.build(cfg, l4)
    assert "-DQUERY_STAGES=2" in two.options and "-DQUERY_STAGES=1" in one.options
    assert one.smem == iomodel.smem_bytes(cfg, catalog.BACKWARD_MMA.smem_fallback) <= l4 < two.smem
    big = config(head_dim=128, block_q=64, block_k=128)
    one_buffer = iomodel.smem_bytes(big, catalog.BACKWARD_MMA.smem_fallback)
    with pytest.raises(ValueError, match=f"need {one_buffer:,} bytes .* even with one query "
                                         f"buffer.*Shapes that fit: .*head_dim 128 with 64×64"):
        backward_mma.build(big, l4)


def test_wgmma_backward_shapes_run_on_wgmma_only_on_hopper():
    from engine.gpu.launchers import backward_wgmma
    assert catalog.BACKWARD_WGMMA.hopper_only
    assert catalog.BACKWARD_WGMMA.source == "hopper/flash_backward_wgmma.cu"
    for d, bq, bk in catalog.BACKWARD_WGMMA.shapes:
        for dtype in ("float16", "bfloat16"):
            cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
            assert catalog.backward_build(cfg, hopper=True) is catalog.BACKWARD_WGMMA
            # every wgmma shape has the mma.sync build to fall back on off Hopper
            assert catalog.backward_build(cfg, hopper=False) is catalog.BACKWARD_MMA
            b = backward_wgmma.build(cfg)
            assert b.threads == 384 and b.function == "flash_backward_wgmma"
            assert b.smem == iomodel.smem_bytes(cfg, "backward wgmma")
            assert "-arch=sm_90a" in b.options and f"-DBF16={int(dtype == 'bfloat16')}" in b.options
            assert f"-DDQ_WRITER={backward_wgmma.DQ_WRITER[d]}" in b.options


def test_mma_sync_only_backward_shapes_stay_on_mma_sync_on_hopper():
    only_mma = [s for s in catalog.BACKWARD_MMA.shapes if s not in catalog.BACKWARD_WGMMA.shapes]
    assert only_mma
    for d, bq, bk in only_mma:
        cfg = config(head_dim=d, block_q=bq, block_k=bk, dtype="bfloat16")
        assert catalog.backward_build(cfg, hopper=True) is catalog.BACKWARD_MMA


def test_backward_dispatch_follows_hopper_wgmma(monkeypatch):
    """backward_mma.chosen: the wgmma build on Hopper for its shapes while HOPPER_WGMMA = 1,
    the mma.sync build with 0 or on another GPU."""
    from engine.gpu.launchers import backward_mma
    cfg = config(head_dim=128, block_q=64, block_k=128)
    for hopper, flag, want in ((True, 1, catalog.BACKWARD_WGMMA), (True, 0, catalog.BACKWARD_MMA),
                               (False, 1, catalog.BACKWARD_MMA)):
        monkeypatch.setattr(backward_mma, "device_is_hopper", lambda: hopper)
        monkeypatch.setattr(backward_mma, "HOPPER_WGMMA", flag)
        assert backward_mma.chosen(cfg) is want, (hopper, flag)


def test_wgmma_backward_launcher_refuses_other_shapes_and_gpus(monkeypatch):
    from engine.gpu.launchers import backward_wgmma
    with pytest.raises(ConfigError, match="does not take .*block_q=64, block_k=64. It takes dtype "
                                          "float16 or bfloat16: head_dim 64 with block_q×block_k "
                                          "128×128"):
        backward_wgmma.check_takes(config())
    from engine.gpu import runtime
    monkeypatch.setattr(runtime, "device_is_hopper", lambda: False)   # the check every Hopper
    with pytest.raises(ConfigError, match="needs a GPU of compute capability 9.x"):  # launcher shares
        backward_wgmma.check_takes(config(block_q=128, block_k=128))


def test_backward_shared_memory_worked_by_hand():
    # d = 128, 64×128: K_j, V_j 2 · 128·128·2 = 65,536; Q_i, dO_i twice each 4 · 64·128·2 =
    # 65,536; dS_ijᵀ twice 2 · 128·64·2 = 32,768; lse_i, D_i twice each 4 · 64·4 = 1,024:
    # 164,864 B.
    cfg = config(head_dim=128, block_q=64, block_k=128)
    assert iomodel.smem_bytes(cfg, "backward mma.sync") == 164_864


@pytest.mark.parametrize("changes,named", [
    (dict(dtype="float32"), "dtype=float32"),
    (dict(head_dim=128, block_q=128, block_k=64), "head_dim=128, block_q=128, block_k=64"),
    (dict(head_dim=32), "head_dim=32"),
    (dict(block_q=128, block_k=64), "block_q=128, block_k=64")])
def test_unsupported_backward_configs_are_refused_with_the_list(changes, named):
    from engine.gpu.launchers import backward_mma
    cfg = config(**changes)
    assert not backward_mma.supported(cfg)
    with pytest.raises(ConfigError) as err:
        backward_mma.build(cfg)
    msg = str(err.value)
    assert named in msg and catalog.backward_supported_text() in msg
    assert "head_dim 128 with block_q×block_k 64×128" in msg
    for hopper in (False, True):          # the same refusal, naming both builds, on every GPU
        with pytest.raises(ConfigError) as err:
            catalog.backward_build(cfg, hopper)
        assert str(err.value) == msg


def test_backward_refusal_text_names_both_builds():
    text = catalog.backward_supported_text()
    assert text.startswith(catalog.BACKWARD_MMA.text())
    assert "mma.sync kernel" in text and "compute capability 9.x the wgmma kernel" in text
    assert catalog.BACKWARD_WGMMA.shapes_text() in text


@pytest.mark.parametrize("hopper", [False, True])
def test_every_backward_shape_has_a_forward_to_make_o_and_lse(hopper):
    for d, bq, bk in catalog.BACKWARD_MMA.shapes:
        for dtype in catalog.BACKWARD_MMA.dtypes:
            cfg = AttentionConfig(head_dim=d, block_q=bq, block_k=bk, dtype=dtype, seq_q=300)
            fwd = catalog.forward_for_backward(cfg, hopper)
            assert catalog.tensorcore_takes(fwd, hopper), (cfg, fwd)
            assert fwd.with_(block_q=bq, block_k=bk) == cfg      # only the tiles change
            if catalog.tensorcore_takes(cfg, hopper):
                assert fwd == cfg
