#!/usr/bin/env bash
# Every GPU job of the project in one script, for one call of the device tool on a lent GPU
# (the H200 that results/ were recorded on). Results, logs and the environment go to $OUT; a
# short table is printed last.
#
# Usage: OUT=<folder> bash benchmarks/gpu_run.sh MODE [MODE ...]
#   tests     every gpu-marked test, then the AppTest suite with the CuPy backend (needs
#             Streamlit and Altair: carry their wheels in .whl/, see the device tool's README)
#   forward   forward sweep: naive, teaching and tensor-core kernels beside PyTorch's SDPA
#             backends (bench_<gpu>_forward.json)
#   backward  backward sweep: naive, teaching and tensor-core backward beside PyTorch's
#             (bench_<gpu>_backward.json)
#   bwd-wgmma issue 10 on Hopper: the backward gpu tests (both builds of the tensor-core
#             backward, the wgmma one on Hopper), then the backward sweep at the wgmma
#             backward's shapes (d 64: 128×128, d 128: 64×128; N 1024-16384, float16 and
#             bfloat16, causal and not, the backward mode's sizes) with dQ added by the
#             consumers (backward_wgmma.DQ_WRITER 0 at both head_dims) and PyTorch's flash
#             and cuDNN lines, then with dQ staged (1 at both) at N >= 4096;
#             bench_<gpu>_backward_wgmma.json; the table of
#             benchmarks/backward_parity.py (with the recorded mma.sync sweep) last
#   tiles     tile-size grid of the teaching and tensor-core kernels (tiles_<gpu>.json)
#   fairness  the naive baseline against PyTorch's matmul-softmax-matmul (fairness_<gpu>.json)
#   schedule  traced runs whose block-to-SM schedules the Kernel page shows (schedule_*.json)
#   decode    the Flash-Decoding gpu tests (tests/test_gpu_decode.py), then the issue's H200
#             decode sweep: batch 1-8, seq_k 32k-128k, heads 32, kv_heads 8, d 128, float16;
#             split counts, paged caches and PyTorch SDPA (decode_<gpu>_<date>.json)
#   hopper    issue 14: the gpu tests of the forward tensor-core kernels (three runs with
#             their own limits: mma.sync, wgmma, its persistent build), then the comparison
#             with cuDNN: N 512-16384, d 64 and 128, float16 and bfloat16, causal and not,
#             B·H·N = 32k tokens, 128×128 tiles, the wgmma kernel one block per item
#             (wgmma_p0) and persistent (wgmma_p1), and PyTorch's flash and cuDNN lines
#             (torch); then causal against non-causal at B·H = 4 (N 4096-16384, d 128) for
#             both tensor-core kernels; the parity tables from benchmarks/cudnn_parity.py
#             last (hopper_*_<gpu>.json); HOPPER_TESTS=0 skips the tests
#   compare   issue 14's comparison alone, every line in one run: the naive baseline, the
#             persistent wgmma build and PyTorch's lines at the hopper mode's B·H·N = 32k
#             grid (hopper_naive_<gpu>.json, hopper_wgmma_p1_<gpu>.json,
#             hopper_torch_<gpu>.json), then the parity table
#   stream-k  issue 14, the stream-K walks: the gpu tests of both tensor-core kernels, then
#             causal and non-causal at B·H = 4 (N 4096-16384) and 1 (N 4096), d 128, float16,
#             whole items against the launchers' rule: the wgmma kernel at 128×128
#             (hopper_bh*_wgmma_sk*_<gpu>.json), the mma.sync kernel at 128×32
#             (hopper_bh4_mma_sk*_<gpu>.json) and at B·H·N = 32k, N 1024-8192
#             (hopper_grid_mma_sk*_<gpu>.json)
#   mma-head  issue 14, the heads on the mma.sync kernel's stream-K line: its gpu tests (with
#             the wgmma kernel's, which shares stream_k.cuh, and the launchers'), then B·H = 4
#             (N 4096-16384) and B·H·N = 32k (N 1024-8192), d 128, 128×32, float16, causal
#             and not, the launcher's rule with heads of 0 and of engine.stream_k.MMA_SYNC_HEAD
#             (hopper_bh4_mma_head<h>_r<1|2>_<gpu>.json: two rounds, interleaved;
#             hopper_grid_mma_head<h>_<gpu>.json), then the run logs the Kernel page
#             shows (RUNS_ONLY=1 benchmarks/record_kernel_page.sh)
#   wgmma-head the same for the wgmma kernel (engine.stream_k.WGMMA_HEAD): its gpu tests and
#             the launchers', then B·H = 4 (N 4096-16384) and B·H = 1 (N 4096), d 128, 128×128,
#             float16, causal and not, heads 0 and WGMMA_HEAD interleaved, two rounds
#             (hopper_bh{4,1}_wgmma_head<h>_r<1|2>_<gpu>.json)
#   serve     server load (tests/server_load.py) on this machine, server and clients together:
#             the mixed load (30 sessions x 60 s) on one app process, first on the code in
#             $BEFORE (a `git archive` tarball of an earlier commit; skipped when unset), then
#             on this tree; then the class (100 x 120 s) and the talk (200 within 30 s) on
#             $REPLICAS (default 12) processes behind nginx (server_load_*_<gpu>.json). nginx
#             comes from the system, or from Debian packages carried in .deb/ (dpkg -x).
#             SCENARIOS="class talk" runs a subset (default: mixed class talk).
#   browser-part  keep the browser bundle's parts carried in .brw/ (benchmarks/browser_bundle.sh)
#             on this machine, outside the tree, for the calls that follow while it stays warm
#   browser   the same, then unpack the whole bundle and run the browser test
#             (tests/test_browser.py) in the carried chromium-headless-shell against a server
#             on this machine's GPU; the log and the screenshots of the GPU pages to $OUT
# Every timing goes through engine.timing (python -m engine ...), the project's timing method.
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for results}"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print tolower($NF)}')
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import cupy, numpy, torch; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)"
  date -u; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# Large sweeps need more than a classroom server allows.
export FA_LAB_MAX_QKV_ELEMENTS=1000000000 FA_LAB_MAX_NAIVE_BYTES=200000000000 \
  FA_LAB_MAX_SWEEP_POINTS=100000
summary=()
# One `python -m engine bench` run of the tensor-core builds (hopper and stream-k modes): the
# time limit, wgmma.PERSISTENT, STREAM_K (of both the wgmma and the mma.sync launcher), the
# log's name, the output's name (hopper_<name>_<gpu>.json), then the bench arguments.
bench_wgmma() {
  local limit=$1 p=$2 sk=$3 log=$4 name=$5; shift 5
  timeout "$limit" python3 -c "import sys
from engine.gpu.launchers import mma, wgmma
wgmma.PERSISTENT, wgmma.STREAM_K = int(sys.argv[1]), int(sys.argv[2])
mma.STREAM_K = int(sys.argv[2])
from engine.cli import main
raise SystemExit(main(sys.argv[3:]))" "$p" "$sk" bench "$@" --out "$OUT/hopper_${name}_${gpu}.json" \
    >> "$OUT/$log.log" 2>> "$OUT/${log}_progress.log"
  summary+=("$name rc=$?")
}
# One `python -m engine bench` run of a tensor-core kernel with its stream-K line's heads set
# (mma-head and wgmma-head modes): the time limit, the launcher's constant (mma.MMA_SYNC_HEAD
# or wgmma.WGMMA_HEAD), the head, the output's name, then the bench arguments.
bench_head() {
  local limit=$1 constant=$2 head=$3 name=$4; shift 4
  timeout "$limit" python3 -c "import importlib, sys
module, name = sys.argv[1].split('.')
setattr(importlib.import_module('engine.gpu.launchers.' + module), name, int(sys.argv[2]))
from engine.cli import main
raise SystemExit(main(sys.argv[3:]))" "$constant" "$head" bench "$@" \
    --out "$OUT/hopper_${name}_${gpu}.json" >> "$OUT/head.log" 2>> "$OUT/head_progress.log"
  summary+=("$name rc=$?")
}
# Issue 14's comparison grid (hopper and compare modes): B·H·N = 32k tokens, 128×128 tiles.
grid32k=(--seq "${SEQ:-512,1024,2048,4096,8192,16384}" --head-dim 64,128 --block-q 128
         --block-k 128 --dtype float16,bfloat16 --causal both --tokens 32768 --heads 1
         --reps 30 --budget 1)
for mode in "$@"; do
  case "$mode" in
    tests)
      # the tests check the classroom limits, so they run without the sweep limits above
      nolimits=(env -u FA_LAB_MAX_QKV_ELEMENTS -u FA_LAB_MAX_NAIVE_BYTES -u FA_LAB_MAX_SWEEP_POINTS)
      timeout "${TESTS_S:-420}" "${nolimits[@]}" python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/ \
        > "$OUT/gpu_tests.log" 2>&1
      summary+=("gpu tests rc=$?: $(tail -1 "$OUT/gpu_tests.log")")
      timeout "${APPTEST_S:-300}" "${nolimits[@]}" python3 -m pytest -q -rs -p no:cacheprovider tests/test_app_pages.py \
        tests/test_url_fuzz.py tests/test_charts.py > "$OUT/apptest_gpu.log" 2>&1
      summary+=("AppTest on the GPU rc=$?: $(tail -1 "$OUT/apptest_gpu.log")") ;;
    forward)
      timeout "${FORWARD_S:-240}" python3 -m engine bench --seq "${SEQ:-1024,2048,4096,8192,16384}" \
        --head-dim 64,128 --block-q 128 --block-k 128 --dtype float16,bfloat16 --causal both \
        --tokens 32768 --kernels naive,tensorcore,torch --reps 30 --budget 1 \
        --out "$OUT/bench_${gpu}_forward.json" > "$OUT/forward.log" 2> "$OUT/forward_progress.log"
      summary+=("forward sweep rc=$?") ; tail -60 "$OUT/forward.log" ;;
    backward)
      # one sweep per head_dim, each at the tensor-core backward's fastest catalogued tiles
      # (head_dim 64: 128×128, 128: 64×128), merged into one file
      for shape in "64 128 128" "128 64 128"; do
        read -r d bq bk <<< "$shape"
        timeout "${BACKWARD_S:-270}" python3 -m engine bench --direction backward \
          --seq "${SEQ:-1024,2048,4096,8192,16384}" --head-dim "$d" --block-q "$bq" --block-k "$bk" \
          --dtype float16,bfloat16 --causal both --tokens 32768 \
          --kernels "${BACKWARD_KERNELS:-naive,tensorcore,torch}" --reps 20 --budget 1 \
          --out "$OUT/backward_d$d.json" >> "$OUT/backward.log" 2>> "$OUT/backward_progress.log"
        summary+=("backward sweep d=$d rc=$?")
      done
      python3 -m engine merge "$OUT/backward_d64.json" "$OUT/backward_d128.json" \
        --out "$OUT/bench_${gpu}_backward.json"
      tail -100 "$OUT/backward.log" ;;
    bwd-wgmma)
      # step limits sum to under 9 minutes (230 + 2·95 + 2·55 s): a hang costs only its step,
      # a cut sweep keeps the points it timed (bench writes its file after every configuration)
      timeout "${BWD_TESTS_S:-230}" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
        -p no:cacheprovider -m gpu tests/test_gpu_backward_mma.py tests/test_gpu_backward.py \
        > "$OUT/bwd_wgmma_tests.log" 2>&1
      summary+=("backward gpu tests rc=$?: $(tail -1 "$OUT/bwd_wgmma_tests.log")")
      # backward_wgmma.DQ_WRITER set per run: the wgmma backward's two dQ writers, timed alike
      bwd_as() {  # DQ_WRITER, name, limit, seq, kernels, head_dim, block_q, block_k
        local w=$1 name=$2 limit=$3 seq=$4 kernels=$5 d=$6 bq=$7 bk=$8
        timeout "$limit" python3 -c "import sys
from engine.gpu.launchers import backward_wgmma
backward_wgmma.DQ_WRITER = dict.fromkeys(backward_wgmma.DQ_WRITER, int(sys.argv[1]))
from engine.cli import main
raise SystemExit(main(sys.argv[2:]))" "$w" bench --direction backward --seq "$seq" \
          --head-dim "$d" --block-q "$bq" --block-k "$bk" --dtype float16,bfloat16 \
          --causal both --tokens 32768 --kernels "$kernels" --reps 20 --budget 1 \
          --out "$OUT/bwd_${name}_d$d.json" >> "$OUT/bwd_wgmma.log" 2>> "$OUT/bwd_wgmma_progress.log"
        summary+=("backward $name d=$d rc=$?")
      }
      for shape in "64 128 128" "128 64 128"; do
        bwd_as 0 wgmma "${BWD_WGMMA_S:-95}" "${SEQ:-1024,2048,4096,8192,16384}" \
          tensorcore,torch_flash,torch_cudnn $shape
      done
      for shape in "64 128 128" "128 64 128"; do
        bwd_as 1 wgmma_staged "${BWD_STAGED_S:-55}" 4096,8192,16384 tensorcore $shape
      done
      python3 -m engine merge "$OUT"/bwd_wgmma_d64.json "$OUT"/bwd_wgmma_d128.json \
        --out "$OUT/bench_${gpu}_backward_wgmma.json" > /dev/null
      # the mma.sync backward: its recorded sweep (same sizes and method, H200, 2026-11-23)
      python3 benchmarks/backward_parity.py --wgmma "$OUT"/bwd_wgmma_d*.json \
        --staged "$OUT"/bwd_wgmma_staged_d*.json \
        --mma benchmarks/records/backward_mma_sync_h200_2026-11-23.json > "$OUT/bwd_wgmma_parity.txt" 2>&1
      cat "$OUT/bwd_wgmma_parity.txt" ;;
    tiles)
      timeout "${TILES_S:-200}" python3 -m engine tiles --seq 4096 --head-dim 64 \
        --dtype float16 --out "$OUT/tiles_${gpu}.json" > "$OUT/tiles.log" 2>&1
      summary+=("tile grid rc=$?") ; tail -40 "$OUT/tiles.log" ;;
    fairness)
      timeout 120 python3 -m engine fairness --out "$OUT/fairness_${gpu}.json" \
        > "$OUT/fairness.log" 2>&1
      summary+=("fairness rc=$?: $(tail -1 "$OUT/fairness.log")") ;;
    schedule)
      timeout 240 bash benchmarks/record_kernel_page.sh "$OUT" > "$OUT/schedule.log" 2>&1
      summary+=("schedule and compile facts rc=$?: $(grep -c FAILED "$OUT/schedules.log") failed") ;;
    decode)
      [ "${DECODE_TESTS_S:-240}" = 0 ] || timeout "${DECODE_TESTS_S:-240}" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
        -p no:cacheprovider -m gpu tests/test_gpu_decode.py > "$OUT/decode_tests.log" 2>&1
      summary+=("decode gpu tests rc=$?: $(tail -1 "$OUT/decode_tests.log")")
      timeout "${DECODE_S:-420}" python3 -m engine decode-bench \
        --out "$OUT/decode_${gpu}_$(date -u +%F).json" > "$OUT/decode.log" 2> "$OUT/decode_progress.log"
      summary+=("decode sweep rc=$?") ; tail -80 "$OUT/decode.log" ;;
    hopper)
      # the gpu tests in three runs, each with its own limit, so that a kernel that hangs
      # costs only its own run: mma.sync, then wgmma one block per item, then persistent
      hopper_tests() {  # name, limit, then pytest arguments
        local name=$1 limit=$2; shift 2
        timeout "$limit" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
          -p no:cacheprovider -m gpu "$@" > "$OUT/hopper_tests_$name.log" 2>&1
        summary+=("gpu tests, $name rc=$?: $(tail -1 "$OUT/hopper_tests_$name.log")")
      }
      if [ "${HOPPER_TESTS:-1}" != 0 ]; then   # HOPPER_TESTS=0: the comparison alone
        hopper_tests mma 240 tests/test_gpu_tensorcore.py tests/test_gpu_launchers.py -k "not wgmma"
        hopper_tests wgmma 300 tests/test_gpu_wgmma.py tests/test_gpu_launchers.py \
          -k "wgmma and not persistent"
        hopper_tests persistent 180 tests/test_gpu_wgmma.py -k persistent
      fi
      # wgmma.PERSISTENT set per run: the two builds of the wgmma kernel, timed alike
      bench_as() { bench_wgmma "${HOPPER_BENCH_S:-200}" "$1" 1 hopper "${@:2}"; }
      small=(--seq 4096,8192,16384 --head-dim 128 --dtype float16 --causal both --batch 1
             --heads 4 --reps 30 --budget 1 --kernels tensorcore --block-q 128)
      bench_as 0 wgmma_p0 "${grid32k[@]}" --kernels tensorcore
      bench_as 0 torch "${grid32k[@]}" --kernels torch
      bench_as 0 bh4_mma "${small[@]}" --block-k 32
      bench_as 0 bh4_wgmma_p0 "${small[@]}" --block-k 128
      bench_as 1 wgmma_p1 "${grid32k[@]}" --kernels tensorcore      # the persistent build last
      bench_as 1 bh4_wgmma_p1 "${small[@]}" --block-k 128
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_wgmma_p*_"$gpu".json \
        "$OUT"/hopper_torch_"$gpu".json > "$OUT/hopper_parity.txt" 2>&1
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_bh4_*_"$gpu".json > "$OUT/hopper_bh4.txt" 2>&1
      cat "$OUT/hopper_parity.txt" "$OUT/hopper_bh4.txt" ;;
    compare)
      bench_wgmma "${HOPPER_BENCH_S:-200}" 1 1 hopper naive "${grid32k[@]}" --kernels naive
      bench_wgmma "${HOPPER_BENCH_S:-200}" 1 1 hopper wgmma_p1 "${grid32k[@]}" --kernels tensorcore
      bench_wgmma "${HOPPER_BENCH_S:-200}" 1 1 hopper torch "${grid32k[@]}" --kernels torch
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_wgmma_p1_"$gpu".json \
        "$OUT"/hopper_torch_"$gpu".json > "$OUT/hopper_parity.txt" 2>&1
      cat "$OUT/hopper_parity.txt" ;;
    stream-k)
      # issue 14, the persistent wgmma kernel's stream-K walk: the wgmma kernel's gpu tests
      # (tests/test_gpu_wgmma.py, every build, and the launchers'), then B·H = 4 at d = 128 (causal and
      # not, N 4096-16384) and B·H = 1 at N = 4096, whole items (STREAM_K = 0) against the
      # launcher's rule (STREAM_K = 1); hopper_bh4_wgmma_sk<0|1>_<gpu>.json and the table of
      # benchmarks/cudnn_parity.py
      timeout "${STREAMK_TESTS_S:-240}" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
        -p no:cacheprovider -m gpu tests/test_gpu_wgmma.py tests/test_gpu_launchers.py \
        tests/test_gpu_tensorcore.py > "$OUT/stream_k_tests.log" 2>&1
      summary+=("stream-K gpu tests rc=$?: $(tail -1 "$OUT/stream_k_tests.log")")
      for sk in 0 1; do
        for shape in "--heads 4 --seq 4096,8192,16384" "--heads 1 --seq 4096"; do
          bench_wgmma "${STREAMK_BENCH_S:-90}" 1 "$sk" stream_k "bh${shape:8:1}_wgmma_sk${sk}" \
            $shape --head-dim 128 --dtype float16 --causal both --batch 1 --reps 30 --budget 1 \
            --kernels tensorcore --block-q 128 --block-k 128
        done
      done
      for sk in 0 1; do
        bench_wgmma "${STREAMK_BENCH_S:-90}" 1 "$sk" stream_k "bh4_mma_sk${sk}" --heads 4 \
          --seq 4096,8192,16384 --head-dim 128 --dtype float16 --causal both --batch 1 \
          --reps 30 --budget 1 --kernels tensorcore --block-q 128 --block-k 32
        bench_wgmma "${STREAMK_BENCH_S:-90}" 1 "$sk" stream_k "grid_mma_sk${sk}" --heads 1 \
          --tokens 32768 --seq 1024,2048,4096,8192 --head-dim 128 --dtype float16 \
          --causal both --reps 30 --budget 1 --kernels tensorcore --block-q 128 --block-k 32
      done
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_bh*_sk*_"$gpu".json \
        "$OUT"/hopper_grid_mma_sk*_"$gpu".json > "$OUT/stream_k_parity.txt" 2>&1
      cat "$OUT/stream_k_parity.txt" ;;
    mma-head)
      timeout "${HEAD_TESTS_S:-300}" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
        -p no:cacheprovider -m gpu tests/test_gpu_tensorcore.py tests/test_gpu_launchers.py \
        tests/test_gpu_wgmma.py > "$OUT/mma_head_tests.log" 2>&1
      summary+=("mma.sync and wgmma gpu tests rc=$?: $(tail -1 "$OUT/mma_head_tests.log")")
      head=$(python3 -c "from engine.stream_k import MMA_SYNC_HEAD; print(MMA_SYNC_HEAD)")
      for r in 1 2; do          # twice each, interleaved: the machine's drift shows
        for h in 0 "$head"; do
          bench_head "${HEAD_BENCH_S:-60}" mma.MMA_SYNC_HEAD "$h" "bh4_mma_head${h}_r${r}" \
            --heads 4 --batch 1 \
            --seq 4096,8192,16384 --head-dim 128 --dtype float16 --causal both --reps 30 \
            --budget 1 --kernels tensorcore --block-q 128 --block-k 32
        done
      done
      for h in 0 "$head"; do
        bench_head "${HEAD_BENCH_S:-60}" mma.MMA_SYNC_HEAD "$h" "grid_mma_head${h}" \
          --heads 1 --tokens 32768 \
          --seq 1024,2048,4096,8192 --head-dim 128 --dtype float16 --causal both --reps 30 \
          --budget 1 --kernels tensorcore --block-q 128 --block-k 32
      done
      mkdir -p "$OUT/runs" && RUNS_ONLY=1 PYTHON=python3 timeout 120 \
        bash benchmarks/record_kernel_page.sh "$OUT/runs" > "$OUT/runs.log" 2>&1
      summary+=("run logs rc=$?: $(tr '\n' ' ' < "$OUT/runs/schedules.log")")
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_bh4_mma_head*_"$gpu".json \
        "$OUT"/hopper_grid_mma_head*_"$gpu".json > "$OUT/mma_head_table.txt" 2>&1
      cat "$OUT/mma_head_table.txt" ;;
    wgmma-head)
      timeout "${HEAD_TESTS_S:-300}" env -u FA_LAB_MAX_QKV_ELEMENTS python3 -m pytest -q -rs \
        -p no:cacheprovider -m gpu tests/test_gpu_wgmma.py tests/test_gpu_launchers.py \
        > "$OUT/wgmma_head_tests.log" 2>&1
      summary+=("wgmma gpu tests rc=$?: $(tail -1 "$OUT/wgmma_head_tests.log")")
      head=$(python3 -c "from engine.stream_k import WGMMA_HEAD; print(WGMMA_HEAD)")
      for r in 1 2; do          # twice each, interleaved: the machine's drift shows
        for h in 0 "$head"; do
          for bh in 4 1; do
            bench_head "${HEAD_BENCH_S:-60}" wgmma.WGMMA_HEAD "$h" "bh${bh}_wgmma_head${h}_r${r}" \
              --heads "$bh" --batch 1 --seq "$([ "$bh" = 4 ] && echo 4096,8192,16384 || echo 4096)" \
              --head-dim 128 --dtype float16 --causal both --reps 30 --budget 1 \
              --kernels tensorcore --block-q 128 --block-k 128
          done
        done
      done
      python3 benchmarks/cudnn_parity.py "$OUT"/hopper_bh*_wgmma_head*_"$gpu".json \
        > "$OUT/wgmma_head_table.txt" 2>&1
      cat "$OUT/wgmma_head_table.txt" ;;
    serve)
      export STREAMLIT_GLOBAL_DEVELOPMENT_MODE=false
      if ! command -v nginx >/dev/null && ls .deb/*.deb >/dev/null 2>&1; then
        for f in .deb/*.deb; do dpkg -x "$f" /tmp/ngx; done
        mkdir -p /tmp/ngx/bin
        printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/ngx/usr/lib/x86_64-linux-gnu:/tmp/ngx/lib/x86_64-linux-gnu exec /tmp/ngx/usr/sbin/nginx "$@"\n' \
          > /tmp/ngx/bin/nginx && chmod +x /tmp/ngx/bin/nginx && export PATH=/tmp/ngx/bin:$PATH
      fi
      nginx -v >> "$OUT/serve.log" 2>&1
      where="$(nproc)-core GPU machine ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)); clients on the same machine"
      if [ -n "${BEFORE:-}" ]; then
        mkdir -p /tmp/before && tar -xzf "$BEFORE" -C /tmp/before
        port=8590
        (cd /tmp/before && PYTHONPATH="/tmp/site:/tmp/before" exec python3 -m streamlit run app/main.py \
          --server.headless true --server.port $port --browser.gatherUsageStats false \
          > "$OUT/before_server.log" 2>&1) &
        python3 -c "import sys, time, urllib.request as u
for _ in range(240):
    try: u.urlopen(sys.argv[1], timeout=2); break
    except OSError: time.sleep(0.5)" "http://127.0.0.1:$port/_stcore/health"
        timeout 200 python3 tests/server_load.py --scenario mixed --url "http://127.0.0.1:$port" \
          --machine "$where" --note "before: ${BEFORE_NOTE:-$BEFORE}" \
          --out "$OUT/server_load_mixed_before_${gpu}.json" >> "$OUT/serve.log" 2>&1
        summary+=("mixed, before, 1 process rc=$?")
        pkill -f "server.port $port" ; sleep 2
      fi
      for scenario in ${SCENARIOS:-mixed class talk}; do    # SCENARIOS: a subset, e.g. "class"
        n=$([ "$scenario" = mixed ] && echo 1 || echo "${REPLICAS:-12}")
        timeout 260 python3 tests/server_load.py --scenario "$scenario" --replicas "$n" \
          --machine "$where" --out "$OUT/server_load_${scenario}_${n}_${gpu}.json" >> "$OUT/serve.log" 2>&1
        summary+=("$scenario, $n process(es) rc=$?")
      done
      for f in "$OUT"/server_load_*.json; do
        python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].rsplit('/',1)[-1], d['runs_per_s'], 'runs/s p50/p95/p99', d['p50_ms_to_finished_run'], d['p95_ms_to_finished_run'], d['p99_ms_to_finished_run'], 'ms; first', d['first_page_ms'], 'later', d['later_actions_ms'], 'cpu/run', d['cpu_ms_per_run'], 'ms; errors', d['error_count'], 'wrong', d['wrong_count'], 'exc', d['exceptions'], 'rss', d['server_rss_peak_mb'], 'MB; gpu', d['gpu_busy_fraction'])" "$f"
      done ;;
    browser-part|browser)
      mkdir -p /root/brw-parts && cp .brw/part-* /root/brw-parts/ 2>/dev/null
      ls -l /root/brw-parts
      [ "$mode" = browser ] || continue
      rm -rf /tmp/b && cat /root/brw-parts/part-* | xz -d | tar -x -C /tmp || exit 1
      LD_LIBRARY_PATH=/tmp/b/lib ldd /tmp/b/chromium/chromium-headless-shell | grep "not found" \
        >> "$OUT/browser.log"   # libraries the bundle lacks, if any
      timeout "${BROWSER_S:-500}" env -u FA_LAB_MAX_QKV_ELEMENTS -u FA_LAB_MAX_NAIVE_BYTES \
        -u FA_LAB_MAX_SWEEP_POINTS STREAMLIT_GLOBAL_DEVELOPMENT_MODE=false \
        FA_LAB_CHROMIUM=/tmp/b/chrome FA_LAB_CAPTURE_DIR=/tmp/fa-lab-captures-gpu \
        PYTHONPATH="/tmp/b/site:$PWD" \
        python3 -m pytest -q -rs -p no:cacheprovider tests/test_browser.py >> "$OUT/browser.log" 2>&1
      summary+=("browser test against the GPU server rc=$?: $(tail -1 "$OUT/browser.log")")
      for name in backward timings kernel; do
        cp "/tmp/fa-lab-captures-gpu/full/$name.png" "$OUT/browser_gpu_$name.png" 2>/dev/null
      done ;;
    *) echo "unknown mode $mode (tests, forward, backward, bwd-wgmma, tiles, fairness, schedule, decode, hopper, serve, browser-part, browser)"; exit 2 ;;
  esac
done
echo "---- summary"
printf '%s\n' "${summary[@]}"
