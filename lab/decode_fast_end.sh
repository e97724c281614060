#!/usr/bin/env bash
# Lab: the end of a split and the merge through the free rings (FAST_END=1 of flash_decode.cu,
# copy-engine builds whose warps' O_i fit the rings). At batch 1 a step's last block spends
# about 1.0 us merging its warps' O_i a warp at a time (four barriers) and 2.5-2.8 us merging
# 32 splits' O_s in four rounds of 8 loads a thread (lab/NOTES.md, "Decoding: a batch-1 step
# block by block"). The switch merges the warps in one step and brings the merging block's O_s
# into the rings by cp.async copies, all in flight at once, with the arithmetic of the other
# path (same fused multiply-adds, same order), so its bits are the kernel's.
#   nvcc 13.0, sm_90a, d 128, float16, whole tiles: 101 registers against 100, no spills; the
#   default build's SASS is unchanged. The main loop is rescheduled (the old risk): the same
#   FFMA and shared-memory loads, about 100 fewer integer instructions a tile.
#   Prediction: batch 1 0.8-1.5 us less a step (32k-128k), batch 2-8 level to 0.5 us less.
# The switch is in patches/decode_fast_end.diff: `git apply` it onto commit e2a98da first.
# Run from the repository root on a Hopper GPU, committed first (switch_tests.sh takes the
# kernel back with git checkout, so it runs last): bash lab/decode_fast_end.sh  (about 6
# minutes)
# Run on an H200 at 11:12 UTC, 2026-11-29 (logs/h200_2026-11-29_decode_fast_end.log): 1.4-2.0 us
# slower at batch 1, 0.1-1.2 at batch 2-8, and 4 of the 33 decode tests failed on the bits; not
# kept.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set fast_end 2>&1 | grep -v "^  {"
bash lab/switch_tests.sh kernels/decode/flash_decode.cu FAST_END tests/test_gpu_decode.py
