"""The SRAM tiling page's question cards (app/core/cards.py), their truth from the IO model
(engine.model.iomodel) for the sidebar's config and GPU profile."""
from __future__ import annotations

import engine
from app.core import card_view
from app.core.cards import NUMBER, Card, Truth, number_text
from engine.model.units import format_bytes
from engine.model import iomodel
from engine.model.iomodel import RESERVED_SMEM_PER_BLOCK, format_bytes

SMALL_BLOCK_Q = 16


def k_reads_card(cfg: engine.AttentionConfig) -> Card:
    """How many times over K is read from HBM in FlashAttention-2's order at block_q = 16."""
    cid = "sram_tiling.k_reads"
    small = cfg.with_(block_q=SMALL_BLOCK_Q)
    k_bytes = cfg.bh * cfg.seq_k * cfg.head_dim * cfg.itemsize
    times = iomodel.flash_hbm(small).parts["read K"] / k_bytes
    now = iomodel.flash_hbm(cfg).parts["read K"] / k_bytes
    question = (
        f"In FlashAttention-2's order (query tiles outer), with **block_q = {SMALL_BLOCK_Q}** "
        f"and every other setting as in the sidebar (N_q = {cfg.seq_q:,}, N_k = "
        f"{cfg.seq_k:,}{', causal' if cfg.causal else ''}), how many times over is K read "
        f"from HBM? (Bytes of K read ÷ bytes of K, every load counted as one from HBM. Right "
        f"within 1%.)")
    tr = small.Tr
    if cfg.causal:
        how = (f"Query tile i reads only the key tiles up to its diagonal, so the "
               f"Tr = ⌈{cfg.seq_q:,} / {SMALL_BLOCK_Q}⌉ = {tr:,} query tiles read K "
               f"{number_text(times)} times over, about half of {tr:,}.")
    else:
        how = (f"Every query tile reads every key tile K_j once, and there are Tr = "
               f"⌈N_q / block_q⌉ = ⌈{cfg.seq_q:,} / {SMALL_BLOCK_Q}⌉ = {tr:,} query tiles: K "
               f"is read {tr:,} times.")
    why = (f"{how} That is {format_bytes(times * k_bytes)} for a K of "
           f"{format_bytes(k_bytes)}; at the sidebar's block_q = {cfg.block_q} it is "
           f"{number_text(now)} times. block_k does not change it: it only cuts the same keys "
           f"into more or fewer tiles. (On a GPU, query tiles running at the same time often "
           f"find K_j in the L2 cache, so HBM sees fewer bytes.)")
    source = ("the IO model, engine.model.iomodel.flash_hbm: `read K` = B·H·(key rows each "
              "query tile loads, summed)·d·bytes; the loop's HBM bars above count the same.")
    return Card(cid, question, NUMBER, Truth(times, why, source, rel_tol=0.01))


def blocks_per_sm_card(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
                       layout: str) -> Card:
    """How many thread blocks of this config share one SM, by shared memory alone."""
    budget = iomodel.smem_budget(cfg, gpu, layout)
    question = (
        f"One thread block of this config needs **{format_bytes(budget.total)}** of shared memory for "
        f"its tiles ({layout} layout), and the CUDA runtime reserves "
        f"{format_bytes(RESERVED_SMEM_PER_BLOCK)} more per block. {gpu.name} has "
        f"**{format_bytes(gpu.smem_per_sm)}** of shared memory per SM, at most "
        f"{format_bytes(gpu.smem_per_block_optin)} for one block, and runs at most "
        f"{gpu.max_blocks_per_sm} blocks on an SM. Counting shared memory alone, how many "
        f"thread blocks can share one SM?")
    per_block = budget.total + RESERVED_SMEM_PER_BLOCK
    if not budget.fits:
        why = (f"None: {format_bytes(budget.total)} is more than the {format_bytes(budget.limit)} one block may "
               f"use, so the GPU cannot launch this config at all.")
    else:
        fit = gpu.smem_per_sm // per_block
        why = (f"⌊{number_text(gpu.smem_per_sm)} / ({number_text(budget.total)} + "
               f"{number_text(RESERVED_SMEM_PER_BLOCK)})⌋ = {fit} blocks"
               + (f", capped at the {gpu.max_blocks_per_sm} blocks an SM runs"
                  if fit > gpu.max_blocks_per_sm else "")
               + f": **{budget.blocks_per_sm}**. Registers and threads per block can lower "
                 f"it further; the waves chart above uses this figure.")
    source = (f"engine.model.iomodel.smem_budget for the {gpu.name} profile (the shared-memory "
              f"chart and the caption under it on this page).")
    return Card("sram_tiling.blocks_per_sm", question, NUMBER,
                Truth(budget.blocks_per_sm, why, source))


def build(cfg: engine.AttentionConfig, gpu: engine.GpuProfile, layout: str) -> list[Card]:
    return [k_reads_card(cfg), blocks_per_sm_card(cfg, gpu, layout)]


def show(cfg: engine.AttentionConfig, gpu: engine.GpuProfile, layout: str) -> None:
    """The page's cards, at the bottom of the page."""
    card_view.show(build(cfg, gpu, layout))
