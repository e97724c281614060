"""Launcher of the teaching kernel, kernels/flash_teaching.cu, on CuPy arrays.

launch(cfg, Q, K, V, trace) -> dict of CuPy arrays (the interface every flash launcher
shares): "O" (B·H, seq_q, d) in cfg.dtype, "lse" (B·H, seq_q) float32, and with trace
"running_max", "running_sum", "rescale", "tile_max" (B·H, seq_q, Tc) float32 plus per thread
block "sm_id" (int32), "start_ns", "end_ns" (uint64), record index bh·Tr + i.
"""
from __future__ import annotations

import numpy as np

from kernels.loader import get_function

from ...config import AttentionConfig, ConfigError
from ...devices import GpuProfile
from ..runtime import ELEM_TYPES, compile_facts, live_gpu
from ...iomodel import largest_fitting_tiles, smem_budget

SOURCE = "flash_teaching.cu"
FUNCTION = "flash_teaching"
NUM_THREADS = 128            # NUM_THREADS in the source
DEFAULT_SMEM_LIMIT = 48 * 1024
MAX_GRID_Y = 65535
TRACE_KEYS = ("running_max", "running_sum", "rescale", "tile_max")
BLOCK_KEYS = ("sm_id", "start_ns", "end_ns")


class SharedMemoryError(ConfigError):
    """The tiles do not fit in one thread block's shared memory on this GPU."""


def smem_bytes(cfg: AttentionConfig) -> int:
    """Dynamic shared memory of one block, as the kernel carves it: Q_i, K_j, V_j in the
    input dtype, then S_ij, O_i, m_i, l_i in float32."""
    Br, Bc, d, e = cfg.block_q, cfg.block_k, cfg.head_dim, cfg.itemsize
    return (Br * d + 2 * Bc * d) * e + 4 * (Br * Bc + Br * d + Br + Br)


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    elem = ELEM_TYPES[cfg.dtype]
    return (f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}",
            f"-DHEAD_DIM={cfg.head_dim}", f"-DELEM_T={elem}",
            f"-DCAUSAL={int(cfg.causal)}", f"-DTRACE={int(trace)}")


def check_fits(cfg: AttentionConfig, gpu: GpuProfile) -> int:
    """Bytes of shared memory per block; SharedMemoryError when over the GPU's limit."""
    need = smem_bytes(cfg)
    budget = smem_budget(cfg, gpu)
    if need > budget.limit:
        best = largest_fitting_tiles(cfg, gpu)
        fit = (", ".join(f"block_q={bq}, block_k={bk}" for bq, bk in best)
               if best else "none of the allowed tile sizes")
        raise SharedMemoryError(
            f"Tiles block_q={cfg.block_q} × block_k={cfg.block_k} at head_dim {cfg.head_dim}, "
            f"{cfg.dtype}, need {need:,} bytes of shared memory per thread block; "
            f"{gpu.name} allows {budget.limit:,} bytes. Largest tiles that fit: {fit}.")
    return need


def allocate_outputs(cfg: AttentionConfig, trace: bool, poison: bool = False) -> dict:
    """Output buffers; poison=True fills them with NaN (or all-ones bits) first, so that a
    test can tell every element was written."""
    import cupy
    bh, nq = cfg.bh, cfg.seq_q
    out = {"O": cupy.empty((bh, nq, cfg.head_dim), dtype=cfg.dtype),
           "lse": cupy.empty((bh, nq), dtype=cupy.float32)}
    if trace:
        for key in TRACE_KEYS:
            out[key] = cupy.empty((bh, nq, cfg.Tc), dtype=cupy.float32)
        n_blocks = bh * cfg.Tr
        out["sm_id"] = cupy.empty(n_blocks, dtype=cupy.int32)
        out["start_ns"] = cupy.empty(n_blocks, dtype=cupy.uint64)
        out["end_ns"] = cupy.empty(n_blocks, dtype=cupy.uint64)
    if poison:
        for arr in out.values():
            arr.view(cupy.uint8).fill(0xFF)   # NaN in float16 and float32, -1 in integers
    return out


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel, writing into outputs. Compiles on first use."""
    import cupy
    gpu = live_gpu()
    smem = check_fits(cfg, gpu)
    fn = get_function(SOURCE, FUNCTION, compile_options(cfg, trace))
    if smem > DEFAULT_SMEM_LIMIT and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    out = outputs if outputs is not None else allocate_outputs(cfg, trace, poison)
    dummy = cupy.empty(1, dtype=cupy.uint64)
    Tr = cfg.Tr
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale))
    launches = []
    for bh0 in range(0, cfg.bh, MAX_GRID_Y):   # gridDim.y is at most 65535
        bh1 = min(cfg.bh, bh0 + MAX_GRID_Y)
        rec = slice(bh0 * Tr, bh1 * Tr)
        traced = ([out[key][bh0:bh1] for key in TRACE_KEYS] + [out[key][rec] for key in BLOCK_KEYS]
                  if trace else [dummy] * 7)
        args = (Q[bh0:bh1], K[bh0:bh1], V[bh0:bh1], out["O"][bh0:bh1], out["lse"][bh0:bh1],
                *scalars, *traced)
        launches.append(((Tr, bh1 - bh0), args))

    def run():
        for grid, args in launches:
            fn(grid, (NUM_THREADS,), args, shared_mem=smem)

    out["info"] = {**compile_facts(SOURCE, compile_options(cfg, trace), fn, NUM_THREADS, smem,
                                   (Tr, cfg.bh)), "device": gpu.name}
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, poison: bool = False) -> dict:
    run, out = prepare(cfg, Q, K, V, trace, poison=poison)
    run()
    return out
