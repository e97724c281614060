"""Tables for the SRAM-tiling page: the loop over tiles in the kernel's order with the HBM bytes
moved so far, the shared-memory budget, and thread blocks in waves over the SMs."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

import engine
from app.core.memo import by_shape
from app.core.player.component import Animation, loop_animation
from engine.model import iomodel
from engine.model.tiles import key_rows, processed_tiles, query_rows

MAX_CELLS = 4096     # grid cells drawn; bigger grids group g×g tiles into one cell
MAX_WAVES = 100      # waves drawn in the SM view (× SMs marks)


ORDERS = {"fa2": "FlashAttention-2: query tiles outer",
          "fa1": "FlashAttention-1: key/value tiles outer"}


@dataclass(frozen=True)
class LoopView:
    tiles: pd.DataFrame   # one row per cell: row, col, order (-1: causally skipped), label
    steps: pd.DataFrame   # one row per loop step: order, row, col, HBM bytes so far, label
    group: int            # tiles per cell side (1 unless the grid is large)
    rows: int             # cells down (query tiles / group)
    cols: int             # cells across (key tiles / group)
    order: str            # "fa2" (row after row) or "fa1" (column after column)


def tile_rows(n: int, block: int) -> np.ndarray:
    """Rows in each tile of a sequence of length n (the last one may be short)."""
    starts = np.arange(0, n, block)
    return np.minimum(starts + block, n) - starts


def tile_bytes(cfg: engine.AttentionConfig,
               order: str = "fa2") -> tuple[np.ndarray, np.ndarray]:
    """(Tr, Tc) HBM bytes read and written at each tile step, over all batch·heads.

    FA2 order: tile (i, j) reads K_j and V_j; the first step of query tile i also reads Q_i,
    its last writes O_i and the row log-sum-exp. The sums equal iomodel.flash_hbm(cfg).
    FA1 order: tile (i, j) reads Q_i, O_i, m_i, l_i and writes O_i, m_i, l_i back; the first
    step of key tile j also reads K_j and V_j; the first step of all also initialises O, m, l
    in HBM. The sums equal iomodel.flash1_hbm(cfg).
    """
    e, bh, d = cfg.itemsize, cfg.bh, cfg.head_dim
    proc = processed_tiles(cfg)
    q_rows, k_rows = tile_rows(cfg.seq_q, cfg.block_q), tile_rows(cfg.seq_k, cfg.block_k)
    if order == "fa1":
        per_row = (bh * q_rows)[:, None].astype(np.int64)
        read = proc * per_row * (2 * d * e + 8)
        first = np.argmax(proc, axis=0)
        seen = proc.any(axis=0)
        read[first[seen], np.flatnonzero(seen)] += 2 * bh * k_rows[seen] * d * e
        written = proc * per_row * (d * e + 8)
        written[0, 0] += bh * cfg.seq_q * (d * e + 8)
        return read, written
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


@by_shape
def loop_view(cfg: engine.AttentionConfig, order: str = "fa2") -> LoopView:
    """The loop's cells in the order of `order` ("fa2": row after row, "fa1": column after
    column), with the HBM bytes moved up to each step in that order."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {list(ORDERS)}; got {order!r}.")
    g = 1 if cfg.Tr * cfg.Tc <= MAX_CELLS else math.ceil(math.sqrt(cfg.Tr * cfg.Tc / MAX_CELLS))
    proc = _group_sum(processed_tiles(cfg).astype(np.int64), g) > 0
    read, written = (_group_sum(x, g) for x in tile_bytes(cfg, order))
    R, C = proc.shape
    if order == "fa1":        # rank in column-major order
        rank = (np.cumsum(proc.T.ravel()).reshape(C, R) - 1).T
    else:
        rank = np.cumsum(proc.ravel()).reshape(R, C) - 1
    order_of = np.where(proc, rank, -1)
    row, col = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    label = np.array([_cell_label(r, c, g, cfg) for r, c in zip(row.ravel(), col.ravel())])
    tiles = pd.DataFrame({"row": row.ravel(), "col": col.ravel(), "order": order_of.ravel(),
                          "label": label})
    sel = proc.ravel()
    by_step = np.argsort(order_of.ravel()[sel], kind="stable")
    naive = iomodel.naive_hbm(cfg)
    steps = pd.DataFrame({
        "order": order_of.ravel()[sel][by_step], "row": row.ravel()[sel][by_step],
        "col": col.ravel()[sel][by_step],
        "flash_read": np.cumsum(read.ravel()[sel][by_step]),
        "flash_written": np.cumsum(written.ravel()[sel][by_step]),
        "label": label[sel][by_step]})
    steps["naive_read"] = naive.read
    steps["naive_written"] = naive.written
    return LoopView(tiles=tiles, steps=steps, group=g, rows=R, cols=C, order=order)


@by_shape(maxsize=16)     # a grid of 4096 steps is a few MB of frames
def loop_player(cfg: engine.AttentionConfig, order: str, url_name: str,
                compact: bool = False) -> Animation:
    """The loop player's animation of loop_view(cfg, order) (its frames, the teaching
    kernel's source, their signature): built once per shape, then sent as it is by every
    run that shows it (a step the browser reports, a new seed)."""
    return loop_animation(loop_view(cfg, order), url_name, compact)


def _cell_label(r: int, c: int, g: int, cfg: engine.AttentionConfig) -> str:
    if g == 1:
        (r0, r1), (k0, k1) = query_rows(cfg, r), key_rows(cfg, c)
        return f"S_{r},{c}: queries {r0}–{r1 - 1}, keys {k0}–{k1 - 1}"
    return (f"query tiles {r * g}–{min((r + 1) * g, cfg.Tr) - 1}, "
            f"key tiles {c * g}–{min((c + 1) * g, cfg.Tc) - 1}")


def smem_layout(cfg: engine.AttentionConfig, gpu: engine.GpuProfile, kernel: str) -> str:
    """The shared-memory layout (iomodel.smem_parts) of the kernel that runs cfg: "teaching",
    or for kernel="tensorcore" the build engine.model.catalog picks ("mma.sync" or "wgmma" on
    compute capability 9.x); "teaching" when no tensor-core build takes cfg."""
    if kernel != "tensorcore":
        return "teaching"
    from engine.model import catalog
    try:
        return catalog.tensorcore_build(cfg, gpu.compute_capability.startswith("9")).name
    except ValueError:
        return "teaching"


@by_shape
def smem_table(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
               layout: str = "teaching") -> pd.DataFrame:
    """Bytes of each tile held in shared memory by one thread block of the kernel whose
    layout is `layout`, with the block's limit."""
    budget = iomodel.smem_budget(cfg, gpu, layout)
    return pd.DataFrame({"part": list(budget.parts), "bytes": list(budget.parts.values()),
                         "limit": budget.limit, "fits": budget.fits})


@dataclass(frozen=True)
class Waves:
    table: pd.DataFrame   # wave, sm, blocks (thread blocks resident on that SM in that wave)
    blocks: int
    per_sm: int
    waves: int
    shown: int


def thread_blocks(cfg: engine.AttentionConfig, order: str = "fa2") -> int:
    """Thread blocks of the grid: FA2's order runs one per batch·head and query tile (the
    query tiles are independent); FA1's, as its paper's kernel, one per batch·head, which
    walks the key tiles and, inside each, every query tile."""
    return cfg.bh if order == "fa1" else cfg.bh * cfg.Tr


def grid_text(cfg: engine.AttentionConfig, order: str) -> str:
    """What one thread block is, in this order, with the grid's numbers."""
    if order == "fa1":
        return (f"one per batch·head, B·H = {cfg.bh:,}: FlashAttention-1's order runs a head's "
                f"{cfg.Tr:,} query tiles one after another inside one block, so it cannot "
                f"spread one head over several SMs")
    return (f"one per batch·head and query tile, B·H·Tr = {cfg.bh:,}·{cfg.Tr:,}: the query "
            f"tiles are independent, so FlashAttention-2 runs them in parallel")


def intro_text(cfg: engine.AttentionConfig, order: str) -> str:
    """What one thread block of the loop does, in FA2's or FA1's order."""
    if order == "fa1":
        return (f"FlashAttention-1's order: one thread block per batch·head walks the key "
                f"tiles: it loads **K_j** and **V_j** ({cfg.block_k} rows each) into shared "
                f"memory once, then for every query tile **Q_i** ({cfg.block_q} rows) reads "
                f"Q_i, **O_i**, m_i and l_i from HBM, computes **S_ij = Q_i K_jᵀ** on chip, "
                f"updates the running max and sum and O_i, and writes O_i, m_i, l_i back to "
                f"HBM: once per key tile. S and P never touch HBM.")
    return (f"One thread block per batch·head and query tile **Q_i** ({cfg.block_q} rows) "
            f"loads Q_i into shared memory once, then walks over the key tiles: load **K_j** "
            f"and **V_j** ({cfg.block_k} rows each), compute **S_ij = Q_i K_jᵀ** on chip, "
            f"update the running max and sum, accumulate **O_i**. Only Q, K, V, O and the row "
            f"log-sum-exp touch HBM.")


def reread_text(cfg: engine.AttentionConfig, order: str) -> str:
    """What each order reads again and again, as a formula and for this config."""
    if order == "fa1":
        return (f"FA1 reads K and V once but reads and writes Q_i, O_i, m_i, l_i once per key "
                f"tile, about 3·N²·d·bytes / block_k ({cfg.Tc:,} key tiles here).")
    return (f"FA2 reads K and V once per query tile, about 2·N²·d·bytes / block_q "
            f"({cfg.Tr:,} query tiles here).")


def l2_text(order: str, gpu_name: str, l2: str) -> str:
    """Why HBM may see fewer bytes than counted, in this order."""
    if order == "fa1":
        return (f"In FA1's order a block rereads its own Q_i, O_i, m_i, l_i, which stay in the "
                f"L2 cache ({gpu_name}: {l2}) only while a head's rows fit there beside the "
                f"other blocks' rows, so HBM may see fewer bytes than counted.")
    return (f"Query tiles that run at the same time ask for the same K_j and V_j, which then "
            f"often come from the L2 cache ({gpu_name}: {l2}) rather than HBM, so HBM sees "
            f"fewer bytes than counted.")


@by_shape
def waves(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
          layout: str = "teaching", order: str = "fa2") -> Waves:
    """Thread blocks (thread_blocks: one per batch·head and query tile in FA2's order, one
    per batch·head in FA1's) filling the SMs wave after wave, with as many resident per SM
    as the shared memory of `layout` allows (a model: the hardware scheduler decides the real
    placement, which the Kernel page shows when recorded)."""
    per_sm = iomodel.smem_budget(cfg, gpu, layout).blocks_per_sm
    blocks = thread_blocks(cfg, order)
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
