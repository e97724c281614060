"""What the lock files in requirements/ are made from, and what they hold.

pyproject.toml declares the packages (ranges); requirements/*.lock pin them (exact versions
with hashes), made by scripts/lock.sh. Each lock's header records the requirements-hash of
the declarations it was made from, so tests/test_dependencies.py can tell a stale lock.
Standard library only (tomli on Python 3.10), so scripts/lock.sh runs it with any Python.

  python scripts/lockinfo.py hash            # the requirements-hash of pyproject.toml now
  python scripts/lockinfo.py header LOCK     # the header comment scripts/lock.sh writes
  python scripts/lockinfo.py build-requires  # build-system requires, one a line
  python scripts/lockinfo.py changes OLD NEW # pins that differ between two lock files
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:        # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK_DIR = ROOT / "requirements"

# Each lock: the extras it holds on top of [project] dependencies and build-system requires
# (setuptools, so the editable install of the project itself needs no network), and the lock
# whose pins it must keep (scripts/lock.sh compiles them in this order).
LOCKS = {
    "app": {"extras": ["app"], "constrained_by": None,
            "about": "the app: [project] dependencies, the [app] extra, build-system requires"},
    "dev": {"extras": ["app", "test"], "constrained_by": "app",
            "about": "the app and the test suite: app.lock plus the [test] extra"},
    "gpu": {"extras": ["app", "gpu"], "constrained_by": "dev",
            "about": "the app with the live CUDA kernels: app.lock plus the [gpu] extra"},
}
HASH_KEY = "requirements-hash"


def lock_path(name: str) -> Path:
    return LOCK_DIR / f"{name}.lock"


def canonical_name(name: str) -> str:
    """PEP 503: lower case, runs of -, _ and . as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def normalise(requirement: str) -> str:
    """A requirement string without its whitespace and with its name canonical, so that
    spacing and spelling of names do not change the hash but any other edit does."""
    text = re.sub(r"\s+", "", requirement)
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)
    if not match:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical_name(match.group(0)) + text[match.end():]


def declared(pyproject: Path = PYPROJECT) -> dict:
    """pyproject's [project] dependencies, optional-dependencies and build-system requires,
    as written (requirement strings)."""
    data = tomllib.loads(pyproject.read_text())
    project = data.get("project", {})
    return {"dependencies": list(project.get("dependencies", [])),
            "optional-dependencies": {k: list(v) for k, v in
                                      project.get("optional-dependencies", {}).items()},
            "build-system": list(data.get("build-system", {}).get("requires", []))}


def requirements_hash(pyproject: Path = PYPROJECT) -> str:
    """sha256 of the declarations, normalised (each list sorted, extras by name)."""
    d = declared(pyproject)
    canon = {"dependencies": sorted(map(normalise, d["dependencies"])),
             "optional-dependencies": {k: sorted(map(normalise, v)) for k, v in
                                       sorted(d["optional-dependencies"].items())},
             "build-system": sorted(map(normalise, d["build-system"]))}
    blob = json.dumps(canon, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def header(name: str, pyproject: Path = PYPROJECT) -> str:
    return (f"# requirements/{name}.lock: {LOCKS[name]['about']}.\n"
            "# Exact versions with hashes for Python >= 3.10 on every platform, made from\n"
            "# pyproject.toml by `bash scripts/lock.sh`; do not edit by hand. Installed with\n"
            "# `pip install --require-hashes --no-deps -r` (scripts/venv.sh).\n"
            f"# {HASH_KEY}: {requirements_hash(pyproject)}\n")


def lock_entries(path: Path) -> list[dict]:
    """The entries of a lock file: name (canonical), version (None unless pinned with ==),
    the requirement as written, its environment marker ('' when none) and its hashes."""
    entries, logical = [], ""
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        logical += " " + line.rstrip("\\").strip()
        if line.endswith("\\"):
            continue
        entries.append(_entry(logical.strip()))
        logical = ""
    if logical.strip():
        entries.append(_entry(logical.strip()))
    return entries


def _entry(text: str) -> dict:
    hashes = re.findall(r"--hash=(\S+)", text)
    req = re.sub(r"\s*--hash=\S+", "", text).strip()
    spec, _, marker = req.partition(";")
    match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s,;=<>!~]+)",
                         spec.strip())
    return {"name": canonical_name(match.group(1) if match else re.split(r"[\s\[=<>!~;]", spec)[0]),
            "version": match.group(3) if match else None,
            "requirement": req, "marker": marker.strip(), "hashes": hashes}


def recorded_hash(path: Path) -> str | None:
    """The requirements-hash in a lock file's header, or None."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(f"# {HASH_KEY}:"):
            return line.split(":", 1)[1].strip()
    return None


def changes(old: Path, new: Path) -> list[str]:
    """'name: old pins -> new pins' for each package whose pins differ (a missing file: none)."""
    def pins(path: Path) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for e in lock_entries(path) if path.is_file() else []:
            out.setdefault(e["name"], []).append(
                e["version"] + (f" ({e['marker']})" if e["marker"] else ""))
        return out
    a, b = pins(old), pins(new)
    return [f"{name}: {', '.join(a.get(name, [])) or '-'} -> {', '.join(b.get(name, [])) or '-'}"
            for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]


def main(argv: list[str]) -> int:
    if argv[:1] == ["hash"]:
        print(requirements_hash())
    elif argv[:1] == ["header"] and len(argv) == 2 and argv[1] in LOCKS:
        sys.stdout.write(header(argv[1]))
    elif argv[:1] == ["build-requires"]:
        print("\n".join(declared()["build-system"]))
    elif argv[:1] == ["changes"] and len(argv) == 3:
        for line in changes(Path(argv[1]), Path(argv[2])):
            print(line)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
