"""The Overview page's key figures for a config on a GPU (model figures, exact for the config)."""
from __future__ import annotations

import engine
from engine import iomodel
from engine.cpu.forward import processed_tiles


def kib(n: float) -> str:
    """Shared-memory sizes, in KiB as the CUDA guide gives them."""
    return f"{n / 1024:.1f} KiB"


def gib(n: float) -> str:
    """Device memory, in GiB as vendors size it (an H200 has 141 GiB)."""
    return f"{n / 2**30:.0f} GiB"


def key_figures(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> list[tuple[str, str, str]]:
    """(label, value, explanation) for the Overview page."""
    naive_mem, flash_mem = iomodel.peak_memory(cfg, "naive"), iomodel.peak_memory(cfg, "flash")
    naive_io, flash_io = iomodel.naive_hbm(cfg).total, iomodel.flash_hbm(cfg).total
    budget = iomodel.smem_budget(cfg, gpu)
    blocks = cfg.bh * cfg.Tr
    slots = gpu.sms * budget.blocks_per_sm
    processed = int(processed_tiles(cfg).sum())
    return [
        ("peak memory, naive", iomodel.format_bytes(naive_mem),
         "Q, K, V, O and the N×N matrices S and P"),
        ("peak memory, flash", iomodel.format_bytes(flash_mem), "Q, K, V, O and the row log-sum-exp"),
        ("HBM traffic, naive", iomodel.format_bytes(naive_io), "S and P written and read back"),
        ("HBM traffic, flash", iomodel.format_bytes(flash_io),
         f"{naive_io / flash_io:.1f}× less: K and V read once per query tile"),
        ("tiles of S (Tr × Tc)", f"{cfg.Tr} × {cfg.Tc}",
         f"{processed} computed" + (", the rest skipped by the causal mask" if cfg.causal
                                   else "")),
        ("thread blocks", f"{blocks:,}",
         f"one per batch·head and query tile; {-(-blocks // slots)} wave(s) on {gpu.sms} SMs"
         if slots else "none can launch: the tiles do not fit in shared memory"),
        ("shared memory per block", kib(budget.total),
         f"limit {kib(budget.limit)}: " + ("fits" if budget.fits else "does NOT fit")),
    ]
