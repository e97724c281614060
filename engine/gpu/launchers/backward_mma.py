"""Launcher of the tensor-core backward pass: the delta pre-kernel (D = rowsum(dO ∘ O), and
zeros into the float32 dQ accumulator), the FA2 backward kernel (one block per key tile and
batch·head) and the cast of dQ to the input dtype; the two helpers live in
kernels/ampere/flash_backward_mma.cu (launched by engine.gpu.launchers.backward_helpers).

The backward kernel is the build engine.model.catalog.backward_build names: the mma.sync one
(kernels/ampere/flash_backward_mma.cu, launched here) or, on Hopper for its shapes, the wgmma one
(engine.gpu.launchers.backward_wgmma, between the same helpers). HOPPER_WGMMA = 0 keeps the
mma.sync one on Hopper too (benchmarks set it to time both).

Operands are contiguous CuPy arrays, either (B, H, N, d) or (B·H, N, d) (lse: (B, H, seq_q)
or (B·H, seq_q)); the gradients come back in the layout they came in.
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig
from ...model.iomodel import smem_bytes
from ...model import catalog
from ...model.launch import backward_mma_threads
from ..runtime import check_arch, device_is_hopper
from . import backward_helpers, backward_wgmma, core

FUNCTION = catalog.BACKWARD_MMA.function
# 1: on Hopper the wgmma backward runs the shapes it takes; 0: the mma.sync backward always.
HOPPER_WGMMA = 1


def chosen(cfg: AttentionConfig) -> catalog.TensorCoreBuild:
    """The backward build that runs cfg on this machine's GPU (ConfigError when none takes it)."""
    check_arch(cfg.dtype, "tensorcore", "backward")   # before any compile (engine.model.arch)
    return catalog.backward_build(cfg, bool(HOPPER_WGMMA) and device_is_hopper())


def supported(cfg: AttentionConfig) -> bool:
    return catalog.BACKWARD_MMA.takes(cfg)


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return backward_helpers.compile_options(cfg)


def build(cfg: AttentionConfig) -> core.Build:
    """The mma.sync backward kernel of cfg's shape (ConfigError with the supported list if
    it does not take cfg)."""
    b = catalog.backward_build(cfg, hopper=False)
    return core.Build(b.source, FUNCTION, compile_options(cfg), threads=backward_mma_threads(cfg),
                      smem=smem_bytes(cfg, b.name))


def kernel_facts(cfg: AttentionConfig) -> dict:
    """Compile facts of the backward build that runs this config."""
    if chosen(cfg) is catalog.BACKWARD_WGMMA:
        return backward_wgmma.kernel_facts(cfg)
    b = build(cfg)
    return b.facts(b.compiled(), (cfg.Tc, cfg.bh))


def prepare_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False):
    """(run, outputs): run() enqueues the three kernels, writing outputs "dQ", "dK", "dV" (in
    cfg.dtype) and "delta" (float32); outputs["info"] holds the backward kernel's compile facts."""
    if chosen(cfg) is catalog.BACKWARD_WGMMA:
        return backward_wgmma.prepare_backward(cfg, Q, K, V, O, lse, dO, poison=poison)
    b = build(cfg)
    out, dQacc, flat = backward_helpers.outputs(cfg, Q, K, V, O, lse, dO, poison)
    fn = b.compiled()
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))

    def args_for(bh0, bh1):
        return (flat["Q"][bh0:bh1], flat["K"][bh0:bh1], flat["V"][bh0:bh1],
                flat["dO"][bh0:bh1], flat["lse"][bh0:bh1], flat["delta"][bh0:bh1],
                dQacc[bh0:bh1], flat["dK"][bh0:bh1], flat["dV"][bh0:bh1], *scalars)

    backward = core.launch_loop(fn, b, cfg.Tc, cfg.bh, args_for)
    run = backward_helpers.between_helpers(cfg, O, dO, out, dQacc, backward)
    out["info"] = b.facts(fn, (cfg.Tc, cfg.bh))
    return run, out


def launch_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False) -> dict:
    """Run the backward once: dict(dQ=, dK=, dV=, delta=, info=) of CuPy arrays (and facts)."""
    return core.launch_once(prepare_backward, cfg, Q, K, V, O, lse, dO, poison=poison)
