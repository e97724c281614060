#!/usr/bin/env bash
# Start FlashAttention Lab. Makes .venv and installs requirements/app.lock (exact versions
# with hashes) and the project itself; where an NVIDIA driver answers, also
# requirements/gpu.lock (CuPy with its CUDA libraries) so the live kernels run (a CPU-only
# machine never downloads them). scripts/venv.sh installs a lock only when it changed since
# the last install, so a second start needs no network. Extra arguments go to
# `streamlit run`. With FA_LAB_SETUP_ONLY=1 it only prepares .venv (scripts/serve.sh does so
# before starting its app processes).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
venv_install requirements/app.lock
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  venv_install requirements/gpu.lock \
    || echo "CuPy could not be installed: the app will use CPU emulation." >&2
fi
[ "${FA_LAB_SETUP_ONLY:-}" = 1 ] && exit 0
exec .venv/bin/python -m streamlit run app/main.py "$@"
