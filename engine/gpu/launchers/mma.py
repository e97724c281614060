"""Launcher of kernel="tensorcore": dispatches each config to the build engine.gpu.catalog
names for it — the mma.sync kernel here (kernels/flash_tensorcore.cu), or the Hopper wgmma
kernel (engine.gpu.launchers.wgmma) — with the interface of every flash launcher
(prepare / launch / kernel_facts, the outputs of core.forward_outputs).
"""
from __future__ import annotations

import numpy as np

from ...config import AttentionConfig
from ...iomodel import smem_bytes
from .. import catalog
from ..runtime import device_is_hopper, live_gpu
from . import core, wgmma

FUNCTION = "flash_tensorcore"
THREADS = 128                # four warps, each owning block_q / 4 query rows


def chosen(cfg: AttentionConfig) -> catalog.TensorCoreBuild:
    """The build that runs cfg on this machine's GPU (ConfigError when none takes it)."""
    return catalog.tensorcore_build(cfg, device_is_hopper())


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DBF16={int(cfg.dtype == 'bfloat16')}")


def build(cfg: AttentionConfig, trace: bool) -> core.Build:
    return core.Build(catalog.MMA_SYNC.source, FUNCTION, compile_options(cfg, trace), THREADS,
                      smem_bytes(cfg, catalog.MMA_SYNC.name))


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    """Compile facts of the build that runs this config."""
    if chosen(cfg) is catalog.WGMMA:
        return wgmma.kernel_facts(cfg, trace)
    b = build(cfg, trace)
    return b.facts(b.compiled(), core.item_grid(cfg, live_gpu().sms)(cfg.bh))


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel, writing into outputs. Compiles on first use.
    Q (B·H, seq_q, d), K and V (B·H, seq_k, d): contiguous CuPy arrays of cfg.dtype."""
    if chosen(cfg) is catalog.WGMMA:
        return wgmma.prepare(cfg, Q, K, V, trace, outputs, poison)
    bh, d, Tr = cfg.bh, cfg.head_dim, cfg.Tr
    core.check_operands(cfg.dtype, Q=(Q, (bh, cfg.seq_q, d)), K=(K, (bh, cfg.seq_k, d)),
                        V=(V, (bh, cfg.seq_k, d)))
    b = build(cfg, trace)
    fn = b.compiled()
    out = outputs if outputs is not None else core.forward_outputs(cfg, trace, poison)
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))
    grid_of = core.item_grid(cfg, live_gpu().sms)
    args_for = core.forward_args(Q, K, V, out, scalars, trace, Tr, with_count=True)
    run = core.launch_loop(fn, b, Tr, bh, args_for, grid_of)
    out["info"] = b.facts(fn, grid_of(bh))
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, trace, poison=poison)
