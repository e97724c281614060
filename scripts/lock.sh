#!/usr/bin/env bash
# Move the lock files forward: recompile requirements/app.lock, dev.lock and gpu.lock from
# pyproject.toml, reinstall .venv from the new dev lock, and run the whole test suite.
#
#   bash scripts/lock.sh                   # every package to the newest version pyproject allows
#   bash scripts/lock.sh --sync            # after a pyproject.toml edit: keep the pinned versions
#                                          # that still fit, add and drop only what the edit asks
#   bash scripts/lock.sh -c pins.txt       # also hold the versions a constraints file names
#   bash scripts/lock.sh --no-test         # lock and reinstall, but do not run the suite
#
# The locks are universal (Python >= 3.10, every platform; a package may have one pin per
# Python version where its newest release dropped 3.10) and carry every wheel's hash. app.lock
# is compiled first, dev.lock (app + [test]) constrained by it, gpu.lock (app + [gpu])
# constrained by dev.lock, so the three agree on every package they share. Each header
# records the requirements-hash of pyproject.toml (scripts/lockinfo.py), which
# tests/test_dependencies.py checks. uv compiles the locks (taken from PATH, else installed
# with pip into ~/.cache/fa-lab-lock-tools); nothing is ever installed with uv.
# Needs network. At the end it says whether the new lock passed; `git diff requirements/`
# shows what moved, and `git checkout requirements/` goes back.
set -euo pipefail
cd "$(dirname "$0")/.."

upgrade=--upgrade
run_tests=1
constraints=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sync) upgrade=""; shift ;;
    --upgrade) upgrade=--upgrade; shift ;;
    -c|--constraints) constraints+=(-c "$2"); shift 2 ;;
    --no-test) run_tests=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "lock.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# uv and a Python that reads pyproject.toml (tomli on 3.10), outside .venv
tools="${XDG_CACHE_HOME:-$HOME/.cache}/fa-lab-lock-tools"
if [ ! -x "$tools/bin/python" ] || ! "$tools/bin/python" -c "import tomli" 2>/dev/null; then
  rm -rf "$tools"
  "${PYTHON:-python3}" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check uv tomli
fi
uv=$(command -v uv || echo "$tools/bin/uv")
[ -x "$uv" ] || { "$tools/bin/python" -m pip install -q --disable-pip-version-check uv; uv="$tools/bin/uv"; }
info() { "$tools/bin/python" scripts/lockinfo.py "$@"; }
build_requires=$(info build-requires)

mkdir -p requirements
backup=$(mktemp -d)
trap 'rm -rf "$backup"' EXIT
cp requirements/*.lock "$backup"/ 2>/dev/null || true
restore() {
  rm -f requirements/*.lock
  cp "$backup"/*.lock requirements/ 2>/dev/null || true
  echo "lock.sh: the locks could not be compiled (above); requirements/ is as it was." >&2
  exit 1
}

compile() {            # compile NAME CONSTRAINING-LOCK EXTRA...
  local name=$1 by=$2; shift 2
  local args=() extra
  for extra; do args+=(--extra "$extra"); done
  [ -n "$by" ] && args+=(-c "requirements/$by.lock")
  echo "lock.sh: compiling requirements/$name.lock" >&2
  # the build-system requires come in on stdin (the editable install needs setuptools)
  printf '%s\n' "$build_requires" | UV_PYTHON_DOWNLOADS=never "$uv" pip compile -q \
    pyproject.toml - "${args[@]}" ${constraints[@]+"${constraints[@]}"} $upgrade \
    --universal --python-version 3.10 --generate-hashes \
    --custom-compile-command "bash scripts/lock.sh" -o "requirements/$name.lock" || restore
  { info header "$name"; cat "requirements/$name.lock"; } > "$backup/new.lock"
  mv "$backup/new.lock" "requirements/$name.lock"
}
compile app "" app
compile dev app app test
compile gpu dev app gpu

for name in app dev gpu; do
  echo "lock.sh: requirements/$name.lock, what moved:" >&2
  moved=$(info changes "$backup/$name.lock" "requirements/$name.lock")
  echo "${moved:-(no pin moved)}" | sed 's/^/  /' >&2
done

# a fresh .venv from the new dev lock (nothing left over from the old one), then the suite
rm -rf .venv
. scripts/venv.sh
if ! venv_install requirements/app.lock requirements/dev.lock; then
  echo "lock.sh: the new lock did NOT install (above)." >&2
  echo "lock.sh: \`git checkout requirements/ && rm -rf .venv\` goes back to the old lock." >&2
  exit 1
fi
if [ "$run_tests" = 0 ]; then
  echo "lock.sh: new locks written and .venv reinstalled; the suite was NOT run (--no-test)."
  exit 0
fi
set +e
bash scripts/test.sh
status=$?
set -e
if [ "$status" = 0 ]; then
  echo "lock.sh: the new lock PASSED the whole suite. Review \`git diff requirements/\` and commit it."
else
  echo "lock.sh: the new lock FAILED: bash scripts/test.sh exited $status (above)." >&2
  echo "lock.sh: \`git checkout requirements/ && rm -rf .venv\` goes back to the old lock." >&2
fi
exit "$status"
