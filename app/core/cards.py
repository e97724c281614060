"""The classroom lab's question cards: a card asks about the student's own config and run,
takes an answer (a number within a tolerance, one choice, or a set of tile shapes) and
grades it against the truth its page computed from the run's trace or from the model.

Pure: no Streamlit. Each page builds its cards in app/features/<page>/cards.py; the cards
are drawn and graded by app/core/card_view.py; a teacher's link names cards by id
(`?cards=online_softmax.alpha,tile_sizes.fit`), checked against CATALOG here."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

NUMBER, CHOICE, TILES = "number", "choice", "tiles"
NONE_FIT = "none"                 # the tiles answer "no shape fits"
CARDS_PARAM = "cards"             # the teacher's link: card ids, comma-separated
MAX_ANSWER_CHARS = 40

# Every card, by id (<page's feature>.<name>), in the lab's order, with the short title the
# progress list shows: the one list a teacher's link is checked against (each page's
# cards.py builds exactly its own ids from here; tests/test_cards.py checks it).
CATALOG = {
    "sram_tiling.k_reads": "How many times is K read at block_q = 16?",
    "sram_tiling.blocks_per_sm": "How many thread blocks share an SM?",
    "online_softmax.alpha": "Predict the rescale factor α",
    "online_softmax.overflow": "Does exp(s) overflow the dtype without the max?",
    "tile_sizes.fit": "Which tiles fit this GPU's shared memory?",
    "backward.recompute": "What does the backward pass recompute, and from what?",
    "backward.extra_flops": "What does recomputing P cost?",
    "decoding.why_split": "Why does decoding split the KV cache here?",
    "decoding.blocks": "How many thread blocks does the decode step launch?",
}


@dataclass(frozen=True)
class Truth:
    """The right answer of a card for this config, and why."""
    value: object                 # a float (number), an option key (choice), or a frozenset
    #                               of (block_q, block_k) pairs (tiles)
    why: str                      # how it follows, in this config's numbers (markdown)
    source: str                   # where it comes from: the run's trace, the model, ...
    rel_tol: float = 0.0          # a number is right within rel_tol · |value| or abs_tol
    abs_tol: float = 0.0
    text: str = ""                # the value as the verdict writes it (default: formatted)


@dataclass(frozen=True)
class Card:
    id: str                       # a key of CATALOG
    question: str                 # markdown, in this config's numbers
    kind: str                     # NUMBER, CHOICE or TILES
    truth: Truth | None           # None when the card cannot be asked for this config
    options: tuple = ()           # CHOICE: (key, words) pairs; TILES: (block_q, block_k) pairs
    unavailable: str = ""         # why there is no truth (what to change to get one)

    @property
    def page(self) -> str:
        """The feature folder of its page (app/features/<page>/)."""
        return self.id.split(".", 1)[0]

    @property
    def title(self) -> str:
        return CATALOG[self.id]

    def fingerprint(self) -> str:
        """Tells a verdict on this very question from one on an earlier config's."""
        return repr((self.id, self.question, self.truth and self.truth.value))


@dataclass(frozen=True)
class Verdict:
    correct: bool
    explanation: str              # markdown: right or not, the true value, why, its source
    graded: bool = True           # False: the answer could not be read (nothing counted)


def tile_text(tile) -> str:
    return f"{tile[0]} × {tile[1]}"


def number_text(x: float) -> str:
    """A number as the cards write it: whole numbers with thousands separators, else four
    significant digits."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.4g}"


def parse_number(raw) -> float:
    """A typed answer as a number: "0.74", "-3", "1,024", "1.5e3", "3/4" and a decimal comma
    ("0,74") are read; anything else is a ValueError that says what to type."""
    text = "" if raw is None else str(raw).strip()
    if not text:
        raise ValueError("Type a number first, then press **Check**.")
    t = re.sub(r"[\s_\u2009\u202f]", "", text).replace("\u2212", "-")
    if "," in t:
        thousands = re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?", t)
        t = t.replace(",", "") if thousands or "." in t else t.replace(",", ".")
    try:
        if t.count("/") == 1:
            top, bottom = (float(p) for p in t.split("/"))
            value = top / bottom
        else:
            value = float(t)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"“{text[:MAX_ANSWER_CHARS]}” is not a number: type digits such as "
                         f"0.75, 12, 1,024, 1.5e3 or 3/4.") from None
    if not math.isfinite(value):
        raise ValueError("Type a finite number (not inf or nan).")
    return value


def check(card: Card, answer) -> Verdict:
    """Grade `answer` (the raw widget value: text for NUMBER, an option key or None for
    CHOICE, a list of (block_q, block_k) pairs or NONE_FIT for TILES) against the card's
    truth. An answer that cannot be read is an ungraded verdict saying what to do."""
    truth = card.truth
    if truth is None:
        return Verdict(False, card.unavailable or "This card cannot be asked here.", False)
    try:
        if card.kind == NUMBER:
            return _check_number(answer, truth)
        if card.kind == CHOICE:
            return _check_choice(answer, truth, dict(card.options))
        if card.kind == TILES:
            return _check_tiles(answer, truth)
    except ValueError as exc:
        return Verdict(False, str(exc), False)
    raise ValueError(f"card kind must be {NUMBER}, {CHOICE} or {TILES}; got {card.kind!r}")


def _explained(correct: bool, head: str, truth: Truth) -> Verdict:
    lead = "**Right.**" if correct else "**Not quite.**"
    return Verdict(correct, f"{lead} {head}\n\n{truth.why}\n\n*Where this comes from:* "
                            f"{truth.source}")


def _check_number(answer, truth: Truth) -> Verdict:
    got = parse_number(answer)
    want = float(truth.value)
    close = math.isclose(got, want, rel_tol=truth.rel_tol, abs_tol=truth.abs_tol)
    shown = truth.text or number_text(want)
    head = (f"You said {number_text(got)}; the true value is **{shown}**"
            + (" (within the card's tolerance)" if close and number_text(got) != shown
               else "") + ".")
    return _explained(close, head, truth)


def _check_choice(answer, truth: Truth, words: dict) -> Verdict:
    if answer is None or answer == "":
        raise ValueError("Choose one of the answers first, then press **Check**.")
    if answer not in words:
        raise ValueError(f"{answer!r} is not one of this card's answers; choose one of the "
                         f"listed answers.")
    right = answer == truth.value
    head = ("" if right else f"You chose “{words[answer]}”. ") + \
        f"The answer: **{truth.text or words[truth.value]}**"
    return _explained(right, head, truth)


def _tiles_of(answer) -> frozenset | None:
    """The chosen shapes, or None for "none fits"; ValueError when empty or contradictory."""
    picked = list(answer or [])
    if not picked:
        raise ValueError("Pick the tile shapes that fit (or “none of them”), then press "
                         "**Check**.")
    if NONE_FIT in picked:
        if len(picked) > 1:
            raise ValueError("“none of them” goes alone: take it out or take out the shapes.")
        return frozenset()
    return frozenset((int(t[0]), int(t[1])) for t in picked)


def _check_tiles(answer, truth: Truth) -> Verdict:
    got, want = _tiles_of(answer), frozenset(truth.value)
    missed, extra = sorted(want - got), sorted(got - want)
    right = not missed and not extra
    parts = []
    if missed:
        parts.append("these fit but were not picked: " + ", ".join(map(tile_text, missed)))
    if extra:
        parts.append("these were picked but do not fit: " + ", ".join(map(tile_text, extra)))
    shown = ", ".join(map(tile_text, sorted(want))) or "none of them"
    head = (f"{len(want)} shape{'s' if len(want) != 1 else ''} fit: **{shown}**."
            + (" " + "; ".join(parts).capitalize() + "." if parts else ""))
    return _explained(right, head, truth)


# ---- a teacher's link --------------------------------------------------------------------
def parse_link(raw: str) -> tuple[tuple[str, ...], str | None]:
    """The card ids a link's `cards` parameter names (known ones, in the link's order, each
    once), and a message naming any unknown ones (None when all are known)."""
    named = [part.strip() for part in str(raw).split(",") if part.strip()]
    known = tuple(dict.fromkeys(n for n in named if n in CATALOG))
    unknown = [n for n in named if n not in CATALOG]
    if not unknown and known:
        return known, None
    what = (f"names unknown cards {', '.join(unknown[:5])}" if unknown
            else "names no card")
    rest = ("; the others are shown" if known else "; every page's cards are shown")
    return known, (f"The link's {CARDS_PARAM}={str(raw)[:200]!r} {what}{rest}. Known cards: "
                   f"{', '.join(CATALOG)}.")


def link_text(ids) -> str:
    return ",".join(ids)


# ---- progress ------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One card's progress in this browser session."""
    attempts: int                 # graded answers given
    correct: bool                 # whether the last graded answer was right


def progress_line(records: dict, linked: tuple | None) -> str:
    """The lab's progress in words: of the linked cards when a teacher's link names some,
    else of the cards answered so far; empty when there is nothing to say."""
    if linked:
        answered = [i for i in linked if i in records]
        right = sum(records[i].correct for i in answered)
        return (f"Lab progress: **{len(answered)} of {len(linked)}** linked cards answered, "
                f"**{right}** right.")
    if not records:
        return ""
    right = sum(r.correct for r in records.values())
    return (f"Lab progress: **{len(records)}** card{'s' if len(records) != 1 else ''} "
            f"answered, **{right}** right.")


PRIVACY_NOTE = ("Kept in this browser session only: nothing is stored on the server, and a "
                "reload starts afresh.")
