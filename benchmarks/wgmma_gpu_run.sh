#!/usr/bin/env bash
# One device call for the Hopper wgmma kernel: a smoke launch of each build (free issue order,
# then ping-pong), the GPU tests of the wgmma and tensor-core kernels, then the benchmark
# (benchmarks/wgmma_bench.py). Logs and JSON go to $OUT; a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=.
export FA_LAB_MAX_QKV_ELEMENTS=1000000000 FA_LAB_MAX_NAIVE_BYTES=200000000000
OUT=${OUT:-/tmp/wgmma_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv \
  | tee "$OUT/wgmma_device.txt"
timeout 60 python3 benchmarks/wgmma_smoke.py 0 2>&1 | tee "$OUT/wgmma_smoke.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "free-order smoke failed"; exit 1; }
timeout 60 python3 benchmarks/wgmma_smoke.py 1 2>&1 | tee -a "$OUT/wgmma_smoke.log"
pp=${PIPESTATUS[0]}
echo "pingpong smoke exit: $pp"
select=(); builds="0,1"
if [ "$pp" -ne 0 ]; then select=(-k "not pingpong"); builds="0"; fi
timeout 150 python3 -m pytest -q -p no:cacheprovider "${select[@]}" tests/test_gpu_wgmma.py \
  tests/test_gpu_tensorcore.py > "$OUT/wgmma_pytest.log" 2>&1
echo "pytest exit: $?"
grep -E "passed|failed|Error |assert" "$OUT/wgmma_pytest.log" | tail -n 25
WGMMA_BUILDS=$builds timeout 220 python3 benchmarks/wgmma_bench.py "$OUT" \
  > "$OUT/wgmma_bench.log" 2>&1
echo "bench exit: $?"
tail -n 90 "$OUT/wgmma_bench.log"
