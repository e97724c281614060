"""A model of how the tensor-core forward kernels' work items spread over the SMs, behind the
predictions in lab/NOTES.md ("Forward parity"): each item (query tile i, batch·head) costs a
fixed part plus one unit per key tile it reads (causal: i + 1 at block_q = block_k); one block per SM.
Orders:

  per-bh     one block per item, heaviest first within each batch·head (the kernel before)
  global     one block per item in the launch order of kernels/include/common.cuh: heaviest first
             within groups of batch·heads of at least 4 waves
  strided    one block per SM, block b taking items b, b + SMs, b + 2·SMs, ... of that order
             (weighed on paper, not built: it gives every heavy round to the same blocks)
  persistent the PERSISTENT build: one block per SM; causal, group by group, one item of each
             round of SMs items, the rounds dealt in alternate directions

Not built, weighed for the forward-parity B·H = 4 target (`--split`): causal rows cut into parts of
at most `cut` key tiles, one block per part, heaviest first, plus a merge of the cut rows'
partial results (`split:<cut>`); and an even share of the causal work for each SM, a block's
share running across row ends with the cut rows merged afterwards (`even`, stream-K style).

A free SM takes the next block in launch order (greedy list scheduling). Times are in units
of one 128×128 tile's products (about 1.7 µs at d = 128 on an H200, lab/NOTES.md).

  python -m benchmarks.schedule_model [--sms 132] [--fixed 1.7]
      [--fixed-persistent 0.6] [--split [--merge 0.3]]
"""
from __future__ import annotations

import argparse
import heapq

from engine.gpu.launchers.core import group_for


def items(tiles: int, bh: int, causal: bool, order: str, sms: int) -> list[tuple[int, int]]:
    """(group, key tiles) of every item, in launch order (tiles = Tr = Tc)."""
    if not causal:
        return [(0, tiles)] * (tiles * bh)
    if order == "per-bh":
        return [(b, tiles - x) for b in range(bh) for x in range(tiles)]
    group = group_for(tiles, sms)
    out = []
    for first in range(0, bh, group):
        n = min(group, bh - first)
        out += [(first, tiles - k // n) for k in range(tiles * n)]
    return out


def makespan(work: list[tuple[int, int]], sms: int, fixed: float, order: str) -> float:
    """The time the last SM finishes."""
    if order in ("strided", "persistent"):
        load = [0.0] * sms
        pos, current = 0, None
        for w, (group, t) in enumerate(work):
            if order == "strided":
                block = w % sms
            else:                       # rounds restart with every group
                pos = 0 if group != current else pos
                current = group
                rnd, k = divmod(pos, sms)
                block = sms - 1 - k if rnd % 2 else k
                pos += 1
            load[block] += fixed + t
        return max(load)
    free = [0.0] * sms
    heapq.heapify(free)
    for _, t in work:
        heapq.heappush(free, heapq.heappop(free) + fixed + t)
    return max(free)


def split_items(tiles: int, bh: int, cut: int) -> tuple[list[tuple[int, int]], int]:
    """(items, parts of cut rows): causal row i (i + 1 key tiles) in ceil((i + 1) / cut)
    parts as equal as can be, heaviest first."""
    sizes, parts = [], 0
    for n in range(1, tiles + 1):
        k = -(-n // cut)
        base, extra = divmod(n, k)
        sizes += [base + (p < extra) for p in range(k)] * bh
        parts += k * bh if k > 1 else 0
    return [(0, t) for t in sorted(sizes, reverse=True)], parts


def split_table(sms: int, fixed: float, merge: float, shapes, cuts) -> list[tuple]:
    """(N, B·H, variant, non-causal, causal, ratio) of the split variants, not built: a cut
    row's merge costs `merge` tiles per part, spread over the SMs."""
    rows = []
    for n, bh in shapes:
        tiles = n // 128
        plain = makespan(items(tiles, bh, False, "global", sms), sms, fixed, "global")
        for cut in cuts:
            work, parts = split_items(tiles, bh, cut)
            causal = makespan(work, sms, fixed, "global") + merge * parts / sms
            rows.append((n, bh, f"split:{cut}", plain, causal, causal / plain))
        total = bh * tiles * (tiles + 1) / 2
        even = total / sms + fixed + merge * 2        # one share each, one partial row each end
        rows.append((n, bh, "even", plain, even, even / plain))
    return rows


def table(sms: int, fixed: float, fixed_persistent: float, shapes) -> list[tuple]:
    """(N, B·H, order, non-causal time, causal time, causal / non-causal)."""
    rows = []
    for n, bh in shapes:
        tiles = n // 128
        for order in ("per-bh", "global", "strided", "persistent"):
            f = fixed_persistent if order in ("strided", "persistent") else fixed
            plain = makespan(items(tiles, bh, False, order, sms), sms, f, order)
            causal = makespan(items(tiles, bh, True, order, sms), sms, f, order)
            rows.append((n, bh, order, plain, causal, causal / plain))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.schedule_model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sms", type=int, default=132)
    p.add_argument("--fixed", type=float, default=1.7,
                   help="fixed cost of a block, in tiles (launch, first loads, epilogue)")
    p.add_argument("--fixed-persistent", type=float, default=0.6,
                   help="fixed cost of an item in a persistent block (the first S alone)")
    p.add_argument("--split", action="store_true",
                   help="the split variants (not built) at B·H = 4 instead")
    p.add_argument("--merge", type=float, default=0.3,
                   help="cost of merging one part of a cut row, in tiles (--split)")
    args = p.parse_args(argv)
    if args.split:
        print(f"{'N':>6}{'B·H':>5}  {'variant':<11}{'non-causal':>11}{'causal':>9}{'ratio':>7}")
        for n, bh, name, plain, causal, ratio in split_table(
                args.sms, args.fixed, args.merge, [(4096, 4), (8192, 4), (16384, 4)],
                (32, 24, 16, 12, 10, 8)):
            print(f"{n:>6}{bh:>5}  {name:<11}{plain:>11.1f}{causal:>9.1f}{ratio:>7.2f}")
        return 0
    shapes = [(n, 32768 // n) for n in (512, 1024, 2048, 4096, 8192, 16384)]
    shapes += [(4096, 4), (16384, 4), (4096, 128), (8192, 64)]
    print(f"{'N':>6}{'B·H':>5}  {'order':<11}{'non-causal':>11}{'causal':>9}{'ratio':>7}"
          f"{'vs per-bh':>11}")
    base = {}
    for n, bh, order, plain, causal, ratio in table(args.sms, args.fixed,
                                                    args.fixed_persistent, shapes):
        if order == "per-bh":
            base = {False: plain, True: causal}
        gain = f"{base[False] / plain:.3f} {base[True] / causal:.3f}"
        print(f"{n:>6}{bh:>5}  {order:<11}{plain:>11.1f}{causal:>9.1f}{ratio:>7.2f}{gain:>15}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
