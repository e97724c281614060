#!/usr/bin/env bash
# Lab: the ticket's fences at batch 1. The leader's __threadfence() is fence.sc.gpu
# (MEMBAR.SC.GPU), before its atomicAdd and again in the merging block after it; a single
# atom.acq_rel.gpu (TICKET_ACQ_REL=1 of kernels/include/ticket.cuh) orders the same writes
# with one MEMBAR.ALL.GPU before the atomic and none after (nvcc 13.0, sm_90a).
# One GPU call, every build checked against float64 over the GPU tests' decode cases before
# it is timed (decode_tensor_cores.py --set acq_rel: the kernel, the acquire-release ticket,
# no merge timed unchecked), batch 1 and 8 at 32k and 128k keys.
#   Prediction: 0.2-0.6 us less at batch 1 (one SC fence's wait off the posting path and one
#   off the merging block's), nothing measurable at batch 8.
# Then the stream-K forward's and the decode kernel's gpu-marked tests with the acquire-release
# ticket forced on (the ticket is theirs too), for making it the kernel.
# Run from the repository root on a Hopper GPU: bash lab/decode_acq_rel.sh   (about 5 minutes)
# Prepared 2026-11-28; run 20:00-20:05 UTC (H200): logs/h200_2026-11-28_decode_acq_rel.log.
# The acquire-release ticket has been the kernel's since (the switch is gone), so its second
# half no longer runs as written.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set acq_rel --quick 2>&1 | grep -v "^  {"
# the acquire-release ticket in every launcher's build, for the tests only (taken back after)
bash lab/switch_tests.sh kernels/include/ticket.cuh TICKET_ACQ_REL tests/test_gpu_decode.py \
    tests/test_gpu_wgmma.py tests/test_gpu_tensorcore.py tests/test_gpu_launchers.py
