#!/usr/bin/env bash
# Records what the Kernel page shows without a GPU: the compile facts of every kernel and the
# block-to-SM schedules that teach (waves, causal order, the wgmma kernel's blocks, the mma.sync
# kernel's runs before and after stream-K).
# Usage: bash benchmarks/record_kernel_page.sh OUT_DIR   (on a GPU; then copy OUT_DIR/*.json to
# benchmarks/results/ and OUT_DIR/*.log to benchmarks/records/logs/); RUNS_ONLY=1 records the
# run schedules alone.
set -u
out=${1:?output folder}
mkdir -p "$out"
py=${PYTHON:-python3}
# the traced mma.sync run at 128×32 tiles keeps 537 MB of trace, over the app's default cap
export FA_LAB_MAX_TRACE_BYTES=${FA_LAB_MAX_TRACE_BYTES:-2000000000}
tmp=$(mktemp -d)
runs() {    # name, label, order, then the config arguments: the untraced build's run log
    local name=$1 label=$2 order=$3; shift 3
    "$py" -m engine runs --order "$order" --label "$label" "$@" \
        --out "$out/schedule_$name.json" >> "$out/schedules.log" 2>&1 \
        || echo "FAILED $name" >> "$out/schedules.log"
}
bh4=(--batch 1 --heads 4 --seq-q 4096 --seq-k 4096 --head-dim 128 --block-q 128 --block-k 32
     --dtype float16 --causal)
runs h200_6_causal_mma_bh4_whole "causal B·H = 4, one block per item (mma.sync)" \
    whole "${bh4[@]}"
runs h200_7_causal_mma_bh4_stream_k "causal B·H = 4, stream-K runs (mma.sync)" \
    stream-k "${bh4[@]}"
if [ "${RUNS_ONLY:-0}" = 1 ]; then cat "$out/schedules.log"; exit 0; fi
"$py" -m engine facts --out "$out/kernel_facts_h200.json" > "$out/kernel_facts.log" 2>&1 &
facts=$!
trace() {   # name, label, then the trace arguments
    local name=$1 label=$2; shift 2
    "$py" -m engine trace --backend cupy --dtype float16 --label "$label" "$@" \
        --out "$tmp/$name.npz" --schedule-out "$out/schedule_$name.json" >> "$out/schedules.log" 2>&1 \
        || echo "FAILED $name" >> "$out/schedules.log"
}
trace h200_1_waves_teaching "several waves: 2,048 blocks of the teaching kernel" \
    --kernel teaching --batch 2 --heads 16 --seq-q 4096 --seq-k 4096 --head-dim 64 \
    --block-q 64 --block-k 64
trace h200_5_causal_mma_heaviest "causal, heaviest query tiles first (mma.sync kernel)" \
    --kernel tensorcore --batch 1 --heads 32 --seq-q 4096 --seq-k 4096 --head-dim 128 \
    --block-q 128 --block-k 32 --causal
trace h200_3_causal_wgmma "causal, heaviest query tiles first (wgmma kernel)" \
    --kernel tensorcore --batch 1 --heads 32 --seq-q 4096 --seq-k 4096 --head-dim 128 \
    --block-q 128 --block-k 128 --causal
trace h200_4_wgmma "the wgmma kernel's blocks, not causal" \
    --kernel tensorcore --batch 2 --heads 16 --seq-q 4096 --seq-k 4096 --head-dim 64 \
    --block-q 128 --block-k 128
wait $facts
rm -rf "$tmp"
tail -n 60 "$out/kernel_facts.log"; cat "$out/schedules.log"
