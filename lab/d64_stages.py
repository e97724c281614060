"""Lab: the Hopper forward at d = 64 (kernels/hopper/flash_wgmma.cu), float16 and FP8.

Default: deeper K_j / V_j rings (KV_STAGES) on 128 x 128 tiles. The launchers take three stages
only at 16-bit d = 128 and FP8 128 x 192 (engine.model.iomodel.WGMMA_RINGS, measured on an H100
on 2026-11-27); every other build keeps two, never measured. At d = 64 a tile's products take
half the time of d = 128's, so a load has half the time to arrive; and FP8 at 128 x 128,
d = 128, ran 6% faster with three stages than with two (lab/fp8_double_s.py --stages). FP8 at
d = 64 runs only 1.01x float16 in the recorded sweeps. Two Q_i buffers stay; three and four
stages fit (16-bit: 2 x 16 + 4 x 32 KiB). Beside them, DOUBLE_S (lab/fp8_double_s.py) in both
dtypes, where two S sets fit beside O at d = 64 (consumers not taking turns); those builds need
patches/fp8_double_s_tile_pairs.diff (`git apply` onto ea77543).
Run on an H200, 2026-11-29 03:50 UTC: the stages level (within 1%) in both dtypes at every N;
DOUBLE_S 9% slower at 1k-2k in both, float16 level at 8k-16k, FP8 8% slower there. FP8 and
float16 run at the same rate at d = 64 (1.00-1.01x).

--wide: key tiles of 192 against 128, both dtypes (patches/d64_wide_tiles.diff onto ea77543
opens the kernel's static_asserts, the config's block_k and the registry's shapes). At d = 64
the work a score and a tile binds, and at d = 128 FP8's 192-key tiles ran 10% faster than 128
(three stages each). Registers at 192: float16 S 96 + O 32 + P 48, FP8 S 96 + O 32 + P 24 (nvcc
13.0: no spills, no serialisation). Prediction: +5-10% at N >= 4k in both dtypes, less at 1k
(1024 = 5 x 192 + 64). Run on an H200, 2026-11-29 04:02 UTC (lab/NOTES.md, "Key tiles of 192 at
d = 64"): wrong; float16 +2% at 8k-16k, 2% slower at 2k, 11% at 1k; FP8 4-15% slower
everywhere. Not kept.

Each build is checked first as lab/kv_stages.py checks it (FP8: the emulation and float64 at
its block_k; float16: float64 at its own block_k), then timed alternately (median of 30, the
better of two rounds), non-causal, B·H·N = 32k tokens x 8 heads, N = 1k, 2k, 8k and 16k.
Run on a Hopper GPU: python3 lab/d64_stages.py [--wide]"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402

STAGES = {
    "f16, 2 stages": (False, 128, {}),
    "f16, 3 stages": (False, 128, {"KV_STAGES": 3}),
    "f16, 4 stages": (False, 128, {"KV_STAGES": 4}),
    "fp8, 2 stages": (True, 128, {}),
    "fp8, 3 stages": (True, 128, {"KV_STAGES": 3}),
    "fp8, 4 stages": (True, 128, {"KV_STAGES": 4}),
    "f16 double S, 3 stages": (False, 128, {"DOUBLE_S": 1, "PINGPONG": 0, "KV_STAGES": 3}),
    "fp8 double S, 3 stages": (True, 128, {"DOUBLE_S": 1, "PINGPONG": 0, "KV_STAGES": 3}),
    "f16, 2 stages again": (False, 128, {}),
}
WIDE = {
    "f16 128": (False, 128, {}),
    "f16 192": (False, 192, {}),
    "fp8 128": (True, 128, {}),
    "fp8 192": (True, 192, {}),
    "f16 128 again": (False, 128, {}),
}


def main():
    import fp8_wide_tiles
    from overlap_fence import check_f16
    kv_stages.D = fp8_wide_tiles.D = 64
    kv_stages.BUILDS = WIDE if "--wide" in sys.argv else STAGES
    # kv_stages checks float16 builds at block_k 128: check each at its own instead
    current = {}
    use = kv_stages.use

    def use_and_note(name):
        current["bk"] = kv_stages.BUILDS[name][1]
        return use(name)
    kv_stages.use = use_and_note
    kv_stages.check_f16 = lambda L, d, c, rng: check_f16(L, d, c, rng, block_k=current["bk"])
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
