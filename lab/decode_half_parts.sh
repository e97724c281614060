#!/usr/bin/env bash
# Lab: the splits' O_s in 16 bits. At batch 1 the merging block of a KV head reads 32 splits'
# O_s, 64 KB in float32, in four rounds of 8 loads a thread; the ticket and merge cost
# 1.6-1.7 us of a step, and a step at SDPA's needs them under about 0.7 us at 32k
# (lab/NOTES.md, "Decoding: the ticket's fences"). HALF_PARTS=1 of flash_decode.cu stores O_s
# in the build's 16-bit dtype (float16 here: O_s is normalised, so |O_s| <= max |V|, which
# float16 holds; its rounding, 2^-11 relative, is the output's own), and the merge reads 8-byte
# loads of four elements.
#   nvcc 13.0, sm_90a, d 128, float16: with 8 loads in flight the cp.async build's SASS up to
#   the end of the warps' merge is the kernel's (full text); the copy engine's build, which
#   the auto counts run, is rescheduled from its prologue on (the old risk: time it). With 16
#   in flight, 100 registers against 84, every build is rescheduled.
#   Prediction: 8 in flight 0.2-0.3 us less at batch 1 (half the bytes into one SM, the same
#   round trips); 16 in flight 0.5-0.8 us less (two L2 round trips fewer); batch 8 (4 splits,
#   one round either way) level. Small grids (cp.async, 8 and 16 splits at batch 1) as well.
# Every build is checked against float64 over the GPU tests' decode cases before it is timed.
# The switch is in patches/decode_half_parts.diff: `git apply` it onto commit f605092 first.
# Run from the repository root on a Hopper GPU: bash lab/decode_half_parts.sh  (about 5 minutes)
# Run on an H200 at 00:28 UTC, 2026-11-29 (logs/h200_2026-11-29_decode_half_parts.log): 8 in
# flight level with the kernel, 16 in flight 11-16% slower at every shape; not kept.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 lab/decode_tensor_cores.py --set half_parts 2>&1 | grep -v "^  {"
python3 lab/decode_tensor_cores.py --set half_parts --quick --splits 8,16 2>&1 | grep -v "^  {"
