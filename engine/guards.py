"""Checks made before any device allocation: does this request fit the GPU's free memory,
and is a sweep small enough for a shared server."""
from __future__ import annotations

from .config import LIMITS, AttentionConfig, LimitError
from .iomodel import peak_memory

HEADROOM = 0.9   # use at most this fraction of the free device memory


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def check_device_memory(cfg: AttentionConfig, algorithm: str, trace: bool,
                        free_bytes: int) -> None:
    """Raise LimitError when the run's peak device memory would not fit in free memory."""
    need = peak_memory(cfg, algorithm, trace)
    if need <= HEADROOM * free_bytes:
        return
    flash_need = peak_memory(cfg, "flash", False)
    if algorithm == "naive":
        sp = 2 * cfg.bh * cfg.seq_q * cfg.seq_k * cfg.itemsize
        what = f"naive attention would need {_gb(need)} ({_gb(sp)} of it for S and P)"
    else:
        what = f"flash attention{' with the trace' if trace else ''} would need {_gb(need)}"
    raise LimitError(f"{what}; this GPU has {_gb(free_bytes)} free; flash without the trace "
                     f"needs {_gb(flash_need)}. Choose smaller sizes or fewer batch·heads.")


def check_sweep(n_points: int) -> None:
    lim = LIMITS["sweep_points"]
    if n_points > lim.value:
        raise LimitError(f"Limit {lim.name} exceeded: a sweep of {n_points} runs was asked for; "
                         f"this server allows {lim.value}. Use fewer sequence lengths or kernels, "
                         f"or raise it with the environment variable {lim.env}=<runs>.")
