"""The house's shape: the layers of pyproject.toml's [tool.importlinter] contracts hold
(checked by import-linter, and shown to fail on a wrong import), the page scripts sit where the
contracts see them and follow the app's, no import cycle among the project's modules, and CuPy
imported only by the GPU side (engine/gpu/, device detection, the kernel loader).
Function-level imports count everywhere."""
import ast
import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# the dev lock has import-linter; a GPU machine's own Python, which runs the gpu tests, may not
read_configuration = pytest.importorskip("importlinter.api").read_configuration

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "app", "kernels")
CUPY_ALLOWED = ("engine/gpu/", "engine/devices.py", "kernels/loader.py")


def modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path, known: dict) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        out.update(c for c in candidates if c in known and c != name)
    return out


def find_cycle(graph: dict) -> list[str] | None:
    state, stack = {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == "open":
                return stack[stack.index(v):] + [v]
            if v not in state and (cycle := visit(v)):
                return cycle
        stack.pop()
        state[u] = "done"
        return None

    for u in sorted(graph):
        if u not in state and (cycle := visit(u)):
            return cycle
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a"}}) is None


def test_no_import_cycle():
    known = modules()
    graph = collections.defaultdict(set, {n: imports(n, p, known) for n, p in known.items()})
    assert len(known) > 30
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cupy_only_on_the_gpu_side():
    offenders = []
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        uses = any((isinstance(n, ast.Import) and any(a.name.split(".")[0] == "cupy"
                                                      for a in n.names))
                   or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "cupy")
                   for n in ast.walk(tree))
        if uses and not rel.startswith(CUPY_ALLOWED):
            offenders.append(rel)
    assert offenders == []


# ---- the layers (docs/DESIGN.md, "Layers") ----------------------------------------------
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = {c["id"]: c for c in
             read_configuration(str(ROOT / "pyproject.toml"))["contracts_options"]}
# what app/ (its page scripts too) may import from the engine: its public API, the facade and
# the model
APP_MAY_IMPORT = ("engine", "engine.facade", "engine.model")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def engine_top_modules() -> set[str]:
    """engine's own modules and subpackages, one level down."""
    return {f"engine.{p.stem}" for p in (ROOT / "engine").iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}


def test_import_contracts_hold():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    for contract in CONTRACTS.values():
        assert f"{contract['name']} KEPT" in done.stdout


def test_contracts_name_every_engine_module():
    """A new engine module is forbidden to app/ and to the model until a contract allows it."""
    inner = engine_top_modules()
    assert {"engine.model", "engine.facade", "engine.cpu", "engine.gpu"} <= inner
    app_forbidden = {m for m in CONTRACTS["app-uses-public-engine"]["forbidden_modules"]}
    assert app_forbidden == inner - set(APP_MAY_IMPORT)
    model_forbidden = {m for m in CONTRACTS["model-is-pure"]["forbidden_modules"]
                       if m.startswith("engine.")}
    assert model_forbidden == inner - {"engine.model"}


def test_the_model_never_imports_the_engine_package():
    """The one import the model contract cannot name: engine itself (its __init__ reaches
    both backends)."""
    known = modules()
    offenders = [(name, target) for name, path in known.items() if name.startswith("engine.model")
                 for target in imports(name, path, known)
                 if not target.startswith("engine.model")]
    assert offenders == []


def outside_engine_api(path: Path, known: dict) -> list[str]:
    """The engine modules a file outside the engine imports other than APP_MAY_IMPORT."""
    return sorted(t for t in imports(path.stem, path, known)
                  if t.split(".")[0] == "engine" and t not in APP_MAY_IMPORT
                  and not t.startswith("engine.model."))


def test_pages_import_only_the_public_engine():
    """Each page script (app/features/<page>/page.py, which Streamlit runs as a file) is a
    module of the app package, so import-linter holds it to the app's contracts; its imports
    are read here as well."""
    known = modules()
    scripts = sorted((ROOT / "app" / "features").glob("*/page.py"))
    assert len(scripts) > 5
    for script in scripts:
        package = script.parent
        assert (package / "__init__.py").exists() and (package.parent / "__init__.py").exists()
        assert ".".join(script.relative_to(ROOT).with_suffix("").parts) in known
    found = {p.parent.name: outside_engine_api(p, known) for p in scripts}
    assert {name: bad for name, bad in found.items() if bad} == {}


def test_the_pages_check_sees_a_wrong_import(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import engine\nfrom engine.model import iomodel\n"
                    "def f():\n    from engine import recorded\n    from engine.gpu import lock\n")
    assert outside_engine_api(page, modules()) == ["engine.gpu", "engine.gpu.lock", "engine.recorded"]


BAD_IMPORTS = {   # contract -> (a module added to a copy of the tree, its source)
    "app-uses-public-engine": ("app/features/timings/_wrong.py",
                               "def f():\n    from engine.gpu import lock\n    return lock\n"),
    "core-below-features": ("app/core/_wrong.py",
                            "def f():\n    from app.features.timings import data\n"),
    "pages-are-scripts": ("app/features/kernel/_wrong.py",
                          "def f():\n    from app.features.timings import page\n"),
    "backends-independent": ("engine/cpu/_wrong.py",
                             "def f():\n    from ..gpu import runtime\n    return runtime\n"),
    "model-is-pure": ("engine/model/_wrong.py", "from ..cpu import forward\n"),
    "engine-below-app": ("engine/_wrong.py", "def f():\n    import app.core.ui\n"),
}


@pytest.mark.parametrize("contract", sorted(BAD_IMPORTS))
def test_a_wrong_import_breaks_its_contract(tmp_path, contract):
    for folder in ("engine", "app", "kernels"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    rel, source = BAD_IMPORTS[contract]
    (tmp_path / rel).write_text(source)
    done = lint_imports(tmp_path)
    assert done.returncode != 0, done.stdout
    broken = done.stdout.split("Broken contracts")[-1]
    assert CONTRACTS[contract]["name"] in broken
    assert rel[:-3].replace("/", ".") in broken          # the copy was analysed, not ROOT
    assert f"{len(CONTRACTS) - 1} kept, 1 broken" in done.stdout
