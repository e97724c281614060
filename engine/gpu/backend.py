"""CuPy backend: runs the GPU kernels and returns a Result of NumPy arrays.

Flash kernels are reached through their launchers (engine.gpu.launchers.teaching, engine.gpu.launchers.mma), which
share one interface: launch(cfg, Q, K, V, trace) -> dict of CuPy arrays (see engine.gpu.launchers.teaching).
"""
from __future__ import annotations

import numpy as np

from ..config import AttentionConfig
from .lock import GPU_LOCK
from .runtime import GpuRunError, gpu_failures, live_gpu
from ..cpu.forward import processed_tiles
from ..results import BLOCK_FIELDS, TRACE_FIELDS, Result, Schedule, Trace



def launcher(kernel: str):
    """The launcher module of a flash kernel ("teaching" or "tensorcore")."""
    from .launchers import mma, teaching
    return {"teaching": teaching, "tensorcore": mma}[kernel]


def to_device(cfg: AttentionConfig, x: np.ndarray):
    """(B, H, N, d) NumPy -> contiguous (B·H, N, d) CuPy array of cfg.dtype."""
    import cupy
    flat = np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim), dtype=cfg.dtype)
    return cupy.asarray(flat)


def _checked(out: dict, key: str, shape: tuple, kernel: str):
    if key not in out:
        raise GpuRunError(f"The {kernel} launcher returned no {key!r} array.")
    arr = out[key]
    if tuple(arr.shape) != shape:
        raise GpuRunError(f"The {kernel} launcher returned {key!r} of shape {tuple(arr.shape)}; "
                          f"expected {shape}.")
    return arr.get()


def to_result(cfg: AttentionConfig, out: dict, algorithm: str, kernel: str | None,
              trace: bool) -> Result:
    B, H, nq, d, Tc, Tr = cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim, cfg.Tc, cfg.Tr
    name = kernel or "naive"
    O = _checked(out, "O", (cfg.bh, nq, d), name).reshape(B, H, nq, d)
    lse = _checked(out, "lse", (cfg.bh, nq), name).reshape(B, H, nq)
    tr = sched = None
    if trace and algorithm == "flash":
        arrays = {k: _checked(out, k, (cfg.bh, nq, Tc), name).reshape(B, H, nq, Tc)
                  for k in TRACE_FIELDS}
        tr = Trace(**arrays, processed=processed_tiles(cfg))
        n = cfg.bh * Tr
        blocks = {k: _checked(out, k, (n,), name) for k in BLOCK_FIELDS}
        idx = np.arange(n)
        sched = Schedule(block_bh=idx // Tr, block_q_tile=idx % Tr,
                         sm_id=blocks["sm_id"].astype(np.int32),
                         start_ns=blocks["start_ns"].astype(np.int64),
                         end_ns=blocks["end_ns"].astype(np.int64))
    info = dict(out.get("info", {}))
    info.setdefault("device", live_gpu().name)
    return Result(output=O.astype(cfg.dtype, copy=False), lse=lse.astype(np.float32, copy=False),
                  backend="cupy", algorithm=algorithm,
                  kernel=kernel if algorithm == "flash" else None,
                  trace=tr, schedule=sched, info=info)


def run(cfg: AttentionConfig, q, k, v, algorithm: str = "flash", kernel: str = "teaching",
        trace: bool = False) -> Result:
    """One forward pass on the GPU; NumPy arrays out."""
    from . import naive as gpu_naive
    what = f"{algorithm} attention on the GPU" + (f" ({kernel} kernel)" if algorithm == "flash"
                                                  else "")
    with GPU_LOCK, gpu_failures(what):
        Q, K, V = (to_device(cfg, x) for x in (q, k, v))
        if algorithm == "naive":
            out = gpu_naive.run(cfg, Q, K, V)
            return to_result(cfg, out, "naive", None, trace=False)
        out = launcher(kernel).launch(cfg, Q, K, V, trace)
        return to_result(cfg, out, "flash", kernel, trace)
