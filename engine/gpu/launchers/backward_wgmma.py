"""Launcher of the Hopper warpgroup-MMA backward kernel, kernels/hopper/flash_backward_wgmma.cu, for
the shapes engine.model.catalog.BACKWARD_WGMMA lists (reached through kernel="tensorcore",
engine.gpu.launchers.backward_mma), between the delta and dQ-cast kernels of
engine.gpu.launchers.backward_helpers.

The kernel needs compute capability 9.x (built for sm_90a: wgmma, setmaxnreg) and reads Q,
K, V and dO through bulk tensor copies: each launch carries four tensor maps
(engine.gpu.launchers.wgmma.tensor_map) spanning every batch·head, and the index of its first
batch·head instead of sliced operands.
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig
from ...model.iomodel import smem_bytes
from ...model.catalog import BACKWARD_WGMMA
from ...model.launch import backward_wgmma_threads
from ..runtime import live_gpu
from . import backward_helpers, core
from .wgmma import tensor_map

FUNCTION = BACKWARD_WGMMA.function
# How dQ_i reaches the float32 accumulator in HBM (the kernel's header), per head_dim: 0,
# red.global.add.v4 from the consumers' registers; 1, staged in shared memory and added by
# bulk reductions from a producer warp while the consumers go on. Both pass the GPU tests at
# both head_dims; with the accumulator in tile order the consumers' reductions are the faster
# at both (H100, lab/NOTES.md, "wgmma backward: dQ in tile order").
DQ_WRITER = {64: 0, 128: 0}


threads = backward_wgmma_threads  # one producer warpgroup, block_k / 64 consumer warpgroups


def check_takes(cfg: AttentionConfig) -> None:
    core.check_hopper_build(cfg, BACKWARD_WGMMA, "wgmma backward")


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("--std=c++17", "-arch=sm_90a", f"-DHEAD_DIM={cfg.head_dim}",
            f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}",
            f"-DBF16={int(cfg.dtype == 'bfloat16')}", f"-DDQ_WRITER={DQ_WRITER[cfg.head_dim]}")


def build(cfg: AttentionConfig) -> core.Build:
    return core.Build(BACKWARD_WGMMA.source, FUNCTION, compile_options(cfg), threads(cfg),
                      smem_bytes(cfg, BACKWARD_WGMMA.name))


# Causal launches of at most this many key tiles per batch·head take the key tiles heaviest
# first within groups of batch·heads; longer ones, and every non-causal one, go batch·head by
# batch·head. Measured on the H200 (lab/NOTES.md, "causal key tiles heaviest first"):
# the groups gain 3-4.5% at N = 2048-8192 (head_dim 128) and lose 3% at N = 16384.
ORDERED_KEY_TILES = 64


def grid_of(cfg: AttentionConfig):
    """grid_of(bh) of one block per (key tile, batch·head) in launch order (grid_key_tile in
    kernels/include/common.cuh): groups as core.item_grid, of one batch·head past ORDERED_KEY_TILES."""
    if cfg.Tc > ORDERED_KEY_TILES:
        return lambda bh: (1, cfg.Tc, bh)
    return core.item_grid(cfg, live_gpu().sms, cfg.Tc)


def kernel_facts(cfg: AttentionConfig) -> dict:
    check_takes(cfg)
    b = build(cfg)
    return b.facts(b.compiled(), grid_of(cfg)(min(cfg.bh, core.MAX_GRID_Y)))


def prepare_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False):
    """(run, outputs) as engine.gpu.launchers.backward_mma.prepare_backward describes them."""
    check_takes(cfg)
    b = build(cfg)
    out, dQacc, flat = backward_helpers.outputs(cfg, Q, K, V, O, lse, dO, poison, tiled=True)
    fn = b.compiled()
    maps = (tensor_map(flat["Q"], cfg.block_q, cfg.dtype),
            tensor_map(flat["K"], cfg.block_k, cfg.dtype),
            tensor_map(flat["V"], cfg.block_k, cfg.dtype),
            tensor_map(flat["dO"], cfg.block_q, cfg.dtype))
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))

    # Every array is passed whole: the kernel indexes them with bh0 + its batch·head.
    def args_for(bh0, bh1):
        return (*maps, flat["lse"], flat["delta"], dQacc, flat["dK"], flat["dV"], *scalars,
                np.int32(bh1 - bh0), np.int32(bh0))

    grid = grid_of(cfg)
    backward = core.launch_loop(fn, b, cfg.Tc, cfg.bh, args_for, grid)
    run = backward_helpers.between_helpers(cfg, O, dO, out, dQacc, backward, tiled=True)
    run.operands = (Q, K, V, dO)      # the tensor maps point into these: keep them alive
    out["info"] = b.facts(fn, grid(min(cfg.bh, core.MAX_GRID_Y)))
    return run, out


def launch_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False) -> dict:
    """Run the backward once: dict(dQ=, dK=, dV=, delta=, info=) of CuPy arrays (and facts)."""
    return core.launch_once(prepare_backward, cfg, Q, K, V, O, lse, dO, poison=poison)
