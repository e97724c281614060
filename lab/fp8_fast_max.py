"""Lab: FP8 with P formed from the running max and no tile max (flash_wgmma.cu, FAST_MAX,
RESCALE_THRESHOLD; not kept: the switches, the norms, the emulation's rule and the tests are in
lab/patches/fp8_lazy_max.diff, to `git apply` onto commit ed9c043; lab/NOTES.md, "FP8: P from
the running max"). With the patch the FP8 kernel's running max moves only when a tile's max
passes it by more than 8 (log2 units, FA4's conditional rescaling; P ≤ 256 < 448). Where the
norms bound every score of a tile within 2^120 of the running max (f · |q8| · max |k8| - m <
120), the kernel skips the tile max (102 of the 656 instructions a consumer thread spends on a
tile) and forms P from the running max; only where a thread's share of a row's sum passes 2^8
does the warp find the max (from P) and move. nvcc 13.0's SASS of the main loop: 656 → 550
instructions a tile on that path.

Builds: float16; FP8 at the threshold with the exact path only (FAST_MAX=0); FP8 with the fast
path (FAST_MAX=1, the launcher's). Each is checked against the emulation (engine.cpu.fp8.run,
the same rule) and float64 first (lab/kv_stages.py), then all are timed alternately at
d = 128, non-causal, B·H·N = 32k tokens × 8 heads, N(0, 1) inputs.
Run on a Hopper GPU: python3 lab/fp8_fast_max.py [--rule] [hopper/flash_wgmma_prev.cu]
(--rule: also the exact path at threshold 0, the rule before, on the new source)
(the source before the rule, made by hand and not kept: `git show
ed9c043:kernels/hopper/flash_wgmma.cu > kernels/hopper/flash_wgmma_prev.cu`)"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    import fp8_wide_tiles
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    builds = {"f16": (False, 128, {})}
    if args:            # the source before the rule, checked against the emulation without it
        builds["fp8 before"] = (True, 192, {}, args[0])
    if "--rule" in sys.argv:     # the exact path without the threshold (the rule before)
        builds["fp8 exact, threshold 0"] = (True, 192, {"FAST_MAX": 0, "RESCALE_THRESHOLD": 0})
    builds["fp8 exact"] = (True, 192, {"FAST_MAX": 0})
    builds["fp8 fast"] = (True, 192, {"FAST_MAX": 1})
    kv_stages.BUILDS = builds
    use = kv_stages.use

    def use_with_rule(name):
        before = name in ("fp8 before", "fp8 exact, threshold 0")
        fp8_wide_tiles.RULE = None if before else "kernel"
        return use(name)
    kv_stages.use = use_with_rule
    kv_stages.main()


if __name__ == "__main__":
    main()
