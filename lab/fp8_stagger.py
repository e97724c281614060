"""Lab: the FP8 forward's two consumer warpgroups kept out of step (flash_wgmma.cu, STAGGER k,
no turns): at tiles 1, 1 + k, ... of each run, consumer 1 issues its products only once
consumer 0's S_ij is done, and consumer 0 its next ones only once consumer 1 has issued.
Why: a first key tile narrower than 192 keys (lab/fp8_first_width.py, patches/
fp8_keys_last_first.diff) made the same main loop 2–25% slower, so the consumers' relative
phase, which nothing in the kernel sets, is worth that much; turns (PINGPONG) set it at a
cost every tile. k = 1 is a handshake every tile, 4 every fourth, 1000 once a run.
LOCKSTEP k, the opposite: both consumers meet before issuing at those tiles.
Each build is checked (lab/kv_stages.py's checks), then all are timed alternately at d = 128,
non-causal, B·H·N = 32k tokens × 8 heads.
Needs `git apply lab/patches/fp8_consumer_phase.diff` onto commit 94576de (not kept).
Run on a Hopper GPU: python3 lab/fp8_stagger.py"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8 192": (True, 192, {}),
        "fp8 192 stagger 1": (True, 192, {"STAGGER": 1}),
        "fp8 192 stagger 4": (True, 192, {"STAGGER": 4}),
        "fp8 192 stagger once a run": (True, 192, {"STAGGER": 1000}),
        "fp8 192 lockstep 1": (True, 192, {"LOCKSTEP": 1}),
        "fp8 192 lockstep once a run": (True, 192, {"LOCKSTEP": 1000}),
    }
    kv_stages.main()


if __name__ == "__main__":
    main()
