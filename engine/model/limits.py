"""Resource limits for a shared server: what a run may ask for, checked before any allocation.

The byte counts come from the IO model (engine.model.iomodel); each limit can be raised with its
environment variable before the app starts.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .config import DIRECTIONS, AttentionConfig, LimitError, _check_choice
from .decode_config import DecodeConfig
from .iomodel import (backward_trace_bytes, decode_elements, decode_trace_bytes, format_bytes,
                      naive_backward_bytes, naive_bytes, qkv_elements, trace_bytes)


@dataclass(frozen=True)
class Limit:
    name: str
    env: str
    default: int
    unit: str
    what: str

    @property
    def value(self) -> int:
        raw = os.environ.get(self.env)
        if raw is None:
            return self.default
        try:
            val = int(float(raw))
        except ValueError:
            return self.default
        return val if val > 0 else self.default

    def show(self, n: float) -> str:
        if self.unit == "bytes":
            return format_bytes(n)
        return f"{int(n):,} {self.unit}"


LIMITS = {
    "qkv_elements": Limit("qkv_elements", "FA_LAB_MAX_QKV_ELEMENTS", 1 << 26, "elements",
                          "Q, K and V together would hold"),
    "trace_bytes": Limit("trace_bytes", "FA_LAB_MAX_TRACE_BYTES", 256 << 20, "bytes",
                         "the online-softmax trace would take"),
    "naive_bytes": Limit("naive_bytes", "FA_LAB_MAX_NAIVE_BYTES", 2 << 30, "bytes",
                         "naive attention's S and P matrices would take"),
    "sweep_points": Limit("sweep_points", "FA_LAB_MAX_SWEEP_POINTS", 48, "runs",
                          "a sweep would make"),
    "tile_sweep_points": Limit("tile_sweep_points", "FA_LAB_MAX_TILE_SWEEP_POINTS", 40, "runs",
                               "a sweep over tile sizes would make"),
}


def check_limits(cfg: AttentionConfig, algorithm: str = "flash", trace: bool = False,
                 direction: str = "forward") -> None:
    """Raise LimitError naming the limit, the value asked for and how to raise it.

    direction="backward": naive holds P, dP and dS (naive_backward_bytes) and the trace is the
    backward trace (backward_trace_bytes)."""
    _check_choice("direction", direction, DIRECTIONS)
    backward = direction == "backward"
    asked = [("qkv_elements", qkv_elements(cfg), None)]
    if trace and algorithm == "flash":
        asked.append(("trace_bytes", backward_trace_bytes(cfg), "the backward trace would take")
                     if backward else ("trace_bytes", trace_bytes(cfg), None))
    if algorithm == "naive":
        asked.append(("naive_bytes", naive_backward_bytes(cfg),
                      "the naive backward's P, dP and dS matrices (which flash backward never "
                      "holds) would take")
                     if backward else ("naive_bytes", naive_bytes(cfg), None))
    _enforce(asked, "Use smaller sizes")


def _enforce(asked: list, advice: str) -> None:
    """Raise LimitError for the first (limit key, amount, what it is) over its limit, saying
    what was asked, what the server allows, `advice`, and how to raise the limit."""
    for key, val, what in asked:
        lim = LIMITS[key]
        if val > lim.value:
            raise LimitError(
                f"Limit {lim.name} exceeded: {what or lim.what} {lim.show(val)}; "
                f"this server allows {lim.show(lim.value)}. {advice}, or raise it with the "
                f"environment variable {lim.env}=<{lim.unit}> before starting the app.")


def check_decode_limits(cfg: DecodeConfig, num_splits: int, trace: bool = False) -> None:
    """The limits of a decode step (engine.run_decode), before anything is allocated: q and
    the two caches against qkv_elements, and the decode trace against trace_bytes."""
    asked = [("qkv_elements", decode_elements(cfg), "q and the K and V caches together would "
                                                     "hold")]
    if trace:
        asked.append(("trace_bytes", decode_trace_bytes(cfg, num_splits),
                      "the decode trace would take"))
    _enforce(asked, "Use a shorter cache, fewer heads or a smaller batch")
