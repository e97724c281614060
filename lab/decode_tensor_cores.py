"""Lab: what holds Flash-Decoding at 0.93-0.96x PyTorch's SDPA (enable_gqa) on the H100? Builds
of the split kernel on the recorded decode grid (float16, heads 32, kv_heads 8, d 128, one
query token, batch 1-8, seq_k 32k-128k, contiguous, the auto split count), each first checked
against float64 on the GPU tests' shapes, then timed alternately with the project's harness
(engine.gpu.decode_bench: L2 flushed, median of 30), the better of two rounds, beside SDPA:

  --set stages     products on the tensor cores (TENSOR_CORES=1: mma.sync m16n8k16, the query
                   rows of a KV head padded to 16) or the CUDA cores (FFMA), 2 or 3 key tiles
                   in flight
  --set prefetch   the copies asking L2 for 128 or 256 bytes at once (L2_PREFETCH)
  --set deeper     the 256-byte prefetch with 3 stages, both kinds of products
  --set hint       the kernel as it is, its copies asking L2 for 256 bytes (as committed), 128
                   or none (L2_PREFETCH)
  --set layout     K_j, V_j rows swizzled by 16-byte chunks (patches/decode_swizzle.diff onto
                   commit 4b80ab2), padded by 16 bytes as the kernel has them (KV_PAD), and
                   swizzled without the L2 prefetch
  --set tc         products on the CUDA cores or the tensor cores, on the H200 (the patch)
  --set lockstep   the warps of a block apart on the key tiles (the kernel) or in step, a block
                   barrier a tile (patches/decode_lockstep.diff onto d873ddd; 0.1-1.7% slower)
  --set rings      the kernel as it is with 2 or 3 key tiles in flight (STAGES)
  --set warps      the kernel as it is with 4 warps a block (16 keys each of a 64-key tile) or 8
                   (8 keys each): twice the warps an SM to hide each warp's dependent chain
  --set tma        the kernel as it is, its K and V rows brought by 16-byte cp.async copies or by
                   the copy engine (TMA_COPIES, the launcher's choice on Hopper at 1.5 blocks an
                   SM and more; forced here on any grid), 2 or 3 stages
  --set tiles      the kernel as it is, with 128-key tiles (32 keys a warp, one block an SM)
                   or 64 (two blocks an SM, the auto rule's, or one)
  --set walk       the copy engine over the contiguous cache, each split its own run of key
                   tiles (the kernel) or the tiles dealt round the splits (split s: tiles s,
                   s + S, ...; INTERLEAVE=1 of patches/decode_interleave.diff), and over a
                   paged cache of 64-key pages (the same keys scattered by the block table),
                   to see whether the paged cache's lead is its blocks reading neighbouring
                   bytes at once (no: the interleaved walk ran as fast as the kernel's)
  --set rotate     the copy engine over the contiguous cache, each block walking its split's
                   tiles from the first (the kernel) or from its own place, wrapping round
                   (ROTATE=1 of patches/decode_rotate.diff), and over the paged cache, to see
                   whether blocks at the same offsets of regions a power of two apart is what
                   holds the contiguous cache behind the paged one (no: 5-8% slower)
  --set order      the kernel as it is (the copy engine) over the contiguous cache and over
                   paged caches of 64-key pages, their pages scattered by the block table (as
                   every paged run here) or in order (page j of sequence b at b ·
                   pages_per_seq + j), to tell the pages' scattering from their eight KV
                   heads' rows side by side (the heads side by side: in order as fast)
  --set split_wait the copy engine's K_j and V_j of a warp's stage on one mbarrier (the kernel)
                   or on one each (SPLIT_WAIT=1 of patches/decode_split_wait.diff), so that S_ij
                   and the softmax start once K_j has landed and only P_ij V_j waits for V_j;
                   also on a paged cache
  --set merge      the merge's loads of O_s, 8 (the kernel), 16 or 32 in flight a thread
                   (the kernel's MERGE_IN_FLIGHT)
  --set promotion  the copy engine's tensor maps with L2 promotion 128 bytes (the launcher's),
                   256 or none
  --set paged_tiles  a paged cache (pages of 64) copied a whole tile at a time (the kernel
                   since 2026-11-28, decode_tile_copies) or each warp its rows, beside the
                   contiguous cache
  --set merge_cost the kernel, and the same with no merge (SKIP_MERGE=1: each split writes its
                   state and no block merges, so the output is not written and that build
                   is timed unchecked, labelled so), to tell the split phase's time from the
                   merge's at the batch-1 shapes, where ours trails SDPA by 1-3 us
  --set half_parts the kernel, and its splits' O_s stored in 16 bits (HALF_PARTS=1 of
                   patches/decode_half_parts.diff), the merge's loads 8 or 16 in flight a
                   thread (level, and 11-16% slower)
  --set ticket     the kernel, its ticket with the leader's fence only (LEADER_FENCE_ONLY=1 of
                   ticket.cuh: no fence in each thread before the barrier), and no merge;
                   the leader's fence is the kernel's since commit 3c202ce and the
                   switch is gone, so both builds are now the same
  --set merge_prefetch  the kernel, the leader's fence only, that and the merge's first
                   O_s loads issued with m_s and l_s (MERGE_PREFETCH=1), and no merge (the
                   first two the same build since, as in --set ticket; MERGE_PREFETCH left
                   the kernel after its run: git apply patches/decode_merge_prefetch.diff)
  --set acq_rel    the kernel of 3c202ce (the leader's fence.sc before its atomicAdd, one after in
                   the merging block) and the ticket as one acquire-release atomic at GPU
                   scope (TICKET_ACQ_REL=1 of ticket.cuh: MEMBAR.ALL.GPU before it, no fence
                   after), and no merge; the acquire-release ticket is the kernel's since
                   commit cd9ec1f and the switch is gone, so both builds are the same
  --set warp_merge the kernel, and the warps' O_i merged at the end of a split in one step
                   (WARP_MERGE_PARALLEL=1 of flash_decode.cu: each warp's scaled O_i to its
                   slice of the free ring, one barrier, each thread summing its dimensions
                   over the warps) instead of a warp at a time, a barrier each (1.0 us of a
                   block's end in decode_phases.py's run); made the kernel at commit da0d8ae
                   and taken back at d6e7720: the cp.async builds ran 12-16% slower with it
                   (--splits 1,8; NOTES.md); the switch left the kernel at b0a487e: git apply
                   patches/decode_phase_clock.diff
  --set merge_bulk the kernel; the warps' O_i merged in one step (as in --set warp_merge);
                   the merging block's O_s brought by one bulk copy into the free ring and
                   summed from shared memory (MERGE_BULK=1: one L2 round trip instead of four
                   rounds of 8 loads a thread at 32 splits); and both. MERGE_BULK left the
                   kernel after its run (9-11% slower): git apply patches/decode_merge_bulk.diff
                   onto commit ca1d399
  --set fast_end   the kernel, and its end of a split and merge through the free rings
                   (FAST_END=1 of flash_decode.cu, copy-engine builds only: the warps' O_i
                   merged in one step with the same fused multiply-adds, the merging block's
                   O_s brought by cp.async copies all in flight at once), contiguous and on
                   pages of 64; needs patches/decode_fast_end.diff onto e2a98da (1.4-2.0 us
                   slower at batch 1; not kept)
  --set block      the copy engine's tile by each warp (the kernel on commit 11b5938) or whole
                   by thread 0 (BLOCK_COPIES=1 of patches/decode_block_copies.diff, boxes of 64
                   rows), and a paged cache; the kernel copies whole tiles since

The first three sets and --set tc need the switches of patches/decode_tensor_cores.diff, first
made against commit f668e29 and now carried onto 6922d6f (git checkout 6922d6f && git apply
lab/patches/decode_tensor_cores.diff); the 256-byte prefetch is in the kernel since.
Run on a GPU: python3 lab/decode_tensor_cores.py --set S [--quick] [--splits 1,4,16]
(--splits: those split counts instead of the auto count, where the copy engine's fill rule
matters; run by decode_fill.sh, logs/h200_2026-11-28_decode_fill.log)"""
import argparse
import sys
from dataclasses import replace

import numpy as np

sys.path[:0] = ["tests", "."]


def force(tensor_cores=None, stages: int = 2, prefetch=None, block_k=None, per_sm=None,
          padded=False, threads=None, defines=(), tma=None, extra_smem=0, box_rows=False,
          promotion=None, paged_tiles=None):
    """Point the decode launcher at one build; returns the undo. tensor_cores, prefetch: the
    patch's TENSOR_CORES and the kernel's L2_PREFETCH (None: leave them out); stages: its ring
    of key tiles (and the shared memory counted for it); block_k: keys a tile (None:
    decode_block_k's); per_sm: the auto rule's blocks an SM (None: AUTO_BLOCKS_PER_SM); padded:
    K_j and V_j rows padded by 16 bytes (KV_PAD=1 of patches/decode_swizzle.diff) instead of
    swizzled; threads: threads a block (None: DECODE_THREADS), the warps sharing each key tile;
    defines: more -D switches ("NAME=value") for the build; tma: the copy engine wherever
    decode_tma allows it but for the grid's fill (True) or cp.async everywhere (False); None:
    the launcher's choice; extra_smem: bytes of shared memory a block needs beyond what
    decode_smem_parts counts (a patch's switch that adds barriers); box_rows: the contiguous
    cache's tensor maps in boxes of a whole tile's rows (BLOCK_COPIES of
    patches/decode_block_copies.diff) instead of a warp's; promotion: the tensor maps' L2
    promotion in bytes (0, 64, 128 or 256; None: the launcher's 128); paged_tiles: False to keep
    each warp's copies on a paged cache where the rule (decode_tile_copies) copies whole
    tiles (None: the rule)."""
    from engine.gpu.launchers import decode as launcher
    from engine.model import decode_config as dc
    saved = {(launcher, "compile_options"): launcher.compile_options,
             (launcher, "check_fits"): launcher.check_fits,
             (launcher, "NUM_THREADS"): launcher.NUM_THREADS,
             (launcher, "DECODE_STAGES"): launcher.DECODE_STAGES,
             (dc, "DECODE_STAGES"): dc.DECODE_STAGES,
             (launcher, "decode_block_k"): launcher.decode_block_k,
             (dc, "decode_block_k"): dc.decode_block_k,
             (dc, "AUTO_BLOCKS_PER_SM"): dc.AUTO_BLOCKS_PER_SM,
             (launcher, "TMA_COPIES"): launcher.TMA_COPIES,
             (dc, "TMA_MIN_BLOCKS_PER_SM"): dc.TMA_MIN_BLOCKS_PER_SM,
             (launcher, "cache_maps"): launcher.cache_maps}
    if promotion is not None:
        from engine.gpu.launchers import wgmma
        saved[(wgmma, "tiled_map_args")] = map_args = wgmma.tiled_map_args
        kinds = wgmma.cuda_driver().CUtensorMapL2promotion
        chosen = {0: kinds.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  64: kinds.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
                  128: kinds.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  256: kinds.CU_TENSOR_MAP_L2_PROMOTION_L2_256B}[promotion]
        wgmma.tiled_map_args = lambda *a, **k: map_args(*a, **k)._replace(l2_promotion=chosen)
    if paged_tiles is not None:
        saved[(launcher, "decode_tile_copies")] = rule = launcher.decode_tile_copies
        launcher.decode_tile_copies = lambda cfg, n: rule(cfg, n) and (paged_tiles
                                                                       or not cfg.paged)
    if box_rows:
        warp_maps = launcher.cache_maps

        def tile_maps(cfg, K, V, *tiles):
            if cfg.paged:
                return warp_maps(cfg, K, V, *tiles)
            n0, kv, rows, d = cfg.cache_shape
            return tuple(launcher.tensor_map(x.reshape(n0 * kv, rows, d),
                                             dc.decode_block_k(cfg.head_dim), cfg.dtype)
                         for x in (K, V))
        launcher.cache_maps = tile_maps
    if tma is not None:           # True: on every grid the rule's other parts allow
        launcher.TMA_COPIES = tma
        dc.TMA_MIN_BLOCKS_PER_SM = 0
    if tensor_cores is not None:
        orig = launcher.uses_tensor_cores
        saved[(launcher, "uses_tensor_cores")] = orig
        launcher.uses_tensor_cores = lambda cfg: tensor_cores and orig(cfg)
    launcher.DECODE_STAGES = dc.DECODE_STAGES = stages
    extra = [*defines, *([f"L2_PREFETCH={prefetch}"] if prefetch is not None else []),
             *(["KV_PAD=1"] if padded else [])]
    if extra:
        options = launcher.compile_options
        launcher.compile_options = lambda cfg, *a: (*options(cfg, *a),
                                                    *(f"-D{x}" for x in extra))
    if padded:                    # each ring's rows 16 bytes wider than decode_smem_parts counts
        fits = launcher.check_fits
        launcher.check_fits = lambda cfg, gpu, *a: (
            fits(cfg, gpu, *a) + 2 * stages * dc.decode_block_k(cfg.head_dim) * 16)
    if extra_smem:
        fits_now = launcher.check_fits
        launcher.check_fits = lambda cfg, gpu, *a: fits_now(cfg, gpu, *a) + extra_smem
    if threads is not None:
        launcher.NUM_THREADS = threads
    if block_k is not None:
        orig_bk = dc.decode_block_k
        launcher.decode_block_k = dc.decode_block_k = (
            lambda head_dim: block_k if head_dim <= 128 else orig_bk(head_dim))
    if per_sm is not None:
        dc.AUTO_BLOCKS_PER_SM = per_sm

    def undo():
        for (module, name), value in saved.items():
            setattr(module, name, value)
    return undo


def check(build: dict) -> float:
    """The worst error against float64 over the GPU tests' shapes (relative, as they measure)."""
    from engine.decode import make_decode_inputs, run_decode
    from kernels.loader import KernelCompileError
    from reference import decode64, rel_err
    from test_gpu_decode import CASES, OUT_TOL, config, contiguous
    worst = 0.0
    undo = force(**kernel_args(build))
    try:
        for kw in CASES:
            cfg = config(**kw)
            q, k, v = make_decode_inputs(cfg)
            try:
                got = run_decode(cfg, q, k, v, backend="cupy", trace=False)
            except KernelCompileError as e:    # a switch's static_assert: not for this case
                print(f"  {build} {kw}: not built ({str(e).splitlines()[-1][:120]})")
                continue
            want, _, _ = decode64(q, *contiguous(cfg, k, v))
            err = rel_err(got.output, want) / OUT_TOL[cfg.dtype]
            worst = max(worst, err)
            print(f"  {build} {kw}: "
                  f"{err * OUT_TOL[cfg.dtype]:.2e} (limit {OUT_TOL[cfg.dtype]:.0e})", flush=True)
    finally:
        undo()
    return worst


def spec(tc=None, stages=2, **kw) -> dict:
    """force()'s keyword arguments for one build (tc: tensor_cores)."""
    return {"tensor_cores": tc, "stages": stages, **kw}


BUILDS = {   # name -> force()'s arguments
    "stages": {"FFMA": spec(False), "TC": spec(True), "FFMA s3": spec(False, 3),
               "TC s3": spec(True, 3)},
    "prefetch": {"FFMA": spec(False, prefetch=0), "TC": spec(True, prefetch=0),
                 "TC L2 128": spec(True, prefetch=128), "TC L2 256": spec(True, prefetch=256),
                 "FFMA L2 256": spec(False, prefetch=256)},
    "deeper": {"FFMA L2 256": spec(False, prefetch=256),
               "FFMA L2 256 s3": spec(False, 3, prefetch=256),
               "TC L2 256": spec(True, prefetch=256),
               "TC L2 256 s3": spec(True, 3, prefetch=256)},
    # with patches/decode_swizzle.diff: K_j, V_j swizzled (the patch) or padded (KV_PAD, the
    # kernel's layout)
    "layout": {"swizzled": spec(), "padded": spec(padded=True),
               "swz no L2": spec(prefetch=0)},
    # against the kernel as it is (no patch): the L2 prefetch of its copies (L2_PREFETCH)
    "hint": {"L2 256": spec(prefetch=256), "L2 128": spec(prefetch=128),
             "no hint": spec(prefetch=0)},
    # with patches/decode_tensor_cores.diff: products on the CUDA cores or the tensor cores
    "tc": {"FFMA": spec(False), "TC": spec(True)},
    # with patches/decode_lockstep.diff: the warps walk the tiles apart (as the kernel does) or
    # together (a block barrier a tile), so a tile's copies reach memory at once
    "lockstep": {"per warp": spec(), "lockstep": spec(defines=("LOCKSTEP=1",))},
    # against the kernel as it is (no patch): 2 or 3 key tiles in flight (the H200's bandwidth
    # asks for more bytes in flight than the H100's, where 3 were no faster)
    "rings": {"2 stages": spec(), "3 stages": spec(stages=3)},
    # against the kernel as it is (no patch): 8 warps a block, each 8 keys of a 64-key tile
    "warps": {"4 warps": spec(), "8 warps": spec(threads=256)},
    # against the kernel as it is (no patch): K and V by 16-byte cp.async from every lane, or
    # by the copy engine (TMA_COPIES: a warp's rows as 128-byte swizzled boxes, unpadded)
    "tma": {"cp.async": spec(tma=False), "TMA": spec(tma=True),
            "TMA s3": spec(stages=3, tma=True)},
    # against the kernel as it is (no patch): wider key tiles, one block an SM
    "tiles": {"64 keys, 2/SM": spec(), "128 keys, 1/SM": spec(block_k=128, per_sm=1),
              "64 keys, 1/SM": spec(block_k=64, per_sm=1)},
    # with patches/decode_interleave.diff: the copy engine over a KV head's tiles split by
    # split (the kernel) or dealt round the splits, and over a paged cache (page_size: main's)
    "walk": {"by split": spec(tma=True), "interleaved": spec(tma=True, defines=("INTERLEAVE=1",)),
             "paged 64": spec(tma=True, page_size=64)},
    # with patches/decode_rotate.diff: each block's walk from its split's first tile or from
    # a place of its own
    "rotate": {"by split": spec(tma=True), "rotated": spec(tma=True, defines=("ROTATE=1",)),
               "paged 64": spec(tma=True, page_size=64)},
    # against the kernel as it is (no patch): the paged pool's pages scattered or in order
    "order": {"contiguous": spec(tma=True), "paged 64": spec(tma=True, page_size=64),
              "pages in order": spec(tma=True, page_size=64, table="in order")},
    # with patches/decode_split_wait.diff: the copy engine's K_j and V_j on one barrier (the
    # kernel) or on two, P V alone waiting for V_j (8 bytes more a stage and warp)
    "split_wait": {"one barrier": spec(tma=True),
                   "K, V apart": spec(tma=True, defines=("SPLIT_WAIT=1",), extra_smem=8 * 2 * 4),
                   "K, V apart, paged 64": spec(tma=True, defines=("SPLIT_WAIT=1",),
                                                extra_smem=8 * 2 * 4, page_size=64)},
    # with patches/decode_block_copies.diff on commit 11b5938: the copy engine's tile by warps
    # (the kernel then) or by thread 0 in boxes of the tile's 64 rows on one barrier, the warps
    # together (the kernel since, so on it both builds are the same)
    # against the kernel as it is (its MERGE_IN_FLIGHT switch): the merging block's loads of
    # the splits' O_s, 8 (the kernel), 16 or 32 in flight a thread; the launcher's copies
    "merge": {"8 in flight": spec(), "16 in flight": spec(defines=("MERGE_IN_FLIGHT=16",)),
              "32 in flight": spec(defines=("MERGE_IN_FLIGHT=32",))},
    # against the kernel as it is: the copy engine's tensor maps with an L2 promotion of 128
    # bytes (the launcher's), 256, or none; the launcher's copies
    "promotion": {"L2 128B": spec(), "L2 256B": spec(promotion=256),
                  "none": spec(promotion=0)},
    # a paged cache of 64-row pages copied a whole tile at a time (the rule, the kernel since
    # the run of lab/logs/h200_2026-11-28_decode_paged_tiles.log, made with the patch it came
    # from) or each warp its rows, the contiguous cache beside them; the launcher's copies
    "paged_tiles": {"contiguous": spec(), "paged 64, whole tiles": spec(page_size=64),
                    "paged 64, warps": spec(page_size=64, paged_tiles=False)},
    # against the kernel as it is: the same build with no merge (its output unwritten, so
    # timed unchecked), to see what the merge adds to a step
    "merge_cost": {"kernel": spec(), "no merge": spec(defines=("SKIP_MERGE=1",),
                                                      unchecked=True)},
    # against the kernel as it is: the ticket with the leader's fence only (LEADER_FENCE_ONLY
    # of ticket.cuh), and no merge at all (timed unchecked) for the merge's whole cost
    "ticket": {"kernel": spec(), "leader fence": spec(defines=("LEADER_FENCE_ONLY=1",)),
               "no merge": spec(defines=("SKIP_MERGE=1",), unchecked=True)},
    # against the kernel as it is: the leader's fence (as in "ticket"), then with it the
    # merge's first O_s loads issued with m_s and l_s (MERGE_PREFETCH), and no merge
    "merge_prefetch": {
        "kernel": spec(), "leader fence": spec(defines=("LEADER_FENCE_ONLY=1",)),
        "fence+prefetch": spec(defines=("LEADER_FENCE_ONLY=1", "MERGE_PREFETCH=1")),
        "no merge": spec(defines=("SKIP_MERGE=1",), unchecked=True)},
    # against the kernel as it is: its ticket as one acquire-release atomic (TICKET_ACQ_REL
    # of ticket.cuh) in place of the leader's two fences, and no merge (timed unchecked)
    "acq_rel": {"kernel": spec(), "acq_rel atomic": spec(defines=("TICKET_ACQ_REL=1",)),
                "no merge": spec(defines=("SKIP_MERGE=1",), unchecked=True)},
    # against the kernel as it is: the warps' O_i merged in one step (WARP_MERGE_PARALLEL)
    "warp_merge": {"kernel": spec(),
                   "one-step warp merge": spec(defines=("WARP_MERGE_PARALLEL=1",))},
    # against the kernel as it is: the one-step warp merge, the bulk-copied merge (MERGE_BULK,
    # whole-tile builds only), and both
    "merge_bulk": {"kernel": spec(),
                   "one-step warp merge": spec(defines=("WARP_MERGE_PARALLEL=1",)),
                   "bulk merge": spec(defines=("MERGE_BULK=1",)),
                   "both": spec(defines=("WARP_MERGE_PARALLEL=1", "MERGE_BULK=1"))},
    # with patches/decode_half_parts.diff: O_s stored in the build's 16-bit dtype
    # (HALF_PARTS), the merge's loads 8 in flight a thread (half the bytes in the same four
    # rounds at 32 splits) or 16 (two rounds, the registers of the kernel's 8 float32 loads)
    "half_parts": {"kernel": spec(), "16-bit O_s": spec(defines=("HALF_PARTS=1",)),
                   "16-bit O_s, 16": spec(defines=("HALF_PARTS=1", "MERGE_IN_FLIGHT=16"))},
    "fast_end": {"kernel": spec(), "fast end": spec(defines=("FAST_END=1",)),
                 "kernel, paged 64": spec(page_size=64),
                 "fast end, paged 64": spec(defines=("FAST_END=1",), page_size=64)},
    "block": {"per warp": spec(tma=True),
              "block copies": spec(tma=True, defines=("BLOCK_COPIES=1",), box_rows=True),
              "paged 64": spec(tma=True, page_size=64)},
}
LAYOUT = ("page_size", "table")     # main's keys of a build, not force()'s
UNCHECKED = "unchecked"             # main's too: time the build without its float64 check


def kernel_args(build: dict) -> dict:
    return {k: v for k, v in build.items() if k not in (*LAYOUT, UNCHECKED)}


def table_order(order):
    """Point the block table at pages in order (order == "in order": sequence b's page j is
    b · pages_per_seq + j) for inputs made and runs timed until the undo; None: as it is."""
    import engine.decode as host
    import engine.gpu.decode_bench as bench
    saved = host.block_table, bench.block_table
    if order == "in order":
        def in_order(cfg):
            table = saved[0](cfg)
            return np.arange(table.size, dtype=np.int32).reshape(table.shape)
        host.block_table = bench.block_table = in_order

    def undo():
        host.block_table, bench.block_table = saved
    return undo


def recorded_steps(batches, seqs):
    """(batch, seq_k, cfg, inputs) of the recorded grid's decode steps (heads 32, kv_heads 8,
    d 128, float16, contiguous), GPU memory released before each."""
    from engine.decode import make_decode_inputs
    from engine.gpu.torch_reference import release_memory
    from engine.model.decode_config import DecodeConfig
    for n in seqs:
        for b in batches:
            cfg = DecodeConfig(batch=b, heads=32, kv_heads=8, seq_q=1, seq_k=n, head_dim=128,
                               dtype="float16")
            release_memory()
            yield b, n, cfg, make_decode_inputs(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="batch 1 and 8 at 32k and 128k only")
    ap.add_argument("--set", choices=sorted(BUILDS), required=True)
    ap.add_argument("--splits", default="auto",
                    help="split counts to time, comma-separated (default: the auto count)")
    args = ap.parse_args()
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_bench import time_flash_decode, time_sdpa
    from engine.gpu.runtime import live_gpu
    from engine.model.iomodel import decode_kv_bytes
    builds = BUILDS[args.set]
    ok = {name: check(b) < 1 for name, b in builds.items() if not b.get(UNCHECKED)}
    print("validated:", ok, "; timed unchecked (output not written by design):",
          [name for name, b in builds.items() if b.get(UNCHECKED)], flush=True)
    if not all(ok.values()):
        raise SystemExit("a build failed its check: nothing is timed")
    sms = live_gpu().sms
    batches, seqs = ((1, 8), (32768, 131072)) if args.quick else ((1, 2, 4, 8),
                                                                  (32768, 65536, 131072))
    names = [*builds, "SDPA"]
    print(f"{'B':>2} {'seq_k':>6} {'split':>5} | " + " ".join(f"{n:>8}" for n in names)
          + " µs | best/SDPA  TB/s(best)")
    for b, n, cfg, inputs in recorded_steps(batches, seqs):
        paged = {}
        for layout in {tuple(b.get(k) for k in LAYOUT) for b in builds.values()}:
            if layout[0] is not None:
                undo = table_order(layout[1])
                paged_cfg = replace(cfg, page_size=layout[0])
                paged[layout] = (paged_cfg, make_decode_inputs(paged_cfg))
                undo()
        counts = ([cfg.splits_on(sms)] if args.splits == "auto"
                  else [int(x) for x in args.splits.split(",")])
        for count in counts:
            best = {}
            for _ in range(2):
                for name, build in builds.items():
                    c, x = paged.get(tuple(build.get(k) for k in LAYOUT), (cfg, inputs))
                    undo = force(**kernel_args(build))
                    undo_table = table_order(build.get("table"))
                    try:
                        t = float(np.median(time_flash_decode(c, count, x, 30, 3)))
                    finally:
                        undo_table()
                        undo()
                    best[name] = min(best.get(name, 1e9), t)
                t = float(np.median(time_sdpa(cfg, inputs, 30, 3)))
                best["SDPA"] = min(best.get("SDPA", 1e9), t)
            ours = min(best[k] for k in builds)
            rate = decode_kv_bytes(cfg) / (ours * 1e-3) / 1e12
            print(f"{b:>2} {n:>6} {count:>5} | "
                  + " ".join(f"{best[k] * 1e3:8.1f}" for k in names)
                  + f" | {best['SDPA'] / ours:6.3f}  {rate:5.2f}", flush=True)


if __name__ == "__main__":
    main()
