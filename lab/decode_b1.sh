#!/usr/bin/env bash
# Lab: after the whole-tile copies (lab/NOTES.md, "Decoding: the whole tile in one copy") the
# decode step is 0.96-1.00x SDPA on a contiguous cache, furthest behind at batch 1 (32 splits),
# where a fixed cost a block shows. Four tries in one GPU call, each build checked against
# float64 before it is timed (decode_tensor_cores.py), at batch 1 and 8, 32k and 128k keys:
#   1. --set merge: the merging block's loads of the splits' O_s 8 (the kernel), 16 or 32 in
#      flight a thread. With 32 splits the merge waits out 4 rounds of L2 latency at 8.
#      Prediction: 1-2 us less at batch 1 (2-5% at 32k), nothing at batch 8 (4 splits);
#   2. --set promotion: the tensor maps' L2 promotion 128 bytes (the launcher's), 256 or none.
#      Prediction: within 1% (cp.async's 256-byte prefetch gained 1-3.5% on an H100);
#   3. --set tma --splits 2,4,16,32: the copy engine (now whole tiles) against cp.async at
#      about one and two blocks an SM (16, 32 splits at batch 1; 2, 4 at batch 8), for the
#      launcher's fill rule, which was measured with the warps' own copies. Prediction: the
#      copy engine's gap at one block an SM smaller than the 17-21% measured then;
#   4. --set paged_tiles: pages of 64 rows copied a whole tile at a time, as the contiguous
#      cache is, or each warp its rows (the kernel then). With the warps' copies the paged
#      cache read 3-7% faster than the contiguous one. Prediction: whole tiles 3-7% faster
#      than the warps' on pages, at or above the contiguous cache.
# Run from the repository root on a Hopper GPU: bash lab/decode_b1.sh   (about 11 minutes;
# the tries run in the order 1, 2, 4, 3, the longest last)
# Prepared 2026-11-28; run on an H200 the same day, 17:26-17:45 UTC, in three calls, try 4
# with the patch it then needed, lab/patches/decode_paged_tiles.diff (now the kernel):
#   0. the GPU decode tests passed, the head_dim-256 case included (and the full gpu-marked
#      suite, 543 passed: logs/h200_2026-11-28_gpu_tests_b1.log);
#   1. merge: 16 in flight 12-18% slower, 32 level (-0.3..+0.7%): no gain, 8 stays
#      (logs/h200_2026-11-28_decode_merge.log); the prediction was wrong;
#   2. promotion: none level with 128 B, 256 B 6-11% slower; 128 stays
#      (logs/h200_2026-11-28_decode_promotion.log);
#   4. paged_tiles: whole tiles 0.8-3.7% less time than the warps' on pages of 64, within
#      0.2-1.5% of the contiguous cache; smaller than predicted, kept as the kernel
#      (logs/h200_2026-11-28_decode_paged_tiles.log);
#   3. tma: at about one block an SM the copy engine's steps now take 1.3-5.8% longer than
#      cp.async's (it was 17-21%), so the fill rule stands
#      (logs/h200_2026-11-28_decode_fill_tiles.log).
# lab/NOTES.md, "Decoding: batch 1 and whole tiles from pages", has the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
# first the GPU decode tests, which include a case not yet run on a GPU (head_dim 256, whole
# tiles of 32 keys from a contiguous cache)
python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/test_gpu_decode.py 2>&1 | tail -5 \
    || echo "the GPU decode tests failed (above); the tries below go on"
python3 lab/decode_tensor_cores.py --set merge --quick 2>&1 | grep -v "^  {"
python3 lab/decode_tensor_cores.py --set promotion --quick 2>&1 | grep -v "^  {"
python3 lab/decode_tensor_cores.py --set paged_tiles --quick 2>&1 | grep -v "^  {"
python3 lab/decode_tensor_cores.py --set tma --quick --splits 2,4,16,32 2>&1 | grep -v "^  {"
