"""Lab: the Hopper backward's P in two halves (SPLIT_P, `patches/backward_split_p.diff`, onto
commit 72a8b39): the exponentials of the first half of P's k-steps (queries), then that
half's dV_j product issued, then the second half's exponentials and product, against P
whole before dV_j's product. Why: the stamps of 2026-11-28 (lab/NOTES.md, "wgmma backward:
dQ in tile order") found P and dV's issue the longest phase at head_dim 64 (2,004 cycles of
6,111 a tile): 64 exponentials a thread while both consumers are in step, with only dP's
product on the tensor cores. ptxas (nvcc 13.0) puts the first half's 32 exponentials, then
the first dV products interleaved with the rest (SASS read). Prediction (before any GPU
run): the first half of dV (256 clocks of both consumers' products at the datasheet's
rate) runs under the second half's exponentials: up to 4% at head_dim 64, up to 2% at 128
(32 exponentials a thread). Run on a Hopper GPU, after `git apply`:
python3 lab/backward_split_p.py [N ...] (default 4096 8192)."""
import sys

sys.path[:0] = ["lab"]
import backward_phases  # noqa: E402

backward_phases.BUILDS = {64: {"P in halves": {}, "P whole": {"SPLIT_P": 0}},
                          128: {"P in halves": {}, "P whole": {"SPLIT_P": 0}}}
backward_phases.STAMPS = False

if __name__ == "__main__":
    backward_phases.main()
