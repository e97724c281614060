"""The classroom lab's question cards without a server: grading (app/core/cards.py: numbers
within a tolerance, choices, sets of tiles, answers that cannot be read), a teacher's link
and the progress line; and each page's cards (app/features/<page>/cards.py) against truth
worked out here from the config, the trace of a NumPy run, or the model."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from app.features.online_softmax.data import row_of
from app.core import cards
from app.core.cards import CATALOG, CHOICE, NONE_FIT, NUMBER, TILES, Card, Truth
from app.features.backward import cards as backward_cards
from app.features.decoding import cards as decoding_cards
from app.features.online_softmax import cards as softmax_cards
from app.features.sram_tiling import cards as sram_cards
from app.features.tile_sizes import cards as tile_cards
from engine.model import iomodel
from engine.model.iomodel import RESERVED_SMEM_PER_BLOCK

H200, T4 = engine.PROFILES["H200"], engine.PROFILES["T4"]


def config(**changes) -> engine.AttentionConfig:
    base = dict(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=64, block_q=64, block_k=64,
                dtype="float32")
    return engine.AttentionConfig(**{**base, **changes})


def traced(cfg: engine.AttentionConfig):
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="numpy", algorithm="flash", trace=True)
    return res, q, k


# ---- grading ---------------------------------------------------------------------------
NUMBER_CARD = Card("sram_tiling.k_reads", "How many?", NUMBER,
                   Truth(16.0, "Because.", "the model", rel_tol=0.01))


@pytest.mark.parametrize("typed, value", [
    ("0.74", 0.74), (" -3 ", -3.0), ("1,024", 1024.0), ("1.5e3", 1500.0), ("3/4", 0.75),
    ("0,74", 0.74), ("\u22122.5", -2.5), ("1 024", 1024.0), ("12,345.5", 12345.5)])
def test_typed_numbers_are_read(typed, value):
    assert cards.parse_number(typed) == pytest.approx(value)


@pytest.mark.parametrize("typed, says", [
    ("", "Type a number first"), (None, "Type a number first"), ("   ", "Type a number first"),
    ("abc", "is not a number"), ("1/0", "is not a number"), ("1.2.3", "is not a number"),
    ("inf", "finite"), ("nan", "finite")])
def test_unreadable_numbers_say_what_to_type(typed, says):
    with pytest.raises(ValueError, match=says):
        cards.parse_number(typed)
    verdict = cards.check(NUMBER_CARD, typed)
    assert not verdict.graded and not verdict.correct and says in verdict.explanation


def test_a_number_is_right_within_its_tolerance_and_the_verdict_explains():
    right = cards.check(NUMBER_CARD, "16.1")
    assert right.graded and right.correct
    assert right.explanation.startswith("**Right.**")
    assert "**16**" in right.explanation and "within the card's tolerance" in right.explanation
    assert "Because." in right.explanation and "the model" in right.explanation
    exact = cards.check(NUMBER_CARD, "16")
    assert exact.correct and "tolerance" not in exact.explanation
    wrong = cards.check(NUMBER_CARD, "17")
    assert wrong.graded and not wrong.correct
    assert wrong.explanation.startswith("**Not quite.**") and "You said 17" in wrong.explanation


CHOICE_CARD = Card("backward.recompute", "What?", CHOICE, Truth("b", "Why.", "where"),
                   options=(("a", "first"), ("b", "second")))


def test_a_choice_is_graded_and_an_empty_one_is_a_message():
    assert cards.check(CHOICE_CARD, "b").correct
    wrong = cards.check(CHOICE_CARD, "a")
    assert not wrong.correct and "You chose “first”" in wrong.explanation
    assert "**second**" in wrong.explanation
    for bad in (None, "", "z"):
        verdict = cards.check(CHOICE_CARD, bad)
        assert not verdict.graded


TILE_CARD = Card("tile_sizes.fit", "Which?", TILES,
                 Truth(frozenset({(16, 16), (16, 32)}), "Why.", "where"),
                 options=((16, 16), (16, 32), (32, 32)))


def test_tiles_are_right_only_as_the_exact_set_and_the_verdict_names_the_gaps():
    assert cards.check(TILE_CARD, [(16, 32), (16, 16)]).correct
    missed = cards.check(TILE_CARD, [(16, 16)])
    assert not missed.correct and "fit but were not picked: 16 × 32" in missed.explanation
    extra = cards.check(TILE_CARD, [(16, 16), (16, 32), (32, 32)])
    assert not extra.correct and "picked but do not fit: 32 × 32" in extra.explanation
    assert not cards.check(TILE_CARD, [NONE_FIT]).correct
    none_fit = Card("tile_sizes.fit", "Which?", TILES, Truth(frozenset(), "Why.", "where"))
    assert cards.check(none_fit, [NONE_FIT]).correct
    for bad in ([], None, [NONE_FIT, (16, 16)]):
        assert not cards.check(TILE_CARD, bad).graded


def test_a_card_without_truth_says_why_and_grades_nothing():
    card = Card("online_softmax.alpha", "Row 3.", NUMBER, None, unavailable="Make seq_k longer.")
    verdict = cards.check(card, "0.5")
    assert not verdict.graded and verdict.explanation == "Make seq_k longer."


def test_a_fingerprint_changes_with_the_question_or_the_truth():
    other = Card(NUMBER_CARD.id, NUMBER_CARD.question, NUMBER, Truth(8.0, "", ""))
    assert NUMBER_CARD.fingerprint() != other.fingerprint()
    assert NUMBER_CARD.fingerprint() == Card(NUMBER_CARD.id, "How many?", NUMBER,
                                             NUMBER_CARD.truth).fingerprint()


# ---- a teacher's link and progress ---------------------------------------------------
def test_a_link_names_known_cards_once_in_its_order_and_reports_unknown_ones():
    assert cards.parse_link("tile_sizes.fit, online_softmax.alpha,tile_sizes.fit") == (
        ("tile_sizes.fit", "online_softmax.alpha"), None)
    ids, problem = cards.parse_link("online_softmax.alpha,nope")
    assert ids == ("online_softmax.alpha",) and "unknown cards nope" in problem
    assert "the others are shown" in problem
    ids, problem = cards.parse_link(",,")
    assert ids == () and "names no card" in problem and "every page's cards" in problem
    assert cards.link_text(ids := ("a.b", "c.d")) == "a.b,c.d"


def test_the_progress_line_counts_the_linked_cards_or_those_answered():
    records = {"tile_sizes.fit": cards.Record(2, True),
               "decoding.blocks": cards.Record(1, False)}
    assert cards.progress_line({}, None) == ""
    assert "**2** cards answered, **1** right" in cards.progress_line(records, None)
    linked = ("tile_sizes.fit", "online_softmax.alpha", "backward.recompute")
    assert "**1 of 3** linked cards answered, **1** right" in cards.progress_line(records,
                                                                                  linked)


# ---- each page's cards ---------------------------------------------------------------
def all_cards(cfg=None) -> list[Card]:
    cfg = cfg or config()
    res, q, k = traced(cfg)
    dcfg = engine.DecodeConfig(batch=1, heads=8, kv_heads=2, seq_k=4096, head_dim=64)
    return [*sram_cards.build(cfg, H200, "teaching"),
            *softmax_cards.build(cfg, row_of(res.trace, cfg, 0, 1, 70), q, k, 0, 1, 70),
            *tile_cards.build(cfg, H200),
            *backward_cards.build(cfg, H200, None),
            *decoding_cards.build(dcfg, H200, dcfg.splits_on(H200.sms))]


def test_the_pages_build_exactly_the_catalogs_cards_each_with_a_truth_at_the_default():
    built = all_cards()
    assert [c.id for c in built] == list(CATALOG)
    for card in built:
        assert card.truth is not None, card.id
        assert card.truth.why and card.truth.source and card.question
        assert card.kind in (NUMBER, CHOICE, TILES)
        if card.kind == CHOICE:
            assert card.truth.value in dict(card.options)


@pytest.mark.parametrize("changes, reads", [
    (dict(seq_q=256), 16), (dict(seq_q=1000, seq_k=300), 63), (dict(seq_q=256, block_q=128), 16)])
def test_k_is_read_once_per_query_tile_of_16_rows(changes, reads):
    card = sram_cards.k_reads_card(config(**changes))
    assert card.truth.value == reads
    assert cards.check(card, str(reads)).correct and not cards.check(card, str(reads + 1)).correct


def test_causal_reads_k_about_half_as_often():
    card = sram_cards.k_reads_card(config(seq_q=1024, seq_k=1024, causal=True))
    # query tile i (16 rows) loads the 64-key tiles up to its diagonal: ⌈16(i + 1) / 64⌉ of
    # them, so K goes by 4 · (1 + 2 + … + 16) · 64 / 1024 = 34 times, against Tr = 64
    assert card.truth.value == 34
    assert "diagonal" in card.truth.why


@pytest.mark.parametrize("cfg, gpu", [(config(), H200), (config(dtype="float16"), T4),
                                      (config(head_dim=128, block_q=128, block_k=128), H200)])
def test_blocks_per_sm_is_shared_memory_over_the_block_capped(cfg, gpu):
    card = sram_cards.blocks_per_sm_card(cfg, gpu, "teaching")
    total = iomodel.smem_bytes(cfg)
    want = (min(gpu.smem_per_sm // (total + RESERVED_SMEM_PER_BLOCK), gpu.max_blocks_per_sm)
            if total <= gpu.smem_per_block_optin else 0)
    assert card.truth.value == want
    if want == 0:
        assert "cannot launch" in card.truth.why


def test_alpha_is_the_traces_rescale_exp_of_the_max_moving():
    cfg = config(inputs="rising", seq_q=128, seq_k=512)
    res, q, k = traced(cfg)
    card = softmax_cards.alpha_card(cfg, row_of(res.trace, cfg, 0, 0, 70), 0, 0, 70)
    j = softmax_cards.alpha_tile(cfg, row_of(res.trace, cfg, 0, 0, 70))
    m = res.trace.running_max[0, 0, 70].astype(np.float64)
    t = res.trace.tile_max[0, 0, 70].astype(np.float64)
    want = math.exp(m[j - 1] - max(m[j - 1], t[j]))
    assert want < 1                                   # the rising preset moves the max
    assert card.truth.value == pytest.approx(want, rel=1e-5)
    assert f"{m[j - 1]:.4f}" in card.question and f"{t[j]:.4f}" in card.question
    assert cards.check(card, f"{want:.4f}").correct
    assert not cards.check(card, "1").correct


def test_alpha_needs_two_key_tiles():
    cfg = config(seq_k=64)
    res, q, k = traced(cfg)
    card = softmax_cards.alpha_card(cfg, row_of(res.trace, cfg, 0, 0, 3), 0, 0, 3)
    assert card.truth is None and "fewer than two key tiles" in card.unavailable


def test_alpha_skips_key_tiles_the_causal_mask_hides_from_the_row():
    cfg = config(causal=True)
    res, q, k = traced(cfg)
    assert softmax_cards.alpha_tile(cfg, row_of(res.trace, cfg, 0, 0, 10)) is None     # only tile 0
    j = softmax_cards.alpha_tile(cfg, row_of(res.trace, cfg, 0, 0, 200))
    assert 1 <= j <= 200 // 64


@pytest.mark.parametrize("scale, dtype, overflows", [(1.0, "float32", "no"),
                                                     (20.0, "float16", "yes"),
                                                     (20.0, "bfloat16", "no")])
def test_overflow_follows_the_largest_score_against_the_dtypes_limit(scale, dtype, overflows):
    """The card asks in the config's own dtype: float16 overflows past e^11.09, bfloat16 and
    float32 only past e^88.72."""
    cfg = config(logit_scale=scale, dtype=dtype)
    res, q, k = traced(cfg)
    card = softmax_cards.overflow_card(cfg, q, k, 0, 0, 5)
    assert card.truth.value == overflows
    assert cards.check(card, overflows).correct
    assert f"in {dtype}" in card.question
    assert ("float16" in card.question.replace("bfloat16", "")) == (dtype == "float16")


@pytest.mark.parametrize("cfg, gpu", [(config(), H200), (config(head_dim=128), T4),
                                      (config(head_dim=256, dtype="float32"), T4)])
def test_the_tiles_that_fit_are_those_whose_bytes_are_under_the_block_limit(cfg, gpu):
    card = tile_cards.fit_card(cfg, gpu)
    d, e = cfg.head_dim, cfg.itemsize
    by_hand = {(bq, bk) for bq in engine.BLOCK_SIZES for bk in engine.BLOCK_SIZES
               if (bq + 2 * bk) * d * e + 4 * (bq * bk + bq * d + 2 * bq)
               <= gpu.smem_per_block_optin}
    assert card.truth.value == by_hand
    assert set(card.options) == {(bq, bk) for bq in engine.BLOCK_SIZES
                                 for bk in engine.BLOCK_SIZES}
    assert cards.check(card, sorted(by_hand) or [NONE_FIT]).correct


def test_the_backward_recomputes_p_from_lse_and_the_trace_backs_it():
    cfg = config(seq_q=128, seq_k=128)
    q, k, v = engine.make_inputs(cfg)
    grads = engine.run_backward(cfg, q, k, v, engine.make_dout(cfg), backend="numpy",
                                algorithm="flash", trace=True)
    card = backward_cards.recompute_card(cfg, H200, grads.trace)
    assert card.truth.value == "p_from_lse" and "sums to 1" in card.truth.why
    assert not cards.check(card, "p_from_hbm").correct and cards.check(card, "p_from_lse").correct


@pytest.mark.parametrize("causal", [False, True])
def test_rebuilding_p_costs_one_more_qk_product(causal):
    cfg = config(batch=2, heads=3, seq_q=512, seq_k=1024, causal=causal)
    card = backward_cards.extra_flops_card(cfg, H200)
    want = 2 * 2 * 3 * 512 * 1024 * 64 / 1e9 / (2 if causal else 1)
    assert card.truth.value == pytest.approx(want)
    assert cards.check(card, f"{want:.3f}").correct
    assert not cards.check(card, f"{2 * want:.3f}").correct     # forgot the halving, or x2


def decode(**changes) -> engine.DecodeConfig:
    return engine.DecodeConfig(**{**dict(batch=1, heads=8, kv_heads=2, seq_k=4096,
                                         head_dim=64), **changes})


@pytest.mark.parametrize("dcfg, reason", [
    (decode(), "fill"),                                   # 2 blocks on 132 SMs: auto splits
    (decode(num_splits=8), "fill"),                       # chosen, and still fills SMs
    (decode(batch=64, heads=32, kv_heads=8), "none"),    # 512 blocks: auto keeps one split
    (decode(seq_k=300), "none"),                          # too short to split
    (decode(batch=64, heads=32, kv_heads=8, num_splits=8), "by_hand"),
    (decode(num_splits=1), "none")])
def test_why_decoding_splits_follows_the_model(dcfg, reason):
    splits = dcfg.splits_on(H200.sms)
    card = decoding_cards.why_split_card(dcfg, splits, H200)
    assert card.truth.value == reason
    assert (splits > 1) == (reason != "none")
    assert cards.check(card, reason).correct and not cards.check(card, "smem").correct
    if reason == "fill":
        assert (iomodel.decode_model_ms(dcfg, splits, H200)
                < iomodel.decode_model_ms(dcfg, 1, H200))


def test_the_decode_step_launches_a_block_per_sequence_kv_head_and_split():
    dcfg = decode(batch=3, heads=8, kv_heads=4, num_splits=4)
    card = decoding_cards.blocks_card(dcfg, 4)
    assert card.truth.value == 3 * 4 * 4
    assert cards.check(card, "48").correct and not cards.check(card, "96").correct
