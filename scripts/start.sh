#!/usr/bin/env bash
# Start FlashAttention Lab on a fresh machine. Makes .venv with the app's packages; where an
# NVIDIA driver answers, adds CuPy with its CUDA libraries so the live kernels run (a CPU-only
# machine never downloads them). Extra arguments go to `streamlit run`. With FA_LAB_SETUP_ONLY=1
# it only prepares .venv (scripts/serve.sh does so before starting its app processes).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt -e .
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-gpu.txt \
    || echo "CuPy could not be installed: the app will use CPU emulation." >&2
fi
[ "${FA_LAB_SETUP_ONLY:-}" = 1 ] && exit 0
exec .venv/bin/python -m streamlit run app/main.py "$@"
