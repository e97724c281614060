"""Launcher of the tensor-core backward pass (kernels/flash_backward_mma.cu): the delta
pre-kernel (D = rowsum(dO ∘ O), and zeros into the float32 dQ accumulator), the FA2 backward
kernel (one block per key tile and batch·head) and the cast of dQ to the input dtype.

Operands are contiguous CuPy arrays, either (B, H, N, d) or (B·H, N, d) (lse: (B, H, seq_q)
or (B·H, seq_q)); the gradients come back in the layout they came in. The shapes it takes
are engine.gpu.catalog.BACKWARD_MMA's.
"""
from __future__ import annotations

import numpy as np

from ...config import AttentionConfig
from ...iomodel import smem_bytes
from .. import catalog
from . import core

FUNCTION = "flash_backward_mma"
HELPER_THREADS = 256            # threads per block of the delta and cast kernels


def supported(cfg: AttentionConfig) -> bool:
    return catalog.BACKWARD_MMA.takes(cfg)


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DBF16={int(cfg.dtype == 'bfloat16')}")


def build(cfg: AttentionConfig) -> core.Build:
    """The backward kernel of cfg's shape (ConfigError with the supported list if none)."""
    b = catalog.backward_build(cfg)
    return core.Build(b.source, FUNCTION, compile_options(cfg), threads=cfg.block_k // 16 * 32,
                      smem=smem_bytes(cfg, b.name))


def kernel_facts(cfg: AttentionConfig) -> dict:
    b = build(cfg)
    return b.facts(b.compiled(), (cfg.Tc, cfg.bh))


def _helper(cfg: AttentionConfig, name: str):
    from kernels.loader import get_function
    return get_function(catalog.BACKWARD_MMA.source, name, compile_options(cfg))


def _blocks(n_threads: int) -> int:
    return max(1, -(-n_threads // HELPER_THREADS))


def prepare_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False):
    """(run, outputs): run() enqueues the three kernels, writing outputs "dQ", "dK", "dV" (in
    cfg.dtype) and "delta" (float32); outputs["info"] holds the backward kernel's compile facts."""
    b = build(cfg)
    bh, nq, nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    lead = (cfg.batch, cfg.heads) if getattr(Q, "ndim", 3) == 4 else (bh,)
    core.check_operands(cfg.dtype, Q=(Q, (*lead, nq, d)), K=(K, (*lead, nk, d)),
                        V=(V, (*lead, nk, d)), O=(O, (*lead, nq, d)), dO=(dO, (*lead, nq, d)))
    core.check_operands("float32", lse=(lse, (*lead, nq)))
    out = core.allocate({"dQ": ((*lead, nq, d), cfg.dtype), "dK": ((*lead, nk, d), cfg.dtype),
                         "dV": ((*lead, nk, d), cfg.dtype), "delta": ((*lead, nq), np.float32)},
                        poison)
    dQacc = core.allocate({"dQacc": ((bh, nq, d), np.float32)})["dQacc"]   # zeroed by delta
    flat = {name: x.reshape(bh, *x.shape[len(lead):])
            for name, x in dict(Q=Q, K=K, V=V, dO=dO, lse=lse, **out).items()}
    fn, delta_fn, cast_fn = b.compiled(), _helper(cfg, "backward_delta"), \
        _helper(cfg, "backward_dq_cast")
    rows, chunks = bh * nq, bh * nq * d // 8
    scale = np.float32(cfg.softmax_scale)

    def args_for(bh0, bh1):
        return (flat["Q"][bh0:bh1], flat["K"][bh0:bh1], flat["V"][bh0:bh1],
                flat["dO"][bh0:bh1], flat["lse"][bh0:bh1], flat["delta"][bh0:bh1],
                dQacc[bh0:bh1], flat["dK"][bh0:bh1], flat["dV"][bh0:bh1],
                np.int32(nq), np.int32(nk), scale, np.int32(cfg.causal))

    backward = core.launch_loop(fn, b, cfg.Tc, bh, args_for)

    def run():
        delta_fn((_blocks(rows * (d // 8)),), (HELPER_THREADS,),
                 (O, dO, out["delta"], dQacc, np.int64(rows)))
        backward()
        cast_fn((_blocks(chunks),), (HELPER_THREADS,), (dQacc, out["dQ"], scale, np.int64(chunks)))

    out["info"] = b.facts(fn, (cfg.Tc, bh))
    return run, out


def launch_backward(cfg: AttentionConfig, Q, K, V, O, lse, dO, *, poison: bool = False) -> dict:
    """Run the backward once: dict(dQ=, dK=, dV=, delta=, info=) of CuPy arrays (and facts)."""
    return core.launch_once(prepare_backward, cfg, Q, K, V, O, lse, dO, poison=poison)
