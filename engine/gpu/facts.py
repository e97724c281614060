"""Compile facts of every CUDA kernel of the project, read from the compiled module on a GPU:
registers per thread, local memory per thread (register spills land there), dynamic shared
memory, threads per block and resident blocks per SM (CUDA's occupancy calculator). The
Kernel page shows them live on a GPU, and without one from a file that
`python -m benchmarks.compile_facts` recorded
(benchmarks/results/kernel_facts_*.json). CuPy is imported lazily.
"""
from __future__ import annotations

from ..model.config import AttentionConfig
from ..model import catalog, registry
from ..model.iomodel import naive_backward_row_smem_bytes, naive_row_smem_bytes
from ..model.launch import naive_row_threads
from .runtime import gpu_failures, live_gpu

# Traced builds a recording compiles beside the untraced ones: (key, head_dim, block_q, block_k).
TRACED_EXTRA = (("mma.sync", 128, 128, 32), ("wgmma", 64, 128, 128), ("wgmma", 128, 128, 128),
                ("wgmma fp8", 128, 128, 128))


def _flash_builds(k: registry.Kernel) -> list:
    """A flash kernel's builds in a recording: every catalogued shape untraced (a kernel that
    takes any shape: 64×64 tiles at both head_dims, traced too when it can trace)."""
    if k.shapes is None:
        return [(k.key, d, 64, 64, t) for d in (64, 128)
                for t in ((False, True) if k.traceable and k.direction == "forward"
                          else (False,))]
    return ([(k.key, d, bq, bk, False) for d, bq, bk in k.shapes]
            + [(k.key, *shape, True) for key, *shape in TRACED_EXTRA if key == k.key])


# (kernel key, head_dim, block_q, block_k, traced): the flash builds a recording compiles, in
# the registry's order; the naive kernels at head_dim 64 and NAIVE_SEQ.
FLASH_BUILDS = [b for k in registry.KERNELS if k.family for b in _flash_builds(k)]
NAIVE_BUILDS = tuple((k.key, 64) for k in registry.KERNELS if k.launcher == "engine.gpu.naive")
NAIVE_SEQ = 4096


def build_of(kernel: str, cfg: AttentionConfig, trace: bool):
    """(launcher Build, grid) of one kernel for cfg; ConfigError when it does not take cfg."""
    from . import naive
    from .launchers import (backward_mma, backward_teaching, backward_wgmma, core, mma,
                            teaching, wgmma, wgmma_fp8)
    gpu = live_gpu()
    if kernel == "teaching":
        return teaching.build(cfg, trace, gpu), (cfg.Tr, cfg.bh)
    if kernel == "mma.sync":
        return mma.build(cfg, trace), (cfg.Tr, cfg.bh)
    if kernel == "wgmma":
        wgmma.check_takes(cfg)
        return wgmma.build(cfg, trace), (cfg.Tr, cfg.bh)
    if kernel == "wgmma fp8":
        wgmma_fp8.check_takes(cfg)
        return wgmma_fp8.build(cfg, trace), (cfg.Tr, cfg.bh)
    if kernel == "backward teaching":
        return backward_teaching.build(cfg, trace, gpu), (cfg.Tc, cfg.bh)
    if kernel == "backward mma.sync":
        return backward_mma.build(cfg), (cfg.Tc, cfg.bh)
    if kernel == "backward wgmma":
        backward_wgmma.check_takes(cfg)
        return backward_wgmma.build(cfg), (cfg.Tc, cfg.bh)
    rows = (cfg.bh * cfg.seq_q,)
    if kernel == "naive_softmax":
        smem = naive.check_row_fits(cfg, naive_row_smem_bytes(cfg), "softmax", gpu)
        return core.Build(naive.SOURCE, naive.FUNCTION, naive.compile_options(cfg),
                          naive_row_threads(cfg), smem), rows
    if kernel == "naive_backward":
        smem = naive.check_row_fits(cfg, naive_backward_row_smem_bytes(cfg), "backward", gpu)
        return core.Build(naive.BACKWARD_SOURCE, naive.BACKWARD_FUNCTION,
                          naive.backward_compile_options(cfg), naive_row_threads(cfg),
                          smem), rows
    registry.kernel(kernel)        # ValueError naming every key when unknown
    raise ValueError(f"no compile facts of the {kernel!r} kernel")


def facts_of(kernel: str, cfg: AttentionConfig, trace: bool) -> dict:
    """Compile `kernel` for cfg and read its facts and occupancy from the module."""
    build, grid = build_of(kernel, cfg, trace)
    with gpu_failures(f"compile facts of the {kernel} kernel"):
        fn = build.compiled()
        blocks = build.blocks_per_sm(fn)
    return {"kernel": kernel, "traced": trace, "config": cfg.to_dict(),
            **build.facts(fn, grid), "static_smem_bytes": int(fn.shared_size_bytes),
            "blocks_per_sm": blocks}


def record_all(batch: int = 1, heads: int = 16, seq: int = 4096) -> tuple[list, list]:
    """(facts, failures) of every build in FLASH_BUILDS and NAIVE_BUILDS, float16 (the FP8
    build: float8_e4m3)."""
    wanted = [(k, AttentionConfig(batch=batch, heads=heads, seq_q=seq, seq_k=seq, head_dim=d,
                                  block_q=bq, block_k=bk,
                                  dtype=registry.kernel(k).usual_dtype), t)
              for k, d, bq, bk, t in FLASH_BUILDS]
    wanted += [(k, AttentionConfig(batch=batch, heads=heads, seq_q=NAIVE_SEQ, seq_k=NAIVE_SEQ,
                                   head_dim=d, dtype="float16"), False) for k, d in NAIVE_BUILDS]
    facts, failures = [], []
    for kernel, cfg, trace in wanted:
        try:
            facts.append(facts_of(kernel, cfg, trace))
        except Exception as exc:    # noqa: BLE001 — a recording lists what failed, never stops
            failures.append({"kernel": kernel, "traced": trace, "config": cfg.to_dict(),
                             "error": f"{type(exc).__name__}: {exc}"[:400]})
    return facts, failures
