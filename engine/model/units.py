"""The one unit system of every figure the app and the engine print, and its formatters.

Sizes in bytes (capacities such as shared memory, L2 and device memory, and counted traffic
and footprints beside them) in binary units: B, KiB, MiB, GiB, TiB (1 KiB = 1024 B). CUDA
reports capacities as powers of two (an H200's L2 is 62,914,560 B = 60 MiB), so binary units
print them without a rounding that looks like another figure.

Rates in decimal units, as datasheets give them: GB/s and TB/s (1 TB/s = 10¹² B/s) for
bandwidth, TFLOP/s (10¹² FLOP/s) for arithmetic.

Three significant digits, from 100 up the whole number and one decimal, trailing zeros
dropped: 1.25 MiB, 60 MiB, 139.8 GiB, 227 KiB, 4.8 TB/s, 989 TFLOP/s, 1979 TFLOP/s. A missing
figure (NaN or None) prints as "not known".
"""
from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4
UNKNOWN = "not known"


def _known(x) -> bool:
    return x is not None and x == x


def _digits(x: float) -> str:
    """Three significant digits; from 100 up, the whole number and at most one decimal."""
    d = Decimal(repr(float(x)))          # rounds halves up as written: 1.555 -> 1.56
    if d == 0:
        return "0"
    if abs(d) < 100:
        e = d.adjusted()
        d = d.scaleb(-e).quantize(Decimal("0.01"), ROUND_HALF_UP).scaleb(e)
    if abs(d) >= 100:
        d = d.quantize(Decimal("0.1"), ROUND_HALF_UP)
    text = f"{d:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_bytes(n: float | None) -> str:
    """Bytes in binary units: 512 B, 56.5 KiB, 60 MiB, 139.8 GiB."""
    if not _known(n):
        return UNKNOWN
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{_digits(n / size)} {unit}"
    return f"{int(n)} B"


def format_bandwidth(bytes_per_s: float | None) -> str:
    """Bytes per second in decimal units: 300 GB/s, 4.8 TB/s."""
    if not _known(bytes_per_s):
        return UNKNOWN
    if abs(bytes_per_s) >= 1e12:
        return f"{_digits(bytes_per_s / 1e12)} TB/s"
    return f"{_digits(bytes_per_s / 1e9)} GB/s"


def format_gbps(gbps: float | None) -> str:
    """A bandwidth given in GB/s (as GpuProfile holds it), printed by format_bandwidth."""
    return format_bandwidth(gbps * 1e9 if _known(gbps) else None)


def format_tflops(tflops: float | None) -> str:
    """An arithmetic rate in TFLOP/s: 67 TFLOP/s, 989 TFLOP/s."""
    if not _known(tflops):
        return UNKNOWN
    return f"{_digits(tflops)} TFLOP/s"
