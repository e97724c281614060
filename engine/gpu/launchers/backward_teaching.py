"""Launcher of the teaching backward kernel, kernels/teaching/flash_backward_teaching.cu: any head_dim,
tile size and dtype whose tiles fit the GPU's shared memory (layout: engine.model.iomodel.smem_parts,
kernel "backward teaching").

prepare(cfg, Q, K, V, O, lse, dO, trace) -> (run, outputs). run() enqueues, on the current
stream: D = rowsum(dO ∘ O) (backward_delta), a zeroed float32 dQ accumulator, the main kernel
over grid (Tc, B·H), and the cast of the accumulator to dQ (cast_rows); traced, dq_norm is then
summed from the kernel's per-tile dQ parts in key-tile order. Outputs (CuPy):
  "dQ" (B·H, seq_q, d), "dK", "dV" (B·H, seq_k, d) in cfg.dtype; "delta" (B·H, seq_q) and
  "dQ_accum" (B·H, seq_q, d) float32; with trace "p_rowsum", "dq_norm" (B·H, seq_q, Tc),
  "dk_norm", "dv_norm" (B·H, seq_k, Tr), "dq_part" (B·H, seq_q, Tc, d), float32, and per thread
  block (record bh·Tc + j) "sm_id", "start_ns", "end_ns"; and "info", the compile facts.
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig
from ...model.devices import GpuProfile
from ...model.launch import BACKWARD_TEACHING_THREADS
from ...model.registry import BY_KEY
from ...results import BLOCK_FIELDS
from ..runtime import live_gpu
from . import core
from .teaching import compile_options

SOURCE = BY_KEY["backward teaching"].source    # teaching/flash_backward_teaching.cu
FUNCTION, DELTA_FUNCTION, CAST_FUNCTION = BY_KEY["backward teaching"].functions
NUM_THREADS = BACKWARD_TEACHING_THREADS   # NUM_THREADS in the source (engine.model.launch)
ROWS_PER_DELTA_BLOCK = NUM_THREADS // 32    # backward_delta: one warp per row
MAX_CAST_BLOCKS = 1 << 16    # cast_rows loops over the rest (grid-stride)
SMEM_LAYOUT = "backward teaching"
# Traced arrays the kernel writes: per query row and key tile, then per key and query tile.
ROW_TRACE = ("p_rowsum",)
KEY_TRACE = ("dk_norm", "dv_norm")


def check_fits(cfg: AttentionConfig, gpu: GpuProfile) -> int:
    """Bytes of shared memory per block; SharedMemoryError when over the GPU's limit."""
    return core.check_smem(cfg, gpu, SMEM_LAYOUT, "teaching backward")


def build(cfg: AttentionConfig, trace: bool, gpu: GpuProfile) -> core.Build:
    return core.Build(SOURCE, FUNCTION, compile_options(cfg, trace), NUM_THREADS,
                      check_fits(cfg, gpu))


def allocate_outputs(cfg: AttentionConfig, trace: bool, poison: bool = False) -> dict:
    bh, nq, nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    spec = {"dQ": ((bh, nq, d), cfg.dtype), "dK": ((bh, nk, d), cfg.dtype),
            "dV": ((bh, nk, d), cfg.dtype), "delta": ((bh, nq), np.float32),
            "dQ_accum": ((bh, nq, d), np.float32)}
    if trace:
        spec.update({name: ((bh, nq, cfg.Tc), np.float32) for name in ROW_TRACE + ("dq_norm",)})
        spec.update({name: ((bh, nk, cfg.Tr), np.float32) for name in KEY_TRACE})
        spec["dq_part"] = ((bh, nq, cfg.Tc, d), np.float32)
        spec.update(core.block_spec(bh * cfg.Tc))
    return core.allocate(spec, poison)


def dq_norms(dq_part, dq_norm) -> None:
    """dq_norm[., r, j] = ||sum over key tiles j' <= j of dq_part[., r, j', :]||, on the current
    stream, with one temporary the size of dq_part."""
    import cupy
    running = cupy.cumsum(dq_part, axis=2)
    cupy.multiply(running, running, out=running)
    cupy.sqrt(running.sum(axis=3), out=dq_norm)


def prepare(cfg: AttentionConfig, Q, K, V, O, lse, dO, trace: bool, poison: bool = False):
    """(run, outputs): run() enqueues the backward pass, writing into outputs (see above).
    Compiles on first use."""
    gpu = live_gpu()
    b = build(cfg, trace, gpu)
    bh, nq, nk, d, Tc = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim, cfg.Tc
    core.check_operands(cfg.dtype, Q=(Q, (bh, nq, d)), K=(K, (bh, nk, d)), V=(V, (bh, nk, d)),
                        O=(O, (bh, nq, d)), dO=(dO, (bh, nq, d)))
    core.check_operands("float32", lse=(lse, (bh, nq)))
    fn = b.compiled()
    # The two small kernels live in the same source: the same module, compiled once.
    delta_fn = core.Build(SOURCE, DELTA_FUNCTION, b.options, NUM_THREADS, 0).compiled()
    cast_fn = core.Build(SOURCE, CAST_FUNCTION, b.options, NUM_THREADS, 0).compiled()
    out = allocate_outputs(cfg, trace, poison)
    scalars = (np.int32(nq), np.int32(nk), np.float32(cfg.softmax_scale))

    def args_for(bh0, bh1):
        traced = ([out[k][bh0:bh1] for k in ROW_TRACE + ("dq_part",) + KEY_TRACE]
                  + [out[k][bh0 * Tc:bh1 * Tc] for k in BLOCK_FIELDS]
                  if trace else [core.NULL] * 7)
        return (Q[bh0:bh1], K[bh0:bh1], V[bh0:bh1], dO[bh0:bh1], lse[bh0:bh1],
                out["delta"][bh0:bh1], out["dQ_accum"][bh0:bh1], out["dK"][bh0:bh1],
                out["dV"][bh0:bh1], *scalars, *traced)

    main = core.launch_loop(fn, b, Tc, bh, args_for)
    rows, n_dq = bh * nq, bh * nq * d
    delta_grid = (-(-rows // ROWS_PER_DELTA_BLOCK),)
    cast_grid = (min(-(-n_dq // NUM_THREADS), MAX_CAST_BLOCKS),)

    def run():
        delta_fn(delta_grid, (NUM_THREADS,), (O, dO, out["delta"], np.int64(rows)))
        out["dQ_accum"].fill(0)
        main()
        cast_fn(cast_grid, (NUM_THREADS,), (out["dQ_accum"], out["dQ"], np.int64(n_dq)))
        if trace:
            dq_norms(out["dq_part"], out["dq_norm"])

    out["info"] = {**b.facts(fn, (Tc, bh)), "device": gpu.name}
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, O, lse, dO, trace: bool, *,
           poison: bool = False) -> dict:
    """Run the backward once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, O, lse, dO, trace, poison=poison)
