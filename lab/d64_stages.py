"""Lab: deeper K_j / V_j rings in the Hopper forward at d = 64 (kernels/hopper/flash_wgmma.cu,
KV_STAGES), float16 and FP8, both on 128 x 128 tiles. The launchers take three stages only at
16-bit d = 128 and FP8 128 x 192 (engine.model.iomodel.WGMMA_RINGS, measured on an H100 on
2026-11-27); every other build keeps two, never measured. At d = 64 a tile's products take half
the time of d = 128's, so a load has half the time to arrive; and FP8 at 128 x 128, d = 128,
ran 6% faster with three stages than with two (lab/fp8_double_s.py --stages). FP8 at d = 64
runs only 1.01x float16 in the recorded sweeps. Two Q_i buffers stay; three and four stages
fit (16-bit: 2 x 16 + 4 x 32 KiB). Beside them, DOUBLE_S (lab/fp8_double_s.py) in both dtypes,
where two S sets fit beside O at d = 64 (consumers not taking turns). Each build is checked first as lab/kv_stages.py checks it
(FP8: the emulation and float64; float16: float64), then timed alternately (median of 30, the
better of two rounds), non-causal, B·H·N = 32k tokens x 8 heads, N = 1k, 2k, 8k and 16k.
The DOUBLE_S builds need patches/fp8_double_s_tile_pairs.diff (`git apply` onto ea77543).
Run on an H200, 2026-11-29 03:50 UTC: the stages level (within 1%) in both dtypes at every N;
DOUBLE_S 9% slower at 1k-2k in both, float16 level at 8k-16k, FP8 8% slower there. FP8 and
float16 run at the same rate at d = 64 (1.00-1.01x).
Run on a Hopper GPU: python3 lab/d64_stages.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    import fp8_wide_tiles
    kv_stages.D = fp8_wide_tiles.D = 64
    kv_stages.BUILDS = {
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
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
