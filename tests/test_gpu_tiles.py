"""The live tile sweep and CUDA's occupancy on a GPU (engine.gpu.tilesweep,
engine.gpu.occupancy): every shape each kernel takes is timed with the project's method, the
occupancy CUDA reports is what the model allows once the compiled kernel's registers are
counted, and the server's tile-sweep limit refuses a sweep before anything runs."""
import pytest

import engine
from engine.model import iomodel, tilemodel
from engine.model.config import LimitError
from engine.model import catalog
from engine.gpu.occupancy import kernel_occupancy
from engine.gpu.runtime import device_is_hopper, live_gpu
from engine.gpu.tilesweep import shapes_taken, sweep_tiles
import seeds

RNG = seeds.rng(1300)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]


def config(**changes):
    base = dict(batch=1, heads=4, seq_q=512, seq_k=512, head_dim=64, dtype="float16",
                seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


def test_tensor_core_sweep_times_every_catalogued_shape():
    cfg = config()
    hopper = device_is_hopper()
    expected = {(bq, bk) for build in catalog.TENSORCORE_BUILDS for d, bq, bk in build.shapes
                if d == 64 and cfg.dtype in build.dtypes and (hopper or not build.hopper_only)}
    assert set(shapes_taken(cfg, "tensorcore")) == expected
    seen = []
    results, skipped = sweep_tiles(cfg, ("tensorcore",), 20,
                                   lambda done, total, label: seen.append((done, total)))
    assert skipped == []
    assert seen == [(i, len(expected)) for i in range(1, len(expected) + 1)]
    assert {(r["block_q"], r["block_k"]) for r in results} == expected
    for r in results:
        c = cfg.with_(block_q=r["block_q"], block_k=r["block_k"])
        build = catalog.tensorcore_build(c, hopper)
        assert r["kernel"] == "tensorcore" and r["reps"] == 20 and r["method"]
        assert 0 < r["p10_ms"] <= r["median_ms"] <= r["p90_ms"], r
        assert r["smem_bytes"] == iomodel.smem_bytes(c, build.name)
        assert r["blocks_per_sm"] >= 1 and r["registers_per_thread"] > 0
        assert (r["seq_q"], r["head_dim"], r["dtype"]) == (512, 64, "float16")


@pytest.mark.parametrize("tiles", [(16, 16), (64, 64), (128, 64)])
def test_cuda_occupancy_is_within_the_model_with_registers(tiles):
    """CUDA's resident blocks per SM never exceed the model's figure once the compiled
    kernel's registers are counted (CUDA also rounds shared memory up to its allocation
    unit, so it may allow fewer), and the model without registers is an upper bound."""
    cfg = config(block_q=tiles[0], block_k=tiles[1])
    got = kernel_occupancy(cfg, "teaching")
    gpu = live_gpu()
    smem = iomodel.smem_bytes(cfg)
    assert got["smem_bytes"] == smem and got["threads_per_block"] == 128
    with_regs = tilemodel.model_occupancy(gpu, smem, 128, got["registers_per_thread"])
    assert 1 <= got["blocks_per_sm"] <= with_regs.blocks_per_sm, (got, with_regs)
    assert with_regs.blocks_per_sm <= tilemodel.model_occupancy(gpu, smem, 128).blocks_per_sm


def test_teaching_shapes_taken_are_those_that_fit():
    cfg = config(head_dim=128, dtype="float32")
    gpu = live_gpu()
    taken = set(shapes_taken(cfg, "teaching"))
    for bq in engine.BLOCK_SIZES:
        for bk in engine.BLOCK_SIZES:
            fits = iomodel.smem_bytes(cfg.with_(block_q=bq, block_k=bk)) <= \
                gpu.smem_per_block_optin
            assert ((bq, bk) in taken) == fits
    assert (128, 128) not in taken                    # 321 KiB of float32 tiles


def test_sweep_over_the_limit_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_TILE_SWEEP_POINTS", "3")
    calls = []
    with pytest.raises(LimitError, match="tile_sweep_points.*FA_LAB_MAX_TILE_SWEEP_POINTS"):
        sweep_tiles(config(), ("teaching",), 20, lambda *a: calls.append(a))
    assert calls == []


def test_sweep_of_a_config_over_the_servers_limits_is_refused(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_QKV_ELEMENTS", "1000")
    with pytest.raises(LimitError, match="qkv_elements"):
        sweep_tiles(config(), ("teaching",), 20)
