"""Stream-K: the persistent wgmma forward kernel's even share of the work for every SM, as pure
Python, the same arithmetic as struct Work and struct Walk in kernels/flash_wgmma.cu.

The work is one line of key tiles, item after item (an item is one query tile i of one
batch·head; it holds tiles(i) key tiles). Causal items come heaviest first, level by level
(level 0 is query tile Tr - 1 of every batch·head); non-causal items batch·head by batch·head.
Block b of G takes tiles [b·W/G, (b+1)·W/G) of the W on the line, cutting items at its share's
ends. A block that ran part of an item posts its unnormalised state (O, m, l) to slot 2b (its
first run) or 2b + 1 (its last run) and takes a ticket from the item's counter; the part that
draws the last ticket merges the others and writes O_i and lse.

The launcher turns it on (use_stream_k) where an even share pays, by a cost model of the two
walks: launches of few items (fewer than the SMs), whose whole-item walk leaves SMs idle.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from .config import AttentionConfig
from .iomodel import query_rows_per_key_tile

# The launcher's choice (use_stream_k) weighs the two walks' makespans in a cost model, in
# units of one key tile's two products, fitted to the H200's stream-K runs of 2026-11-23
# (benchmarks/NOTES.md, "Issue 14: stream-K measured", within 7% of the three measured shapes):
# every run (a whole item or a part) costs RUN_COST tiles besides its own (the first S_ij
# alone, the last P V_j alone, the epilogue; a second Q_i buffer did not shorten it), posting a part
# POST_COST, and the block that ends a cut item MERGE_COST per part it reads back. Stream-K
# runs where the model has it at most GAIN of the whole-item walk's time.
RUN_COST, POST_COST, MERGE_COST = 2.0, 1.5, 0.9
GAIN = 0.85
CONSUMER_THREADS = 256   # the kernel's SK_THREADS: two consumer warpgroups (block_q = 128)


def key_tiles(cfg: AttentionConfig) -> list[int]:
    """Key tiles of each query tile i (the kernel's Work::tiles; iomodel's causal rule)."""
    return [int(t) for t in query_rows_per_key_tile(cfg)[1]]


def item_of(cfg: AttentionConfig, bh: int, k: int) -> tuple[int, int]:
    """(query tile i, batch·head) of item k on the line."""
    if cfg.causal:
        return cfg.Tr - 1 - k // bh, k % bh
    return k % cfg.Tr, k // cfg.Tr


def total_tiles(cfg: AttentionConfig, bh: int) -> int:
    """W: key tiles of every item of bh batch·heads."""
    return bh * sum(key_tiles(cfg))


def blocks(cfg: AttentionConfig, bh: int, sms: int) -> int:
    """G: one block per SM, never more blocks than tiles (every share holds one)."""
    return min(total_tiles(cfg, bh), sms)


def use_stream_k(cfg: AttentionConfig, bh: int, sms: int) -> bool:
    """True where the cost model has the stream-K walk at most GAIN of the whole-item walk's
    makespan (never for launches of more than two items per SM: their walks are even)."""
    if cfg.Tr * bh > 2 * sms:
        return False
    return makespan_stream_k(cfg, bh, sms) <= GAIN * makespan_whole(cfg, bh, sms)


def makespan_whole(cfg: AttentionConfig, bh: int, sms: int) -> float:
    """The persistent walk of whole items, in tiles: at least its longest item, and at least
    an even share of every item's tiles and run cost."""
    tiles = key_tiles(cfg)
    return max(max(tiles) + RUN_COST, bh * (sum(tiles) + RUN_COST * cfg.Tr) / sms)


def makespan_stream_k(cfg: AttentionConfig, bh: int, sms: int) -> float:
    """The stream-K walk, in tiles: the slowest block's runs, posts and merges."""
    tiles, total, G = key_tiles(cfg), total_tiles(cfg, bh), blocks(cfg, bh, sms)
    worst = 0.0
    for block in runs(cfg, bh, G):
        t = 0.0
        for r in block:
            n = tiles[r.i]
            t += r.j_hi - r.j_lo + RUN_COST
            if r.j_hi - r.j_lo < n:
                t += POST_COST
                if r.j_hi == n:
                    parts = block_at(r.start + n - 1, total, G) - block_at(r.start, total, G) + 1
                    t += MERGE_COST * parts
        worst = max(worst, t)
    return worst


def share_start(b: int, total: int, G: int) -> int:
    return b * total // G


def block_at(x: int, total: int, G: int) -> int:
    """The block whose share holds tile x of the line."""
    return ((x + 1) * G + total - 1) // total - 1


def slot(b: int, start: int, total: int, G: int) -> int:
    """The slot block b posts its part of the item starting at `start` to: 2b if it is the
    block's first run, 2b + 1 if its last."""
    return 2 * b + (share_start(b, total, G) < start)


@dataclass(frozen=True)
class Run:
    """Key tiles [j_lo, j_hi) of item k (query tile i, batch·head bh), whose first tile is
    tile `start` of the line."""
    k: int
    i: int
    bh: int
    j_lo: int
    j_hi: int
    start: int


def runs(cfg: AttentionConfig, bh: int, G: int) -> list[list[Run]]:
    """Every block's runs, in the order the block walks them."""
    tiles = key_tiles(cfg)
    starts, at = [], 0
    for k in range(cfg.Tr * bh):
        starts.append(at)
        at += tiles[item_of(cfg, bh, k)[0]]
    total = at
    out = []
    for b in range(G):
        x, hi = share_start(b, total, G), share_start(b + 1, total, G)
        k = bisect_right(starts, x) - 1
        mine = []
        while x < hi:
            i, h = item_of(cfg, bh, k)
            n = tiles[i]
            j_lo, j_hi = x - starts[k], min(n, hi - starts[k])
            mine.append(Run(k, i, h, j_lo, j_hi, starts[k]))
            x = starts[k] + j_hi
            k += j_hi == n
        out.append(mine)
    return out


def workspace_floats(cfg: AttentionConfig, G: int) -> int:
    """Floats of the kernel's sk_part: 2 slots per block, each the O accumulators (head_dim / 2
    per thread), m_i[2] and l_i[2] of every consumer thread."""
    return 2 * G * (cfg.head_dim // 2 + 4) * CONSUMER_THREADS
