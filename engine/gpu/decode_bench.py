"""Timing of one decode step on the GPU with the project's harness (engine.gpu.timing): the
Flash-Decoding kernel at a split count, and PyTorch's scaled_dot_product_attention on the
same shapes (contiguous cache, grouped heads through enable_gqa). Every figure is checked
against the GPU's bandwidth ceiling: K and V must be read, so a time under their bytes at
the ceiling is refused as a bug."""
from __future__ import annotations

import numpy as np

from ..model.decode_config import DecodeConfig, block_table
from ..model.iomodel import decode_kv_bytes, decode_floor_ms
from ..model.rates import hbm_floor_bandwidth
from ..model.units import format_bandwidth, format_bytes
from .lock import GPU_LOCK
from .runtime import gpu_failures, live_gpu
from .timing import HOLD_NS, ImplausibleTimingError, ceilings, time_stages

def floor_bandwidth() -> tuple[float, str]:
    """(bytes/s, where the figure comes from) of the live GPU's HBM floor: the one floor of
    engine.model.rates.hbm_floor_bandwidth, the datasheet's bandwidth."""
    bw = hbm_floor_bandwidth(live_gpu())
    return bw.bytes_per_s, bw.label


def decode_record(cfg: DecodeConfig, line: str, num_splits: int | None, times: list,
                  auto: bool) -> dict:
    """One timing as benchmarks/results/decode_*.json records it (engine.recorded)."""
    med = float(np.median(times))
    bw, _ = floor_bandwidth()
    floor = decode_floor_ms(cfg, bw)
    check_bandwidth(cfg, med, line)
    return {"kernel": line, "batch": cfg.batch, "heads": cfg.heads, "kv_heads": cfg.kv_heads,
            "seq_q": cfg.seq_q, "seq_k": cfg.seq_k, "head_dim": cfg.head_dim,
            "dtype": cfg.dtype, "page_size": cfg.page_size, "num_splits": num_splits,
            "auto_splits": auto, "median_ms": med,
            "p10_ms": float(np.percentile(times, 10)), "p90_ms": float(np.percentile(times, 90)),
            "reps": len(times), "kv_bytes": decode_kv_bytes(cfg), "floor_ms": floor,
            "floor_fraction": floor / med}


def check_bandwidth(cfg: DecodeConfig, median_ms: float, label: str) -> None:
    ceil = ceilings()
    rate = decode_kv_bytes(cfg) / (median_ms * 1e-3)
    if rate > ceil.bytes_per_s:
        raise ImplausibleTimingError(
            f"{label}: {median_ms:.4f} ms reads {format_bytes(decode_kv_bytes(cfg))} of K and V "
            f"at {rate / 1e12:.2f} TB/s, above this GPU's ceiling "
            f"({ceil.bytes_per_s / 1e12:.1f} TB/s; {ceil.source}): a bug, so it is refused.")


def time_flash_decode(cfg: DecodeConfig, num_splits: int, inputs: tuple, reps: int,
                      warmup: int, budget_s: float | None = None) -> list:
    """Per-repetition times (ms) of the Flash-Decoding kernel (its splits and their merge, one
    launch) at num_splits."""
    from .decode_backend import device_inputs
    from .launchers import decode as launcher
    with GPU_LOCK, gpu_failures("timing the Flash-Decoding kernel"):
        Q, K, V, T = device_inputs(cfg, *inputs, block_table(cfg))
        run, out = launcher.prepare(cfg, Q, K, V, T, num_splits, trace=False)
        totals, _ = time_stages([("decode", run)], reps, warmup, budget_s)
        del out, Q, K, V, T
    return totals


def _sdpa_step(cfg: DecodeConfig, inputs: tuple):
    """(run, keep): run() is one torch.nn.functional.scaled_dot_product_attention call on the
    contiguous cache (inputs: q and contiguous caches), PyTorch choosing its backend; it
    leaves the output in keep["O"]. enable_gqa shares each KV head among its group; several
    query tokens get the bottom-right causal mask as a boolean attn_mask."""
    from .torch_reference import _to_torch, torch_module
    torch = torch_module()
    q, k, v = (_to_torch(torch, x) for x in inputs)
    mask = None
    if cfg.seq_q > 1:
        keys = torch.arange(cfg.seq_k, device=q.device)
        last = cfg.seq_k - cfg.seq_q + torch.arange(cfg.seq_q, device=q.device)
        mask = keys[None, :] <= last[:, None]
    keep = {}
    fn = torch.nn.functional.scaled_dot_product_attention

    def run():
        keep["O"] = fn(q, k, v, attn_mask=mask, scale=cfg.softmax_scale,
                       enable_gqa=cfg.kv_heads != cfg.heads)
    return run, keep


def time_sdpa(cfg: DecodeConfig, inputs: tuple, reps: int, warmup: int,
              budget_s: float | None = None) -> list:
    """Per-repetition times (ms) of PyTorch's SDPA on one decode step (_sdpa_step)."""
    with GPU_LOCK, gpu_failures("timing PyTorch SDPA"):
        run, _ = _sdpa_step(cfg, inputs)
        totals, _ = time_stages([("sdpa", run)], reps, warmup, budget_s)
    return totals


def sdpa_output(cfg: DecodeConfig, inputs: tuple) -> np.ndarray:
    """PyTorch's SDPA output of one decode step (_sdpa_step), float32 on the host."""
    with GPU_LOCK, gpu_failures("running PyTorch SDPA"):
        run, keep = _sdpa_step(cfg, inputs)
        run()
        return keep["O"].float().cpu().numpy()


def decode_method(reps: int, warmup: int) -> str:
    gpu, ceil = live_gpu(), ceilings()
    _, floor_source = floor_bandwidth()
    return (f"GPU ({gpu.name}): CUDA events on the default stream around one decode step: the "
            f"Flash-Decoding kernel (one launch: the splits and their merge), or one PyTorch "
            f"SDPA call on the contiguous cache (enable_gqa); {warmup} warm-up run(s) first "
            f"(compilation stays out); {reps} repetitions (fewer when cut to a time budget, "
            f"never under 20), median with p10/p90; before each, the L2 cache "
            f"({format_bytes(gpu.l2_bytes)}) is flushed (a buffer twice its size written, then "
            f"read back) and a "
            f"{HOLD_NS // 1000} µs GPU wait is queued so that host launch overhead stays "
            f"outside the events. HBM floor: the K and V bytes at {floor_source}; "
            f"floor_fraction = floor / median. Times reading K and V faster than "
            f"{format_bandwidth(ceil.bytes_per_s)} are refused as bugs.")
