"""The Decoding page's one HBM floor: K and V bytes at the bandwidth of
engine.model.rates.hbm_floor_bandwidth (the datasheet's, the one figure no stream passes),
the fraction of it a timing reaches, and that fraction in words, flagged where it passes 1.

Recorded files before this floor drew theirs at a copy bandwidth measured on the H200 (4.3 TB/s,
bytes read + written); PyTorch's read-only decode step beat that copy (floor_fraction up to
1.077 on caches of 0.5 to 4 GiB, far beyond the 60 MiB L2), so the page recomputes every
recorded fraction against the one floor from the file's kv_bytes and median.
"""
from __future__ import annotations

import re

import pandas as pd

from engine import GpuProfile
from engine.model import iomodel
from engine.model.decode_config import DecodeConfig
from engine.model.devices import datasheet_profile
from engine.model.rates import hbm_floor_bandwidth
from engine.model.units import format_bandwidth, format_bytes


def floor_ms(cfg: DecodeConfig, gpu: GpuProfile) -> float:
    """The HBM floor of one decode step: its K and V bytes at the floor's bandwidth."""
    return iomodel.decode_floor_ms(cfg, hbm_floor_bandwidth(gpu).bytes_per_s)


def floor_fraction(kv_bytes: float, median_ms: float, gpu: GpuProfile) -> float:
    """floor / median: 1 means K and V were read at the floor's bandwidth."""
    return kv_bytes / hbm_floor_bandwidth(gpu).bytes_per_s * 1e3 / median_ms


def fraction_text(fraction: float, kv_bytes: float, gpu: GpuProfile) -> str:
    """'87% of the HBM floor', or, above 1, the floor capped and the reason named."""
    if not fraction == fraction:
        return "no HBM floor known"
    if fraction <= 1:
        return f"{100 * fraction:.0f}% of the HBM floor"
    why = (f"K and V ({format_bytes(kv_bytes)}) fit in the {format_bytes(gpu.l2_bytes)} L2, so "
           f"part of them came from L2, not HBM" if kv_bytes < gpu.l2_bytes else
           f"K and V ({format_bytes(kv_bytes)}) are larger than the "
           f"{format_bytes(gpu.l2_bytes)} L2, so this timing beats the datasheet: check it")
    return f"faster than the HBM floor ({100 * fraction:.0f}%, shown as 100%): {why}"


def recorded_profile(file: dict, gpu: GpuProfile) -> GpuProfile:
    """The profile of the GPU a decode file was recorded on (`gpu` when none matches)."""
    device = file.get("device") if isinstance(file.get("device"), dict) else {}
    return datasheet_profile(str(device.get("name", ""))) or gpu


def recorded_fraction(record: dict, gpu: GpuProfile) -> float:
    """A recorded timing's fraction of the page's floor (its own floor_fraction when the
    record lacks kv_bytes)."""
    if record.get("kv_bytes") and record.get("median_ms"):
        return floor_fraction(record["kv_bytes"], record["median_ms"], gpu)
    return float(record.get("floor_fraction") or "nan")


FILE_FLOOR = re.compile(r"HBM floor: the K and V bytes at ([\d.]+ [TG]B/s), ([^;]+);")


def recorded_floor_note(file: dict, rows: pd.DataFrame, gpu: GpuProfile) -> str:
    """The fastest recorded timing of one shape against the page's floor, and where the file's
    own floor used another bandwidth, which and why the page does not."""
    gpu = recorded_profile(file, gpu)
    bw = hbm_floor_bandwidth(gpu)
    text = f"HBM floor: K and V at {bw.label}."
    if not rows.empty and rows.floor_fraction.notna().any():
        best = rows.loc[rows.floor_fraction.idxmax()]
        text += (f" Closest to it: {best.series}, {best.ms:.4f} ms, "
                 f"{fraction_text(best.floor_fraction, best.kv_bytes, gpu)}.")
    found = FILE_FLOOR.search(str(file.get("method", "")))
    if found and found[1] != format_bandwidth(bw.bytes_per_s):
        text += (f" The file's own floor_fraction used {found[1]} ({found[2]}); the "
                 f"fractions here are recomputed against {bw.label}, the one floor.")
        fastest = max((r["kv_bytes"] / (r["median_ms"] * 1e-3) for r in file.get("results", [])
                       if isinstance(r, dict) and r.get("kv_bytes") and r.get("median_ms")),
                      default=0.0)
        if fastest > _bytes_per_s(found[1]):
            text += (f" A decode step only reads, and a copy's bytes are half writes: in this "
                     f"file K and V were read at up to {format_bandwidth(fastest)}, past that "
                     f"copy figure, on caches far larger than the L2.")
    return text


def _bytes_per_s(text: str) -> float:
    value, unit = text.split()
    return float(value) * (1e12 if unit == "TB/s" else 1e9)
