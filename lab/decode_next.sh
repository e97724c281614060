#!/usr/bin/env bash
# Lab: the two decode tries prepared on 2026-11-28 (lab/NOTES.md, "Decoding against SDPA: what
# the counters show"), in one GPU call, each patch applied for its run and taken back after:
#   1. LOCKSTEP: the block's warps walk the key tiles together (patches/decode_lockstep.diff);
#   2. tensor-core products with 2 or 3 stages, beside the CUDA-core build
#      (patches/decode_tensor_cores.diff, --set deeper).
# Every build is checked against float64 before it is timed (decode_tensor_cores.py).
# Run from the repository root on a GPU machine: bash lab/decode_next.sh   (about 7 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
try() {   # try PATCH SET: the set timed with PATCH applied, PATCH taken back even on failure
  local rc=0
  patch -s -p1 < "lab/patches/$1"
  python3 lab/decode_tensor_cores.py --set "$2" 2>&1 | grep -v "^  (" || rc=$?
  patch -s -R -p1 < "lab/patches/$1"
  return "$rc"
}
try decode_lockstep.diff lockstep
try decode_tensor_cores.diff deeper
