"""README.md and docs/ point only at things that exist: every relative link and picture (with
its #anchor, where it names one), every repository path written in backticks; the pictures
in docs/screenshots/ stay small and are all shown somewhere; README stays short."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# docs whose backticked paths are checked too (docs/DESIGN.md names modules at a finer grain
# and is kept true to the code by its own rule)
PATH_CHECKED = [d for d in DOCS if d.name != "DESIGN.md"]
SHOTS = ROOT / "docs" / "screenshots"
PICTURE_LIMIT = 120_000       # bytes; scripts/shrink_screenshots.py makes them so
README_LINES = 150

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
TOP = ("app/", "pages/", "engine/", "kernels/", "benchmarks/", "lab/", "tests/", "scripts/",
       "requirements/", "docs/", "deploy/", ".ci/", ".streamlit/")
TOP_FILES = ("Dockerfile", "pyproject.toml", "README.md")
NAMED_FILE = re.compile(r"^[\w.*-]+\.(py|sh|md|json|log|lock|cu|cuh|toml|yaml)$")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {_slug(m) for m in re.findall(r"^#+\s+(.+)$", text, flags=re.M)}


def _links(doc: Path) -> list[str]:
    return [t for t in LINK.findall(doc.read_text())
            if not re.match(r"^[a-z]+:", t)]          # http:, https:, mailto:


def _exists(token: str) -> bool:
    if any(c in token for c in "*?["):
        return any(ROOT.glob(token))
    return (ROOT / token).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc):
    broken = []
    for target in _links(doc):
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("doc", PATH_CHECKED, ids=lambda p: p.name)
def test_paths_in_backticks_exist(doc):
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    missing = []
    for token in CODE.findall(text):
        if "<" in token or "$" in token:
            continue
        if token.startswith(TOP) or token in TOP_FILES:
            if not _exists(token.rstrip("/")):
                missing.append(token)
        elif NAMED_FILE.match(token) and "/" not in token:
            # a bare file name (a log, a test file): somewhere in the repository
            if not any(ROOT.glob(f"**/{token}")):
                missing.append(token)
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_checks_see_links_and_paths():
    """The patterns above find what they must (so their silence means something)."""
    readme = (ROOT / "README.md").read_text()
    assert "docs/RESULTS.md" in _links(ROOT / "README.md")
    assert "scripts/start.sh" in CODE.findall(readme)
    assert not _exists("docs/no-such-page.md") and _exists("tests/test_*.py")
    assert _slug("Limits for shared servers") == "limits-for-shared-servers"
    assert _slug("The `gpu` tests: H200") == "the-gpu-tests-h200"


def test_pictures_are_small():
    big = {p.relative_to(ROOT).as_posix(): p.stat().st_size for p in SHOTS.rglob("*")
           if p.is_file() and p.stat().st_size > PICTURE_LIMIT}
    assert not big, (f"over {PICTURE_LIMIT} bytes: {big}; make them with "
                     "scripts/update_screenshots.sh (or shrink them) before committing")


def test_every_picture_is_shown_somewhere():
    shown = {(doc.parent / t.partition("#")[0]).resolve() for doc in DOCS for t in _links(doc)}
    unused = [p.relative_to(ROOT).as_posix() for p in sorted(SHOTS.rglob("*"))
              if p.is_file() and p.resolve() not in shown]
    assert not unused, f"pictures no page shows (remove them): {unused}"


def test_readme_stays_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines; move detail into docs/ (at most {README_LINES})")
