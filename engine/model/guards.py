"""Checks made before any device allocation: does this request fit the GPU's free memory,
and is a sweep small enough for a shared server."""
from __future__ import annotations

from .config import AttentionConfig, LimitError
from .limits import LIMITS
from .iomodel import format_bytes, peak_memory

HEADROOM = 0.9   # use at most this fraction of the free device memory


def check_device_memory(cfg: AttentionConfig, algorithm: str, trace: bool,
                        free_bytes: int, direction: str = "forward") -> None:
    """Raise LimitError when the run's peak device memory would not fit in free memory."""
    need = peak_memory(cfg, algorithm, trace, direction)
    if need <= HEADROOM * free_bytes:
        return
    flash_need = peak_memory(cfg, "flash", False, direction)
    run = "attention" if direction == "forward" else "attention's backward pass"
    if algorithm == "naive" and direction == "forward":
        sp = need - flash_need
        what = (f"naive attention would need {format_bytes(need)} ({format_bytes(sp)} of it for "
                f"S and P)")
    elif algorithm == "naive":
        what = (f"naive {run} would need {format_bytes(need)} (it holds P, dP and dS, each "
                f"batch·heads·seq_q·seq_k)")
    else:
        what = f"flash {run}{' with the trace' if trace else ''} would need {format_bytes(need)}"
    raise LimitError(f"{what}; this GPU has {format_bytes(free_bytes)} free; flash without the "
                     f"trace needs {format_bytes(flash_need)}. Choose smaller sizes or fewer "
                     f"batch·heads.")


def _check_runs(key: str, n_runs: int, what: str, advice: str) -> None:
    lim = LIMITS[key]
    if n_runs > lim.value:
        raise LimitError(f"Limit {lim.name} exceeded: {what} of {n_runs} runs was asked for; "
                         f"this server allows {lim.value}. {advice}, or raise it with the "
                         f"environment variable {lim.env}=<runs>.")


def check_sweep(n_points: int) -> None:
    _check_runs("sweep_points", n_points, "a sweep", "Use fewer sequence lengths or kernels")


def check_tile_sweep(n_runs: int) -> None:
    _check_runs("tile_sweep_points", n_runs, "a sweep over tile sizes",
                "Sweep one kernel at a time")
