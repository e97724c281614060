# Sourced by scripts/start.sh, scripts/test.sh and scripts/lock.sh, from the repository root.
#
#   venv_install LOCK...
#
# makes .venv if it is missing (with $PYTHON, default python3) and brings it to the given
# lock files of requirements/: each with `pip install --require-hashes --no-deps -r LOCK`,
# then the project itself, editable, without network (`--no-deps --no-build-isolation`;
# every lock holds setuptools for that). A lock is installed only when its stamp in
# .venv/.fa-lab-stamps/ differs from the sha256 of the lock file and pyproject.toml, so a
# second start installs nothing and needs no network. A stamp is written only after its
# install and the editable install succeeded. Returns non-zero when an install failed.

venv_digest() {        # venv_digest LOCK: sha256 of LOCK and pyproject.toml
  if command -v sha256sum >/dev/null 2>&1; then
    cat "$1" pyproject.toml | sha256sum | cut -d' ' -f1
  else
    cat "$1" pyproject.toml | shasum -a 256 | cut -d' ' -f1
  fi
}

venv_stamp() {         # venv_stamp LOCK: the stamp file of LOCK
  echo ".venv/.fa-lab-stamps/$(basename "$1")"
}

venv_install() {
  local lock digest stale=() digests=() i
  [ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv || return 1
  for lock in "$@"; do
    [ -f "$lock" ] || { echo "venv.sh: $lock is missing (bash scripts/lock.sh makes it)" >&2; return 1; }
    digest=$(venv_digest "$lock")
    if [ "$(cat "$(venv_stamp "$lock")" 2>/dev/null)" != "$digest" ]; then
      stale+=("$lock")
      digests+=("$digest")
    fi
  done
  [ ${#stale[@]} -eq 0 ] && return 0
  for lock in "${stale[@]}"; do
    echo "venv.sh: installing $lock into .venv" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check \
      --require-hashes --no-deps -r "$lock" || return 1
  done
  echo "venv.sh: installing the project itself (editable) into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check \
    --no-deps --no-build-isolation -e . || return 1
  mkdir -p .venv/.fa-lab-stamps || return 1
  for i in "${!stale[@]}"; do
    echo "${digests[$i]}" > "$(venv_stamp "${stale[$i]}")" || return 1
  done
}
