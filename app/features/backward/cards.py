"""The Backward pass page's question cards (app/core/cards.py): what the backward pass
recomputes and from what (checked against the run's BackwardTrace), and what that costs
(the model: engine.model.iomodel and the config's FLOPs)."""
from __future__ import annotations

import engine
from app.core import card_view
from app.core.cards import CHOICE, NUMBER, Card, Truth, number_text
from app.features.backward.data import price, rowsum_gap
from engine.model.iomodel import format_bytes

RECOMPUTE_OPTIONS = (
    ("p_from_hbm", "Nothing: it reads back the N×N matrix P that the forward wrote to HBM"),
    ("forward", "The whole forward pass, O included, from Q, K and V"),
    ("p_from_lse", "Each tile P_ij = exp(S_ij − lse_i), from Q_i, K_j and the row "
                   "log-sum-exp lse_i that the forward saved"),
    ("max_sum", "The running max and sum m_i, l_i, by running the online softmax over the "
                "key tiles again"),
)


def recompute_card(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
                   trace: engine.BackwardTrace | None) -> Card:
    cost = price(cfg, gpu)
    checked = (f" In this run every query row's rebuilt P sums to 1 over the key tiles within "
               f"{rowsum_gap(trace):.1e} (the trace), though no tile knew the others."
               if trace is not None else "")
    why = ("The forward keeps only O and lse: N numbers per row, not the N² of P. Each block "
           "rebuilds S_ij = scale·Q_i K_jᵀ and P_ij = exp(S_ij − lse_i) on chip; no max or "
           "sum has to be tracked again, because lse_i = m_i + log l_i already holds the "
           f"whole row's.{checked} The price: {cost.recompute_flops / 1e9:.3g} GFLOP more "
           f"(one more QKᵀ), to save {format_bytes(max(cost.bytes_saved, 0))} of HBM traffic "
           f"for this config.")
    source = ("the run's BackwardTrace (`p_rowsum`, the 'P rebuilt from lse alone' chart) and "
              "engine.model.iomodel's backward traffic (the price chart on this page).")
    return Card("backward.recompute",
                "The forward pass kept O and one number per query row, lse. What does the "
                "backward pass recompute, and from what?",
                CHOICE, Truth("p_from_lse", why, source), options=RECOMPUTE_OPTIONS)


def extra_flops_card(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> Card:
    extra = price(cfg, gpu).recompute_flops
    question = (
        f"Rebuilding P costs one more S = QKᵀ. For this config (B = {cfg.batch}, H = "
        f"{cfg.heads}, N_q = {cfg.seq_q:,}, N_k = {cfg.seq_k:,}, d = {cfg.head_dim}"
        f"{', causal' if cfg.causal else ''}), how many **GFLOP** (10⁹ floating-point "
        f"operations) does it add? (A multiply and an add count as two. Right within 2%.)")
    full = 2 * cfg.bh * cfg.seq_q * cfg.seq_k * cfg.head_dim
    why = (f"QKᵀ is B·H·N_q·N_k dot products of length d, each d multiplies and d adds: "
           f"2·{cfg.batch}·{cfg.heads}·{cfg.seq_q:,}·{cfg.seq_k:,}·{cfg.head_dim} = "
           f"{number_text(full)} FLOP"
           + (", halved because the causal mask skips half the scores" if cfg.causal else "")
           + f": **{extra / 1e9:.4g} GFLOP**. At {gpu.name}'s {gpu.fp16_tflops:g} TFLOP/s "
             f"(dense 16-bit) that is at least {extra / (gpu.fp16_tflops * 1e12) * 1e6:.3g} µs.")
    source = ("engine.model: the config's FLOPs (4·B·H·N_q·N_k·d, halved when causal) over "
              "two, the page's 'extra FLOPs to rebuild P'.")
    return Card("backward.extra_flops", question, NUMBER,
                Truth(extra / 1e9, why, source, rel_tol=0.02, text=f"{extra / 1e9:.4g}"))


def build(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
          grads: engine.Gradients | None) -> list[Card]:
    trace = grads.trace if grads is not None else None
    return [recompute_card(cfg, gpu, trace), extra_flops_card(cfg, gpu)]


def show(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
         grads: engine.Gradients | None) -> None:
    """The page's cards, at the bottom of the page."""
    card_view.show(build(cfg, gpu, grads))
