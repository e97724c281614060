"""Copy the browser test's captures that the docs show into docs/screenshots/, made small.

    python scripts/shrink_screenshots.py CAPTURES [DEST]   # DEST: docs/screenshots

CAPTURES is the folder the browser test wrote (FA_LAB_CAPTURE_DIR; tests/test_browser.py):
its talk/ and 1280/ screens (1280×720 PNGs) become DEST/talk/ and DEST/1280/, each reduced
to 256 colours (about 2.5× smaller, the text as sharp); the full-length captures (full/) stay
where they are. Only files already in DEST are replaced, so the set the docs show is chosen
in git, not here. Pillow comes with Streamlit (requirements/app.lock holds it for Streamlit);
nothing else in the app needs it. Exit 1 when a picture is over LIMIT_BYTES or missing.
"""
from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "docs" / "screenshots"
SETS = ("talk", "1280")
LIMIT_BYTES = 120_000      # tests/test_docs_links.py holds every picture in DEST to this


def shrink(src: Path, dst: Path) -> int:
    """Write src as a 256-colour PNG at dst; its size in bytes."""
    with Image.open(src) as im:
        im.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(
            dst, "PNG", optimize=True)
    return dst.stat().st_size


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__)
        return 2
    captures, dest = Path(argv[0]), Path(argv[1]) if len(argv) == 2 else DEST
    problems = []
    for name in SETS:
        for old in sorted((dest / name).glob("*.png")):
            src = captures / name / old.name
            if not src.is_file():
                problems.append(f"{src} was not captured")
                continue
            size = shrink(src, old)
            print(f"{old.relative_to(dest)}: {size // 1024} KB")
            if size > LIMIT_BYTES:
                problems.append(f"{old} is {size} bytes, over {LIMIT_BYTES}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
