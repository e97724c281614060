#!/usr/bin/env bash
# Regenerate the pictures in docs/screenshots/ (README and docs/PAGES.md show them), on
# purpose only: the test suite never writes them. Runs the browser test
# (tests/test_browser.py, Debian's /usr/bin/chromium) with its captures in a fresh temp
# folder, then scripts/shrink_screenshots.py copies the talk-mode and 1280×720 screens the
# docs show, reduced to 256 colours, over docs/screenshots/talk/ and docs/screenshots/1280/.
# Review with `git diff --stat docs/screenshots` before committing; every picture committed
# stays in the history. docs/screenshots/gpu/ comes from a GPU machine
# (benchmarks/gpu_run.sh browser), not from here. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
venv_install requirements/app.lock requirements/dev.lock
captures="$(mktemp -d)"
FA_LAB_CAPTURE_DIR="$captures" .venv/bin/python -m pytest -q tests/test_browser.py "$@"
.venv/bin/python scripts/shrink_screenshots.py "$captures" docs/screenshots
echo "captures (full length too): $captures"
