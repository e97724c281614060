#!/usr/bin/env bash
# Lab: at batch 1 the decode step trails SDPA by 1-2 us, and that is the ticket and the merge
# (lab/NOTES.md, "Decoding: what the merge costs": without them the split phase is 0.9-2.2%
# under SDPA's step; they take 2.1-2.2 us; the leader's fence alone took 0.3-0.6 us off).
# One GPU call, every build checked against float64 over the GPU tests' decode cases before
# it is timed (decode_tensor_cores.py), batch 1 and 8 at 32k and 128k keys:
#   --set merge_prefetch: the kernel; the ticket with the leader's fence only
#   (LEADER_FENCE_ONLY=1 of kernels/include/ticket.cuh); that and the merge's first 8 O_s
#   loads a thread issued with the loads of m_s and l_s (MERGE_PREFETCH=1 of flash_decode.cu:
#   one L2 round trip fewer on the merge's path; nvcc 13.0, d 128: 125-128 registers, no
#   spills); and no merge at all (timed unchecked: its output is not written).
#   Prediction: the prefetch 0.3-0.6 us less again at batch 1, nothing at batch 8; the two
#   together about 1 us less, which would bring batch 1 / 128k to SDPA's step and leave
#   32k about 0.3 us behind.
# Then the stream-K forward's and the decode kernel's gpu-marked tests with the leader's fence
# forced on (the ticket is theirs too), for making it the kernel.
# Run from the repository root on a Hopper GPU: bash lab/decode_merge.sh   (about 5 minutes)
# Prepared 2026-11-28; run 19:49-19:55 UTC (H200): logs/h200_2026-11-28_decode_merge_prefetch.log.
# The leader's fence has been the kernel's since (the switch is gone), and MERGE_PREFETCH is
# lab/patches/decode_merge_prefetch.diff now, so the script no longer runs as written.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set merge_prefetch --quick 2>&1 | grep -v "^  {"
# the leader's fence in every build the launchers make, for the tests only (taken back after)
bash lab/switch_tests.sh kernels/include/ticket.cuh LEADER_FENCE_ONLY tests/test_gpu_decode.py \
    tests/test_gpu_wgmma.py tests/test_gpu_tensorcore.py tests/test_gpu_launchers.py
