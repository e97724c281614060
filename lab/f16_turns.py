"""Lab: consumer turns (PINGPONG) in the 16-bit Hopper forward at d = 64 and 128, once more.
The launcher takes turns at every head size (engine.gpu.launchers.wgmma.PINGPONG = 1: 1.03-
1.05x faster at d = 128 on an H200 when the wgmma path was new). On 2026-11-29 the FP8 build
at d = 64 ran 3-6% faster without turns (lab/fp8_d64_256.py), after the fence, the
descriptors, the 16-byte stores and the tile max from bits changed the kernel. Prediction:
float16 at d = 64 +3-6% without turns, at d = 128 turns still ahead. Rule, set before the run:
a head size's launcher rule changes (in a later call, with the gpu-marked suite and the
forward sweep re-recorded) only if no turns beats both turns lines by 2% or more at every N.

Each build is checked against float64 (lab/overlap_fence.py's check), then timed alternately
(median of 30, the better of two rounds), non-causal, B·H·N = 32k tokens x 8 heads.
Run on a Hopper GPU: python3 lab/f16_turns.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    import fp8_wide_tiles
    kv_stages.BUILDS = {
        "f16 turns": (False, 128, {}),
        "f16 no turns": (False, 128, {"PINGPONG": 0}),
        "f16 turns again": (False, 128, {}),
    }
    kv_stages.SEQS = (1024, 2048, 8192, 16384)
    for d in (64, 128):
        kv_stages.D = fp8_wide_tiles.D = d
        kv_stages.main()


if __name__ == "__main__":
    main()
