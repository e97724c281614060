#!/usr/bin/env bash
# The talk scenario (tests/server_load.py --scenario talk, 200 visitors, 12 processes behind
# nginx) for two checkouts in turn on one machine, ROUNDS times: each tree runs its own
# tests/server_load.py, so a tree from before a change of the test is measured as it was.
# Needs nginx on PATH and the app's packages importable (SITE: a folder put first on
# PYTHONPATH, e.g. the /tmp/site that benchmarks/gpu_run.sh's WHEELS step fills).
#
#   OUT=/tmp/ab ROUNDS="1 2" bash lab/talk_ab.sh /tmp/before .
#
# Records: $OUT/<round>_<a|b>.json; a table of both trees' figures last. Used for
# docs/SERVING.md's same-machine comparison (2026-11-27, H100 machine).
set -u
[ $# -eq 2 ] || { sed -n '2,9p' "$0"; exit 2; }
: "${OUT:=/tmp/talk-ab}"; mkdir -p "$OUT"
export STREAMLIT_GLOBAL_DEVELOPMENT_MODE=false
where="$(nproc)-core GPU machine ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)); clients on the same machine"
a=$(cd "$1" && pwd); b=$(cd "$2" && pwd)
for round in ${ROUNDS:-1 2}; do
  for side in a b; do
    dir=$([ $side = a ] && echo "$a" || echo "$b")
    ( cd "$dir" && PYTHONPATH=${SITE:+$SITE:}$dir timeout 200 python3 tests/server_load.py \
        --scenario talk --replicas 12 --machine "$where" --note "A/B $side ($dir) round $round" \
        --out "$OUT/${round}_${side}.json" >> "$OUT/serve_${round}_${side}.log" 2>&1 )
    echo "round $round $side ($dir) rc=$? $(date -u +%T)"
  done
done
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
print("run   runs/s  first p50  later p50 / p95 / p99 (ms)  CPU/run  errors wrong")
for f in sorted(Path(sys.argv[1]).glob("*_[ab].json")):
    r = json.loads(f.read_text())
    later = r["later_actions_ms"]
    print(f"{f.stem:5} {r['runs_per_s']:6} {r['first_page_ms']['p50']:9}  "
          f"{later['p50']} / {later['p95']} / {later['p99']}  {r['cpu_ms_per_run']:8} "
          f"{r['error_count']:6} {r['wrong_count']:5}")
PY
