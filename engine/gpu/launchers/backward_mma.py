"""Launcher of the tensor-core backward pass: the delta pre-kernel (D = rowsum(dO ∘ O), and
zeros into the float32 dQ accumulator), the FA2 backward kernel (one block per key tile and
batch·head) and the cast of dQ to the input dtype; the two helpers live in
kernels/flash_backward_mma.cu.

The backward kernel is the build engine.gpu.catalog.backward_build names: the mma.sync one
(kernels/flash_backward_mma.cu, launched here) or, on Hopper for its shapes, the wgmma one
(engine.gpu.launchers.backward_wgmma, between the same helpers). HOPPER_WGMMA = 0 keeps the
mma.sync one on Hopper too (benchmarks set it to time both).

Operands are contiguous CuPy arrays, either (B, H, N, d) or (B·H, N, d) (lse: (B, H, seq_q)
or (B·H, seq_q)); the gradients come back in the layout they came in.
"""
from __future__ import annotations

import numpy as np

from ...config import AttentionConfig
from ...iomodel import smem_bytes
from .. import catalog
from ..runtime import device_is_hopper
from . import core

FUNCTION = "flash_backward_mma"
HELPER_THREADS = 256            # threads per block of the delta and cast kernels
# 1: on Hopper the wgmma backward runs the shapes it takes; 0: the mma.sync backward always.
HOPPER_WGMMA = 1


def chosen(cfg: AttentionConfig) -> catalog.TensorCoreBuild:
    """The backward build that runs cfg on this machine's GPU (ConfigError when none takes it)."""
    return catalog.backward_build(cfg, bool(HOPPER_WGMMA) and device_is_hopper())


def _wgmma():
    """engine.gpu.launchers.backward_wgmma, imported on use: it builds on this module's
    outputs() and between_helpers()."""
    from . import backward_wgmma
    return backward_wgmma


def supported(cfg: AttentionConfig) -> bool:
    return catalog.BACKWARD_MMA.takes(cfg)


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DBF16={int(cfg.dtype == 'bfloat16')}")


def build(cfg: AttentionConfig) -> core.Build:
    """The mma.sync backward kernel of cfg's shape (ConfigError with the supported list if
    it does not take cfg)."""
    b = catalog.backward_build(cfg, hopper=False)
    return core.Build(b.source, FUNCTION, compile_options(cfg), threads=cfg.block_k // 16 * 32,
                      smem=smem_bytes(cfg, b.name))


def kernel_facts(cfg: AttentionConfig) -> dict:
    """Compile facts of the backward build that runs this config."""
    if chosen(cfg) is catalog.BACKWARD_WGMMA:
        return _wgmma().kernel_facts(cfg)
    b = build(cfg)
    return b.facts(b.compiled(), (cfg.Tc, cfg.bh))


def helper(cfg: AttentionConfig, name: str):
    """The delta pre-kernel ("backward_delta") or the dQ cast ("backward_dq_cast") for cfg,
    from kernels/flash_backward_mma.cu (every backward build runs between these two)."""
    from kernels.loader import get_function
    return get_function(catalog.BACKWARD_MMA.source, name, compile_options(cfg))


def _blocks(n_threads: int) -> int:
    return max(1, -(-n_threads // HELPER_THREADS))


def outputs(cfg: AttentionConfig, Q, K, V, O, lse, dO, poison: bool):
    """Check the operands and allocate the outputs of a backward pass: (out, dQacc, flat).
    out: "dQ", "dK", "dV" (cfg.dtype) and "delta" (float32) in the operands' layout; dQacc:
    the (B·H, seq_q, d) float32 dQ accumulator (zeroed by the delta kernel, not here);
    flat: the operands and outputs as (B·H, ...) views, by name."""
    bh, nq, nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    lead = (cfg.batch, cfg.heads) if getattr(Q, "ndim", 3) == 4 else (bh,)
    core.check_operands(cfg.dtype, Q=(Q, (*lead, nq, d)), K=(K, (*lead, nk, d)),
                        V=(V, (*lead, nk, d)), O=(O, (*lead, nq, d)), dO=(dO, (*lead, nq, d)))
    core.check_operands("float32", lse=(lse, (*lead, nq)))
    out = core.allocate({"dQ": ((*lead, nq, d), cfg.dtype), "dK": ((*lead, nk, d), cfg.dtype),
                         "dV": ((*lead, nk, d), cfg.dtype), "delta": ((*lead, nq), np.float32)},
                        poison)
    dQacc = core.allocate({"dQacc": ((bh, nq, d), np.float32)})["dQacc"]
    flat = {name: x.reshape(bh, *x.shape[len(lead):])
            for name, x in dict(Q=Q, K=K, V=V, dO=dO, lse=lse, **out).items()}
    return out, dQacc, flat


def between_helpers(cfg: AttentionConfig, O, dO, out: dict, dQacc, backward):
    """run() enqueueing the delta kernel (D into out["delta"], zeros into dQacc), then
    backward(), then the cast of scale · dQacc into out["dQ"]."""
    delta_fn, cast_fn = helper(cfg, "backward_delta"), helper(cfg, "backward_dq_cast")
    rows, chunks = cfg.bh * cfg.seq_q, cfg.bh * cfg.seq_q * cfg.head_dim // 8
    scale = np.float32(cfg.softmax_scale)

    def run():
        delta_fn((_blocks(rows * (cfg.head_dim // 8)),), (HELPER_THREADS,),
                 (O, dO, out["delta"], dQacc, np.int64(rows)))
        backward()
        cast_fn((_blocks(chunks),), (HELPER_THREADS,), (dQacc, out["dQ"], scale, np.int64(chunks)))

    return run


def prepare_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False):
    """(run, outputs): run() enqueues the three kernels, writing outputs "dQ", "dK", "dV" (in
    cfg.dtype) and "delta" (float32); outputs["info"] holds the backward kernel's compile facts."""
    if chosen(cfg) is catalog.BACKWARD_WGMMA:
        return _wgmma().prepare_backward(cfg, Q, K, V, O, lse, dO, poison=poison)
    b = build(cfg)
    out, dQacc, flat = outputs(cfg, Q, K, V, O, lse, dO, poison)
    fn = b.compiled()
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))

    def args_for(bh0, bh1):
        return (flat["Q"][bh0:bh1], flat["K"][bh0:bh1], flat["V"][bh0:bh1],
                flat["dO"][bh0:bh1], flat["lse"][bh0:bh1], flat["delta"][bh0:bh1],
                dQacc[bh0:bh1], flat["dK"][bh0:bh1], flat["dV"][bh0:bh1], *scalars)

    backward = core.launch_loop(fn, b, cfg.Tc, cfg.bh, args_for)
    run = between_helpers(cfg, O, dO, out, dQacc, backward)
    out["info"] = b.facts(fn, (cfg.Tc, cfg.bh))
    return run, out


def launch_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False) -> dict:
    """Run the backward once: dict(dQ=, dK=, dV=, delta=, info=) of CuPy arrays (and facts)."""
    return core.launch_once(prepare_backward, cfg, Q, K, V, O, lse, dO, poison=poison)
