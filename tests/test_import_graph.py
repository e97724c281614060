"""The house's shape: no import cycle among the project's modules (function-level imports
included), and CuPy imported only by the GPU side (engine/gpu/, device detection, the kernel
loader)."""
import ast
import collections
from pathlib import Path

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
