"""Every module of the product imports with the installed (locked) packages: app/ and engine/
module by module in a fresh interpreter, so that no module leans on another having been
imported first; the scripts Streamlit runs (app/main.py, app/features/*/page.py) have every
module they import resolvable. A Streamlit or Altair release that moved something the app uses
fails here, before any page is opened."""
from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "app" / "main.py", *sorted((ROOT / "app" / "features").glob("*/page.py"))]


def package_modules(package: str) -> list[str]:
    """Dotted names of every module under a package directory of the repository (not the
    scripts: __main__.py, app/main.py and the pages' page.py run when imported)."""
    base = ROOT / package
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for p in base.rglob("*.py")
                  if "__pycache__" not in p.parts and p.name != "__main__.py"
                  and p not in SCRIPTS)


IMPORT_EACH = """
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc(limit=3)
print(json.dumps(failed))
"""


@pytest.mark.parametrize("package", ["engine", "app"])
def test_every_module_imports(package):
    names = package_modules(package)
    assert len(names) > 5, names
    # one fresh interpreter per module would take a minute; one per package still catches a
    # module that needs another imported first only if it comes earlier, so the order is reversed
    # too
    for order in (names, names[::-1]):
        out = subprocess.run([sys.executable, "-c", IMPORT_EACH, json.dumps(order)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        failed = json.loads(out.stdout.strip().splitlines()[-1])
        assert not failed, "\n".join(f"{k}:\n{v}" for k, v in failed.items())


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("script", SCRIPTS,
                         ids=[str(p.relative_to(ROOT / "app")) for p in SCRIPTS])
def test_page_scripts_import_what_exists(script):
    """Each name a page script imports is a module, or an attribute of one, that exists."""
    missing = []
    for name in sorted(imported_names(script)):
        if importlib.util.find_spec(name.split(".")[0]) is None:
            missing.append(name)
            continue
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ImportError:
            if not module or not hasattr(importlib.import_module(module), attr):
                missing.append(name)
    assert not missing, f"{script.relative_to(ROOT)} imports what does not exist: {missing}"


def test_a_moved_streamlit_internal_names_both_versions():
    """If a Streamlit release drops an internal the app uses, the error says which, and which
    Streamlit is installed and which one the project is tested with."""
    import streamlit

    from app.core import st_internals
    with pytest.raises(ImportError) as err:
        st_internals.internal("streamlit.dataframe_util", "no_such_function_here")
    text = str(err.value)
    assert "streamlit.dataframe_util.no_such_function_here" in text
    assert f"Streamlit {streamlit.__version__} does not have" in text
    assert "tested with Streamlit " in text and "app/core/st_internals.py" in text
