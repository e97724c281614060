#!/usr/bin/env bash
# Run the test suite: makes .venv, installs requirements/app.lock and requirements/dev.lock
# (the app and the test packages, exact versions with hashes) and the project itself, runs
# pytest. Like scripts/start.sh it installs only what changed since the last install, and it
# leaves the app lock's stamp current, so scripts/start.sh afterwards installs nothing.
# gpu-marked tests skip without a GPU; the browser test needs Debian's chromium.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
venv_install requirements/app.lock requirements/dev.lock
exec .venv/bin/python -m pytest -q "$@"
