#!/usr/bin/env bash
# One device call for the tensor-core kernel: its GPU tests, then the benchmark.
# Logs and benchmarks/tensorcore_bench.py's JSON go to $OUT; a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=.
export FA_LAB_MAX_QKV_ELEMENTS=1000000000 FA_LAB_MAX_NAIVE_BYTES=200000000000
OUT=${OUT:-/tmp/tensorcore_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv | tee "$OUT/tensorcore_device.txt"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_tensorcore.py \
  > "$OUT/tensorcore_pytest.log" 2>&1
echo "pytest exit: $?"
tail -n 30 "$OUT/tensorcore_pytest.log"
timeout 420 python3 benchmarks/tensorcore_bench.py "$OUT" > "$OUT/tensorcore_bench.log" 2>&1
echo "bench exit: $?"
tail -n 45 "$OUT/tensorcore_bench.log"
