"""Launcher of the Hopper warpgroup-MMA FlashAttention kernel, kernels/hopper/flash_wgmma.cu, for the
shapes engine.model.catalog.WGMMA lists (reached through kernel="tensorcore", engine.gpu.launchers.mma).

The kernel needs compute capability 9.x (it is built for sm_90a: wgmma, setmaxnreg) and
reads Q, K, V through bulk tensor copies, so each launch carries three tensor maps made by
the driver's cuTensorMapEncodeTiled, called through NVIDIA's typed bindings
(cuda.bindings.driver, the cuda-bindings package of the [gpu] extra; CuPy has no binding for it).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...model.config import AttentionConfig, ConfigError
from ...model.iomodel import smem_bytes, wgmma_barrier_bytes, wgmma_ring
from ...results import BLOCK_FIELDS, TRACE_FIELDS
from ...model.stream_k import (WGMMA_COSTS, WGMMA_HEAD, blocks as stream_k_blocks, total_tiles,
                               use_stream_k, workspace_floats)
from ...model.catalog import WGMMA
from ...model.launch import wgmma_threads
from ..runtime import GpuRunError, live_gpu
from . import core

FUNCTION = WGMMA.function
# 1: the consumer warpgroups take turns issuing their products (see the kernel's header); 0:
# each issues when ready. Both pass the GPU tests; 1 was 1.03-1.05× faster at d = 128 on an H200
# (lab/NOTES.md, "wgmma path").
PINGPONG = 1
# 1: one block per SM walks the work items (query tile, batch·head) in turn, loading the next
# item's tiles during the current one's epilogue; 0: one block per item. Both pass the GPU
# tests; on an H200 (2026-11-23) 1 was 1.07-1.10× faster at N = 512, 1.03-1.06× at 1024,
# within 1% at 4096-8192 and 1-2% slower at 16384 (lab/NOTES.md: the prediction under
# "Forward parity", the measurement under "Forward parity: measured").
PERSISTENT = 1
# 1: PERSISTENT launches that use_stream_k picks (the longest item well over an SM's even
# share: causal at few batch·heads, fewer items than SMs) give every block an even share of the
# key tiles, cutting items and merging their parts (engine/model/stream_k.py); traced runs walk whole
# items, so that the trace follows each row over all its key tiles.
STREAM_K = 1
# By head_dim, 1: a fence keeps each consumer's wait for its P V behind its softmax, so that its
# exponentials overlap its own product (the kernel's header). On an H100 (2026-11-27, B·H·N =
# 32k tokens × 1024/d heads) 1 was 1.01-1.02× faster at d = 128, N >= 4096, and 3-5% slower at
# d = 64 (lab/NOTES.md, "The softmax fence").
SOFTMAX_FENCE = {64: 0, 128: 1}
# 1: a row's tile max from its scores' bits (a three-input integer max, two scores an
# instruction; the kernel's header). On an H200 (2026-11-29, B·H·N = 32k tokens × 8 heads)
# float16 ran 0-2% faster at d = 128 and 4-9% at d = 64, with the same outputs bit for bit
# (lab/NOTES.md, "The tile max from the scores' bits").
TILE_MAX_BITS = 1

_TENSOR_MAP = np.dtype({"names": ["opaque"], "formats": [(np.uint64, (16,))]})   # 128 bytes
_ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "uint8": 1}   # uint8: the FP8 build's e4m3 bytes
BOX_COLUMNS = 64                  # 64 × 2 bytes: one 128-byte swizzle row


threads = wgmma_threads           # one producer warpgroup, block_q / 64 consumer warpgroups


def check_takes(cfg: AttentionConfig) -> None:
    core.check_hopper_build(cfg, WGMMA, "wgmma")


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return ("--std=c++17", "-arch=sm_90a", f"-DHEAD_DIM={cfg.head_dim}",
            f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DPINGPONG={PINGPONG}", f"-DBF16={int(cfg.dtype == 'bfloat16')}",
            f"-DPERSISTENT={PERSISTENT}", f"-DSOFTMAX_FENCE={SOFTMAX_FENCE[cfg.head_dim]}",
            f"-DTILE_MAX_BITS={TILE_MAX_BITS}",
            *((f"-DSK_HEAD={WGMMA_HEAD}",) if WGMMA_HEAD else ()), *wgmma_ring_options(cfg))


def wgmma_ring_options(cfg: AttentionConfig) -> tuple[str, ...]:
    """The -D switches of the build's buffers (engine.model.iomodel.wgmma_ring, whose layout
    smem_bytes counts): with one Q_i buffer the next item's Q_i cannot load a run ahead."""
    q, stages = wgmma_ring(cfg)
    return (f"-DQ_BUFFERS={q}", f"-DKV_STAGES={stages}", f"-DQ_AHEAD={int(q == 2)}",
            f"-DBAR_AREA={wgmma_barrier_bytes(q, stages)}")


def build(cfg: AttentionConfig, trace: bool) -> core.Build:
    return core.Build(WGMMA.source, FUNCTION, compile_options(cfg, trace), threads(cfg),
                      smem_bytes(cfg, WGMMA.name))


def cuda_driver():
    """cuda.bindings.driver, or GpuRunError naming the package to install."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise GpuRunError("The Hopper kernels (wgmma, and the decode kernel's copy-engine build) "
                          "encode their tensor maps with NVIDIA's cuda-bindings "
                          "package (cuda.bindings.driver), which is not installed: install "
                          "requirements/gpu.lock (it pins cuda-bindings), or `pip install "
                          f"'cuda-bindings>=13,<14'` ({exc}).") from exc
    return driver


class TiledMapArgs(NamedTuple):
    """cuTensorMapEncodeTiled's arguments but the global address, in its order."""
    data_type: object             # CUtensorMapDataType
    rank: int
    dims: tuple[int, ...]         # elements, innermost first
    strides: tuple[int, ...]      # bytes, dimensions 1 and up
    box: tuple[int, ...]          # elements copied per dimension
    element_strides: tuple[int, ...]
    interleave: object            # CUtensorMapInterleave
    swizzle: object               # CUtensorMapSwizzle
    l2_promotion: object          # CUtensorMapL2promotion
    oob_fill: object              # CUtensorMapFloatOOBfill


def tiled_map_args(shape: tuple[int, int, int], dtype: str, box_rows: int,
                   box_columns: int = BOX_COLUMNS, swizzle: int = 128) -> TiledMapArgs:
    """The tensor map arguments of a contiguous (B·H, seq, d) array of dtype (float16,
    bfloat16, or uint8 for e4m3 bytes) read in boxes of box_columns columns × box_rows rows of
    one batch·head: no interleave, a 128-byte (or 64-byte) swizzle, 128-byte L2 promotion,
    out-of-bounds elements read as zeros."""
    d = cuda_driver()
    types = {"float16": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             "bfloat16": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "uint8": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8}
    swizzles = {128: d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
                64: d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B}
    if dtype not in types:
        raise ConfigError(f"The wgmma tensor maps take float16, bfloat16 or uint8, not {dtype}.")
    bh, seq, head = shape
    row = head * _ELEMENT_BYTES[dtype]
    return TiledMapArgs(types[dtype], 3, (head, seq, bh), (row, seq * row),
                        (box_columns, box_rows, 1), (1, 1, 1),
                        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                        swizzles[swizzle],
                        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


def tensor_map(x, box_rows: int, dtype: str, box_columns: int = BOX_COLUMNS,
               swizzle: int = 128) -> np.ndarray:
    """The tensor map of a contiguous (B·H, seq, d) CuPy array (tiled_map_args), as a
    1-element array of 128 bytes (CuPy passes a structured array element by value)."""
    d = cuda_driver()
    a = tiled_map_args(tuple(x.shape), dtype, box_rows, box_columns, swizzle)
    u64, u32 = d.cuuint64_t, d.cuuint32_t
    rc, encoded = d.cuTensorMapEncodeTiled(
        a.data_type, a.rank, x.data.ptr, [u64(v) for v in a.dims], [u64(v) for v in a.strides],
        [u32(v) for v in a.box], [u32(v) for v in a.element_strides], a.interleave, a.swizzle,
        a.l2_promotion, a.oob_fill)
    if rc != d.CUresult.CUDA_SUCCESS:
        raise ConfigError(f"cuTensorMapEncodeTiled refused a (B·H, seq, d) = {x.shape} {dtype} "
                          f"tensor with boxes of {box_columns}×{box_rows} (CUresult {int(rc)}, {rc.name}).")
    out = np.zeros(1, dtype=_TENSOR_MAP)
    out["opaque"][0] = [int(v) for v in encoded.opaque]
    return out


NO_SCALES = (core.NULL,) * 3       # the FP8 build's q_scale, k_scale, v_scale: unused here


def splits_items(cfg: AttentionConfig, bh: int, sms: int, trace: bool) -> bool:
    """Whether a launch of bh batch·heads runs stream-K (PERSISTENT, STREAM_K, untraced and
    engine.model.stream_k.use_stream_k)."""
    return bool(PERSISTENT and STREAM_K and not trace
                and use_stream_k(cfg, bh, sms, WGMMA_COSTS, WGMMA_HEAD))


def grid(cfg: AttentionConfig, bh: int, sms: int, split: bool) -> tuple[int, ...]:
    """The launch grid for bh batch·heads on a GPU of `sms` SMs: one block per work item in
    launch order (core.item_grid), or, PERSISTENT, one per SM (never more blocks than items,
    nor, under stream-K (split, from splits_items), than key tiles)."""
    if split:
        return (stream_k_blocks(cfg, bh, sms, WGMMA_HEAD), 1)
    if PERSISTENT:
        return (min(cfg.Tr * bh, sms), 1)
    return core.item_grid(cfg, sms)(bh)


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    check_takes(cfg)
    b = build(cfg, trace)
    sms = live_gpu().sms
    split = splits_items(cfg, cfg.bh, sms, trace)
    return {**b.facts(b.compiled(), grid(cfg, cfg.bh, sms, split)), "stream_k": split}


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs) as engine.gpu.launchers.mma.prepare describes them."""
    check_takes(cfg)
    bh, d = cfg.bh, cfg.head_dim
    core.check_operands(cfg.dtype, Q=(Q, (bh, cfg.seq_q, d)), K=(K, (bh, cfg.seq_k, d)),
                        V=(V, (bh, cfg.seq_k, d)))
    b = build(cfg, trace)
    fn = b.compiled()
    out = outputs if outputs is not None else core.forward_outputs(cfg, trace, poison)
    maps = (tensor_map(Q, cfg.block_q, cfg.dtype), tensor_map(K, cfg.block_k, cfg.dtype),
            tensor_map(V, cfg.block_k, cfg.dtype))
    # The tensor maps span every batch·head, so each launch passes its first one and count
    # instead of slicing (the kernel indexes the outputs with bh0 + its batch·head).
    traced = ([out[k] for k in TRACE_FIELDS] + [out[k] for k in BLOCK_FIELDS]
              if trace else [core.NULL] * 7)
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))
    sms = live_gpu().sms
    group = np.int32(core.causal_bh_group(cfg, sms))
    split = splits_items(cfg, bh, sms, trace)
    launch_grid = grid(cfg, bh, sms, split)
    # Stream-K: the kernel gets the work's key tiles (0: whole items), the parts' states (2
    # slots a block) and a ticket counter per item, 0 between launches (the merging part sets
    # it back).
    workspace = (core.NULL, core.NULL)
    if split:
        import cupy
        workspace = (cupy.empty(workspace_floats(cfg, launch_grid[0]), dtype=np.float32),
                     cupy.zeros(cfg.Tr * bh, dtype=np.int32))

    line = total_tiles(cfg, bh, WGMMA_HEAD) if split else 0    # 0: whole items

    def args_for(bh0, bh1):
        return (*maps, out["O"], out["lse"], *scalars, np.int32(bh0), np.int32(bh1 - bh0),
                np.int32(cfg.Tr), group, np.int32(line), *workspace, *traced,
                *NO_SCALES)

    if PERSISTENT:
        args = args_for(0, bh)

        def run():
            fn(launch_grid, (b.threads,), args, shared_mem=b.smem)
    else:
        run = core.launch_loop(fn, b, cfg.Tr, bh, args_for, core.item_grid(cfg, sms))
    run.operands = (Q, K, V, workspace)   # the tensor maps point into Q, K, V: keep them alive
    out["info"] = {**b.facts(fn, launch_grid), "stream_k": split}
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, trace, poison=poison)
