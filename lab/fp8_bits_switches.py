"""Lab: the FP8 forward's launch switches again, now that the tile max comes from the scores'
bits (a shorter softmax). At d = 128 on 128 x 192 tiles the launcher has the consumers not
taking turns (PINGPONG 0: turns measured 3% slower on 2026-11-27) and the softmax fence on.
Builds: the launcher's, with turns, without the fence, and both; every build checked
(lab/kv_stages.py's checks), then timed alternately at d = 128, non-causal, B·H·N = 32k
tokens x 8 heads, with the float16 kernel beside them.
Prediction: the shorter softmax leaves less for turns to hide, so turns stay slower; the fence
level or better.
Run on an H200, 2026-11-29 02:14 UTC: the launcher's switches stay the fastest (turns 0-7%
slower, no fence 3-8% slower); not changed.
Run on a Hopper GPU: python3 lab/fp8_bits_switches.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8": (True, 192, {}),
        "fp8 turns": (True, 192, {"PINGPONG": 1}),
        "fp8 no fence": (True, 192, {"SOFTMAX_FENCE": 0}),
        "fp8 turns, no fence": (True, 192, {"PINGPONG": 1, "SOFTMAX_FENCE": 0}),
        "fp8 again": (True, 192, {}),
    }
    kv_stages.SHAPES = kv_stages.SHAPES[:2]
    kv_stages.SEQS = (2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
