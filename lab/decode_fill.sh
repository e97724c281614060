#!/usr/bin/env bash
# Lab: the two decode questions left on 2026-11-28 (lab/NOTES.md, "Decoding: the copy engine"),
# in one GPU call:
#   1. the copy engine against cp.async in one run on grids of one block an SM and fewer
#      (split counts 1-32 at batch 1 and 8), to confirm the gap and place the launcher's
#      TMA_MIN_BLOCKS_PER_SM; the copy engine with 3 stages beside them;
#   2. whether reads of neighbouring bytes at once by a KV head's blocks, or by the KV heads'
#      blocks, raise the read rate (decode_read_pattern.py --locality);
#   3. how 16-byte cp.async copies might read as fast as cuDNN's (decode_read_pattern.py
#      --copies: L2 prefetch and evict-first hints, stages, 8 warps).
# Every build is checked against float64 before it is timed (decode_tensor_cores.py).
# Run from the repository root on a Hopper GPU: bash lab/decode_fill.sh   (about 2 minutes)
# Run on an H200 at 13:48 UTC (logs/h200_2026-11-28_decode_fill.log; lab/NOTES.md, "Decoding:
# where the copy engine pays"): cp.async 17-21% less time up to one block an SM, level at two.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set tma --quick --splits 1,4,16,32 2>&1 | grep -v "^  ("
python3 lab/decode_read_pattern.py --locality
python3 lab/decode_read_pattern.py --copies
