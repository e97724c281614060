"""Lab: Flash-Decoding's merge by blocks of its own (kernels/decode/flash_decode_merger.cu, which
`patches/decode_merger.diff` creates: `git apply` it onto commit 7fc9609 first). Today the
last split of a (sequence, KV head) to finish takes a ticket and then merges: after its own
split's end, an atomic's round trip, the m_s and l_s loads, then four rounds of O_s loads, on
the critical path of the step (1.6-1.7 µs of a batch-1 step on an H200; lab/NOTES.md,
"Decoding: the ticket's fences"). Here the grid has one more block a row,
blockIdx.x = num_splits, dispatched after that row's splits. A split releases a flag once its
state is written. The merging block polls the flags and copies each split's state into shared
memory as it arrives, so after the last split only that split's 2 KB is left to read. (The
merging blocks first sat in a column of their own, blockIdx.x = num_splits, 05:44-05:47 UTC;
now in z-slabs after the batch's, so that the splits land on the SMs as the kernel's do.) Then it
merges with the kernel's arithmetic. At batch 1 the 8 merging blocks also fill the 8 SMs that
hold one split block where the rest hold two. Predicted: 0.3-1.0 µs off a batch-1 step, batch
8 (4 splits) level. The first run (05:44 UTC) polled with ld.acquire.gpu, whose SASS
invalidates the SM's L1 at every poll (CCTL.IVALL): 30-43% slower at every shape. The copy now
polls relaxed and fences once a poll finds fresh flags; timed also with 200 ns naps between
polls, and with idle merging blocks (the splits alone).

Checked first: on the GPU decode tests' shapes whose states fit shared memory, every output
(O, lse, O_s, m_s, l_s and the trace's m_final, l_final, rescale) bit for bit the kernel's,
from the second run of one prepare() (the flags back at 0). Then timed alternately with the
kernel and PyTorch SDPA (engine.gpu.decode_bench: L2 flushed, median of 30, the better of two
rounds), heads 32, kv_heads 8, d 128, float16, contiguous, at the auto split count.
Run on a Hopper GPU, with the patch applied: python3 lab/decode_merger.py [--quick]"""
import sys
from dataclasses import replace

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
SOURCE = "decode/flash_decode_merger.cu"


def staged_bytes(cfg, num_splits: int) -> int:
    """Shared memory the merging block stages: every split's O_s, m_s, l_s, the weights and
    l_final of the block's rows."""
    R, S, d = cfg.rows, num_splits, cfg.head_dim
    return 4 * (S * R * d + 3 * S * R + R)


def prepare_merger(cfg, Q, K, V, table, num_splits, trace, poison=False):
    """engine.gpu.launchers.decode.prepare with the merging blocks: the copy's source, one more
    grid column, num_splits flags a row in place of the row's counter. Falls back to the
    kernel's prepare where the states do not fit the block's shared memory."""
    import cupy
    from engine.gpu.launchers import decode as launcher
    from engine.gpu.runtime import live_gpu
    from engine.model.decode_config import decode_tile_copies, split_length
    gpu = live_gpu()
    tma = launcher.uses_tma(cfg, gpu, num_splits)
    tiles = tma and decode_tile_copies(cfg, num_splits)
    b = launcher.build(cfg, gpu, tma, num_splits)
    if staged_bytes(cfg, num_splits) + 16 > b.smem:
        return ORIGINAL(cfg, Q, K, V, table, num_splits, trace, poison)
    b = replace(b, source=SOURCE, options=(*b.options, *(f"-D{x}" for x in DEFINES)))
    fn = b.compiled()
    out = launcher.outputs(cfg, num_splits, trace, poison)
    out["split_count"] = cupy.zeros((cfg.batch, cfg.kv_heads, num_splits), dtype=np.int32)
    # the merging blocks in z-slabs after the batch's: one per (sequence, KV head)
    grid = (num_splits, cfg.kv_heads, cfg.batch + -(-cfg.batch // num_splits))
    traced = ((out["m_final"], out["rescale"], out["l_final"]) if trace
              else (launcher.core.NULL,) * 3)
    args = (Q, K, V, table if cfg.paged else launcher.core.NULL, out["O_part"], out["m_part"],
            out["l_part"], out["O"], out["lse"], *traced, out["split_count"],
            np.int32(cfg.seq_k), np.int32(split_length(cfg.seq_k, num_splits)),
            np.int32(cfg.pages_per_seq), np.float32(cfg.softmax_scale), np.int32(cfg.batch),
            *(launcher.cache_maps(cfg, K, V, tiles) if tma else ()))

    def run():
        fn(grid, (launcher.NUM_THREADS,), args, shared_mem=b.smem)
    out["info"] = {**b.facts(fn, grid), "num_splits": num_splits, "merger": True}
    return run, out


ORIGINAL = None
DEFINES = ()           # more -D switches of the copy for the build timed (VARIANTS)
# name -> the copy's -D switches; the first is the one checked bit for bit, "idle" is timed
# unchecked (its merging blocks return at once: the splits alone, the output unwritten)
VARIANTS = {"merger": (), "merger, 200 ns naps": ("MERGER_POLL_SLEEP=200",),
            "idle": ("MERGER_IDLE=1",)}


def use_merger(on, defines=()):
    """Point the decode launcher's prepare at the merging blocks (on; with the copy's
    `defines`) or back."""
    global ORIGINAL, DEFINES
    from engine.gpu.launchers import decode as launcher
    if ORIGINAL is None:
        ORIGINAL = launcher.prepare
    launcher.prepare = prepare_merger if on else ORIGINAL
    DEFINES = tuple(defines) if on else ()


FIELDS = ("O", "lse", "O_part", "m_part", "l_part", "m_final", "l_final", "rescale")


def check() -> bool:
    """Every output of the merging blocks' build bit for bit the kernel's, on the GPU tests'
    shapes whose states fit (a prepare() run twice, so the flags' reset is checked too)."""
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_backend import device_inputs
    from engine.model.decode_config import block_table
    from test_gpu_decode import CASES, config
    ok, tried = True, 0
    for kw in CASES:
        cfg = config(**kw)
        q, k, v = make_decode_inputs(cfg)
        Q, K, V, T = device_inputs(cfg, q, k, v, block_table(cfg))
        use_merger(False)
        run, want = ORIGINAL(cfg, Q, K, V, T, cfg.num_splits, True, True)
        run()
        use_merger(True)
        run, got = prepare_merger(cfg, Q, K, V, T, cfg.num_splits, True, True)
        if not got["info"].get("merger"):
            print(f"  {kw}: the states do not fit; the kernel's merge", flush=True)
            continue
        run()
        run()
        tried += 1
        same = {n: got[n].get().tobytes() == want[n].get().tobytes() for n in FIELDS}
        flags = int(got["split_count"].get().sum())
        good = all(same.values()) and flags == 0
        ok = ok and good
        print(f"  {kw}: {'bit for bit' if all(same.values()) else same}, flags left {flags} "
              f"{'OK' if good else 'FAIL'}", flush=True)
    use_merger(False)
    return ok and tried > 0


def main():
    from decode_tensor_cores import recorded_steps
    from engine.gpu.decode_bench import time_flash_decode, time_sdpa
    from engine.gpu.runtime import live_gpu
    use_merger(False)
    ok = check()
    print("validated:", ok, flush=True)
    if not ok:
        raise SystemExit("the merging blocks' build failed its check: nothing is timed")
    sms = live_gpu().sms
    quick = "--quick" in sys.argv
    batches, seqs = ((1, 8), (32768, 131072)) if quick else ((1, 2, 8), (32768, 65536, 131072))
    names = ("kernel", *VARIANTS, "SDPA")
    print(f"{'B':>2} {'seq_k':>6} {'split':>5} | " + " ".join(f"{n:>10}" for n in names)
          + " µs | over SDPA: kernel, merger", flush=True)
    for b, n, cfg, inputs in recorded_steps(batches, seqs):
        count = cfg.splits_on(sms)
        best = {}
        for _ in range(2):
            for name in ("kernel", *VARIANTS):
                use_merger(name != "kernel", VARIANTS.get(name, ()))
                try:
                    t = float(np.median(time_flash_decode(cfg, count, inputs, 30, 3)))
                finally:
                    use_merger(False)
                best[name] = min(best.get(name, 1e9), t)
            t = float(np.median(time_sdpa(cfg, inputs, 30, 3)))
            best["SDPA"] = min(best.get("SDPA", 1e9), t)
        print(f"{b:>2} {n:>6} {count:>5} | "
              + " ".join(f"{best[k] * 1e3:10.1f}" for k in names)
              + f" | {best['SDPA'] / best['kernel']:.3f}, {best['SDPA'] / best['merger']:.3f}",
              flush=True)


if __name__ == "__main__":
    main()
