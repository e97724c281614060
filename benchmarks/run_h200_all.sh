#!/usr/bin/env bash
# One device call that checks the whole product on a lent H200: every gpu-marked test, the app's
# AppTest suite with the CuPy backend (Streamlit and Altair carried as wheels in .whl/), and a
# sweep of the tensor-core kernel at head_dim 64 and 128 with 128×128 tiles (the shape that runs
# the Hopper wgmma path) beside the naive baseline, in the layout of bench_h200_sweep.json.
# Usage (device tool, carry .whl): OUT=<folder> bash benchmarks/run_h200_all.sh
# GPU_TESTS=0 or SWEEP=0 leave those parts out.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import cupy, numpy, torch, streamlit; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__, 'streamlit', streamlit.__version__)"
  date -u; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
gpu_rc=skipped
if [ "${GPU_TESTS:-1}" = 1 ]; then
  timeout 330 python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/ > "$OUT/gpu_tests.log" 2>&1
  gpu_rc=$?
fi
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider tests/test_app_pages.py \
  tests/test_url_fuzz.py tests/test_charts.py > "$OUT/apptest_gpu.log" 2>&1
app_rc=$?
if [ "${SWEEP:-1}" = 1 ]; then
  FA_LAB_MAX_QKV_ELEMENTS=1000000000 FA_LAB_MAX_NAIVE_BYTES=200000000000 \
  timeout 150 python3 -m engine bench --seq 256,512,1024,2048,4096,8192,16384 \
    --head-dim 64,128 --block-q 128 --block-k 128 --dtype float16 --causal both \
    --kernels naive,tensorcore --reps 30 --budget 2 \
    --out "$OUT/bench_h200_wgmma.json" > "$OUT/sweep_tc.log" 2> "$OUT/sweep_tc_progress.log"
  echo "sweep rc=$?"
  cat "$OUT/sweep_tc.log" | head -40
fi
echo "--- gpu tests (rc=$gpu_rc)"; tail -15 "$OUT/gpu_tests.log" 2>/dev/null
echo "--- AppTest on GPU (rc=$app_rc)"; tail -15 "$OUT/apptest_gpu.log"
