"""Tables for the SRAM-tiling page: the loop over tiles in the kernel's order with the HBM bytes
moved so far, the shared-memory budget, and thread blocks in waves over the SMs."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

import engine
from engine import iomodel
from engine.cpu.forward import processed_tiles

MAX_CELLS = 4096     # grid cells drawn; bigger grids group g×g tiles into one cell
MAX_WAVES = 100      # waves drawn in the SM view (× SMs marks)


@dataclass(frozen=True)
class LoopView:
    tiles: pd.DataFrame   # one row per cell: row, col, order (-1: causally skipped), label
    steps: pd.DataFrame   # one row per loop step: order, row, col, HBM bytes so far, label
    group: int            # tiles per cell side (1 unless the grid is large)
    rows: int             # cells down (query tiles / group)
    cols: int             # cells across (key tiles / group)


def tile_rows(n: int, block: int) -> np.ndarray:
    """Rows in each tile of a sequence of length n (the last one may be short)."""
    starts = np.arange(0, n, block)
    return np.minimum(starts + block, n) - starts


def tile_bytes(cfg: engine.AttentionConfig) -> tuple[np.ndarray, np.ndarray]:
    """(Tr, Tc) HBM bytes read and written at each tile step, over all batch·heads.

    Tile (i, j) reads K_j and V_j; the first step of query tile i also reads Q_i, its last
    writes O_i and the row log-sum-exp. The sums equal iomodel.flash_hbm(cfg).
    """
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    proc = processed_tiles(cfg)
    q_rows, k_rows = tile_rows(cfg.seq_q, cfg.block_q), tile_rows(cfg.seq_k, cfg.block_k)
    read = proc * (2 * bh * k_rows * d * e)[None, :].astype(np.int64)
    read[:, 0] += bh * q_rows * d * e
    written = np.zeros_like(read)
    last = proc.shape[1] - 1 - np.argmax(proc[:, ::-1], axis=1)
    written[np.arange(cfg.Tr), last] = bh * q_rows * (d * e + 4)
    return read, written


def _group_sum(a: np.ndarray, g: int) -> np.ndarray:
    R, C = -(-a.shape[0] // g), -(-a.shape[1] // g)
    padded = np.zeros((R * g, C * g), dtype=a.dtype)
    padded[:a.shape[0], :a.shape[1]] = a
    return padded.reshape(R, g, C, g).sum(axis=(1, 3))


def loop_view(cfg: engine.AttentionConfig) -> LoopView:
    g = 1 if cfg.Tr * cfg.Tc <= MAX_CELLS else math.ceil(math.sqrt(cfg.Tr * cfg.Tc / MAX_CELLS))
    proc = _group_sum(processed_tiles(cfg).astype(np.int64), g) > 0
    read, written = (_group_sum(x, g) for x in tile_bytes(cfg))
    R, C = proc.shape
    order = np.where(proc, np.cumsum(proc.ravel()).reshape(R, C) - 1, -1)
    row, col = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    label = np.array([_cell_label(r, c, g, cfg) for r, c in zip(row.ravel(), col.ravel())])
    tiles = pd.DataFrame({"row": row.ravel(), "col": col.ravel(), "order": order.ravel(),
                          "label": label})
    sel = proc.ravel()
    naive = iomodel.naive_hbm(cfg)
    steps = pd.DataFrame({
        "order": order.ravel()[sel], "row": row.ravel()[sel], "col": col.ravel()[sel],
        "flash_read": np.cumsum(read.ravel()[sel]),
        "flash_written": np.cumsum(written.ravel()[sel]),
        "label": label[sel]})
    steps["naive_read"] = naive.read
    steps["naive_written"] = naive.written
    return LoopView(tiles=tiles, steps=steps, group=g, rows=R, cols=C)


def _cell_label(r: int, c: int, g: int, cfg: engine.AttentionConfig) -> str:
    if g == 1:
        return (f"S_{r},{c}: queries {r * cfg.block_q}–{min((r + 1) * cfg.block_q, cfg.seq_q) - 1}"
                f", keys {c * cfg.block_k}–{min((c + 1) * cfg.block_k, cfg.seq_k) - 1}")
    return (f"query tiles {r * g}–{min((r + 1) * g, cfg.Tr) - 1}, "
            f"key tiles {c * g}–{min((c + 1) * g, cfg.Tc) - 1}")


def smem_table(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> pd.DataFrame:
    """Bytes of each tile held in shared memory by one thread block, with the block's limit."""
    budget = iomodel.smem_budget(cfg, gpu)
    return pd.DataFrame({"part": list(budget.parts), "bytes": list(budget.parts.values()),
                         "limit": budget.limit, "fits": budget.fits})


@dataclass(frozen=True)
class Waves:
    table: pd.DataFrame   # wave, sm, blocks (thread blocks resident on that SM in that wave)
    blocks: int
    per_sm: int
    waves: int
    shown: int


def waves(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> Waves:
    """Thread blocks (one per batch·head and query tile) filling the SMs wave after wave,
    with as many resident per SM as shared memory allows (a model: the hardware scheduler
    decides the real placement, which the Kernel page shows when recorded)."""
    per_sm = iomodel.smem_budget(cfg, gpu).blocks_per_sm
    blocks = cfg.bh * cfg.Tr
    if per_sm == 0:
        return Waves(pd.DataFrame({"wave": [], "sm": [], "blocks": []}), blocks, 0, 0, 0)
    slots = gpu.sms * per_sm
    n_waves = -(-blocks // slots)
    shown = min(n_waves, MAX_WAVES)
    w = np.arange(shown)[:, None]
    s = np.arange(gpu.sms)[None, :]
    in_wave = np.minimum(slots, blocks - w * slots)
    count = in_wave // gpu.sms + (s < in_wave % gpu.sms)
    table = pd.DataFrame({"wave": np.repeat(np.arange(shown), gpu.sms),
                          "sm": np.tile(np.arange(gpu.sms), shown),
                          "blocks": count.ravel()})
    return Waves(table[table.blocks > 0].reset_index(drop=True), blocks, per_sm, n_waves, shown)
