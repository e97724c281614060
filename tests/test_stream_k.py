"""Stream-K (engine/model/stream_k.py, the schedule the persistent wgmma kernel and the mma.sync
kernel's STREAM_K build walk when their items are few or uneven, and engine/cpu/stream_k.py,
its NumPy emulation): every key tile of every
item runs exactly once, shares are even, cut items post to distinct slots, and the parts'
merge gives attention within float32 rounding of a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model import stream_k
from engine.model.config import AttentionConfig
from engine.cpu import stream_k as emulation
from reference import attention64, rel_err
import seeds

RNG = seeds.rng(7311)


def config(**changes) -> AttentionConfig:
    base = dict(batch=1, heads=4, seq_q=4096, seq_k=4096, head_dim=128, block_q=128,
                block_k=128, causal=True, dtype="float16")
    return AttentionConfig(**{**base, **changes})


def check_schedule(cfg: AttentionConfig, sms: int, head: int = 0) -> None:
    """Coverage, even shares and slots of the stream-K walk of cfg on `sms` SMs, each item
    opening with `head` positions of no key tile."""
    bh = cfg.bh
    total, G = stream_k.total_tiles(cfg, bh, head), stream_k.blocks(cfg, bh, sms, head)
    tiles = stream_k.key_tiles(cfg)
    seen = {}
    slots = set()
    for b, block in enumerate(stream_k.runs(cfg, bh, G, head)):
        lo, hi = stream_k.share_start(b, total, G), stream_k.share_start(b + 1, total, G)
        assert hi - lo in (total // G, -(-total // G)), "shares differ by more than one position"
        if head == 0:
            assert block, f"block {b} has no work"
            assert sum(r.j_hi - r.j_lo for r in block) == hi - lo
        for n, r in enumerate(block):
            assert lo <= r.start + head + r.j_lo < r.start + head + r.j_hi <= hi, "off the share"
            whole = r.j_lo == 0 and r.j_hi == tiles[r.i]
            assert whole or n in (0, len(block) - 1), "only a block's first and last runs cut"
            if not whole:
                s = stream_k.slot(b, r.start, total, G)
                assert s in (2 * b, 2 * b + 1) and s not in slots
                slots.add(s)
                assert b in stream_k.part_blocks(r.start, tiles[r.i], total, G, head)
            for j in range(r.j_lo, r.j_hi):
                assert (r.k, j) not in seen, f"tile {j} of item {r.k} runs twice"
                seen[(r.k, j)] = b
    # a cut item's parts: exactly the blocks part_blocks names (the merge reads each of them)
    by_item = {}
    for (k, _), b in seen.items():
        by_item.setdefault(k, set()).add(b)
    items = {(stream_k.item_of(cfg, bh, k)) for k in range(cfg.Tr * bh)}
    assert len(items) == cfg.Tr * bh
    # the kernel's way to a share's first item (levels skipped) against the line laid out
    starts = np.cumsum([0] + [tiles[stream_k.item_of(cfg, bh, k)[0]] + head
                              for k in range(cfg.Tr * bh)])
    for k, parts in by_item.items():
        n = tiles[stream_k.item_of(cfg, bh, k)[0]]
        assert parts == set(stream_k.part_blocks(int(starts[k]), n, total, G, head)), k
    for x in {stream_k.share_start(b, total, G) for b in range(G)} | {0, total - 1}:
        k, start = stream_k.item_at(cfg, bh, tiles, x, head)
        assert start == starts[k] <= x < starts[k + 1], (x, k, start)
    assert len(seen) == total - head * cfg.Tr * bh == sum(tiles[i] for i, _ in items)
    assert max(slots, default=0) < 2 * G
    # two slots a block of every row-holding thread's O, m and l: the wgmma kernel's 256
    # consumer threads (head_dim / 2 + 4 floats each) at block_q 128, the mma.sync kernel's
    # 128 threads (block_q · head_dim / 128 + block_q / 16 each) at any block_q
    per_thread = (2 * G * (cfg.head_dim // 2 + 4) * 256 if cfg.block_q == 128 else
                  2 * G * (cfg.block_q * cfg.head_dim // 128 + cfg.block_q // 16) * 128)
    assert stream_k.workspace_floats(cfg, G) == per_thread


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n,bh", [(4096, 4), (1000, 2), (4096, 1), (300, 3), (8192, 4)])
def test_every_tile_runs_once_in_even_shares(n, bh, causal):
    check_schedule(config(seq_q=n, seq_k=n, heads=bh, causal=causal), 132)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("head", [0, stream_k.MMA_SYNC_HEAD])
@pytest.mark.parametrize("bq,bk,slots", [(128, 32, 264), (64, 64, 396), (64, 128, 264)])
def test_every_tile_runs_once_with_mma_sync_tiles(bq, bk, slots, causal, head):
    """The mma.sync kernel's tiles (block_q 64 too), slots (several blocks an SM) and
    items' heads."""
    check_schedule(config(seq_q=4096, seq_k=4096, block_q=bq, block_k=bk, causal=causal),
                   slots, head)


def test_the_rule_splits_launches_of_few_items_only():
    """On 132 SMs the cost model picks stream-K for B·H = 1 and 2 at N = 4096 (32 and 64
    items, most SMs idle in the whole-item walk: measured 1.8-1.9× faster at B·H = 1 on the
    H200) and for causal B·H = 4 at N = 4096 (one wave of rows of 1 to 32 tiles: with the
    levels paired no block runs more than 3 items), not for non-causal B·H = 4 (one wave of
    even rows) nor for any of the B·H·N = 32k comparison shapes."""
    for head in (0, stream_k.WGMMA_HEAD):     # the line without heads and the launcher's
        def picks(cfg, bh, slots=132):
            return stream_k.use_stream_k(cfg, bh, slots, stream_k.WGMMA_COSTS, head)
        for causal in (True, False):
            for bh in (1, 2):
                assert picks(config(causal=causal), bh), (bh, causal, head)
        assert picks(config(), 4) and not picks(config(causal=False), 4)
        for n in (512, 1024, 2048, 4096, 8192, 16384):
            for causal in (True, False):
                assert not picks(config(seq_q=n, seq_k=n, causal=causal), 32768 // n), (n, head)
    # the kernel's 32-bit share arithmetic: tiles · blocks < 2^32. On 132 SMs no config
    # reaches it (2^20 keys at most: 264 items of 16,384 tiles); on a GPU of 2^16 SMs it would
    long_rows = config(seq_q=128, seq_k=2**20, block_k=64, causal=False)
    assert stream_k.total_tiles(long_rows, 264) * 132 < 2**32
    assert stream_k.total_tiles(long_rows, 256) * 2**16 >= 2**32
    assert not stream_k.use_stream_k(long_rows, 256, 2**16)


def test_the_mma_sync_rule_splits_where_it_measured_faster():
    """The mma.sync kernel's STREAM_K build (two blocks an SM at d = 128, 128×32: 264 slots on
    132 SMs), against its H200 runs of 2026-11-23: stream-K where it measured faster (B·H = 4,
    N = 4096 causal 1.69× and not 1.05×, N = 8192 causal 1.37×; B·H·N = 32k causal at
    N = 2048 1.08× and 4096 1.24×), whole items where it did not (N = 1024, B·H = 32 causal:
    0.84×; non-causal N = 1024-8192 at B·H·N = 32k and B·H = 4, N = 8192: within 1%) and at
    N = 16384 (two waves, heaviest first already even)."""
    costs = stream_k.MMA_SYNC_COSTS

    def picks(n, causal, bh=4, slots=264):
        return stream_k.use_stream_k(config(seq_q=n, seq_k=n, heads=bh, block_k=32,
                                            causal=causal), bh, slots, costs,
                                     stream_k.MMA_SYNC_HEAD)
    assert picks(4096, True) and picks(4096, False) and picks(8192, True)
    assert picks(2048, True, bh=16) and picks(4096, True, bh=8)
    assert not picks(1024, True, bh=32)
    for n in (1024, 2048, 4096, 8192):
        assert not picks(n, False, bh=32768 // n)
    assert not picks(16384, True) and not picks(16384, False)
    cfg = config(block_k=32)
    # causal rows of 4 to 128 tiles of 32 keys: shares of 32, at most 3 runs a block
    assert stream_k.total_tiles(cfg, 4) == 8448 and stream_k.blocks(cfg, 4, 264) == 264
    assert max(len(b) for b in stream_k.runs(cfg, 4, 264)) == 3


def test_cost_model_reproduces_the_h200_runs():
    """The model (units of one tile, 1.7 µs at d = 128 on the H200) against the measured
    stream-K times of 2026-11-23, the kernel with the pipeline across runs and the paired
    causal levels (lab/records/hopper_bh*_wgmma_sk1_h200_2026-11-23_pipeline.json):
    B·H = 1 not causal 31.7 µs, causal 29.1 µs; B·H = 4 causal 47.8 µs; within 5%."""
    tile_us = 8.4e6 / (651e12 / 132) * 1e6     # N = 16384's rate: 651 TFLOP/s on 132 SMs
    for bh, causal, measured_us in ((1, False, 31.7), (1, True, 29.1), (4, True, 47.8)):
        model = stream_k.makespan_stream_k(config(causal=causal), bh, 132) * tile_us
        assert abs(model / measured_us - 1) <= 0.05, (bh, causal, model, measured_us)


def test_shares_of_the_issue_shape():
    """Causal, B·H = 4, N = 4096: 4 · (1 + ... + 32) = 2112 tiles, 16 per block on 132 SMs;
    the heaviest rows (32 tiles) are cut in two."""
    cfg = config()
    assert stream_k.total_tiles(cfg, 4) == 2112 and stream_k.blocks(cfg, 4, 132) == 132
    blocks = stream_k.runs(cfg, 4, 132)
    assert blocks[0][0] == stream_k.Run(k=0, i=31, bh=0, j_lo=0, j_hi=16, start=0)
    # heaviest and lightest levels alternate on the line, so no block runs more than 3 items
    # (in level order the last blocks ran up to 10 of the lightest rows)
    assert [stream_k.item_of(cfg, 4, k) for k in range(4)] == [(31, 0), (0, 0), (31, 1), (0, 1)]
    assert max(len(b) for b in blocks) == 3


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("sms", [3, 17, 132])
def test_emulation_matches_float64(causal, sms):
    cfg = config(seq_q=700, seq_k=700 if causal else 650, heads=3, head_dim=64, block_k=64,
                 causal=causal, dtype="float32")
    q, k, v = (RNG.standard_normal((1, 3, n, 64)).astype(np.float32)
               for n in (cfg.seq_q, cfg.seq_k, cfg.seq_k))
    got = emulation.flash(cfg, q, k, v, sms)
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(got.output, O64) <= 1e-5
    assert np.abs(got.lse - lse64).max() <= 1e-5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 900), m=st.integers(1, 900), bh=st.integers(1, 4),
       block_k=st.sampled_from([32, 64, 128]), causal=st.booleans(), sms=st.integers(1, 140),
       head=st.sampled_from([0, 1, stream_k.MMA_SYNC_HEAD, 40]))
def test_schedule_and_merge_over_configs(n, m, bh, block_k, causal, sms, head):
    cfg = config(seq_q=n, seq_k=m, heads=bh, head_dim=64, block_k=block_k, causal=causal,
                 dtype="float32")
    check_schedule(cfg, sms, head)
    q = RNG.standard_normal((1, bh, n, 64)).astype(np.float32)
    k, v = (RNG.standard_normal((1, bh, m, 64)).astype(np.float32) for _ in range(2))
    got = emulation.flash(cfg, q, k, v, sms, head)
    O64, lse64 = attention64(q, k, v, cfg.softmax_scale, causal)
    assert rel_err(got.output, O64) <= 1e-5
    assert np.abs(got.lse - lse64).max() <= 1e-5
