#!/usr/bin/env bash
# The project's GPU jobs, for a machine with an NVIDIA GPU, CuPy and PyTorch (docs/DESIGN.md,
# "Recording on a GPU"). Files and logs go to $OUT with the environment (env.txt); a summary
# is printed last. Result files (bench_*, tiles_*, decode_*, schedule_*, kernel_facts_*) are
# copied to benchmarks/results/ by hand once checked; logs go to lab/logs/.
#
# Usage: OUT=<folder> bash benchmarks/gpu_run.sh MODE [MODE ...]
#   gpu-tests       every gpu-marked test, then the AppTest pages on the CuPy backend
#   forward-sweep   naive and tensor-core forward beside PyTorch's SDPA, batch·N = 32k tokens,
#                   1024 / d heads (bench_<gpu>_forward.json; SEQ=1024,4096 to shorten)
#   backward-sweep  the same for the backward pass, each head_dim at its fastest tiles, merged
#                   (bench_<gpu>_backward.json)
#   forward-parity  the tensor-core forward against cuDNN and FA2 at B·H·N = 32k tokens,
#                   128×128 tiles, d 64 and 128, float16 and bfloat16, causal and not
#                   (parity_<gpu>.json); benchmarks.cudnn_parity's table last
#   fp8-parity      the FP8 forward beside the project's float16 kernel, PyTorch's FA2 and
#                   cuDNN (float16), and cuDNN's own FP8 forward (where the cuDNN frontend's
#                   bindings are installed: nvidia-cudnn-frontend), on the forward-parity
#                   grid at 1024 / d heads (HEADS=1: one head), each line validated against
#                   float64 first, FP8 on 128×256 tiles (FP8_BLOCK_K=192,128: 128×192 at
#                   d = 128; 128: 128×128), and the GPU's bfloat16 and FP8 matmul
#                   ceilings
#                   (bench_<gpu>_fp8_<date>.json, matmul_ceiling_<gpu>.json)
#   tile-grid       every tile shape of the teaching and tensor-core kernels at N 4096, d 64
#                   (tiles_<gpu>.json)
#   decode-sweep    Flash-Decoding: split counts, paged caches and SDPA (decode_<gpu>_<date>.json)
#   kernel-page     what the Kernel page shows without a GPU: compile facts of every kernel
#                   and the recorded block-to-SM schedules (kernel_facts_*, schedule_*.json)
#   server-load     tests/server_load.py's scenarios on this machine: mixed on one process,
#                   class and talk on $REPLICAS (default 12) behind nginx (server_load_*.json)
#   browser-test    tests/test_browser.py against a server on this GPU, in the browser bundle
#                   of benchmarks/browser_bundle.sh ($BROWSER_BUNDLE: its .tar.xz)
# Environment: WHEELS=<folder> installs the wheels there first (a machine without an index);
# TESTS_S, APPTEST_S, FORWARD_S, BACKWARD_S, PARITY_S, TILES_S, DECODE_S, FACTS_S, BROWSER_S
# change a step's time limit (seconds); HEADS the heads of the 32k-token grids (default 1;
# fp8-parity's 0: 1024 / d).
set -u
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
usage() { sed -n '/^# Usage/,/^# change/p' benchmarks/gpu_run.sh; exit 2; }
[ $# -gt 0 ] || usage
for mode in "$@"; do
  case "$mode" in
    gpu-tests|forward-sweep|backward-sweep|forward-parity|fp8-parity|tile-grid|decode-sweep) ;;
    kernel-page) ;;
    server-load|browser-test) ;;
    *) echo "unknown mode: $mode"; usage ;;
  esac
done
: "${OUT:?set OUT to the folder for results}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$WHEELS"/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD
fi
# The GPU's short name in the files' names: its model number, lowercased ("NVIDIA H100 80GB
# HBM3" -> h100, "Tesla T4" -> t4, "NVIDIA A100-SXM4-40GB" -> a100); the name's last word
# when it has none ("NVIDIA GeForce RTX 4090" -> 4090).
short_gpu_name() {
  local model
  model=$(grep -oE '[A-Z]{1,2}[0-9]{1,4}' <<< "$1" | head -1)
  if [ -n "$model" ]; then tr '[:upper:]' '[:lower:]' <<< "$model"
  else awk '{print tolower($NF)}' <<< "$1"; fi
}
gpu=$(short_gpu_name "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)")
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import cupy, numpy, torch; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)"
  date -u; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# Sweeps go past the limits a classroom server sets; the tests check those limits, so they
# run without these.
sweep_limits=(env FA_LAB_MAX_QKV_ELEMENTS=1000000000 FA_LAB_MAX_NAIVE_BYTES=200000000000
              FA_LAB_MAX_SWEEP_POINTS=100000)
summary=()
# B·H·N = 32k tokens at 128×128 tiles, d 64 and 128, float16 and bfloat16, causal and not
# (HEADS=0: 1024 / d heads, a model dimension of 1024, as FlashAttention-3's paper counts them)
grid32k=(--seq "${SEQ:-1024,2048,4096,8192,16384}" --head-dim 64,128 --block-q 128
         --block-k 128 --dtype float16,bfloat16 --causal both --tokens 32768
         --heads "${HEADS:-1}" --reps 30 --budget 1)
for mode in "$@"; do
  case "$mode" in
    gpu-tests)
      timeout "${TESTS_S:-420}" python3 -m pytest -q -rs -p no:cacheprovider -m gpu tests/ \
        > "$OUT/gpu_tests.log" 2>&1
      summary+=("gpu tests rc=$?: $(tail -1 "$OUT/gpu_tests.log")")
      timeout "${APPTEST_S:-300}" python3 -m pytest -q -rs -p no:cacheprovider \
        tests/pages/ tests/test_url_fuzz.py \
        > "$OUT/apptest_gpu.log" 2>&1
      summary+=("AppTest on the GPU rc=$?: $(tail -1 "$OUT/apptest_gpu.log")") ;;
    forward-sweep)
      timeout "${FORWARD_S:-240}" "${sweep_limits[@]}" python3 -m benchmarks.bench_sweep \
        --seq "${SEQ:-1024,2048,4096,8192,16384}" --head-dim 64,128 --block-q 128 --block-k 128 \
        --dtype float16,bfloat16 --causal both --tokens 32768 --kernels naive,tensorcore,torch \
        --reps 30 --budget 1 --out "$OUT/bench_${gpu}_forward.json" > "$OUT/forward.log" 2> "$OUT/forward_progress.log"
      summary+=("forward sweep rc=$?") ; tail -60 "$OUT/forward.log" ;;
    backward-sweep)
      # one sweep per head_dim, each at the tensor-core backward's fastest catalogued tiles
      # (head_dim 64: 128×128, 128: 64×128), merged into one file
      for shape in "64 128 128" "128 64 128"; do
        read -r d bq bk <<< "$shape"
        timeout "${BACKWARD_S:-270}" "${sweep_limits[@]}" python3 -m benchmarks.bench_sweep \
          --direction backward --seq "${SEQ:-1024,2048,4096,8192,16384}" --head-dim "$d" \
          --block-q "$bq" --block-k "$bk" --dtype float16,bfloat16 --causal both \
          --tokens 32768 --kernels naive,tensorcore,torch --reps 20 --budget 1 \
          --out "$OUT/backward_d$d.json" >> "$OUT/backward.log" 2>> "$OUT/backward_progress.log"
        summary+=("backward sweep d=$d rc=$?")
      done
      python3 -m benchmarks.merge_bench "$OUT/backward_d64.json" "$OUT/backward_d128.json" \
        --out "$OUT/bench_${gpu}_backward.json" > /dev/null
      tail -100 "$OUT/backward.log" ;;
    forward-parity)
      timeout "${PARITY_S:-400}" "${sweep_limits[@]}" python3 -m benchmarks.bench_sweep \
        "${grid32k[@]}" --kernels tensorcore,torch_flash,torch_cudnn \
        --out "$OUT/parity_${gpu}.json" > "$OUT/parity.log" 2> "$OUT/parity_progress.log"
      summary+=("forward parity rc=$?")
      python3 -m benchmarks.cudnn_parity "$OUT/parity_${gpu}.json" > "$OUT/parity_table.txt" 2>&1
      cat "$OUT/parity_table.txt" ;;
    fp8-parity)
      timeout 120 python3 -m benchmarks.matmul_ceiling --out "$OUT/matmul_ceiling_${gpu}.json" \
        > "$OUT/matmul_ceiling.log" 2>&1
      summary+=("matmul ceilings rc=$?: $(tr '\n' ';' < "$OUT/matmul_ceiling.log")")
      timeout "${FP8_S:-420}" "${sweep_limits[@]}" python3 -m benchmarks.bench_sweep \
        "${grid32k[@]}" --heads "${HEADS:-0}" --dtype float16,float8_e4m3 \
        --fp8-block-k "${FP8_BLOCK_K:-256}" \
        --kernels tensorcore,torch_flash,torch_cudnn,cudnn_fp8 \
        --out "$OUT/bench_${gpu}_fp8_$(date -u +%F).json" > "$OUT/fp8.log" 2> "$OUT/fp8_progress.log"
      summary+=("fp8 parity rc=$?")
      python3 -m benchmarks.fp8_parity "$OUT/bench_${gpu}_fp8_$(date -u +%F).json" \
        > "$OUT/fp8_table.txt" 2>&1
      cat "$OUT/fp8_table.txt" ;;
    tile-grid)
      timeout "${TILES_S:-200}" "${sweep_limits[@]}" python3 -m benchmarks.tile_grid --seq 4096 \
        --head-dim 64 --dtype float16 --out "$OUT/tiles_${gpu}.json" > "$OUT/tiles.log" 2>&1
      summary+=("tile grid rc=$?") ; tail -40 "$OUT/tiles.log" ;;
    decode-sweep)
      timeout "${DECODE_S:-420}" "${sweep_limits[@]}" python3 -m benchmarks.decode_sweep \
        --out "$OUT/decode_${gpu}_$(date -u +%F).json" > "$OUT/decode.log" 2> "$OUT/decode_progress.log"
      summary+=("decode sweep rc=$?") ; tail -80 "$OUT/decode.log" ;;
    kernel-page)
      # the traced mma.sync run at 128×32 keeps 537 MB of trace, over the app's default cap
      export FA_LAB_MAX_TRACE_BYTES=2000000000
      log="$OUT/schedules.log"
      timeout "${FACTS_S:-200}" python3 -m benchmarks.compile_facts \
        --out "$OUT/kernel_facts_${gpu}.json" > "$OUT/kernel_facts.log" 2>&1
      summary+=("compile facts rc=$?")
      schedule() {   # job (traced_schedule or run_log_schedule), name, label, then options
        local job=$1 name=$2 label=$3; shift 3
        timeout 60 python3 -m "benchmarks.$job" --label "$label" "$@" \
          --out "$OUT/schedule_${gpu}_$name.json" >> "$log" 2>&1 || echo "FAILED $name" >> "$log"
      }
      schedule traced_schedule 1_waves_teaching "several waves: 2,048 blocks of the teaching kernel" \
        --kernel teaching --batch 2 --heads 16 --seq-q 4096 --seq-k 4096 --head-dim 64
      schedule traced_schedule 3_causal_wgmma "causal, heaviest query tiles first (wgmma kernel)" \
        --kernel tensorcore --batch 1 --heads 32 --seq-q 4096 --seq-k 4096 --head-dim 128 \
        --block-q 128 --block-k 128 --causal
      schedule traced_schedule 4_wgmma "the wgmma kernel's blocks, not causal" \
        --kernel tensorcore --batch 2 --heads 16 --seq-q 4096 --seq-k 4096 --head-dim 64 \
        --block-q 128 --block-k 128
      schedule traced_schedule 5_causal_mma_heaviest "causal, heaviest query tiles first (mma.sync kernel)" \
        --kernel tensorcore --batch 1 --heads 32 --seq-q 4096 --seq-k 4096 --head-dim 128 \
        --block-q 128 --block-k 32 --causal
      bh4=(--batch 1 --heads 4 --seq-q 4096 --seq-k 4096 --head-dim 128 --block-q 128
           --block-k 32 --causal)
      schedule run_log_schedule 6_causal_mma_bh4_whole "causal B·H = 4, one block per item (mma.sync)" \
        --order whole "${bh4[@]}"
      schedule run_log_schedule 7_causal_mma_bh4_stream_k "causal B·H = 4, stream-K runs (mma.sync)" \
        --order stream-k "${bh4[@]}"
      summary+=("schedules: $(grep -c FAILED "$log") failed")
      tail -n 40 "$OUT/kernel_facts.log"; cat "$log" ;;
    server-load)
      export STREAMLIT_GLOBAL_DEVELOPMENT_MODE=false
      nginx -v >> "$OUT/serve.log" 2>&1 || echo "nginx is needed for more than one process" >> "$OUT/serve.log"
      where="$(nproc)-core GPU machine ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)); clients on the same machine"
      for scenario in ${SCENARIOS:-mixed class talk}; do    # SCENARIOS: a subset, e.g. "class"
        n=$([ "$scenario" = mixed ] && echo 1 || echo "${REPLICAS:-12}")
        timeout 260 python3 tests/server_load.py --scenario "$scenario" --replicas "$n" \
          --machine "$where" --out "$OUT/server_load_${scenario}_${n}_${gpu}.json" >> "$OUT/serve.log" 2>&1
        summary+=("$scenario, $n process(es) rc=$?")
      done ;;
    browser-test)
      : "${BROWSER_BUNDLE:?set BROWSER_BUNDLE to the .tar.xz of benchmarks/browser_bundle.sh}"
      rm -rf /tmp/b && tar -xJf "$BROWSER_BUNDLE" -C /tmp || exit 1
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
  esac
done
echo "---- summary"
printf '%s\n' "${summary[@]}"
