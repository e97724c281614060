#!/usr/bin/env bash
# Lab: the one-step warp merge as the kernel (commit da0d8ae: O_acc gone from shared memory,
# the warps' O_i summed through the rings) against the kernel before it (commit ca1d399) and
# its WARP_MERGE_PARALLEL build, in one GPU call. The decode sweep recorded right after the
# change put the kernel 0.4-1.5% lower against SDPA than the sweep before it, where the switch
# had timed 0.2-1.0 us faster; this tells the change from the run's (lab/NOTES.md, "the
# one-step warp merge as the kernel, and back"). Every build checked against float64 first.
#   1. da0d8ae's kernel, --set warp_merge --quick: both of its builds are the same one, so
#      their difference is the method's noise;
#   2. ca1d399's kernel, shared-memory layout and decode GPU cases, --set warp_merge --quick:
#      the kernel before, and its switch build;
#   3. step 1 again (drift over the call).
# Run on commit da0d8ae (the kernel since d6e7720 is ca1d399's again), from the repository
# root on a Hopper GPU: bash lab/decode_warp_merge_ab.sh (about 4 minutes). Where the copy
# has no git history, OLD_TREE names a folder holding ca1d399's kernels/,
# engine/model/iomodel.py and tests/test_gpu_decode.py. The files are put back afterwards.
# Run 2026-11-28 22:16-22:20 UTC on an H200 (logs/h200_2026-11-28_decode_warp_merge_ab.log;
# its third step then timed ca1d399's kernel again, restored by a git checkout of an older
# HEAD: this script restores from its own copy since).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=(kernels engine/model/iomodel.py tests/test_gpu_decode.py)
run() { python3 lab/decode_tensor_cores.py --set warp_merge --quick 2>&1 | grep -v "^  {"; }
saved=$(mktemp -d)
cp -r --parents "${FILES[@]}" "$saved"
trap 'cp -r "$saved"/. . && rm -rf "$saved"' EXIT
echo "== the kernel as it is"; run
if [ -n "${OLD_TREE:-}" ]; then
  cp -r "$OLD_TREE"/kernels "$OLD_TREE"/engine "$OLD_TREE"/tests .
else
  git checkout ca1d399 -- "${FILES[@]}"
fi
echo "== commit ca1d399: the kernel before, and its WARP_MERGE_PARALLEL build"; run
cp -r "$saved"/. .
echo "== the kernel as it is, again"; run
