"""Tile geometry: the one home of the ragged and causal tile rules, used by the NumPy
emulation (engine.cpu), the GPU backend, the IO model, the stream-K schedule and the app.

Ragged: query tile i holds rows [i·Br, min((i+1)·Br, seq_q)) and key tile j keys
[j·Bc, min((j+1)·Bc, seq_k)), so the last tile of each may be short.
Causal (top-left aligned, as PyTorch's is_causal): key c is visible to query r iff c <= r.
So query tile i sees key tile j iff j·Bc <= its last row: the key tiles 0 .. seen(i) - 1
(forward, one block per query tile); key tile j is seen by the query tiles
first_query_tile(j) .. Tr - 1 (backward, one block per key tile). Without the mask every
tile sees every tile. Pure NumPy.
"""
from __future__ import annotations

import numpy as np

from .config import AttentionConfig


def query_rows(cfg: AttentionConfig, i: int) -> tuple[int, int]:
    """[r0, r1): the query rows of query tile i."""
    return i * cfg.block_q, min((i + 1) * cfg.block_q, cfg.seq_q)


def key_rows(cfg: AttentionConfig, j: int) -> tuple[int, int]:
    """[k0, k1): the keys of key tile j."""
    return j * cfg.block_k, min((j + 1) * cfg.block_k, cfg.seq_k)


def query_tile_sizes(cfg: AttentionConfig) -> np.ndarray:
    """(Tr,) int64: the rows of each query tile (the last may be short)."""
    starts = np.arange(cfg.Tr, dtype=np.int64) * cfg.block_q
    return np.minimum(starts + cfg.block_q, cfg.seq_q) - starts


def key_tile_ends(cfg: AttentionConfig) -> np.ndarray:
    """(Tc,) int64: one past the last key of each key tile."""
    return np.minimum((np.arange(cfg.Tc, dtype=np.int64) + 1) * cfg.block_k, cfg.seq_k)


def seen_key_tiles(cfg: AttentionConfig) -> np.ndarray:
    """(Tr,) int64: how many key tiles query tile i processes, the tiles 0 .. n - 1 (forward
    view of the causal rule)."""
    if not cfg.causal:
        return np.full(cfg.Tr, cfg.Tc, dtype=np.int64)
    last_row = np.minimum((np.arange(cfg.Tr, dtype=np.int64) + 1) * cfg.block_q, cfg.seq_q) - 1
    return np.minimum(last_row // cfg.block_k + 1, cfg.Tc)


def first_query_tile(cfg: AttentionConfig) -> np.ndarray:
    """(Tc,) int64: the first query tile that sees key tile j; the query tiles from there to
    Tr - 1 process it (backward view of the causal rule; Tr where none does)."""
    if not cfg.causal:
        return np.zeros(cfg.Tc, dtype=np.int64)
    first_key = np.arange(cfg.Tc, dtype=np.int64) * cfg.block_k
    return np.where(first_key < cfg.seq_q, first_key // cfg.block_q, cfg.Tr)


def processed_tiles(cfg: AttentionConfig) -> np.ndarray:
    """(Tr, Tc) bool: tile (i, j) runs unless causal and no row of query tile i sees key j·Bc
    (the trace's `processed`)."""
    return np.arange(cfg.Tc)[None, :] < seen_key_tiles(cfg)[:, None]


def processed_count(cfg: AttentionConfig) -> int:
    """Tiles (i, j) that run, per batch·head."""
    return int(seen_key_tiles(cfg).sum())


def hidden(cfg: AttentionConfig, r0: int, r1: int, k0: int, k1: int) -> np.ndarray | None:
    """(r1 - r0, k1 - k0) bool: True where the causal mask hides key c from query r (c > r);
    None without the mask."""
    if not cfg.causal:
        return None
    return np.arange(k0, k1)[None, :] > np.arange(r0, r1)[:, None]


def visible_in_tiles(cfg: AttentionConfig, r: int) -> np.ndarray:
    """(Tc,) int64: the keys of each key tile that query row r sees."""
    k0 = np.arange(cfg.Tc, dtype=np.int64) * cfg.block_k
    k1 = key_tile_ends(cfg)
    if not cfg.causal:
        return k1 - k0
    return np.clip(np.minimum(k1, r + 1) - k0, 0, None)
