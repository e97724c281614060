"""What every flash launcher owes its callers, checked once per launcher (teaching, mma.sync,
wgmma) on a GPU: refused operands, outputs all written (poisoned first), the block schedule,
more batch·heads than one grid takes, identical repeated launches, and builds without spills."""
import numpy as np
import pytest

import engine
from engine.model.config import ConfigError
from engine.model import catalog
from engine.gpu.launchers import mma, teaching, wgmma
from engine.gpu.runtime import device_is_hopper
from engine.results import TRACE_FIELDS
from kernel_checks import check_float64, check_schedule, to_gpu
import seeds

RNG = seeds.rng(7)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]

# launcher -> (module, a config it takes, catalogued shapes for the facts test or None)
LAUNCHERS = {
    "teaching": (teaching, dict(head_dim=64, block_q=64, block_k=32), None),
    "mma.sync": (mma, dict(head_dim=128, block_q=128, block_k=32), catalog.MMA_SYNC),
    "wgmma": (wgmma, dict(head_dim=128, block_q=128, block_k=128), catalog.WGMMA),
}


@pytest.fixture(params=list(LAUNCHERS))
def launcher(request):
    if request.param == "wgmma" and not device_is_hopper():
        pytest.skip("the wgmma kernel needs a GPU of compute capability 9.x")
    return request.param


def config(name, **changes):
    base = dict(batch=1, heads=2, seq_q=256, seq_k=256, dtype="float16",
                seed=int(RNG.integers(0, 2**31)), **LAUNCHERS[name][1])
    return engine.AttentionConfig(**{**base, **changes})


def run_kernel(name, cfg, q, k, v, trace):
    out = LAUNCHERS[name][0].launch(cfg, to_gpu(cfg, q), to_gpu(cfg, k), to_gpu(cfg, v), trace,
                                    poison=True)
    return {key: arr.get() for key, arr in out.items() if key != "info"}


def test_wrong_operands_are_refused(launcher):
    import cupy
    module, cfg = LAUNCHERS[launcher][0], config(launcher)
    q, k, v = (to_gpu(cfg, x) for x in engine.make_inputs(cfg))
    with pytest.raises(ConfigError, match="shape"):
        module.launch(cfg, q[:, :-1], k, v, trace=False)
    with pytest.raises(ConfigError, match="dtype float16"):
        module.launch(cfg, q.astype(cupy.float32), k, v, trace=False)
    with pytest.raises(ConfigError, match="CuPy array"):
        module.launch(cfg, q.get(), k, v, trace=False)


def test_schedule_records_every_block(launcher):
    cfg = config(launcher, seq_q=1000, seq_k=600, heads=5, causal=True)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(launcher, cfg, q, k, v, trace=True)
    check_schedule(got["sm_id"], got["start_ns"], got["end_ns"], cfg.bh * cfg.Tr)


def test_more_batch_heads_than_one_grid_takes(launcher):
    """B·H above gridDim.y's 65535 runs in two launches; both halves are written."""
    cfg = config(launcher, batch=2, heads=32768, seq_q=3, seq_k=5, causal=True)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(launcher, cfg, q, k, v, trace=True)
    assert not any(np.isnan(got[n]).any() for n in ("O", "lse", *TRACE_FIELDS))
    check_schedule(got["sm_id"], got["start_ns"], got["end_ns"], cfg.bh * cfg.Tr)
    check_float64(cfg, q, k, v, got)


@pytest.mark.parametrize("launcher", ["mma.sync", "wgmma"])
def test_causal_items_run_heaviest_first_group_by_group(monkeypatch, launcher):
    """The tensor-core kernels' causal launch order (kernels/include/common.cuh, core.item_grid):
    140 batch·heads of 8 query tiles make groups of 66, 66 and 8 batch·heads on 132 SMs (the
    last partial, its grid's extra blocks exit at once). Every item is written and right, and
    the recorded start times fall with the query tile inside each group, and rise from one
    group to the next."""
    if launcher == "wgmma" and not device_is_hopper():
        pytest.skip("the wgmma kernel needs a GPU of compute capability 9.x")
    from engine.gpu.launchers import core, wgmma
    from engine.gpu.runtime import live_gpu
    # one block per item, in core.item_grid's order (the persistent walk has its own tests)
    monkeypatch.setattr(wgmma, "PERSISTENT", 0)
    cfg = config(launcher, heads=140, seq_q=1000, seq_k=1000, causal=True)
    group = core.causal_bh_group(cfg, live_gpu().sms)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(launcher, cfg, q, k, v, trace=True)
    check_float64(cfg, q, k, v, got)
    check_schedule(got["sm_id"], got["start_ns"], got["end_ns"], cfg.bh * cfg.Tr)
    start = got["start_ns"].astype(np.float64).reshape(cfg.bh, cfg.Tr)    # record bh·Tr + i
    tile = np.broadcast_to(np.arange(cfg.Tr), start.shape)
    groups = [slice(g, min(g + group, cfg.bh)) for g in range(0, cfg.bh, group)]
    assert len(groups) >= 2, (group, cfg.bh)
    for g in groups:
        assert np.corrcoef(tile[g].ravel(), start[g].ravel())[0, 1] < -0.5, g
    means = [start[g].mean() for g in groups]
    assert means == sorted(means), means


def test_repeated_launches_are_identical(launcher):
    cfg = config(launcher, seq_q=777, seq_k=777, causal=True, heads=4)
    q, k, v = engine.make_inputs(cfg)
    first = run_kernel(launcher, cfg, q, k, v, trace=False)
    for _ in range(3):
        again = run_kernel(launcher, cfg, q, k, v, trace=False)
        assert np.array_equal(first["O"], again["O"]), "a race: output changed between runs"
        assert np.array_equal(first["lse"], again["lse"])


@pytest.mark.parametrize("launcher", [n for n, (_, _, b) in LAUNCHERS.items() if b is not None])
def test_catalogued_builds_keep_every_value_in_registers(launcher):
    module, _, build = LAUNCHERS[launcher]
    for trace in (False, True):
        for d, bq, bk in build.shapes:
            for dtype in build.dtypes:
                cfg = config(launcher, head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
                facts = module.kernel_facts(cfg, trace)
                assert 0 < facts["registers_per_thread"] <= 255, (d, bq, bk)
                assert facts["local_bytes_per_thread"] == 0, ("spills", d, bq, bk, trace)
