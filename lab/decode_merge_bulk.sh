#!/usr/bin/env bash
# Lab: the end of a batch-1 decode step (lab/NOTES.md, "Decoding: a batch-1 step block by
# block"): the end of each split takes 1.6 us, 1.0 of it the warps' O_i merged a warp at a
# time, and the merging block 2.5 us, four rounds of 8 L2 loads a thread at 32 splits.
# One GPU call, every build checked against float64 over the GPU tests' decode cases first:
#   1. decode_tensor_cores.py --set merge_bulk --quick: the kernel; the warps merged in one
#      step (WARP_MERGE_PARALLEL=1 of kernels/decode/flash_decode.cu: 0.2-0.9 us less in the
#      20:44 UTC run); the merging block's O_s in one bulk copy into the free ring, summed
#      from shared memory (MERGE_BULK=1: 64 KB at batch 1 / 32 splits, one round trip); both.
#      Prediction: the bulk merge 0.8-1.3 us less at batch 1, under 0.3 at batch 8 (4 splits:
#      8 KB, already one round); both together 1.2-2 us less at batch 1, which would put
#      batch 1 / 32k and 64k at or above SDPA.
#   2. decode_phases.py --with both switches: the merging block's merge and the end of a split
#      phase by phase (predicted: the merge 2.5 -> 1.0-1.5 us, the end of a split 1.6 -> 0.8).
#   3. the decode kernel's gpu-marked tests with both switches set (the kernel is theirs only).
# Needs the switch of patches/decode_merge_bulk.diff (git apply it onto commit ca1d399); run
# from the repository root on a Hopper GPU: bash lab/decode_merge_bulk.sh (about 4 minutes).
# Run 2026-11-28 on an H200 before the switch left the kernel: the bulk merge 9-11% slower at
# every shape, its stamped build not (logs/h200_2026-11-28_decode_merge_bulk.log, NOTES.md).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set merge_bulk --quick 2>&1 | grep -v "^  {"
python3 lab/decode_phases.py --reps 5 --with WARP_MERGE_PARALLEL=1,MERGE_BULK=1 2>&1 \
    | grep -v "^  {"
bash lab/switch_tests.sh kernels/decode/flash_decode.cu WARP_MERGE_PARALLEL,MERGE_BULK \
    tests/test_gpu_decode.py
