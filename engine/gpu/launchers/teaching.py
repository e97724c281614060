"""Launcher of the teaching kernel, kernels/teaching/flash_teaching.cu: any head_dim, tile size and
dtype whose tiles fit the GPU's shared memory (layout: engine.model.iomodel.smem_parts).

prepare(cfg, Q, K, V, trace) -> (run, outputs) with the outputs of
engine.gpu.launchers.core.forward_outputs plus "info", the compile facts.
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig
from ...model.devices import GpuProfile
from ...model.launch import TEACHING_THREADS
from ...model.registry import BY_KEY
from ..runtime import ELEM_TYPES, check_arch, live_gpu
from . import core

SOURCE = BY_KEY["teaching"].source             # teaching/flash_teaching.cu
FUNCTION = BY_KEY["teaching"].function
NUM_THREADS = TEACHING_THREADS     # NUM_THREADS in the source (engine.model.launch)


def check_fits(cfg: AttentionConfig, gpu: GpuProfile) -> int:
    """Bytes of shared memory per block; SharedMemoryError when over the GPU's limit."""
    return core.check_smem(cfg, gpu, "teaching", "teaching")


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return (f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}",
            f"-DHEAD_DIM={cfg.head_dim}", f"-DELEM_T={ELEM_TYPES[cfg.dtype]}",
            f"-DCAUSAL={int(cfg.causal)}", f"-DTRACE={int(trace)}")


def build(cfg: AttentionConfig, trace: bool, gpu: GpuProfile) -> core.Build:
    return core.Build(SOURCE, FUNCTION, compile_options(cfg, trace), NUM_THREADS,
                      check_fits(cfg, gpu))


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel, writing into outputs. Compiles on first use,
    after the compute-capability gate (engine.model.arch)."""
    check_arch(cfg.dtype, "teaching")
    gpu = live_gpu()
    b = build(cfg, trace, gpu)
    bh, d, Tr = cfg.bh, cfg.head_dim, cfg.Tr
    core.check_operands(cfg.dtype, Q=(Q, (bh, cfg.seq_q, d)), K=(K, (bh, cfg.seq_k, d)),
                        V=(V, (bh, cfg.seq_k, d)))
    fn = b.compiled()
    out = outputs if outputs is not None else core.forward_outputs(cfg, trace, poison)
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale))

    run = core.launch_loop(fn, b, Tr, bh, core.forward_args(Q, K, V, out, scalars, trace, Tr))
    out["info"] = {**b.facts(fn, (Tr, bh)), "device": gpu.name}
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, trace, poison=poison)
