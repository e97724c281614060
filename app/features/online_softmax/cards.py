"""The Online softmax page's question cards (app/core/cards.py), their truth taken from the
run the page shows (its trace, or the emulation of the one row it draws), for that row."""
from __future__ import annotations

import math

import numpy as np

import engine
from app.core import card_view
from app.core.cards import CHOICE, NUMBER, Card, Truth
from app.features.online_softmax.data import RowRun, exp_overflow
from engine.model.tiles import key_rows


def alpha_tile(cfg: engine.AttentionConfig, run: RowRun) -> int | None:
    """The key tile j ≥ 1 the α card asks about for row r: the first whose max moved the
    running max (α < 1), else the first the row sees after one it saw; None when the row
    sees fewer than two key tiles."""
    ran, m, t = run.processed, run.running_max, run.tile_max
    seen = [j for j in range(1, cfg.Tc)
            if ran[j] and math.isfinite(float(m[j - 1])) and math.isfinite(float(t[j]))]
    moved = [j for j in seen if run.rescale[j] < 1]
    return (moved or seen or [None])[0]


def alpha_card(cfg: engine.AttentionConfig, run: RowRun, b: int, h: int, r: int) -> Card:
    """Predict the rescale factor α of row r at one key tile, from the running max before it
    and the tile's max (both from the row's run: the trace, or the row's emulation)."""
    cid = "online_softmax.alpha"
    j = alpha_tile(cfg, run)
    if j is None:
        return Card(cid, f"Query row **{r}** (batch {b}, head {h}).", NUMBER, None,
                    unavailable=f"Row {r} sees fewer than two key tiles here, so nothing is "
                    f"ever rescaled: make seq_k longer than block_k ({cfg.block_k}), or "
                    f"choose a later query row of a causal config.")
    m_old, t_j = float(run.running_max[j - 1]), float(run.tile_max[j])
    m_new, alpha = float(run.running_max[j]), float(run.rescale[j])
    k0, k1 = key_rows(cfg, j)
    question = (
        f"Query row **{r}** (batch {b}, head {h}). After key tile {j - 1} its running max is "
        f"m = **{m_old:.4f}**; key tile **{j}** (keys {k0}–{k1 - 1}) has the largest score "
        f"**{t_j:.4f}**. Predict the rescale factor **α** by which the kernel multiplies the "
        f"running sum l and the accumulator O at key tile {j}. (Right within 1%.)")
    moved = alpha < 1
    why = (f"The new running max is max(m, tile max) = max({m_old:.4f}, {t_j:.4f}) = "
           f"{m_new:.4f}, so α = exp(m_old − m_new) = exp({m_old - m_new:.4f}) = "
           f"{alpha:.4g}. "
           + ("α < 1: the max moved, so the sum and output gathered so far were weighted by "
              "exp(s − m_old), too large by exp(m_new − m_old), and shrink to the new max."
              if moved else
              "α = 1: the tile's max is below the running max, so nothing gathered so far "
              "is rescaled."))
    source = (f"the run this page shows (its trace, or on the CPU the emulation of this row's "
              f"loop): `rescale` of row {r} at key tile {j}, "
              f"beside `running_max` and `tile_max` (the statistics chart above draws all "
              f"three).")
    return Card(cid, question, NUMBER,
                Truth(alpha, why, source, rel_tol=0.01, abs_tol=0.002, text=f"{alpha:.4g}"))


def overflow_options(dtype: str) -> tuple:
    top = "65504" if dtype == "float16" else "about 3.4e38"
    return (("yes", f"Yes: at least one exp(s) is inf in {dtype}"),
            ("no", f"No: every exp(s) stays below {top}"))


def overflow_card(cfg: engine.AttentionConfig, q, k, b: int, h: int, r: int) -> Card:
    """Would exp(s) overflow the config's own dtype for row r without subtracting the max
    (real arithmetic in that dtype on the row's scores)?"""
    dt = cfg.dtype
    o = exp_overflow(cfg, q, k, b, h, r, dt)
    top = "65504" if dt == "float16" else "about 3.4e38"
    question = (f"Query row **{r}**: its largest score is **{o.max_score:.3f}** over "
                f"{o.visible:,} visible keys. {dt}'s largest number is {top} = "
                f"e^{o.limit:.2f}. Computing exp(s) in {dt} *without* subtracting the max, "
                f"does any entry overflow?")
    truth = "yes" if o.naive_inf else "no"
    why = (f"exp(s) overflows {dt} exactly when s > {o.limit:.2f}. "
           + (f"{o.max_score:.3f} is above it: {o.naive_inf} of the row's exp(s) are inf, "
              f"and softmax would return NaN. With the max subtracted every exponent is ≤ 0, "
              f"so exp stays ≤ 1: {o.safe_inf} inf."
              if o.naive_inf else
              f"{o.max_score:.3f} is below it, so nothing overflows"
              + (f"; scores {o.overflow_at:.2f}× larger would (raise the logit scale to "
                 f"see it)." if np.isfinite(o.overflow_at) else ".")
              + " Subtracting the max keeps every exponent ≤ 0 whatever the scores."))
    source = (f"this row's scores recomputed from the run's inputs and exp taken in real "
              f"{dt} arithmetic (the overflow section of this page).")
    return Card("online_softmax.overflow", question, CHOICE, Truth(truth, why, source),
                options=overflow_options(dt))


def build(cfg: engine.AttentionConfig, run: RowRun, q, k, b: int, h: int,
          r: int) -> list[Card]:
    return [alpha_card(cfg, run, b, h, r), overflow_card(cfg, q, k, b, h, r)]


def show(cfg: engine.AttentionConfig, run: RowRun, q, k, b: int, h: int, r: int) -> None:
    """The page's cards, at the bottom of the page."""
    card_view.show(build(cfg, run, q, k, b, h, r))
