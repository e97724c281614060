#!/usr/bin/env bash
# Run the test suite on a fresh machine: makes .venv, installs the app and test packages, runs
# pytest. gpu-marked tests skip without a GPU; the browser test needs Debian's chromium.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check \
  -r requirements.txt -r requirements-dev.txt -e .
exec .venv/bin/python -m pytest -q "$@"
