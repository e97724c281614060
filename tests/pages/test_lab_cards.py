"""The classroom lab through AppTest: on each page with cards a student answers a card wrong
and right (and unreadably) and sees the verdict; progress shows on the page and in the
sidebar; a teacher's link shows only its cards, keeps them in the URL and reports unknown
ones. Nothing here reaches the server's storage: progress is session state."""
from __future__ import annotations

import math
import re

import pytest

import engine
from app.core.card_view import PROGRESS_KEY, answer_key, check_key
from app.core.cards import CARDS_PARAM, CATALOG, NONE_FIT
from apptest_helpers import assert_clean, open_page, url
from engine.model import iomodel

H200 = engine.PROFILES["H200"]     # the sidebar's default profile


def answer(at, card_id: str, value):
    """Type, choose or pick `value` for a card and press its Check."""
    key = f"lab_{card_id}_answer"
    if any(w.key == key for w in at.text_input):
        at.text_input(key=key).input(value)
    elif any(w.key == key for w in at.radio):
        at.radio(key=key).set_value(value)
    else:
        at.multiselect(key=key).set_value(value)
    at.button(key=f"lab_{card_id}_check").click().run()
    assert_clean(at)
    return at


def verdicts(at) -> tuple[list[str], list[str], list[str]]:
    """(right, wrong, unreadable) verdicts on the page."""
    return ([s.value for s in at.main.success], [e.value for e in at.main.error],
            [w.value for w in at.main.warning])


def lab_cards(at) -> list[str]:
    """The card ids whose Check buttons the page draws, in order."""
    return [b.key[len("lab_"):-len("_check")] for b in at.main.button
            if b.key and b.key.startswith("lab_") and b.key.endswith("_check")]


def fit_on_h200() -> list:
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=64)
    return [(bq, bk) for bq in engine.BLOCK_SIZES for bk in engine.BLOCK_SIZES
            if iomodel.smem_budget(cfg.with_(block_q=bq, block_k=bk), H200).fits]


# page, the card answered, a wrong answer, the right one worked out from the default config
CASES = {
    "sram_tiling": ("sram_tiling.k_reads", "3", str(math.ceil(256 / 16))),
    "tile_sizes": ("tile_sizes.fit", [(128, 128), (8, 8)], None),      # right: fit_on_h200()
    "backward": ("backward.recompute", "p_from_hbm", "p_from_lse"),
    # heads 2 share one KV head by default: 1 block on 132 SMs, so auto splits fill them
    "decoding": ("decoding.why_split", "smem", "fill"),
}


@pytest.mark.parametrize("page", sorted(CASES))
def test_a_student_answers_a_card_wrong_then_right(page):
    card_id, wrong, right = CASES[page]
    right = fit_on_h200() if right is None else right
    at = open_page(page)
    assert_clean(at)
    assert any(h.value.startswith("Classroom lab") for h in at.main.subheader)
    assert card_id in lab_cards(at)
    assert not verdicts(at)[0] and not verdicts(at)[1]
    answer(at, card_id, wrong)
    ok, bad, _ = verdicts(at)
    assert not ok and len(bad) == 1 and bad[0].startswith("**Not quite.**")
    assert "Where this comes from:" in bad[0]
    answer(at, card_id, right)
    ok, bad, _ = verdicts(at)
    assert len(ok) == 1 and ok[0].startswith("**Right.**") and not bad
    assert any("**1** card answered, **1** right" in m.value for m in at.main.markdown)
    assert any("**1** card answered, **1** right" in c.value for c in at.sidebar.caption)
    assert at.session_state[PROGRESS_KEY][card_id].attempts == 2


def test_the_alpha_card_is_graded_from_the_trace_and_unreadable_answers_are_messages():
    at = open_page("online_softmax", inputs="rising")
    card = "online_softmax.alpha"
    for typed, says in (("", "Type a number first"), ("abc", "is not a number")):
        answer(at, card, typed)
        assert any(says in w for w in verdicts(at)[2])
        assert PROGRESS_KEY not in at.session_state or card not in at.session_state[PROGRESS_KEY]
    answer(at, card, "2")                             # α is never above 1
    wrong = verdicts(at)[1][0]
    true = float(re.search(r"the true value is \*\*([-0-9.e]+)\*\*", wrong).group(1))
    assert 0 < true < 1 and "`rescale` of row 69" in wrong
    answer(at, card, f"{true:.4g}")
    assert verdicts(at)[0] and not verdicts(at)[1]
    # another row asks another question: the old verdict is not shown as this one's
    at.number_input(key="sm_row").set_value(200).run()
    assert_clean(at)
    assert not verdicts(at)[0]
    assert any("for another config or row" in c.value for c in at.main.caption)


def test_a_choice_card_without_a_choice_is_a_message():
    at = open_page("online_softmax")
    answer(at, "online_softmax.overflow", None)
    assert any("Choose one of the answers first" in w for w in verdicts(at)[2])


def test_a_teacher_link_shows_only_its_cards_on_their_pages_and_stays_in_the_url():
    linked = "online_softmax.alpha,tile_sizes.fit"
    at = open_page("online_softmax", heads=4, cards=linked)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert lab_cards(at) == ["online_softmax.alpha"]
    assert url(at)[CARDS_PARAM] == linked and url(at)["heads"] == "4"
    assert not any(e.label.startswith("For teachers") for e in at.main.expander)
    assert any("**0 of 2** linked cards answered" in c.value for c in at.sidebar.caption)
    assert [p.label for p in at.sidebar.get("page_link")] == [
        "Online softmax: 0 of 1 answered", "Tile sizes: 0 of 1 answered"]
    at.switch_page("features/tile_sizes/page.py").run()
    assert_clean(at)
    assert lab_cards(at) == ["tile_sizes.fit"]
    answer(at, "tile_sizes.fit", [NONE_FIT])
    assert any("**1 of 2** linked cards answered, **0** right" in m.value
               for m in at.main.markdown)
    at.switch_page("features/sram_tiling/page.py").run()       # no linked card here
    assert_clean(at)
    assert lab_cards(at) == []
    assert not any(h.value.startswith("Classroom lab") for h in at.main.subheader)
    assert url(at)[CARDS_PARAM] == linked


def test_a_link_with_unknown_cards_says_so_and_shows_the_known_ones():
    at = open_page("backward", cards="backward.extra_flops,nope")
    assert_clean(at)
    assert any("unknown cards nope" in e.value for e in at.error)
    assert lab_cards(at) == ["backward.extra_flops"]
    every = open_page("backward", cards="nope")
    assert lab_cards(every) == [i for i in CATALOG if i.startswith("backward.")]


def test_without_a_link_a_page_offers_the_teacher_a_link_with_its_config():
    at = open_page("decoding", dec_seq_k=8192)
    assert lab_cards(at) == ["decoding.why_split", "decoding.blocks"]
    assert not any("cards=" in c.value for c in at.main.code)    # built only when asked
    at.toggle(key="lab_teacher_decoding").set_value(True).run()
    assert_clean(at)
    link = at.main.code[-1].value
    assert link.startswith("/decoding?") and "dec_seq_k=8192" in link
    assert f"{CARDS_PARAM}=decoding.why_split,decoding.blocks" in link


def test_talk_mode_leaves_the_cards_out_unless_a_link_names_some():
    assert lab_cards(open_page("sram_tiling", talk="true")) == []
    assert lab_cards(open_page("sram_tiling", talk="true",
                               cards="sram_tiling.k_reads")) == ["sram_tiling.k_reads"]
