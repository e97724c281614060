"""The Tile sizes page's question card (app/core/cards.py): which tile shapes fit the shared
memory of the sidebar's GPU profile, from the IO model (engine.model.iomodel.smem_budget)."""
from __future__ import annotations

import engine
from app.core import card_view
from app.core.cards import TILES, Card, Truth, tile_text
from engine.model.units import format_bytes
from engine.model import iomodel

SHAPES = tuple((bq, bk) for bq in engine.BLOCK_SIZES for bk in engine.BLOCK_SIZES)


def fit_card(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> Card:
    """Which (block_q, block_k) of the teaching kernel fit one thread block's shared memory."""
    need = {shape: iomodel.smem_budget(cfg.with_(block_q=shape[0], block_k=shape[1]), gpu)
            for shape in SHAPES}
    fits = frozenset(shape for shape, budget in need.items() if budget.fits)
    limit = gpu.smem_per_block_optin
    e = cfg.itemsize
    question = (
        f"For d = {cfg.head_dim} in {cfg.dtype}, which tile shapes **block_q × block_k** of "
        f"the teaching kernel fit the shared memory one thread block may use on "
        f"**{gpu.name}** ({format_bytes(limit)})? Pick every one that fits.")
    largest = max(fits, key=lambda s: (s[0] * s[1], s[0]), default=None)
    too_big = [s for s in SHAPES if s not in fits]
    smallest_miss = min(too_big, key=lambda s: need[s].total, default=None)
    examples = "; ".join(
        f"{tile_text(s)} needs {format_bytes(need[s].total)}" for s in (largest, smallest_miss) if s)
    why = (f"The teaching kernel keeps Q_i, K_j and V_j in {cfg.dtype} ({e} bytes) and S_ij, "
           f"O_i, m_i and l_i in float32: (block_q + 2·block_k)·d·{e} + 4·(block_q·block_k + "
           f"block_q·d + 2·block_q) bytes, against {gpu.name}'s {format_bytes(limit)}. {examples}.")
    source = (f"engine.model.iomodel.smem_budget for the {gpu.name} profile (the sidebar's), "
              f"the 'Shared memory per block' heatmap above.")
    return Card("tile_sizes.fit", question, TILES, Truth(fits, why, source), options=SHAPES)


def build(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> list[Card]:
    return [fit_card(cfg, gpu)]


def show(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> None:
    """The page's card, at the bottom of the page."""
    card_view.show(build(cfg, gpu))
