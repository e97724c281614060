"""Talk mode's deck as data (app/core/deck.py): the story's slides in order, each on a page
that exists, one home slide a page, the routing of a run to its slide; and each slide's
takeaway (app/core/takeaways.py) computed from the data its chart draws."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from app.core import deck, takeaways
from app.core.controls import PRESETS
from app.page_list import (BACKWARD, DECODING, ONLINE_SOFTMAX, OVERVIEW, PAGES, PRECISION,
                           SRAM_TILING, TIMINGS)
from engine.model.units import GiB, KiB, MiB


def test_the_slides_tell_the_story_in_order():
    assert [s.page for s in deck.SLIDES] == [OVERVIEW, TIMINGS, SRAM_TILING, ONLINE_SOFTMAX,
                                            BACKWARD, DECODING, TIMINGS, PRECISION]
    assert [s.section for s in deck.SLIDES][1::5] == ["memory", "speed"]
    assert {s.page for s in deck.SLIDES} <= {row.url_path for row in PAGES}


def test_each_page_of_the_deck_has_one_home_slide():
    for page in {s.page for s in deck.SLIDES}:
        assert sum(s.home for s in deck.SLIDES if s.page == page) == 1, page
    assert deck.home_slide(TIMINGS) == 7            # Timings opens on the recorded speed
    assert deck.home_slide("kernel") is None


def test_every_preset_names_a_slide_of_its_point():
    assert set(deck.PRESET_SLIDES) == set(PRESETS)
    assert all(1 <= n <= len(deck.SLIDES) for n in deck.PRESET_SLIDES.values())


def test_section_counter_and_parse():
    assert deck.section(2, TIMINGS) == "memory" and deck.section(7, TIMINGS) == "speed"
    assert deck.section(3, TIMINGS) == "speed"      # another page's slide: the home's
    assert deck.section(1, "kernel") is None
    assert deck.counter(3) == f"3 / {len(deck.SLIDES)}"
    assert deck.counter(99) == f"{len(deck.SLIDES)} / {len(deck.SLIDES)}"
    assert deck.parse(" 4 ") == 4
    for bad in ("0", "9", "-1", "2.5", "x", "", "٣"):
        with pytest.raises(ValueError, match="slide must be a whole number from 1 to 8"):
            deck.parse(bad)


@pytest.mark.parametrize("number,page,seen,going,expected", [
    (3, OVERVIEW, OVERVIEW, True, (3, SRAM_TILING)),       # next: switch to its page
    (3, SRAM_TILING, OVERVIEW, True, (3, None)),           # already there
    (2, TIMINGS, TIMINGS, False, (2, None)),               # a rerun keeps the slide
    (2, BACKWARD, TIMINGS, False, (5, None)),              # the menu: the page's home slide
    (4, "kernel", ONLINE_SOFTMAX, False, (4, None)),       # off the deck: the slide stays
    (9, OVERVIEW, None, True, (8, PRECISION)),             # clamped
])
def test_route(number, page, seen, going, expected):
    assert deck.route(number, page, seen, going) == expected


def _recorded(naive_ms, flash_ms, flash_peak, naive_peak, seqs=(1024, 16384)):
    rows = []
    for i, n in enumerate(seqs):
        rows += [dict(kernel="naive", name="naive", seq=n, median_ms=naive_ms[i],
                      peak_bytes=naive_peak[i]),
                 dict(kernel="tensorcore", name="flash (wgmma)", seq=n, median_ms=flash_ms[i],
                      peak_bytes=flash_peak[i]),
                 dict(kernel="torch_flash", name="PyTorch flash", seq=n,
                      median_ms=2 * flash_ms[i], peak_bytes=flash_peak[i])]
    return pd.DataFrame(rows)


def test_headline_says_how_much_faster_at_the_largest_n_and_whether_memory_is_flat():
    rows = _recorded([0.1, 1.4184], [0.05, 0.4113], [33e6, 33e6], [1e8, 2.2e9])
    assert takeaways.headline(rows) == ("3.4× faster than naive at N = 16k · flash's memory "
                                        "flat, naive's ×22")
    growing = _recorded([0.1, 1.4], [0.05, 0.4], [33e6, 66e6], [1e8, 2.2e9])
    assert "flat" not in takeaways.headline(growing)
    assert takeaways.headline(rows[rows.kernel != "naive"]) == ""


def test_speed_compares_the_fastest_flash_with_every_other_kernel():
    rows = _recorded([0.1, 1.4184], [0.05, 0.4113], [33e6, 33e6], [1e8, 2.2e9])
    assert takeaways.speed(rows) == ("N = 16k: flash (wgmma) in 0.411 ms; the others take "
                                     "naive 3.4×, PyTorch flash 2× as long")


def test_memory_wall_names_the_wall_and_the_gap_at_the_largest_n():
    memory = pd.DataFrame([dict(seq=131072, algorithm="naive", peak_GiB=256.0),
                           dict(seq=131072, algorithm="FlashAttention", peak_GiB=0.25)])
    text = takeaways.memory_wall(memory, "H200", 140 * GiB, 96796)
    assert text == ("Naive hits H200's 140 GiB at N = 96,796; at N = 128k naive needs 256 "
                    "GiB, flash 256 MiB (1,024× less)")
    assert takeaways.memory_wall(memory, "H200", 140 * GiB, None).startswith(
        "No memory wall on H200: at N = 128k")


def test_tiling_says_whether_the_tiles_fit_and_what_the_mask_skips():
    assert takeaways.tiling(int(80.5 * KiB), 227 * KiB, True, 2, "H200", 64, 64) == (
        "80.5 KiB of 227 KiB shared memory a block: 2 blocks share an SM")
    too_big = takeaways.tiling(321 * KiB, 227 * KiB, False, 0, "H200", 16, 16)
    assert too_big == "These tiles need 321 KiB; H200 gives a block 227 KiB: cannot launch"
    assert takeaways.tiling(48 * KiB, 227 * KiB, True, 4, "H200", 36, 64).endswith(
        "causal: 28 of 64 tiles skipped")


def test_online_softmax_names_the_tiles_where_the_max_moved():
    assert takeaways.online_softmax([1.0, 1.0, 1.0, 0.44]) == (
        "α < 1: the max moved at key tile 3, so l and O were rescaled")
    assert takeaways.online_softmax([1.0, 0.5, 0.9, 0.1, 0.2, 0.3, 1.0]).startswith(
        "α < 1: the max moved at 5 key tiles (1, 2, 3, 4, …)")
    # tile 0 has no previous max; NaN (a tile the mask skipped) is not a move
    assert takeaways.online_softmax([0.0, 1.0, math.nan]) == (
        "α = 1 at every key tile after the first: the max never moved")


def test_backward_and_decoding():
    assert takeaways.backward(3 * MiB, 2 * MiB, 16.8e6) == (
        "1.5× fewer HBM bytes than naive backward, for one extra QKᵀ (0.0168 GFLOP) to "
        "rebuild P")
    assert takeaways.decoding(16, 16, 132, 0.0) == (
        "16 splits → 16 thread blocks on 132 SMs; their merged sums match exactly")
    assert takeaways.decoding(1, 1, 132, 2e-7).startswith("1 split → 1 thread block ")
    assert takeaways.decoding(1, 1, 132, 2e-7).endswith("match to 2e-07")


def _rmse(values: dict) -> pd.DataFrame:
    return pd.DataFrame([(p, v, x) for p, by in values.items() for v, x in by.items()],
                        columns=["preset", "variant", "rmse"])


def test_precision_takeaway_is_computed_from_the_rmse():
    rmse = _rmse({"outliers": {"bf16": 2.3e-4, "FP8 per-tensor": 1.44e-2,
                               "FP8 per-tile + rotation": 8.0e-3}})
    assert takeaways.precision(rmse, "outliers") == (
        "FP8 per-tile + rotation: 8.0e-03 RMSE on outliers inputs, 1.8× lower than "
        "per-tensor (bf16: 2.3e-04)")
    both = _rmse({"normal": {"FP8 per-tensor": 5.0e-3, "FP8 per-tile + rotation": 5.1e-3},
                  "outliers": {"FP8 per-tensor": 1.2e-2, "FP8 per-tile + rotation": 6.0e-3}})
    assert takeaways.precision(both, "normal") == (
        "FP8 per-tile + rotation: 5.1e-03 RMSE on normal inputs, within 5% of per-tensor · "
        "on outliers 6.0e-03, 2.0× lower than per-tensor")
    worse = _rmse({"rising": {"FP8 per-tensor": 1.0e-2, "FP8 per-tile + rotation": 1.5e-2}})
    assert "1.5× higher than per-tensor" in takeaways.precision(worse, "rising")
    assert takeaways.precision(worse, "normal") == ""
