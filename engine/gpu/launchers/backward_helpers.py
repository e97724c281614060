"""What every build of the tensor-core backward shares: the two kernels it runs between, both
in kernels/ampere/flash_backward_mma.cu (backward_delta: D = rowsum(dO ∘ O) and zeros into the float32
dQ accumulator; backward_dq_cast: dQ = scale · accumulator in the input dtype), and the checked
operands and allocated outputs of a backward pass.
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig
from ...model import catalog
from . import core

HELPER_THREADS = 256            # threads per block of the delta and cast kernels


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    """The -D options of kernels/ampere/flash_backward_mma.cu for cfg (its helpers and its kernel)."""
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DBF16={int(cfg.dtype == 'bfloat16')}")


def helper(cfg: AttentionConfig, name: str):
    """The delta pre-kernel ("backward_delta") or the dQ cast ("backward_dq_cast") for cfg,
    from kernels/ampere/flash_backward_mma.cu (every backward build runs between these two)."""
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
