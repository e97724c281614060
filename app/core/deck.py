"""Talk mode's deck: the story told one slide at a time, each slide a page of app/page_list.py
with the section its stage shows first (app.core.ui.on_stage), kept in the URL as `slide`.
Plain data and pure functions (app/core/deck_view.py draws the counter, the buttons and the
keys; app/core/takeaways.py words each slide's point)."""
from __future__ import annotations

from dataclasses import dataclass

from app.page_list import (BACKWARD, DECODING, ONLINE_SOFTMAX, OVERVIEW, PRECISION,
                           SRAM_TILING, TIMINGS)

SLIDE_PARAM = "slide"     # the URL's parameter: the slide's number, 1-based


@dataclass(frozen=True)
class Slide:
    page: str              # the url_path of its page
    section: str           # the section of that page its stage shows (ui.on_stage)
    title: str             # beside the counter
    home: bool = True      # the slide a page opens on when reached from the menu (one a page)


SLIDES = (
    Slide(OVERVIEW, "headline", "Flash against naive"),
    Slide(TIMINGS, "memory", "The memory wall", home=False),
    Slide(SRAM_TILING, "loop", "Tiles in SRAM"),
    Slide(ONLINE_SOFTMAX, "row", "Online softmax: the rescale"),
    Slide(BACKWARD, "loop", "Backward: P rebuilt"),
    Slide(DECODING, "merge", "Decoding: splits merged"),
    Slide(TIMINGS, "speed", "Speed on this GPU"),
    Slide(PRECISION, "error", "Precision: FP8 against float64"),
)

# each talk preset (app/core/controls.py) and the slide that makes its point
PRESET_SLIDES = {"small and clear": 4, "long context": 2, "causal": 3,
                 "tiles too big for SRAM": 3}


def slide(number: int) -> Slide:
    """Slide `number` (1-based; clamped to the deck)."""
    return SLIDES[clamp(number) - 1]


def clamp(number: int) -> int:
    return min(max(int(number), 1), len(SLIDES))


def home_slide(page: str) -> int | None:
    """The number of the slide a page opens on when reached from the menu; None off the deck."""
    return next((i for i, s in enumerate(SLIDES, 1) if s.page == page and s.home), None)


def section(number: int, page: str) -> str | None:
    """The section page `page` puts on its stage: slide `number`'s when that slide is on this
    page, else the page's home slide's (None off the deck)."""
    if slide(number).page == page:
        return slide(number).section
    home = home_slide(page)
    return SLIDES[home - 1].section if home else None


def counter(number: int) -> str:
    """The slide counter: "3 / 8"."""
    return f"{clamp(number)} / {len(SLIDES)}"


def parse(raw: str) -> int:
    """The slide number a link's text names, or ValueError saying what is allowed."""
    text = str(raw).strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= len(SLIDES):
        return int(text)
    raise ValueError(f"The link's {SLIDE_PARAM}={raw!r} is not allowed: {SLIDE_PARAM} must be "
                     f"a whole number from 1 to {len(SLIDES)}. Using the page's own slide "
                     f"instead.")


def route(number: int, page: str, deck_page: str | None, going: bool) -> tuple[int, str | None]:
    """(the slide to show, the page to switch to or None) for a run of talk mode on `page`.
    `going`: the slide was just chosen (next/back, a key, a link's slide, a preset), so its
    page is shown; otherwise, on `deck_page` (the page the deck showed last) the slide stays,
    and a page reached another way (the menu, a link without a slide) shows its home slide
    (off the deck the slide stays, for next/back to go on from)."""
    number = clamp(number)
    target = slide(number).page
    if going:
        return number, (None if target == page else target)
    if page == deck_page:
        return number, None
    return home_slide(page) or number, None
