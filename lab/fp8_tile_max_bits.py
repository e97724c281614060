"""Lab: the tile max from the scores' bits. Nsight Compute put 15% of the FP8 forward's
samples on the tile max (FMNMX, two scores an instruction's worth of work in two
instructions), and a timing-only build without it ran 4-8% faster (lab/fp8_softmax_issue.py).
Hopper's three-input integer max (VIMNMX3, __vimax3_s32) takes two scores an instruction, and
positive floats order as their bits do: where a row holds a score >= +0, the int max of its
scores' bits is its float max's bits. TILE_MAX_BITS=1 (kernels/hopper/flash_wgmma.cu; the
default since this run) finds the max that way, in four chains (two a row), and a warp with a
row of negative scores only takes the float max. The max is the same float, so the output
should be the kernel's bit for bit.
Prediction: 48 of the 96 FMNMX a consumer thread a tile at 128 x 192 go, about 7% of the
loop's instructions: FP8 at d = 128 +2-4% (half the timing-only gain); float16, bound by its
products, level.
Builds: float16 and FP8 128 x 192 each with and without the switch; every build checked
(lab/kv_stages.py's checks), the switch's outputs compared with the kernel's bit for bit on
scores of both signs and on negative scores only (the float path), then all timed alternately
at d = 128, non-causal, B·H·N = 32k tokens x 8 heads.
Run on an H200, 2026-11-29 01:48 UTC: bit for bit the kernel's outputs and traces (24
comparisons); FP8 +1-4% at 1k-8k, float16 +0-2% (two runs): the kernel's default since.
Run on a Hopper GPU: python3 lab/fp8_tile_max_bits.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def same_bits(fp8: bool, causal: bool, negative: bool, d: int = 128) -> bool:
    """The kernel's and the switch's outputs (O, lse and, traced, the trace) on one ragged
    shape, bit for bit;
    negative: every score below zero (q >= 0, k <= 0), so the switch's float path runs."""
    import cupy
    import engine
    from engine.model.config import AttentionConfig
    from engine.results import BLOCK_FIELDS
    cfg = AttentionConfig(dtype="float8_e4m3" if fp8 else "float16", head_dim=d,
                          block_q=128, block_k=192 if fp8 and d == 128 else 128, batch=1, heads=3,
                          seq_q=1000, seq_k=1333, causal=causal, seed=11)
    q, k, v = engine.make_inputs(cfg)
    if negative:
        q, k = np.abs(q), -np.abs(k)
    dev = [cupy.asarray(np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], d))
                        .astype(np.float16)) for x in (q, k, v)]
    same = True
    for trace in (False, True):
        outs = []
        for name in (("fp8 192", "fp8 192 bits") if fp8 else ("f16", "f16 bits")):
            L, undo = kv_stages.use(name)
            try:
                got = L.launch(cfg, *dev, trace)
                outs.append({n: a.get() for n, a in got.items()   # the schedule's clocks aside
                             if isinstance(a, cupy.ndarray) and n not in BLOCK_FIELDS})
            finally:
                undo()
        same_here = (outs[0].keys() == outs[1].keys()
                     and all(outs[0][n].tobytes() == outs[1][n].tobytes() for n in outs[0]))
        print(f"{'FP8' if fp8 else 'float16'} causal={causal} negative={negative} "
              f"trace={trace}: the switch's {len(outs[0])} outputs bit for bit the kernel's: "
              f"{same_here}", flush=True)
        same &= same_here
    return same


def main(d: int = 128):
    """d = 64 (`python3 lab/fp8_tile_max_bits.py 64`): FP8 on 128 x 128 tiles, the builds
    keeping their names."""
    import fp8_wide_tiles
    kv_stages.D = fp8_wide_tiles.D = d
    bk = 192 if d == 128 else 128
    kv_stages.BUILDS = {
        "f16": (False, 128, {"TILE_MAX_BITS": 0}),
        "f16 bits": (False, 128, {"TILE_MAX_BITS": 1}),
        "fp8 192": (True, bk, {"TILE_MAX_BITS": 0}),
        "fp8 192 bits": (True, bk, {"TILE_MAX_BITS": 1}),
        "fp8 192 again": (True, bk, {"TILE_MAX_BITS": 0}),
    }
    for fp8 in (False, True):
        for causal in (False, True):
            for negative in (False, True):
                same_bits(fp8, causal, negative, d)
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 128)
