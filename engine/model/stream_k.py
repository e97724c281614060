"""Stream-K: an even share of the forward's work for every block that runs at once, as pure
Python, the same arithmetic as kernels/include/stream_k.cuh (walked by the persistent wgmma kernel,
one block per SM, and by the mma.sync kernel's STREAM_K build, as many blocks as fit on the
GPU at once).

The work is one line of key tiles, item after item (an item is one query tile i of one
batch·head; it holds tiles(i) key tiles). Causal items come in pairs of levels, the heaviest
and the lightest query tile left (Tr - 1 and 0 of every batch·head, then Tr - 2 and 1, ...),
so that no share ends in a run of light items, each a run with its own fixed cost;
non-causal items batch·head by batch·head.
Each item may open with `head` positions of no key tile (about the fixed cost of a run:
MMA_SYNC_HEAD, WGMMA_HEAD), so that a share that opens items holds fewer key tiles. Block b
of G takes positions [b·W/G, (b+1)·W/G) of the W on the line, cutting items at its share's
ends. A block that ran part of an item posts its unnormalised state (O, m, l) to slot 2b (its
first run) or 2b + 1 (its last run) and takes a ticket from the item's counter; the part that
draws the last ticket merges the others and writes O_i and lse.

The launchers turn it on (use_stream_k) where an even share pays, by a cost model of the two
walks: launches of few items (fewer than the blocks the GPU runs at once, `slots`), whose
whole-item walk leaves SMs idle or waits for its longest rows.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import AttentionConfig
from .tiles import seen_key_tiles


@dataclass(frozen=True)
class Costs:
    """A kernel's costs in the launchers' model, in units of one of its key tiles' two
    products: every run (a whole item or a part) costs `run` tiles besides its own (launch,
    first loads, the first softmax alone, the epilogue), posting a part `post`, and the block
    that ends a cut item `merge` per part it reads back."""
    run: float
    post: float
    merge: float


# The persistent wgmma kernel (tiles of 128 keys), fitted to the H200's stream-K runs of
# 2026-11-23 (the kernel with the pipeline across runs and the paired causal levels;
# lab/NOTES.md, "Forward parity: a pipeline across runs, measured", within 5% of the three
# measured shapes).
WGMMA_COSTS = Costs(run=2.0, post=1.0, merge=1.3)
# The mma.sync kernel's STREAM_K build (tiles of block_k keys, several blocks an SM): fitted
# to its first H200 runs (2026-11-23, d = 128, 128×32, ten shapes; lab/NOTES.md, "Forward
# parity: stream-K in the mma.sync kernel, measured"), so that the rule picks stream-K at the
# shapes where it measured faster and not at N = 1024, B·H = 32 causal, where it measured
# slower. The model counts slots, not SMs (two blocks sharing an SM each run slower than one
# alone): its times are a ranking of the two walks, not a prediction of either.
MMA_SYNC_COSTS = Costs(run=4.0, post=1.0, merge=1.0)
# Line positions each item's head takes in the mma.sync kernel's walk, before its key tiles:
# about the fixed cost of a run in tiles. From the kernel's run log on the H200 (2026-11-23,
# B·H = 4, N = 4096, d = 128, 128×32 causal): a block's end grew 4.8 µs a run and 5.8 µs a
# merge (95% of them by the block of the item's first part), its tiles 1.7 µs each. Those
# costs, laid over the walks of the launches the rule splits, put the last block's end lowest
# at 3 (lab/NOTES.md, "the mma.sync kernel's runs").
MMA_SYNC_HEAD = 3
# The persistent wgmma kernel's heads (tiles of 128 keys): by its cost model (WGMMA_COSTS, a run
# 2 tiles) the launches the rule splits end soonest at 3; on the H200 (2026-11-24) 3 was 8%
# faster than 0 at B·H = 1, N = 4096 causal, 2% not causal, 1.6% at B·H = 4 causal
# (lab/NOTES.md, "heads on the wgmma kernel's line, measured").
WGMMA_HEAD = 3
# Stream-K runs where the model has it at most GAIN of the whole-item walk's time.
GAIN = 0.85


def key_tiles(cfg: AttentionConfig) -> list[int]:
    """Key tiles of each query tile i (the kernel's Work::tiles; engine.model.tiles's causal
    rule)."""
    return [int(t) for t in seen_key_tiles(cfg)]


def item_of(cfg: AttentionConfig, bh: int, k: int) -> tuple[int, int]:
    """(query tile i, batch·head) of item k on the line: causal, pairs of levels p (query
    tiles Tr - 1 - p and p, each batch·head's two side by side), then the middle query tile of
    an odd Tr; not causal, batch·head by batch·head."""
    if not cfg.causal:
        return k % cfg.Tr, k // cfg.Tr
    p, e = divmod(k, 2 * bh)
    if p < cfg.Tr // 2:
        return (p if e % 2 else cfg.Tr - 1 - p), e // 2
    return cfg.Tr // 2, k - cfg.Tr // 2 * 2 * bh


def total_tiles(cfg: AttentionConfig, bh: int, head: int = 0) -> int:
    """W: positions on the line, the key tiles of every item of bh batch·heads and each
    item's head."""
    return bh * (sum(key_tiles(cfg)) + head * cfg.Tr)


def blocks(cfg: AttentionConfig, bh: int, slots: int, head: int = 0) -> int:
    """G: one block per slot (the blocks that run at once), never more blocks than positions
    (every share holds one)."""
    return min(total_tiles(cfg, bh, head), slots)


def use_stream_k(cfg: AttentionConfig, bh: int, slots: int, costs: Costs = WGMMA_COSTS,
                 head: int = 0) -> bool:
    """True where the cost model has the stream-K walk on `slots` blocks at most GAIN of the
    whole-item walk's makespan (never for launches of more than two items per slot: their
    walks are even, nor where tiles · blocks reaches 2^32: the kernels' share arithmetic is
    32-bit, since a 64-bit division is a call and no call may sit where a wgmma is in
    flight)."""
    total = total_tiles(cfg, bh, head)
    if cfg.Tr * bh > 2 * slots or total * min(total, slots) >= 2**32:
        return False
    return (makespan_stream_k(cfg, bh, slots, costs, head)
            <= GAIN * makespan_whole(cfg, bh, slots, costs))


def makespan_whole(cfg: AttentionConfig, bh: int, slots: int,
                   costs: Costs = WGMMA_COSTS) -> float:
    """The walk of whole items, in tiles: at least its longest item, and at least an even
    share of every item's tiles and run cost."""
    tiles = key_tiles(cfg)
    return max(max(tiles) + costs.run, bh * (sum(tiles) + costs.run * cfg.Tr) / slots)


def makespan_stream_k(cfg: AttentionConfig, bh: int, slots: int,
                      costs: Costs = WGMMA_COSTS, head: int = 0) -> float:
    """The stream-K walk, in tiles: the slowest block's runs, posts and merges."""
    tiles, total = key_tiles(cfg), total_tiles(cfg, bh, head)
    G = blocks(cfg, bh, slots, head)
    worst = 0.0
    for block in runs(cfg, bh, G, head):
        t = 0.0
        for r in block:
            n = tiles[r.i]
            t += r.j_hi - r.j_lo + costs.run
            if r.j_hi - r.j_lo < n:
                t += costs.post
                if r.j_hi == n:
                    t += costs.merge * len(part_blocks(r.start, n, total, G, head))
        worst = max(worst, t)
    return worst


def share_start(b: int, total: int, G: int) -> int:
    return b * total // G


def block_at(x: int, total: int, G: int) -> int:
    """The block whose share holds tile x of the line."""
    return ((x + 1) * G + total - 1) // total - 1


def part_blocks(start: int, n: int, total: int, G: int, head: int = 0) -> range:
    """The blocks that run a part of the item of n key tiles whose head starts at `start`:
    those holding its first and last key tiles and every block between."""
    return range(block_at(start + head, total, G), block_at(start + head + n - 1, total, G) + 1)


def slot(b: int, start: int, total: int, G: int) -> int:
    """The slot block b posts its part of the item starting at `start` to: 2b if it is the
    block's first run, 2b + 1 if its last."""
    return 2 * b + (share_start(b, total, G) < start)


@dataclass(frozen=True)
class Run:
    """Key tiles [j_lo, j_hi) of item k (query tile i, batch·head bh), whose head starts at
    position `start` of the line (its key tile j at start + head + j)."""
    k: int
    i: int
    bh: int
    j_lo: int
    j_hi: int
    start: int


def item_at(cfg: AttentionConfig, bh: int, tiles: list[int], x: int,
            head: int = 0) -> tuple[int, int]:
    """(k, start): the item holding position x of the line and its head's position, found
    as the kernel's walk finds a share's first item: whole (pairs of) levels skipped, then
    whole (pairs of) items. tiles: key_tiles(cfg)."""
    if not cfg.causal:
        n = cfg.Tc + head
        return x // n, x // n * n
    start, half = 0, cfg.Tr // 2
    for p in range(half + 1):
        heavy = tiles[cfg.Tr - 1 - p] + head
        n = heavy + tiles[p] + head if p < half else heavy
        if x < start + bh * n:
            skip = (x - start) // n
            k = p * 2 * bh + (2 * skip if p < half else skip)
            start += skip * n
            if p < half and x >= start + heavy:
                k, start = k + 1, start + heavy
            return k, start
        start += bh * n
    raise ValueError(f"position {x} is past the line's end")


def runs(cfg: AttentionConfig, bh: int, G: int, head: int = 0) -> list[list[Run]]:
    """Every block's runs, in the order the block walks them (a share that ends in an item's
    head runs none of it; a block whose share lies in one head runs nothing)."""
    tiles = key_tiles(cfg)
    total = total_tiles(cfg, bh, head)
    out = []
    for b in range(G):
        x, hi = share_start(b, total, G), share_start(b + 1, total, G)
        k, start = item_at(cfg, bh, tiles, x, head)
        mine = []
        while x < hi:
            i, h = item_of(cfg, bh, k)
            n = tiles[i]
            end = min(start + head + n, hi)
            j_lo, j_hi = max(0, x - start - head), end - start - head
            if j_hi > j_lo:
                mine.append(Run(k, i, h, j_lo, j_hi, start))
            x = end
            if end == start + head + n:
                k, start = k + 1, start + head + n
        out.append(mine)
    return out


def workspace_floats(cfg: AttentionConfig, G: int) -> int:
    """Floats of the kernels' sk_part: 2 slots per block, each the O accumulators, m_i and l_i
    of every thread that holds rows: block_q · head_dim floats of O and 8 · block_q of m and l
    (the wgmma kernel's 256 consumer threads hold head_dim / 2 + 4 each, the mma.sync kernel's
    128 threads block_q · head_dim / 128 + block_q / 16)."""
    return 2 * G * cfg.block_q * (cfg.head_dim + 8)
