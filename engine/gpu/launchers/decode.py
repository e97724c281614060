"""Launcher of the Flash-Decoding kernels, kernels/flash_decode.cu: the split kernel (grid
(num_splits, kv_heads, batch)) writes each split's O_s, m_s, l_s in float32; the merge
kernel (one block per query row) combines them into O and lse, and with the trace writes
m_final, the rescale of every split and l_final.

prepare(cfg, Q, K, V, table, num_splits, trace) -> (run, outputs): CuPy arrays "O"
(B, H, seq_q, d) in cfg.dtype, "lse" (B, H, seq_q), "O_part" (B, H, seq_q, S, d), "m_part",
"l_part" (B, H, seq_q, S), with trace "m_final", "l_final" (B, H, seq_q) and "rescale"
(B, H, seq_q, S), float32; and "info", the compile facts of the split kernel.
"""
from __future__ import annotations

import numpy as np

from ...config import ConfigError
from ...decode_config import (DECODE_STAGES, MAX_SPLITS, DecodeConfig, decode_block_k,
                              split_length, splits_without_empty)
from ...devices import GpuProfile
from ...iomodel import decode_smem_parts, format_bytes
from ..catalog import decode_build
from ..runtime import ELEM_TYPES, live_gpu
from . import core

NUM_THREADS = 128            # NUM_THREADS in the source
MERGE_THREADS = 128          # MERGE_THREADS in the source


def compile_options(cfg: DecodeConfig) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DELEM_T={ELEM_TYPES[cfg.dtype]}",
            f"-DQUERY_ROWS={cfg.rows}", f"-DSEQ_Q={cfg.seq_q}",
            f"-DBLOCK_K={decode_block_k(cfg.head_dim)}", f"-DPAGE_SIZE={cfg.page_size or 0}",
            f"-DNUM_THREADS={NUM_THREADS}",
            f"-DSTAGES={DECODE_STAGES}")


def check_fits(cfg: DecodeConfig, gpu: GpuProfile) -> int:
    """Shared memory per block of the split kernel; SharedMemoryError when over the GPU's."""
    need = sum(decode_smem_parts(cfg, NUM_THREADS).values())
    if need > gpu.smem_per_block_optin:
        raise core.SharedMemoryError(
            f"The Flash-Decoding split kernel at head_dim {cfg.head_dim}, {cfg.dtype}, "
            f"{cfg.rows} query rows per block needs {need:,} bytes ({format_bytes(need)}) of "
            f"shared memory per thread block; {gpu.name} allows "
            f"{gpu.smem_per_block_optin:,} bytes. Use fewer query rows per KV head "
            f"(more kv_heads or fewer query tokens) or a 16-bit dtype.")
    return need


def builds(cfg: DecodeConfig, gpu: GpuProfile) -> tuple[core.Build, core.Build]:
    """(split kernel, merge kernel) of cfg."""
    source = decode_build(cfg)
    split_fn, merge_fn = source.functions
    opts = compile_options(cfg)
    return (core.Build(source.source, split_fn, opts, NUM_THREADS, check_fits(cfg, gpu)),
            core.Build(source.source, merge_fn, opts, MERGE_THREADS, 0))


def outputs(cfg: DecodeConfig, num_splits: int, trace: bool, poison: bool = False) -> dict:
    rows = (cfg.batch, cfg.heads, cfg.seq_q)
    spec = {"O": ((*rows, cfg.head_dim), cfg.dtype), "lse": (rows, np.float32),
            "O_part": ((*rows, num_splits, cfg.head_dim), np.float32),
            "m_part": ((*rows, num_splits), np.float32),
            "l_part": ((*rows, num_splits), np.float32)}
    if trace:
        spec.update({"m_final": (rows, np.float32), "l_final": (rows, np.float32),
                     "rescale": ((*rows, num_splits), np.float32)})
    return core.allocate(spec, poison)


def prepare(cfg: DecodeConfig, Q, K, V, table, num_splits: int, trace: bool,
            poison: bool = False):
    """(run, outputs): run() enqueues the split kernel and the merge. Q (B, H, seq_q, d) and
    the caches (cfg.cache_shape) in cfg.dtype; table (B, pages_per_seq) int32 when paged
    (None or ignored when contiguous). Compiles on first use."""
    if (not isinstance(num_splits, int) or not 1 <= num_splits <= MAX_SPLITS
            or not splits_without_empty(cfg.seq_k, num_splits)):
        raise ConfigError(f"num_splits must be a whole number from 1 to {MAX_SPLITS} that leaves "
                          f"no split of seq_k={cfg.seq_k} keys empty; got {num_splits!r}.")
    gpu = live_gpu()
    split_build, merge_build = builds(cfg, gpu)
    core.check_operands(cfg.dtype, Q=(Q, cfg.q_shape), K=(K, cfg.cache_shape),
                        V=(V, cfg.cache_shape))
    if cfg.paged:
        core.check_operands("int32", block_table=(table, (cfg.batch, cfg.pages_per_seq)))
    split_fn, merge_fn = split_build.compiled(), merge_build.compiled()
    out = outputs(cfg, num_splits, trace, poison)
    split_grid = (num_splits, cfg.kv_heads, cfg.batch)
    merge_grid = (cfg.batch * cfg.heads * cfg.seq_q,)
    split_args = (Q, K, V, table if cfg.paged else core.NULL, out["O_part"], out["m_part"],
                  out["l_part"], np.int32(cfg.seq_k),
                  np.int32(split_length(cfg.seq_k, num_splits)), np.int32(cfg.pages_per_seq),
                  np.float32(cfg.softmax_scale))
    traced = ((out["m_final"], out["rescale"], out["l_final"]) if trace
              else (core.NULL,) * 3)
    merge_args = (out["O_part"], out["m_part"], out["l_part"], np.int32(num_splits), out["O"],
                  out["lse"], *traced)

    def run():
        split_fn(split_grid, (NUM_THREADS,), split_args, shared_mem=split_build.smem)
        merge_fn(merge_grid, (MERGE_THREADS,), merge_args)

    out["info"] = {**split_build.facts(split_fn, split_grid), "device": gpu.name,
                   "num_splits": num_splits, "merge_grid": str(merge_grid[0])}
    return run, out


def launch(cfg: DecodeConfig, Q, K, V, table, num_splits: int, trace: bool, *,
           poison: bool = False) -> dict:
    """Run both kernels once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, table, num_splits, trace, poison=poison)
