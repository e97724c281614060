#!/usr/bin/env bash
# Run the test suite: makes .venv, installs requirements/app.lock and requirements/dev.lock
# (the app and the test packages, exact versions with hashes) and the project itself, runs
# pytest. Like scripts/start.sh it installs only what changed since the last install, and it
# leaves the app lock's stamp current, so scripts/start.sh afterwards installs nothing.
# gpu-marked tests skip without a GPU; the browser test needs Debian's chromium.
# The tests run on FA_LAB_TEST_WORKERS pytest-xdist workers (default 2, the development
# machine's cores; 0 runs them in this one process), a module or group of tests whole on one
# worker (tests/conftest.py, docs/TESTING.md). Extra arguments go to pytest (after ours, so
# `-n 0` there wins too).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
venv_install requirements/app.lock requirements/dev.lock
workers=${FA_LAB_TEST_WORKERS:-2}
if [ "$workers" = 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadgroup "$@"
