"""Launcher of the Flash-Decoding kernel, kernels/decode/flash_decode.cu: one launch of the split
kernel (grid (num_splits, kv_heads, batch)). Each block writes its split's O_s, m_s, l_s in
float32; the last block of each (sequence, KV head) to finish, found by a counter per
(sequence, KV head), merges the splits of its query rows into O and lse, and with the trace
writes m_final, the rescale of every split and l_final.

prepare(cfg, Q, K, V, table, num_splits, trace) -> (run, outputs): CuPy arrays "O"
(B, H, seq_q, d) in cfg.dtype, "lse" (B, H, seq_q), "O_part" (B, H, seq_q, S, d), "m_part",
"l_part" (B, H, seq_q, S), with trace "m_final", "l_final" (B, H, seq_q) and "rescale"
(B, H, seq_q, S), float32; "split_count" (B, kv_heads) int32, the counters (zero before and
after every run); and "info", the compile facts of the kernel, the split count,
"merging_blocks" (batch · kv_heads: the blocks that also merge) and "copies" (how K and V reach
shared memory: "the copy engine, ..." where engine.model.decode_config.decode_tma allows,
saying whether a whole tile or each warp's rows a copy, else "16-byte cp.async copies").
"""
from __future__ import annotations

import numpy as np

from ...model.config import ConfigError
from ...model.decode_config import (DECODE_STAGES, MAX_SPLITS, DecodeConfig, decode_block_k,
                                    decode_tile_copies, decode_tma, decode_warp_keys,
                                    split_length, splits_without_empty)
from ...model.devices import GpuProfile
from ...model.launch import DECODE_THREADS
from ...model.iomodel import decode_smem_parts, format_bytes
from ...model.catalog import decode_build
from ..runtime import ELEM_TYPES, check_arch, live_gpu
from . import core
from .wgmma import tensor_map

NUM_THREADS = DECODE_THREADS       # NUM_THREADS in the source (engine.model.launch)
TMA_COPIES = True                  # False: cp.async copies on every GPU (the lab's comparison)


def uses_tma(cfg: DecodeConfig, gpu: GpuProfile, num_splits: int) -> bool:
    """Whether cfg's build on gpu with num_splits splits takes its K and V rows by the copy
    engine (TMA_COPIES): where decode_tma allows (Hopper, 16-bit, whole boxes, pages that a
    warp's box never spans, a grid of enough blocks an SM)."""
    return TMA_COPIES and decode_tma(cfg, gpu.compute_capability, NUM_THREADS, num_splits,
                                     gpu.sms)


def compile_options(cfg: DecodeConfig, tma: bool = False,
                    num_splits: int = 1) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DELEM_T={ELEM_TYPES[cfg.dtype]}",
            f"-DQUERY_ROWS={cfg.rows}", f"-DSEQ_Q={cfg.seq_q}",
            f"-DBLOCK_K={decode_block_k(cfg.head_dim)}", f"-DPAGE_SIZE={cfg.page_size or 0}",
            f"-DNUM_THREADS={NUM_THREADS}",
            f"-DSTAGES={DECODE_STAGES}", f"-DTMA_COPIES={int(tma)}",
            f"-DTILE_COPIES={int(tma and decode_tile_copies(cfg, num_splits))}")


def check_fits(cfg: DecodeConfig, gpu: GpuProfile, tma: bool = False) -> int:
    """Shared memory per block of the split kernel (tma: its TMA_COPIES build);
    SharedMemoryError when over the GPU's."""
    need = sum(decode_smem_parts(cfg, NUM_THREADS, tma).values())
    if need > gpu.smem_per_block_optin:
        raise core.SharedMemoryError(
            f"The Flash-Decoding split kernel at head_dim {cfg.head_dim}, {cfg.dtype}, "
            f"{cfg.rows} query rows per block needs {need:,} bytes ({format_bytes(need)}) of "
            f"shared memory per thread block; {gpu.name} allows "
            f"{gpu.smem_per_block_optin:,} bytes. Use fewer query rows per KV head "
            f"(more kv_heads or fewer query tokens) or a 16-bit dtype.")
    return need


def build(cfg: DecodeConfig, gpu: GpuProfile, tma: bool = False,
          num_splits: int = 1) -> core.Build:
    """The split kernel (with its merge) of cfg; tma: its TMA_COPIES build (uses_tma), which
    copies whole tiles where decode_tile_copies(cfg, num_splits)."""
    source = decode_build(cfg)
    return core.Build(source.source, source.function, compile_options(cfg, tma, num_splits),
                      NUM_THREADS, check_fits(cfg, gpu, tma))


def outputs(cfg: DecodeConfig, num_splits: int, trace: bool, poison: bool = False) -> dict:
    rows = (cfg.batch, cfg.heads, cfg.seq_q)
    spec = {"O": ((*rows, cfg.head_dim), cfg.dtype), "lse": (rows, np.float32),
            "O_part": ((*rows, num_splits, cfg.head_dim), np.float32),
            "m_part": ((*rows, num_splits), np.float32),
            "l_part": ((*rows, num_splits), np.float32)}
    if trace:
        spec.update({"m_final": (rows, np.float32), "l_final": (rows, np.float32),
                     "rescale": ((*rows, num_splits), np.float32)})
    out = core.allocate(spec, poison)
    out["split_count"] = split_counters(cfg)
    return out


def split_counters(cfg: DecodeConfig):
    """The kernel's counters, one int32 per (sequence, KV head), zeroed (never poisoned): a
    block adds 1 when its split's state is written; the block that finds num_splits - 1
    merges and sets it back to 0, so every run starts from zero without a memset."""
    import cupy
    return cupy.zeros((cfg.batch, cfg.kv_heads), dtype=np.int32)


def cache_maps(cfg: DecodeConfig, K, V, tiles: bool) -> tuple:
    """The tensor maps of the TMA_COPIES build: each cache as (B · kv_heads, seq_k, d), or paged
    as (pages · kv_heads, page_size, d), read in boxes of 64 columns (128 bytes, swizzled) × a
    tile's keys where the build copies whole tiles (tiles: decode_tile_copies), else a warp's;
    rows past a sequence's or page's end read as zeros."""
    n0, kv, rows, d = cfg.cache_shape
    box_rows = (decode_block_k(cfg.head_dim) if tiles
                else decode_warp_keys(cfg.head_dim, NUM_THREADS))
    return tuple(tensor_map(x.reshape(n0 * kv, rows, d), box_rows, cfg.dtype) for x in (K, V))


def prepare(cfg: DecodeConfig, Q, K, V, table, num_splits: int, trace: bool,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel (the splits and their merge). Q (B, H, seq_q,
    d) and the caches (cfg.cache_shape) in cfg.dtype; table (B, pages_per_seq) int32 when
    paged (None or ignored when contiguous). Compiles on first use. The counters are the
    outputs' own, so runs of one prepare() go one after another on one stream."""
    check_arch(cfg.dtype, "decode", "decode")     # before any compile (engine.model.arch)
    if (not isinstance(num_splits, int) or not 1 <= num_splits <= MAX_SPLITS
            or not splits_without_empty(cfg.seq_k, num_splits)):
        raise ConfigError(f"num_splits must be a whole number from 1 to {MAX_SPLITS} that leaves "
                          f"no split of seq_k={cfg.seq_k} keys empty; got {num_splits!r}.")
    gpu = live_gpu()
    tma = uses_tma(cfg, gpu, num_splits)
    tiles = tma and decode_tile_copies(cfg, num_splits)    # the build's TILE_COPIES
    split_build = build(cfg, gpu, tma, num_splits)
    core.check_operands(cfg.dtype, Q=(Q, cfg.q_shape), K=(K, cfg.cache_shape),
                        V=(V, cfg.cache_shape))
    if cfg.paged:
        core.check_operands("int32", block_table=(table, (cfg.batch, cfg.pages_per_seq)))
    split_fn = split_build.compiled()
    out = outputs(cfg, num_splits, trace, poison)
    grid = (num_splits, cfg.kv_heads, cfg.batch)
    traced = ((out["m_final"], out["rescale"], out["l_final"]) if trace
              else (core.NULL,) * 3)
    args = (Q, K, V, table if cfg.paged else core.NULL, out["O_part"], out["m_part"],
            out["l_part"], out["O"], out["lse"], *traced, out["split_count"],
            np.int32(cfg.seq_k), np.int32(split_length(cfg.seq_k, num_splits)),
            np.int32(cfg.pages_per_seq), np.float32(cfg.softmax_scale),
            *(cache_maps(cfg, K, V, tiles) if tma else ()))

    def run():
        split_fn(grid, (NUM_THREADS,), args, shared_mem=split_build.smem)

    out["info"] = {**split_build.facts(split_fn, grid), "device": gpu.name,
                   "num_splits": num_splits,
                   "merging_blocks": cfg.batch * cfg.kv_heads,
                   "copies": ("16-byte cp.async copies" if not tma
                              else "the copy engine, a whole key tile a copy" if tiles
                              else "the copy engine, each warp's rows a copy")}
    return run, out


def launch(cfg: DecodeConfig, Q, K, V, table, num_splits: int, trace: bool, *,
           poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, table, num_splits, trace, poison=poison)
