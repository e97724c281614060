"""The tile-size explorer's model: for every (block_q, block_k) of the allowed sizes, the
shared memory of one thread block, resident blocks per SM, waves over the SMs, HBM bytes
moved and a roofline time, for the teaching and the tensor-core kernel on a GPU profile; and
the paper's choice of tiles. Pure Python and NumPy: no GPU needed, and every figure is a
model (the live GPU's occupancy and times come from engine.gpu.tilesweep).
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import BLOCK_SIZES, AttentionConfig
from .devices import GpuProfile
from . import catalog
from .iomodel import RESERVED_SMEM_PER_BLOCK, flash_hbm, smem_bytes
from .launch import MMA_SYNC_THREADS, TEACHING_THREADS, wgmma_threads
from .rates import peak_rate

REGISTER_ALLOCATION = 256        # registers are given to a warp in units of 256 (cc 7.0-9.0)


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    limited_by: str              # "shared memory", "threads", "registers", "blocks per SM",
    #                              or "does not fit"


def model_occupancy(gpu: GpuProfile, smem: int, threads: int,
                    registers: int | None = None) -> Occupancy:
    """Resident blocks per SM, as CUDA's occupancy calculator counts them: the smallest of
    what shared memory (with the runtime's 1 KiB per block), threads, registers (when known)
    and the per-SM block limit allow."""
    if smem > gpu.smem_per_block_optin:
        return Occupancy(0, "does not fit")
    limits = {"shared memory": gpu.smem_per_sm // (smem + RESERVED_SMEM_PER_BLOCK),
              "threads": gpu.max_threads_per_sm // threads,
              "blocks per SM": gpu.max_blocks_per_sm}
    if registers:
        per_warp = -(-registers * 32 // REGISTER_ALLOCATION) * REGISTER_ALLOCATION
        limits["registers"] = (gpu.regs_per_sm // per_warp) // (threads // 32)
    by = min(limits, key=limits.get)
    return Occupancy(int(limits[by]), by)


def waves(cfg: AttentionConfig, gpu: GpuProfile, blocks_per_sm: int) -> int:
    """Waves of thread blocks (one per batch·head and query tile) over the SMs."""
    if blocks_per_sm <= 0:
        return 0
    return -(-cfg.bh * cfg.Tr // (gpu.sms * blocks_per_sm))


def busy_fraction(cfg: AttentionConfig, gpu: GpuProfile, blocks_per_sm: int) -> float:
    """Average fraction of SMs with work over the waves: every wave but the last keeps all SMs
    busy; the last keeps min(SMs, blocks left) busy."""
    n_waves = waves(cfg, gpu, blocks_per_sm)
    if n_waves == 0:
        return 0.0
    left = cfg.bh * cfg.Tr - (n_waves - 1) * gpu.sms * blocks_per_sm
    return ((n_waves - 1) * gpu.sms + min(gpu.sms, left)) / (n_waves * gpu.sms)


def model_ms(cfg: AttentionConfig, gpu: GpuProfile, kernel: str, blocks_per_sm: int) -> float:
    """Roofline time: max(HBM bytes ÷ bandwidth, FLOPs ÷ peak) ÷ the busy fraction of SMs.
    Peak: engine.model.rates.peak_rate of the config's dtype on `kernel` (FP32 on the CUDA
    cores for the teaching kernel, dense 16-bit tensor cores for the tensor-core kernel;
    datasheet figures). NaN when the tiles do not fit or a figure is missing."""
    busy = busy_fraction(cfg, gpu, blocks_per_sm)
    peak = peak_rate(gpu, cfg.dtype, kernel).tflops
    if busy == 0 or not peak == peak or not gpu.hbm_gbps == gpu.hbm_gbps:
        return float("nan")
    seconds = max(flash_hbm(cfg).total / (gpu.hbm_gbps * 1e9), cfg.flops / (peak * 1e12))
    return seconds / busy * 1e3


@dataclass(frozen=True)
class PaperChoice:
    M: int               # SRAM size in elements of the input dtype (shared memory per SM)
    Bc_formula: int      # ceil(M / 4d)
    Br_formula: int      # min(Bc, d)
    block_q: int         # rounded down to the allowed sizes
    block_k: int

    def rounding(self) -> str:
        return (f"Bc = ⌈M / 4d⌉ = {self.Bc_formula} and Br = min(Bc, d) = {self.Br_formula}, "
                f"each rounded down to the largest allowed size ({', '.join(map(str, BLOCK_SIZES))}) "
                f"not above it (the smallest, {BLOCK_SIZES[0]}, when below): block_q = "
                f"{self.block_q}, block_k = {self.block_k}")


def _round_down(x: int) -> int:
    return max([b for b in BLOCK_SIZES if b <= x], default=BLOCK_SIZES[0])


def paper_tiles(cfg: AttentionConfig, gpu: GpuProfile) -> PaperChoice:
    """FlashAttention's Algorithm 1: Bc = ⌈M / 4d⌉, Br = min(Bc, d), M the SRAM size in
    elements (here the shared memory of one SM, in the config's dtype)."""
    M = gpu.smem_per_sm // cfg.itemsize
    Bc = -(-M // (4 * cfg.head_dim))
    Br = min(Bc, cfg.head_dim)
    return PaperChoice(M, Bc, Br, _round_down(Br), _round_down(Bc))


def tensorcore_smem_threads(cfg: AttentionConfig, hopper: bool) -> tuple[int, int] | None:
    """(shared memory bytes, threads) of the tensor-core build that takes cfg (the kernel
    catalog, engine.model.catalog; threads: engine.model.launch), or None."""
    if not catalog.tensorcore_takes(cfg, hopper):
        return None
    build = catalog.tensorcore_build(cfg, hopper)
    threads = wgmma_threads(cfg) if build is catalog.WGMMA else MMA_SYNC_THREADS
    return smem_bytes(cfg, build.name), threads


def tile_rows(cfg: AttentionConfig, gpu: GpuProfile) -> list[dict]:
    """One row per kernel and (block_q, block_k): the model's figures. The tensor-core rows
    hold only the shapes its builds take on this GPU (compute capability 9.x adds wgmma)."""
    hopper = gpu.compute_capability.startswith("9")
    rows = []
    for bq in BLOCK_SIZES:
        for bk in BLOCK_SIZES:
            c = cfg.with_(block_q=bq, block_k=bk)
            hbm = flash_hbm(c)
            shared = {"block_q": bq, "block_k": bk, "hbm_bytes": hbm.total,
                      "kv_bytes": hbm.parts["read K"] + hbm.parts["read V"],
                      "kv_passes": c.Tr, "blocks": c.bh * c.Tr}
            smem = smem_bytes(c, "teaching")
            occ = model_occupancy(gpu, smem, TEACHING_THREADS)
            rows.append({**shared, "kernel": "teaching", "smem_bytes": smem,
                         "fits": occ.limited_by != "does not fit",
                         "blocks_per_sm": occ.blocks_per_sm, "limited_by": occ.limited_by,
                         "waves": waves(c, gpu, occ.blocks_per_sm),
                         "model_ms": model_ms(c, gpu, "teaching", occ.blocks_per_sm)})
            tc = tensorcore_smem_threads(c, hopper)
            if tc is not None:
                occ = model_occupancy(gpu, tc[0], tc[1])
                rows.append({**shared, "kernel": "tensorcore", "smem_bytes": tc[0],
                             "fits": occ.limited_by != "does not fit",
                             "blocks_per_sm": occ.blocks_per_sm, "limited_by": occ.limited_by,
                             "waves": waves(c, gpu, occ.blocks_per_sm),
                             "model_ms": model_ms(c, gpu, "tensorcore", occ.blocks_per_sm)})
    return rows
