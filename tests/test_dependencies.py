"""The declared dependencies (pyproject.toml) and the lock files made from them
(requirements/*.lock, by scripts/lock.sh) agree; scripts/venv.sh installs a lock only when it
changed; and a second start of the app needs no network."""
from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from app_server import free_port

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("lockinfo", ROOT / "scripts" / "lockinfo.py")
lockinfo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lockinfo)

LOCKS = list(lockinfo.LOCKS)
# "gpu.lock", not "gpu": conftest skips tests with a "gpu" keyword where no GPU answers
LOCK_IDS = lambda name: f"{name}.lock"
DECLARED = lockinfo.declared()
RESYNC = "bash scripts/lock.sh --sync"
# Imported by the code but deliberately not declared: optional, and never installed by the
# project's scripts.
OPTIONAL_IMPORTS = {
    "torch": "PyTorch reference lines (engine/gpu/torch_reference.py), on GPU machines that "
             "have PyTorch; the app works without it",
    "cudnn": "cuDNN's FP8 reference line (engine/gpu/cudnn_fp8.py): the nvidia-cudnn-frontend "
             "bindings, on GPU machines that have them; the FP8 sweep skips that line without",
}
# Import names of declared packages that may not be installed here (the [gpu] extra on a
# machine without a GPU), so importlib.metadata cannot map them.
NOT_INSTALLED_HERE = {"cupy": "cupy-cuda12x", "cupy_backends": "cupy-cuda12x",
                      "cuda": "cuda-bindings"}


def entries(name: str) -> list[dict]:
    return lockinfo.lock_entries(lockinfo.lock_path(name))


def declared_for(lock: str) -> list[Requirement]:
    """What a lock must hold: [project] dependencies, its extras, build-system requires."""
    texts = DECLARED["dependencies"] + DECLARED["build-system"]
    for extra in lockinfo.LOCKS[lock]["extras"]:
        texts += DECLARED["optional-dependencies"][extra]
    return [Requirement(t) for t in texts]


def pins(lock: str) -> dict[str, set]:
    """name -> {(version, marker)} of a lock."""
    out: dict[str, set] = {}
    for e in entries(lock):
        out.setdefault(e["name"], set()).add((e["version"], e["marker"]))
    return out


@pytest.mark.parametrize("lock", LOCKS, ids=LOCK_IDS)
def test_every_entry_is_pinned_with_hashes(lock):
    found = entries(lock)
    assert found, f"requirements/{lock}.lock holds no packages"
    for e in found:
        assert e["version"], f"{lock}.lock: {e['requirement']!r} is not pinned with =="
        assert e["hashes"], f"{lock}.lock: {e['requirement']!r} has no --hash"
        assert all(h.startswith("sha256:") for h in e["hashes"]), e["requirement"]


@pytest.mark.parametrize("lock", LOCKS, ids=LOCK_IDS)
def test_lock_is_made_from_pyproject_as_it_is_now(lock):
    path = lockinfo.lock_path(lock)
    recorded = lockinfo.recorded_hash(path)
    assert recorded, f"requirements/{lock}.lock has no '# {lockinfo.HASH_KEY}:' header line"
    assert recorded == lockinfo.requirements_hash(), (
        f"requirements/{lock}.lock was made from other declarations than pyproject.toml's "
        f"now (the dependencies, optional-dependencies or build-system requires changed): "
        f"run `{RESYNC}` to bring the locks in line, and commit them")


@pytest.mark.parametrize("lock", LOCKS, ids=LOCK_IDS)
def test_every_declared_requirement_is_locked_within_its_range(lock):
    locked = pins(lock)
    for req in declared_for(lock):
        name = lockinfo.canonical_name(req.name)
        assert name in locked, (f"{req} (pyproject.toml) is missing from "
                                f"requirements/{lock}.lock: run `{RESYNC}`")
        for version, marker in locked[name]:
            assert req.specifier.contains(version, prereleases=True), (
                f"requirements/{lock}.lock pins {name}=={version}"
                f"{' ; ' + marker if marker else ''}, outside pyproject's {req}: run `{RESYNC}`")


def test_locks_agree_on_every_shared_package():
    all_pins = {lock: pins(lock) for lock in LOCKS}
    for i, a in enumerate(LOCKS):
        for b in LOCKS[i + 1:]:
            for name in sorted(set(all_pins[a]) & set(all_pins[b])):
                assert all_pins[a][name] == all_pins[b][name], (
                    f"{name}: {a}.lock pins {sorted(all_pins[a][name])}, "
                    f"{b}.lock {sorted(all_pins[b][name])}: run `{RESYNC}`")


@pytest.mark.parametrize("lock", ["dev", "gpu"], ids=LOCK_IDS)
def test_dev_and_gpu_locks_hold_the_whole_app_lock(lock):
    missing = set(pins("app")) - set(pins(lock))
    assert not missing, f"{lock}.lock lacks app.lock's {sorted(missing)}: run `{RESYNC}`"


def third_party_imports(folders: list[str]) -> dict[str, set[str]]:
    """Top-level names of absolute imports under the folders that are neither the standard
    library nor the project's own modules -> the files importing them."""
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {n.split(".")[0] for n in names}:
                    local = any((d / top).is_dir() or (d / f"{top}.py").is_file()
                                for d in (ROOT, path.parent, ROOT / "tests", ROOT / "benchmarks"))
                    if top not in sys.stdlib_module_names and not local:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def check_declared(folders: list[str], groups: list[str]) -> None:
    declared = {lockinfo.canonical_name(Requirement(t).name) for t in DECLARED["dependencies"]}
    for group in groups:
        declared |= {lockinfo.canonical_name(Requirement(t).name)
                     for t in DECLARED["optional-dependencies"][group]}
    installed = importlib.metadata.packages_distributions()
    problems = []
    for name, files in sorted(third_party_imports(folders).items()):
        if name in OPTIONAL_IMPORTS:
            continue
        dists = {lockinfo.canonical_name(d) for d in installed.get(name, [])}
        if name in NOT_INSTALLED_HERE:
            dists.add(NOT_INSTALLED_HERE[name])
        if not dists:
            problems.append(f"{name} (imported by {', '.join(sorted(files))}) is not installed "
                            "here, so its distribution is unknown: declare it in pyproject.toml")
        elif not dists & declared:
            problems.append(f"{name} (imported by {', '.join(sorted(files))}, distribution "
                            f"{' or '.join(sorted(dists))}) is not declared in pyproject's "
                            f"dependencies or the {', '.join(groups)} extras")
    assert not problems, "\n".join(problems)


def test_every_import_of_the_app_is_declared():
    check_declared(["app", "engine", "kernels"], ["app", "gpu"])


def test_every_import_of_the_tests_is_declared():
    check_declared(["tests"], ["app", "gpu", "test"])


def test_the_import_scan_finds_the_app_packages():
    """The scan above sees what it must (so its silence means something)."""
    found = third_party_imports(["app", "engine"])
    assert {"numpy", "pandas", "altair", "streamlit", "pyarrow", "ml_dtypes", "cupy"} <= set(found)
    assert "engine" not in found and "app" not in found


# scripts/venv.sh, with a stand-in for .venv's python (no pip, no network)

FAKE_PYTHON = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/calls"
exit "$(cat "$(dirname "$0")/exit_code")"
"""


def venv_install(cwd: Path, *locks: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f". {ROOT}/scripts/venv.sh && venv_install {' '.join(locks)}"],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.fixture
def fake_repo(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "requirements").mkdir()
    for name in ("app", "dev"):
        (tmp_path / "requirements" / f"{name}.lock").write_text(f"{name}==1.0 --hash=sha256:00\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "exit_code").write_text("0")
    return tmp_path


def test_venv_installs_a_lock_once_and_again_when_it_changes(fake_repo):
    calls = fake_repo / ".venv" / "bin" / "calls"
    run = venv_install(fake_repo, "requirements/app.lock", "requirements/dev.lock")
    assert run.returncode == 0, run.stderr
    assert "installing requirements/app.lock" in run.stderr
    lines = calls.read_text().splitlines()
    assert any("--require-hashes --no-deps -r requirements/app.lock" in l for l in lines)
    assert any("--require-hashes --no-deps -r requirements/dev.lock" in l for l in lines)
    assert "--no-deps --no-build-isolation -e ." in lines[-1]
    # both stamps current: the app lock alone (scripts/start.sh after scripts/test.sh) and
    # both again install nothing
    calls.unlink()
    for locks in (["requirements/app.lock"], ["requirements/app.lock", "requirements/dev.lock"]):
        run = venv_install(fake_repo, *locks)
        assert run.returncode == 0 and not calls.exists(), run.stderr
    # a changed lock, and a changed pyproject.toml, install again
    (fake_repo / "requirements" / "app.lock").write_text("app==1.1 --hash=sha256:01\n")
    assert venv_install(fake_repo, "requirements/app.lock").returncode == 0
    assert "requirements/app.lock" in calls.read_text()
    calls.unlink()
    with open(fake_repo / "pyproject.toml", "a") as f:
        f.write("# edited\n")
    assert venv_install(fake_repo, "requirements/dev.lock").returncode == 0
    assert "requirements/dev.lock" in calls.read_text()


def test_a_failed_install_writes_no_stamp(fake_repo):
    (fake_repo / ".venv" / "bin" / "exit_code").write_text("1")
    run = venv_install(fake_repo, "requirements/app.lock")
    assert run.returncode != 0
    assert not (fake_repo / ".venv" / ".fa-lab-stamps" / "app.lock").exists()
    # so the next call tries again
    (fake_repo / ".venv" / "bin" / "exit_code").write_text("0")
    assert venv_install(fake_repo, "requirements/app.lock").returncode == 0
    assert (fake_repo / ".venv" / ".fa-lab-stamps" / "app.lock").exists()


# A second start with the package index out of reach, in the .venv the suite runs in

def offline_env() -> dict:
    """The environment without any way for pip to fetch a package: no config files (they may
    name extra indexes or find-links folders), no index, a dead index URL and proxy."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "UV_"))}
    dead = "http://127.0.0.1:9/"
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_INDEX_URL=dead, http_proxy=dead, https_proxy=dead,
               HTTP_PROXY=dead, HTTPS_PROXY=dead, no_proxy="", NO_PROXY="")
    return env


def site_snapshot() -> dict[str, float]:
    """Every entry of .venv's site-packages with its modification time."""
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return {p.name: p.stat().st_mtime for p in site.iterdir()}


@pytest.mark.slow
def test_second_start_is_offline_and_installs_nothing(tmp_path):
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("runs in the repository's .venv (bash scripts/test.sh makes it)")
    env = offline_env()
    python = str(ROOT / ".venv" / "bin" / "python")
    # the variables must really cut pip off, or this test would prove nothing
    numpy_pin = next(e for e in entries("app") if e["name"] == "numpy")["version"]
    probe = subprocess.run([python, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path),
                            f"numpy=={numpy_pin}", "setuptools"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode != 0 and not list(tmp_path.iterdir()), (
        "pip can still fetch packages under the offline variables:\n" + probe.stdout)
    # where a GPU answers but the gpu lock was never installed here (the suite installs the
    # app and dev locks), start.sh would try it: take the CPU path for this test
    gpu = subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0
    stamp = ROOT / ".venv" / ".fa-lab-stamps" / "gpu.lock"
    if gpu and not stamp.is_file():
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 1\n")
        (fake / "nvidia-smi").chmod(0o755)
        env["PATH"] = f"{fake}:{env['PATH']}"

    before = site_snapshot()
    t0 = time.monotonic()
    setup = subprocess.run(["bash", "scripts/start.sh"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env={**env, "FA_LAB_SETUP_ONLY": "1"})
    took = time.monotonic() - t0
    assert setup.returncode == 0, (
        "a second start failed without network (are .venv's stamps current? bash "
        f"scripts/test.sh installs and writes them):\n{setup.stdout}{setup.stderr}")
    assert "installing" not in setup.stderr, setup.stderr
    assert site_snapshot() == before, "start.sh changed .venv's site-packages"
    assert took < 10, f"the setup of a second start took {took:.1f} s"

    port = free_port()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            ["bash", "scripts/start.sh", "--server.port", str(port), "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**env, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                                timeout=2) as reply:
                        if reply.read() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail("the app did not answer its health check without network:\n"
                                + log.read().decode(errors="replace")[-3000:])
                time.sleep(0.5)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        log.seek(0)
        assert "installing" not in log.read().decode(errors="replace")
    assert site_snapshot() == before


def test_the_suite_runs_on_the_locked_versions():
    """In the .venv that scripts/test.sh made from the dev lock, every package of that lock
    (for this Python and platform) is installed at exactly its pinned version: the verdict of
    the suite is the verdict on the lock. Elsewhere (a GPU machine's own Python) it skips."""
    from packaging.markers import Marker
    from packaging.version import Version
    venv = ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve() or not (
            venv / ".fa-lab-stamps" / "dev.lock").exists():
        pytest.skip("not running in the .venv that scripts/test.sh installs from the dev lock")
    wrong = []
    for e in entries("dev"):
        if e["marker"] and not Marker(e["marker"]).evaluate():
            continue
        try:
            have = importlib.metadata.version(e["name"])
        except importlib.metadata.PackageNotFoundError:
            have = None
        if have is None or Version(have) != Version(e["version"]):
            wrong.append(f"{e['name']}: locked {e['version']}, installed {have}")
    assert not wrong, "\n".join(wrong) + "\n(bash scripts/test.sh installs the lock)"
