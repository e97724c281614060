"""The lab notebook (lab/) stays outside the product: lab/README.md names every file under
lab/, and the product's code (engine/, app/) builds no path into lab/ nor into the
old benchmarks/records/; it reads recorded results from benchmarks/results/ only."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "lab"
PRODUCT = ("engine", "app")


def indexed_names(text: str) -> set[str]:
    """The paths the index names: the first `code` span of each list line."""
    return set(re.findall(r"^- `([^`]+)`", text, flags=re.M))


def test_every_file_under_lab_is_in_its_index():
    named = indexed_names((LAB / "README.md").read_text())
    files = {p.relative_to(LAB).as_posix() for p in LAB.rglob("*") if p.is_file()}
    files.discard("README.md")
    assert files, "lab/ holds no files"
    assert sorted(files - named) == [], "files under lab/ missing from lab/README.md"
    assert sorted(named - files) == [], "lab/README.md names files that do not exist"


def test_index_lines_say_what_date_and_device():
    for line in (LAB / "README.md").read_text().splitlines():
        if line.startswith("- `"):
            what, *rest = line.split(" — ", 1)[1].rsplit("; ", 2)
            assert what and len(rest) == 2, line
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}( to \d{4}-\d{2}-\d{2})?", rest[0]), line
            assert rest[1], line


def test_indexed_names_reads_only_list_lines():
    assert indexed_names("# t\n- `a/b.json` — x; 2000-01-01; H200\ntext `c`\n") == {"a/b.json"}


def string_literals(path: Path) -> list[str]:
    """Every string constant of a module except docstrings (comments are not in the tree)."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def reads_lab(literals: list[str]) -> list[str]:
    """The literals that name lab/ or benchmarks/records/ as a path or a path part."""
    return [s for s in literals
            if s == "lab" or re.search(r"(^|[/\s`(])lab/|benchmarks/records", s)]


def test_reads_lab_sees_a_path_into_lab():
    assert reads_lab(["lab", "lab/records/x.json", "see `lab/NOTES.md`",
                      "benchmarks/records/y.json"]) == [
        "lab", "lab/records/x.json", "see `lab/NOTES.md`", "benchmarks/records/y.json"]
    assert reads_lab(["benchmarks/results", "label", "collab/x", "records"]) == []


def test_the_product_never_reads_lab():
    found = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            hits = reads_lab(string_literals(path))
            if hits:
                found[path.relative_to(ROOT).as_posix()] = hits
    assert found == {}
