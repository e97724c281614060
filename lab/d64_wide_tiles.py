"""Lab: key tiles of 192 at d = 64, float16 and FP8 (the kernel's static_asserts, the config's
block_k and the registry's shapes opened by patches/d64_wide_tiles.diff). At d = 64 both dtypes
run at the same rate (lab/d64_stages.py), bound by the work a score and a tile rather than by
the products; at d = 128 FP8's 192-key tiles ran 10% faster than 128 with three stages each
(lab/fp8_double_s.py --stages), sharing each tile's fixed costs among more keys. Registers at
192 keys: float16 S 96 + O 32 + P 48, FP8 S 96 + O 32 + P 24 (nvcc 13.0: no spills, no
serialisation). Prediction: +5-10% at N >= 4k in both dtypes, less at 1k (ragged tiles:
1024 = 5 × 192 + 64). Each build is checked first (FP8: the emulation and float64 at
block_k 192; float16: float64 at its own block_k), then timed alternately (median of 30, the
better of two rounds), non-causal, B·H·N = 32k tokens x 8 heads.
`git apply` patches/d64_wide_tiles.diff onto commit ea77543 first.
Run on an H200, 2026-11-29 04:02 UTC (lab/NOTES.md, "Key tiles of 192 at d = 64"): wrong
prediction; float16 +2% at 8k-16k, 2% slower at 2k, 11% at 1k; FP8 4-15% slower everywhere.
Not kept.
Run on a Hopper GPU: python3 lab/d64_wide_tiles.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    import fp8_wide_tiles
    from overlap_fence import check_f16
    kv_stages.D = fp8_wide_tiles.D = 64
    kv_stages.BUILDS = {
        "f16 128": (False, 128, {}),
        "f16 192": (False, 192, {}),
        "fp8 128": (True, 128, {}),
        "fp8 192": (True, 192, {}),
        "f16 128 again": (False, 128, {}),
    }
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
