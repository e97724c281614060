"""Lab: the FP8 forward's key tiles visited last first (flash_wgmma.cu, REVERSE_KEYS), with a
run's first S_ij as wide as the ragged last tile's keys (FIRST_KEYS: 64 or 128 of 192).
At N = 8k a run's last key tile holds 128 keys of 192 (16k, 4k, 1k: 64), so it computed
64 (128) keys for nothing, and each run's first tile has its softmax exposed (no P V of its
own warpgroup beside it). Visiting the ragged tile first, as a narrower product, removes the
first cost and shortens the second.

Builds: float16 (as kept), the FP8 source before (a kernel file under kernels/, made by hand,
not kept: `git show <commit>:kernels/hopper/flash_wgmma.cu > kernels/hopper/flash_wgmma_prev.cu`),
the new order with a full first tile (FIRST_KEYS = 192), the new order with the narrow one
(the launcher's choice). Each is checked against the emulation and float64 (lab/kv_stages.py's
checks: the trace check of the source before fails by design, its order being first to last),
then all are timed alternately at d = 128, non-causal, B·H·N = 32k tokens × 8 heads.
Needs `git apply lab/patches/fp8_keys_last_first.diff` onto commit 94576de (not kept).
Run on a Hopper GPU: python3 lab/fp8_ragged_first.py [hopper/flash_wgmma_prev.cu]"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    prev = sys.argv[1] if len(sys.argv) > 1 else "hopper/flash_wgmma_prev.cu"
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8 192 before": (True, 192, {}, prev),
        "fp8 192 last first, full": (True, 192, {"FIRST_KEYS": 192}),
        "fp8 192 last first, narrow": (True, 192, {}),
    }
    # and a last key tile of 116 keys (a first S_ij of 128), beside kv_stages' 64-key ones
    kv_stages.SHAPES = kv_stages.SHAPES + ((260, 500, "rising"),)
    kv_stages.main()


if __name__ == "__main__":
    main()
