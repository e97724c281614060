"""The tensor-core forward kernels' launch order (kernels/include/common.cuh grid_item_tile, laid out by
engine.gpu.launchers.core.item_grid), checked on the CPU by walking the grid in dispatch order
(x fastest, then y, then z) as the kernels read it. (The schedule model that lab/NOTES.md's
predictions come from is checked against the GPU ratios it was calibrated on by
benchmarks/check_schedule_model.py, not here: those are one GPU's measurements.)"""
import pytest

import engine
from engine.gpu.launchers import core

H200_SMS = 132


def config(seq, bh, causal, block_q=128):
    return engine.AttentionConfig(batch=1, heads=bh, seq_q=seq, seq_k=seq, head_dim=128,
                                  block_q=block_q, block_k=128, dtype="float16",
                                  causal=causal)


def items_in_dispatch_order(cfg, sms):
    """(i, bh) of every block that has an item, in the order the GPU dispatches the blocks:
    grid_item_tile of kernels/include/common.cuh, block by block."""
    gx, gy, gz = core.item_grid(cfg, sms)(cfg.bh)
    out = []
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                i = gy - 1 - y if cfg.causal else y
                bh = z * gx + x
                if bh < cfg.bh:
                    out.append((i, bh))
    return out


@pytest.mark.parametrize("seq,bh", [(1000, 140), (4096, 8), (512, 64), (16384, 3), (256, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_every_item_runs_once_in_the_documented_order(seq, bh, causal):
    cfg = config(seq, bh, causal)
    order = items_in_dispatch_order(cfg, H200_SMS)
    assert sorted(order) == [(i, b) for i in range(cfg.Tr) for b in range(bh)]
    group = core.causal_bh_group(cfg, H200_SMS)
    if not causal:
        assert group == 1
        assert order == [(i, b) for b in range(bh) for i in range(cfg.Tr)], "bh by bh"
        return
    assert group * cfg.Tr >= core.GROUP_WAVES * H200_SMS or group >= bh
    for first in range(0, bh, group):           # heaviest first within each group, groups in turn
        run = [it for it in order if first <= it[1] < first + group]
        tiles = [i for i, _ in run]
        assert tiles == sorted(tiles, reverse=True)
        assert order.index(run[0]) == first * cfg.Tr


def test_grids_fit_the_launch_limits():
    """Every dimension within CUDA's limits for the largest chunk launch_loop makes."""
    for seq in (1, 128, 1000, 65536):
        for causal in (False, True):
            cfg = config(seq, core.MAX_GRID_Y, causal)
            gx, gy, gz = core.item_grid(cfg, H200_SMS)(core.MAX_GRID_Y)
            assert gx <= 2**31 - 1 and gy <= 65535 and gz <= 65535, (seq, causal)
            assert gx * gz >= core.MAX_GRID_Y and gy == cfg.Tr
