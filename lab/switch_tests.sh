#!/usr/bin/env bash
# Lab helper: gpu-marked tests with lab switches of one kernel source set to 1 in every build
# the launchers make. Each MACRO must appear in FILE as "#define MACRO 0"; the file is taken
# back afterwards (git checkout), so commit first. Stops if a switch is not there to set.
# Usage, from the repository root on a GPU:
#   bash lab/switch_tests.sh FILE MACRO[,MACRO...] TEST_FILE...
# e.g., with patches/decode_phase_clock.diff applied: bash lab/switch_tests.sh \
#   kernels/decode/flash_decode.cu WARP_MERGE_PARALLEL tests/test_gpu_decode.py
# (decode_acq_rel.sh ran it on ticket.cuh's TICKET_ACQ_REL, the kernel's ticket since.)
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:?a kernel source}
macros=${2:?switches to set, comma-separated}
shift 2
trap 'git checkout "$file"' EXIT
for macro in ${macros//,/ }; do
  sed -i "s/^#define $macro 0\$/#define $macro 1/" "$file"
  grep -q "^#define $macro 1\$" "$file"
done
python3 -m pytest -q -rs -p no:cacheprovider -m gpu "$@" 2>&1 | tail -4
