"""Lab: FP8 key tiles of 256 at d = 64 (kernels/hopper/flash_wgmma.cu, BLOCK_K = 256), the
shape cuDNN's FP8 forward launches at both head sizes (lab/cudnn_fp8_kernels.py: 64 x 256
tiles, 14-17% faster than ours at d = 64, N 2k-8k, where our FP8 runs at our float16's rate).
S_ij is one m64n256 wgmma (128 accumulators a thread: S 128 + O 32 + P 32), V_jᵀ arrives as
two 128-byte-swizzle boxes of 128 keys, and the config, registry and static_asserts take
block_k 256 at d = 64 (patches/fp8_d64_256.diff: `git apply` it onto commit ce87d27). nvcc
13.0: no spills, no serialisation, with and without turns, with and without the tile max
from bits. Our 192-key try at d = 64 (lab/d64_stages.py --wide) ran with turns, as the d = 64
launchers do, and lost 4-15%; cuDNN's shape suggests trying without. Prediction: without
turns +5-15% at N >= 2k against the launcher's 128-key build, with turns level or slower.

Each build is checked as lab/kv_stages.py checks it (the emulation and float64 at its
block_k), then timed alternately (median of 30, the better of two rounds), non-causal, B·H·N
= 32k tokens x 8 heads.
Run on a Hopper GPU: python3 lab/fp8_d64_256.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402

BUILDS = {
    "f16 128": (False, 128, {}),
    "fp8 128 (launcher)": (True, 128, {}),
    "fp8 256 turns": (True, 256, {"PINGPONG": 1}),
    "fp8 256 no turns": (True, 256, {"PINGPONG": 0}),
    "fp8 256 no turns, max from bits": (True, 256, {"PINGPONG": 0, "TILE_MAX_BITS": 1}),
    "fp8 128 no turns": (True, 128, {"PINGPONG": 0}),
    "fp8 128 again": (True, 128, {}),
}


def main():
    import fp8_wide_tiles
    kv_stages.D = fp8_wide_tiles.D = 64
    kv_stages.BUILDS = BUILDS
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
