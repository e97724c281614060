#!/usr/bin/env bash
# Lab helper: the gpu-marked tests of the ticket's users (the decode kernel and the stream-K
# forward kernels: tests/test_gpu_decode.py, test_gpu_wgmma.py, test_gpu_tensorcore.py,
# test_gpu_launchers.py) with one lab switch of kernels/include/ticket.cuh set to 1 in every
# build the launchers make; the header is taken back afterwards (git checkout), so commit
# first. Stops if the header has no "#define MACRO 0" to set.
# Usage, from the repository root on a GPU: bash lab/ticket_tests_with.sh MACRO
set -euo pipefail
cd "$(dirname "$0")/.."
macro=${1:?the name of a ticket.cuh switch}
header=kernels/include/ticket.cuh
sed -i "s/^#define $macro 0\$/#define $macro 1/" "$header"
trap 'git checkout "$header"' EXIT
grep -q "^#define $macro 1\$" "$header"
python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/test_gpu_decode.py \
    tests/test_gpu_wgmma.py tests/test_gpu_tensorcore.py tests/test_gpu_launchers.py 2>&1 | tail -4
