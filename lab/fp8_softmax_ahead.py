"""Lab: the next run's first softmax under this run's last P V (flash_wgmma.cu with the switch
SOFTMAX_AHEAD, untraced persistent builds). At the end of a run the consumers issue the next
run's first S_ij before this run's last P V, run that S's softmax while the P V computes, and
write this run's output after it; in the kernel as kept, the first softmax of every run runs
with no product of its
warpgroup in flight, both warpgroups at once (FP8 at d = 128 takes no turns), about 0.8 µs of
the 4.5 µs FP8 pays an item beyond its tiles (lab/NOTES.md, "What binds the FP8 steady state").

Not kept (slower, lab/NOTES.md, "FP8: the first softmax under the last P V"): the switch is in
lab/patches/fp8_softmax_ahead.diff; `git apply` it onto commit 495643c, and make the source
before by hand: `git show 495643c:kernels/hopper/flash_wgmma.cu >
kernels/hopper/flash_wgmma_prev.cu`. Builds: that source before, the patched source with
SOFTMAX_AHEAD=0 (the cost of the restructure alone) and with it on, and float16.
Each is checked against the emulation and float64 first (lab/kv_stages.py), then all are timed
alternately at d = 128, non-causal, B·H·N = 32k tokens × 8 heads.
Run on a Hopper GPU: python3 lab/fp8_softmax_ahead.py [--turns] [hopper/flash_wgmma_prev.cu]
(--turns: SOFTMAX_AHEAD 0 and 1 with the consumers taking turns, beside 0 without)"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    prev = args[0] if args else "hopper/flash_wgmma_prev.cu"
    builds = {
        "f16": (False, 128, {}),
        "fp8 before": (True, 192, {}, prev),
        "fp8 ahead 0": (True, 192, {"SOFTMAX_AHEAD": 0}),
        "fp8 ahead 1": (True, 192, {"SOFTMAX_AHEAD": 1}),
    }
    if "--turns" in sys.argv:     # the same with the consumers taking turns (PINGPONG=1)
        builds = {"fp8 ahead 0": builds["fp8 ahead 0"], **{
            f"{name}, turns": (fp8, bk, {**defs, "PINGPONG": 1})
            for name, (fp8, bk, defs, *_) in builds.items() if name.startswith("fp8 ahead")}}
    kv_stages.BUILDS = builds
    kv_stages.main()


if __name__ == "__main__":
    main()
