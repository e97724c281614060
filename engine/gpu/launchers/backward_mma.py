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
from ...model import arch
from ...model.iomodel import fitting_layout, smem_bytes
from ...model import catalog
from ...model.launch import backward_mma_threads
from ..runtime import block_smem_optin, check_arch, device_cc, device_is_hopper, live_gpu
from . import backward_helpers, backward_wgmma, core

FUNCTION = catalog.BACKWARD_MMA.function
# 1: on Hopper the wgmma backward runs the shapes it takes; 0: the mma.sync backward always.
HOPPER_WGMMA = 1
# Buffers of Q_i, dO_i, lse_i and D_i: None chooses by the GPU's shared memory (two where a
# block holds them, else one: -DQUERY_STAGES of the kernel); 1 or 2 forces it (the tests).
QUERY_STAGES = None


def query_stages(cfg: AttentionConfig, smem_optin: int) -> int:
    """The kernel's query-tile buffers for cfg on a block of smem_optin bytes."""
    if QUERY_STAGES is not None:
        return QUERY_STAGES
    layout = catalog.BACKWARD_MMA.smem_layout
    return 2 if fitting_layout(cfg, layout, smem_optin) == layout else 1


def chosen(cfg: AttentionConfig) -> catalog.TensorCoreBuild:
    """The backward build that runs cfg on this machine's GPU (ConfigError when none takes it)."""
    check_arch(cfg.dtype, "tensorcore", "backward")   # before any compile (engine.model.arch)
    return catalog.backward_build(cfg, bool(HOPPER_WGMMA) and device_is_hopper())


def supported(cfg: AttentionConfig) -> bool:
    return catalog.BACKWARD_MMA.takes(cfg)


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return backward_helpers.compile_options(cfg)


def too_big(cfg: AttentionConfig, smem: int, smem_optin: int) -> str:
    """Why cfg's tiles cannot run on this GPU, and the catalogued shapes that can."""
    fit = [s for s in catalog.BACKWARD_MMA.shapes
           if arch.shape_fits(catalog.BACKWARD_MMA, s, smem_optin, cfg.dtype)]
    shapes = "; ".join(f"head_dim {d} with {bq}×{bk}" for d, bq, bk in fit) or "none"
    gpu = (f"The {live_gpu().name} (compute capability {device_cc():.1f})" if device_cc()
           else "A GPU")
    return (f"{gpu} cannot run the tensor-core backward at head_dim {cfg.head_dim} with "
            f"block_q×block_k {cfg.block_q}×{cfg.block_k}: its tiles need {smem:,} bytes of "
            f"shared memory per block even with one query buffer, and a block may use "
            f"{smem_optin:,}. Shapes that fit: {shapes}.")


def kernel_options(cfg: AttentionConfig, stages: int) -> tuple[str, ...]:
    """The -D options of the backward kernel itself: its helpers' and -DQUERY_STAGES."""
    return compile_options(cfg) + (f"-DQUERY_STAGES={stages}",)


def build(cfg: AttentionConfig, smem_optin: int | None = None) -> core.Build:
    """The mma.sync backward kernel of cfg's shape for a block of smem_optin bytes (None: this
    GPU's, or two query buffers where there is no GPU); ConfigError with the supported list
    if it does not take cfg, SharedMemoryError when its tiles do not fit."""
    b = catalog.backward_build(cfg, hopper=False)
    if smem_optin is None and device_cc():
        smem_optin = block_smem_optin()
    stages = query_stages(cfg, smem_optin) if smem_optin else QUERY_STAGES or 2
    layout = b.smem_layout if stages == 2 else b.smem_fallback
    smem = smem_bytes(cfg, layout)
    if smem_optin and smem > smem_optin:
        raise core.SharedMemoryError(too_big(cfg, smem_bytes(cfg, b.smem_fallback), smem_optin))
    return core.Build(b.source, FUNCTION, kernel_options(cfg, stages),
                      threads=backward_mma_threads(cfg), smem=smem)


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
