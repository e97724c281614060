"""Resident thread blocks per SM of a compiled flash kernel, from CUDA's occupancy
calculator (cuOccupancyMaxActiveBlocksPerMultiprocessor: the kernel is a driver CUfunction,
so the driver's entry point, not the runtime's, takes it). CuPy is imported lazily."""
from __future__ import annotations

from ..model.config import AttentionConfig
from .runtime import gpu_failures, live_gpu


def kernel_build(cfg: AttentionConfig, kernel: str):
    """The launcher Build (source, options, threads, shared memory) that runs cfg untraced."""
    from .launchers import mma, teaching, wgmma
    if kernel == "teaching":
        return teaching.build(cfg, False, live_gpu())
    if mma.chosen(cfg).name == "wgmma":
        return wgmma.build(cfg, False)
    return mma.build(cfg, False)


def kernel_occupancy(cfg: AttentionConfig, kernel: str) -> dict:
    """Compile (or reuse) the untraced build of `kernel` for cfg and ask CUDA how many of its
    blocks fit on one SM. ConfigError when the kernel does not take cfg."""
    build = kernel_build(cfg, kernel)
    with gpu_failures(f"occupancy of the {kernel} kernel"):
        fn = build.compiled()
        blocks = build.blocks_per_sm(fn)
    return {"blocks_per_sm": blocks, "registers_per_thread": int(fn.num_regs),
            "threads_per_block": build.threads, "smem_bytes": build.smem}
