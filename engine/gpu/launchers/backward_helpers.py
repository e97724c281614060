"""What every build of the tensor-core backward shares: the two kernels it runs between, both
in kernels/ampere/flash_backward_mma.cu (backward_delta: D = rowsum(dO ∘ O) and zeros into the float32
dQ accumulator; backward_dq_cast: dQ = scale · accumulator in the input dtype), and the checked
operands and allocated outputs of a backward pass. The wgmma build keeps its accumulator in
tile order (whole query tiles, each in its consumers' fragment order: tiled=True), which
backward_dq_cast_tiles reads back into rows.
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


def outputs(cfg: AttentionConfig, Q, K, V, O, lse, dO, poison: bool, tiled: bool = False):
    """Check the operands and allocate the outputs of a backward pass: (out, dQacc, flat).
    out: "dQ", "dK", "dV" (cfg.dtype) and "delta" (float32) in the operands' layout; dQacc:
    the (B·H, seq_q, d) float32 dQ accumulator, or (tiled) (B·H, Tr · Br, d), whole query
    tiles (zeroed by run(), not here); flat: the operands and outputs as (B·H, ...) views, by
    name."""
    bh, nq, nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    lead = (cfg.batch, cfg.heads) if getattr(Q, "ndim", 3) == 4 else (bh,)
    core.check_operands(cfg.dtype, Q=(Q, (*lead, nq, d)), K=(K, (*lead, nk, d)),
                        V=(V, (*lead, nk, d)), O=(O, (*lead, nq, d)), dO=(dO, (*lead, nq, d)))
    core.check_operands("float32", lse=(lse, (*lead, nq)))
    out = core.allocate({"dQ": ((*lead, nq, d), cfg.dtype), "dK": ((*lead, nk, d), cfg.dtype),
                         "dV": ((*lead, nk, d), cfg.dtype), "delta": ((*lead, nq), np.float32)},
                        poison)
    acc_rows = cfg.Tr * cfg.block_q if tiled else nq
    dQacc = core.allocate({"dQacc": ((bh, acc_rows, d), np.float32)})["dQacc"]
    flat = {name: x.reshape(bh, *x.shape[len(lead):])
            for name, x in dict(Q=Q, K=K, V=V, dO=dO, lse=lse, **out).items()}
    return out, dQacc, flat


def between_helpers(cfg: AttentionConfig, O, dO, out: dict, dQacc, backward,
                    tiled: bool = False):
    """run() enqueueing the delta kernel (D into out["delta"], zeros into dQacc: its first
    B·H · seq_q · d floats, and where tiled rows pad a ragged last query tile, a memset of the
    rest), then backward(), then the cast of scale · dQacc into out["dQ"] (tiled: from tile
    order)."""
    import cupy
    delta_fn = helper(cfg, "backward_delta")
    cast_fn = helper(cfg, "backward_dq_cast_tiles" if tiled else "backward_dq_cast")
    rows, chunks = cfg.bh * cfg.seq_q, cfg.bh * cfg.seq_q * cfg.head_dim // 8
    # tiled: one thread per 16 floats of the accumulator (a quad of its float4 columns)
    quads = cfg.bh * cfg.Tr * cfg.block_q * cfg.head_dim // 16
    zeroed = rows * cfg.head_dim * 4                  # bytes the delta kernel zeroes
    tail = dQacc.nbytes - zeroed
    scale = np.float32(cfg.softmax_scale)
    cast_args = ((dQacc, out["dQ"], scale, np.int64(quads), np.int32(cfg.seq_q),
                  np.int32(cfg.Tr)) if tiled else (dQacc, out["dQ"], scale, np.int64(chunks)))

    def run():
        delta_fn((_blocks(rows * (cfg.head_dim // 8)),), (HELPER_THREADS,),
                 (O, dO, out["delta"], dQacc, np.int64(rows)))
        if tail:
            cupy.cuda.runtime.memsetAsync(dQacc.data.ptr + zeroed, 0, tail,
                                          cupy.cuda.get_current_stream().ptr)
        backward()
        cast_fn((_blocks(quads if tiled else chunks),), (HELPER_THREADS,), cast_args)

    return run
