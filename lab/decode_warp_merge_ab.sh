#!/usr/bin/env bash
# Lab: the one-step warp merge as the kernel (commit da0d8ae: O_acc gone from shared memory,
# the warps' O_i summed through the rings) against the switch it came from, in one GPU call.
# The decode sweep recorded right after the change (lab/NOTES.md, "the one-step warp merge as
# the kernel") put the kernel 0.4-1.5% lower against SDPA than the sweep before it, where the
# switch had timed 0.2-1.0 us faster; this tells the layout's change from the run's.
#   1. the kernel as it is, --set warp_merge --quick: both builds are now the same one, so
#      their difference is the method's noise;
#   2. commit ca1d399's kernel, shared-memory layout and decode GPU cases (kernels/, iomodel.py,
#      --set warp_merge --quick: the kernel before, and its WARP_MERGE_PARALLEL build;
#   3. step 1 again (drift over the call). Every build checked against float64 first.
# Run from the repository root on a Hopper GPU, git history present: bash
# lab/decode_warp_merge_ab.sh (about 4 minutes); the files are taken back afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { python3 lab/decode_tensor_cores.py --set warp_merge --quick 2>&1 | grep -v "^  {"; }
echo "== the kernel as it is"; run
trap 'git checkout HEAD -- kernels engine/model/iomodel.py tests/test_gpu_decode.py' EXIT
old=${OLD_TREE:-}   # where git history is absent: those files of ca1d399 under $OLD_TREE
if [ -n "$old" ]; then cp -r "$old"/kernels "$old"/engine "$old"/tests .
else git checkout ca1d399 -- kernels engine/model/iomodel.py tests/test_gpu_decode.py; fi
echo "== commit ca1d399: the kernel before, and its WARP_MERGE_PARALLEL build"; run
git checkout HEAD -- kernels engine/model/iomodel.py tests/test_gpu_decode.py
echo "== the kernel as it is, again"; run
