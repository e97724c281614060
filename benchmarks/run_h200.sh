#!/usr/bin/env bash
# Record the GPU results of benchmarks/ on a lent H200: the gpu-marked kernel tests, the naive
# fairness check against PyTorch (with a side check of cupy.matmul against the direct cuBLAS
# call), one block schedule, and the sequence-length sweep.
# Usage: OUT=<folder> bash benchmarks/run_h200.sh [full|short]
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
mode=${1:-full}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$OUT/env.txt" 2>&1
python3 -c "import cupy, numpy, torch; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)" >> "$OUT/env.txt" 2>&1
date -u >> "$OUT/env.txt"; cat "$OUT/env.txt"

timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/test_gpu_kernels.py \
  > "$OUT/pytest.log" 2>&1
tests_rc=$?
tail -25 "$OUT/pytest.log"

python3 - <<'PY' 2>&1 | tee "$OUT/gemm_check.txt"
# cupy.matmul against the direct cuBLAS call of engine.gpu_naive, float16 P·V of the fairness shape
import cupy, numpy as np
from engine import gpu_naive
from engine.timing import time_stages
bh, n, d = 64, 4096, 64
P = cupy.random.standard_normal((bh, n, n), dtype=cupy.float32).astype(cupy.float16)
V = cupy.random.standard_normal((bh, n, d), dtype=cupy.float32).astype(cupy.float16)
O1, O2 = cupy.empty((bh, n, d), cupy.float16), cupy.empty((bh, n, d), cupy.float16)
stages = [("cupy.matmul", lambda: cupy.matmul(P, V, out=O1)),
          ("cublas direct", lambda: gpu_naive.batched_gemm(False, d, n, n, V, d, P, n, O2, d, bh))]
tot, per = time_stages(stages, 20, 2)
for name, ms in per.items():
    print(f"{name}: median {np.median(ms):.4f} ms = {2 * bh * n * n * d / np.median(ms) / 1e9:.1f} TFLOP/s")
print("max |difference|:", float(cupy.abs(O1.astype(cupy.float32) - O2.astype(cupy.float32)).max()))
PY
python3 -m engine fairness --reps 30 --out "$OUT/fairness_h200.json" 2>&1 | tail -4
python3 -m engine trace --batch 1 --heads 4 --seq-q 2048 --seq-k 2048 --head-dim 64 \
  --block-q 64 --block-k 64 --dtype float16 --backend cupy --out /tmp/trace.npz \
  --schedule-out "$OUT/schedule_h200_teaching.json" 2>&1 | tail -2

seqs=256,512,1024,2048,4096,8192,16384
if [ "$tests_rc" != 0 ] || [ "$mode" = short ]; then seqs=256,1024; fi
timeout "${SWEEP_TIMEOUT:-330}" python3 -m engine bench --seq "$seqs" --head-dim 64,128 \
  --dtype float16,float32 --causal both --kernels naive,teaching,torch --reps 30 --budget 2 \
  --out "$OUT/bench_h200_sweep.json" > "$OUT/sweep.log" 2> "$OUT/sweep_progress.log"
echo "sweep rc=$? tests rc=$tests_rc"
grep -E "^(kernel|naive|teaching|torch_flash) +(4096|16384) " "$OUT/sweep.log" | head -40
grep -c . "$OUT/sweep.log"; grep skipped "$OUT/sweep.log" | head -5
