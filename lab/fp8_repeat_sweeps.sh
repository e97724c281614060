#!/usr/bin/env bash
# Lab: is the FP8 forward's ratio to the float16 kernel at d = 128, N >= 8k, non-causal, at
# least 1.5 on this GPU, run after run? One GPU call: tests/test_gpu_fp8.py, then
# `benchmarks/gpu_run.sh fp8-parity` RUNS times (default 3; each the matmul ceilings and the
# whole FP8 sweep, every line checked against float64 before it is timed), then a table of each
# run's FP8 / float16 ratio at N = 8k and 16k. The runs go into one tar ($OUT/fp8_runs.tgz),
# since a call brings back at most 8 files.
# Run on a Hopper GPU: OUT=... WHEELS=.srvload/whl bash lab/fp8_repeat_sweeps.sh
set -u
: "${OUT:?set OUT}"
export PYTHONPATH=$PWD
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD
fi
date -u +"tests from %H:%M:%S"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_fp8.py > "$OUT/fp8_tests.log" 2>&1
echo "test_gpu_fp8.py rc=$?: $(tail -1 "$OUT/fp8_tests.log")"
for n in $(seq 1 "${RUNS:-3}"); do
  date -u +"run $n from %H:%M:%S"
  OUT="$OUT/run$n" bash benchmarks/gpu_run.sh fp8-parity > "$OUT/run$n.log" 2>&1
done
date -u +"runs done %H:%M:%S"
python3 - "$OUT" <<'PY'
import glob, json, sys
print("run  N      float16  FP8      ratio  (d = 128, non-causal, TFLOP/s)")
for path in sorted(glob.glob(f"{sys.argv[1]}/run*/bench_*_fp8_*.json")):
    rows = json.load(open(path))["results"]
    for n in (8192, 16384):
        got = {r["dtype"]: r["tflops"] for r in rows if r["kernel"] == "tensorcore"
               and r["head_dim"] == 128 and not r["causal"] and r["seq_q"] == n}
        f16, f8 = got.get("float16"), got.get("float8_e4m3")
        if f16 and f8:
            print(f"{path.split('/')[-2]:4} {n:6} {f16:8.1f} {f8:8.1f} {f8 / f16:6.3f}")
PY
tar czf "$OUT/fp8_runs.tgz" -C "$OUT" $(cd "$OUT" && ls -d run*) && rm -rf "$OUT"/run*
