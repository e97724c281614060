"""Lab: the Hopper backward's P without the mask's tests in the tiles that need none
(MASK_BRANCH, `patches/backward_mask_branch.diff`, onto commit 4075ea5, whose kernel is
829f23e's; the kernel has the branch since 9341068, with no switch): P's loop as a function
templated on the tests, called with them for the masked tiles (causal diagonal, ragged) and without them for every other tile, chosen by
a warp-uniform branch (1), against the loop of 829f23e with its tests predicated in every
tile (0; its SASS is identical to 829f23e's at every shape, dtype and SPLIT_P).

Why: the recorded sweeps of 2026-11-28 (lab/NOTES.md, "wgmma backward: P in halves, 16-byte
stores") have our bfloat16 build 12-21% slower than our float16 build at head_dim 64, and
only there. In the SASS (nvcc 13.0) of the head_dim 64 build with P in halves, float16 keeps
the mask's predicates in predicate registers (P2R 0, LOP3 50, 1,888 instructions) while
bfloat16 parks them in general registers (P2R 18, LOP3 250, 2,088) among its exponentials:
about 210 compares, 64 predicate operations and 64 selects a tile. With the branch an
unmasked tile's P is 105-109 instructions a part in both dtypes (32 FFMA, 32 MUFU.EX2,
16 FMUL, 16 F2FP, 8 LDS). The builds below do not spill (nvcc 13.0 and NVRTC 12 and 13;
the branch with P whole at head_dim 128 spills 16 bytes, so it is not timed).

Prediction (before any GPU run): head_dim 64 bfloat16 takes float16's time (cuDNN time over
ours 0.86-0.94 -> 1.0-1.1); float16 at head_dim 64 within 3% (the issue slots the tests took
mostly overlap the exponentials); head_dim 128 within 2%.
Run on a Hopper GPU on 4075ea5 after `git apply`: python3 lab/backward_mask_branch.py [N ...]
(default 2048 4096 8192)."""
import sys

sys.path[:0] = ["lab"]
import backward_phases  # noqa: E402

backward_phases.BUILDS = {
    64: {"now": {"MASK_BRANCH": 0}, "branch": {}},
    128: {"now": {"MASK_BRANCH": 0}, "now, P in halves": {"MASK_BRANCH": 0, "SPLIT_P": 1},
          "branch, P in halves": {"SPLIT_P": 1}}}
backward_phases.STAMPS = False
backward_phases.DTYPES = ("float16", "bfloat16")

if __name__ == "__main__":
    if len(sys.argv) == 1:
        sys.argv += ["2048", "4096", "8192"]
    backward_phases.main()
