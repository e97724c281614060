"""Lab: key tiles of 224 in the Hopper FP8 forward at d = 128 (BLOCK_K = 224, the width
FlashAttention-3 takes for FP8 at d = 128). S_ij is one m64n224 wgmma (112 accumulators a
thread: S 112 + O 64 + P 28 fit the consumers' 240 registers, where 256 keys spilled), and V_jᵀ
arrives as seven boxes of 32 keys in the 32-byte swizzle (rows of 224 bytes span no wider
swizzle evenly). Why: at d = 64, float16 and FP8 run at the same rate (lab/d64_stages.py),
so the forward there is bound by the softmax's work a score, not by the products; FP8 at
d = 128 runs at that rate of scores too, and wider tiles share the softmax's fixed costs a
tile (the tile max's shuffles and vote, the waits, the barriers, the O rescale's factors)
among more keys. From the 128- and 192-key builds with three stages (lab/fp8_double_s.py
--stages: 924 and 1,020 TFLOP/s at 8k), time a tile = a + b·Bc predicts 1,051 at 224 (+3%),
less the ragged last tile (8192 = 36 × 224 + 128: 1.2% of the keys padded). The switches are
in patches/fp8_tile_224.diff (`git apply` it onto commit ea77543 first). Each build is checked
as lab/kv_stages.py checks it (the emulation at block_k 224, and float64), then timed
alternately (median of 30, the better of
two rounds), non-causal, B·H·N = 32k tokens x 8 heads.
Run on an H200, 2026-11-29 03:54 UTC: every check passed; with three stages +0.8% at 8k
(1,025 against 1,017 TFLOP/s), +0.5-1.7% at 16k, level at 4k, 3% slower at 2k; 8k ratio 1.465
against float16's 700. Not kept.
Run on a Hopper GPU: python3 lab/fp8_tile_224.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8 192": (True, 192, {}),
        "fp8 224, 2 stages": (True, 224, {"KV_STAGES": 2}),
        "fp8 224, 3 stages": (True, 224, {"KV_STAGES": 3}),
        "fp8 192 again": (True, 192, {}),
    }
    kv_stages.SEQS = (2048, 4096, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
