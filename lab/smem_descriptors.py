"""Lab: the Hopper forward's shared-memory descriptors built once (hopper.cuh, SmemDesc), each
wgmma's descriptor one 32-bit add, against the source before, which masked, shifted and or-ed
every descriptor's fields again for each k-step (about 4 uniform instructions a wgmma; nvcc
13.0's SASS of the FP8 128 × 192 main loop: 705 → 666 instructions a consumer thread a tile).
Where the softmax's issue sets the pace (lab/NOTES.md, "What binds the FP8 steady state"), the
~6% fewer instructions might show in the time; float16, bound by its products, should not move.

The previous source is given as a kernel file under kernels/ (made by hand, not kept:
`git show 778d358:kernels/hopper/flash_wgmma.cu > kernels/hopper/flash_wgmma_prev.cu`).
Each build is checked against the emulation and float64 (lab/kv_stages.py's checks), then all
are timed alternately at d = 128, non-causal, B·H·N = 32k tokens × 8 heads.
Run on a Hopper GPU: python3 lab/smem_descriptors.py [hopper/flash_wgmma_prev.cu]"""
import sys

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402


def main():
    prev = sys.argv[1] if len(sys.argv) > 1 else "hopper/flash_wgmma_prev.cu"
    kv_stages.BUILDS = {
        "f16 before": (False, 128, {}, prev),
        "f16 after": (False, 128, {}),
        "fp8 192 before": (True, 192, {}, prev),
        "fp8 192 after": (True, 192, {}),
    }
    kv_stages.main()


if __name__ == "__main__":
    main()
