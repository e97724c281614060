"""Figures the sidebar and several pages show: the Overview's key figures for a config on a GPU
(model figures, exact for the config) and its guide to every page, the device's figures with
their sources (sizes and rates in the one unit system of engine.model.units), the HBM traffic
in words, why no GPU is used as a plain sentence."""
from __future__ import annotations

import engine
from engine.model import iomodel
from engine.model.devices import device_facts
from engine.model.tiles import processed_count
from engine.model.units import format_bytes

from app.page_list import PAGES


def device_table(gpu: engine.GpuProfile) -> list[dict]:
    """Every figure of `gpu` (engine.model.devices.device_facts) as table rows: its value in
    the one unit system and whether it is a datasheet figure, a CUDA attribute, the CUDA
    guide's or measured."""
    return [{"figure": f.label, "value": f.text, "kind": f.kind, "source": f.source}
            for f in device_facts(gpu)]


def key_figures(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> list[tuple[str, str, str]]:
    """(label, value, explanation) for the Overview page."""
    naive_mem, flash_mem = iomodel.peak_memory(cfg, "naive"), iomodel.peak_memory(cfg, "flash")
    naive_io, flash_io = iomodel.naive_hbm(cfg).total, iomodel.flash_hbm(cfg).total
    budget = iomodel.smem_budget(cfg, gpu)
    blocks = cfg.bh * cfg.Tr
    slots = gpu.sms * budget.blocks_per_sm
    processed = processed_count(cfg)
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
        ("shared memory per block", format_bytes(budget.total),
         f"limit {format_bytes(budget.limit)}: " + ("fits" if budget.fits else "does NOT fit")),
    ]


# Why no GPU is used, in one plain sentence for the audience (engine.devices.probe_gpu's
# reasons start with these words; its full text, exception included, goes to an expander).
DEVICE_SENTENCES = (
    ("CuPy is not installed", "CuPy is not installed here, so no GPU can be used."),
    ("No usable CUDA driver", "No CUDA driver or GPU was found on this machine."),
    ("CuPy found no CUDA device", "No CUDA driver or GPU was found on this machine."),
    ("The GPU is present", "A GPU is present, but CUDA kernels cannot be compiled or run here."),
    ("A probe kernel ran", "A GPU is present, but a test kernel gave a wrong answer."),
    ("Reading the GPU's properties", "A GPU is present, but its properties could not be read."),
    ("CPU emulation was chosen", "CPU emulation was chosen."),
)


def device_sentence(reason: str) -> str:
    """Why the app emulates instead of running on a GPU, without exception text."""
    for start, sentence in DEVICE_SENTENCES:
        if reason.startswith(start):
            return sentence
    return "No GPU can be used here."


def theta_text(cfg: engine.AttentionConfig, gpu: engine.GpuProfile, counted: int) -> str:
    """The paper's Θ(N²d²/M) as what it is, an order of growth with no constant, beside a
    byte count of this config: the term's value and the constant relating the two."""
    theta = iomodel.paper_theta_bytes(cfg, gpu)
    M = theta["M_elements"]
    return (f"The paper's bound Θ(N²d²/M) is an order of growth, not a byte count: with M = "
            f"{M:,.0f} elements of {cfg.dtype} (shared memory per SM), B·H·N_q·N_k·d²/M "
            f"elements of {cfg.itemsize} bytes are {iomodel.format_bytes(theta['flash'])}, "
            f"and the count of "
            f"{iomodel.format_bytes(counted)} is {counted / theta['flash']:.1f}× that: the "
            f"constant the Θ drops, set by the tiles (its analysis takes tiles of about "
            f"M/4d = {M / (4 * cfg.head_dim):,.0f} rows; these are {cfg.block_q}×"
            f"{cfg.block_k})")


def hbm_text(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> str:
    """What the IO model says about HBM traffic and memory for this config, with the paper's
    Θ(N²d²/M) beside the exact count."""
    naive, flash = iomodel.naive_hbm(cfg).total, iomodel.flash_hbm(cfg).total
    return (f"Memory drops from N² to N: naive holds S and P, flash only Q, K, V, O and one "
            f"log-sum-exp per row. HBM traffic does not drop to N: flash reads K and V once per "
            f"query tile, about 2·N²·d·bytes/block_q, so it still grows as N² (the paper's "
            f"Θ(N²d²/M), M = shared memory per SM in elements). For this config the model "
            f"counts {iomodel.format_bytes(flash)} for flash against "
            f"{iomodel.format_bytes(naive)} for naive ({naive / flash:.1f}× less at "
            f"block_q = {cfg.block_q}). {theta_text(cfg, gpu, flash)} Concurrent query tiles "
            f"often find K and V "
            f"again in L2 ({iomodel.format_bytes(gpu.l2_bytes)} on {gpu.name}), so measured "
            f"HBM traffic can be lower still.")


# (title, line) for each page in menu order: the Overview's guide to the app
PAGE_GUIDE = tuple((row.title, row.guide) for row in PAGES)
