"""CuPy backend: runs the GPU kernels and returns a Result (forward) or Gradients (backward) of
NumPy arrays.

Flash kernels are reached through their launchers (engine.gpu.launchers.teaching,
engine.gpu.launchers.mma: the launcher of each kernel= family's build that runs on every GPU,
as the kernel registry engine.model.registry names it; it hands a Hopper build on itself),
which share one interface: launch(cfg, Q, K, V, trace) -> dict of CuPy arrays (see engine.gpu.launchers.teaching).
"""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig, ConfigError
from .lock import GPU_LOCK
from ..model import catalog, registry
from .runtime import GpuRunError, check_arch, device_is_hopper, gpu_failures, live_gpu
from ..model.tiles import processed_tiles
from ..results import (BACKWARD_TRACE_FIELDS, BLOCK_FIELDS, TRACE_FIELDS, BackwardTrace,
                       Gradients, Result, Schedule, Trace)



def _launcher_name(kernel: str, direction: str) -> str:
    """The module launching a kernel= family in one direction: the launcher of its build that
    runs on every GPU (it hands the family's Hopper build, if any, on itself)."""
    return next(b.launcher for b in registry.builds(kernel, direction) if not b.hopper_only)


LAUNCHERS = {k: _launcher_name(k, "forward") for k in registry.FAMILIES}
BACKWARD_LAUNCHERS = {k: _launcher_name(k, "backward") for k in registry.FAMILIES}


def launcher(kernel: str):
    """The launcher module of a flash kernel ("teaching" or "tensorcore")."""
    import importlib
    if kernel not in LAUNCHERS:
        raise ConfigError(f"kernel must be one of {', '.join(LAUNCHERS)}; got {kernel!r}.")
    return importlib.import_module(LAUNCHERS[kernel])


def to_device(cfg: AttentionConfig, x: np.ndarray):
    """(B, H, N, d) NumPy -> contiguous (B·H, N, d) CuPy array of cfg.input_dtype (the
    config's dtype; FP8's inputs: float16, make_inputs' q, k, v)."""
    import cupy
    flat = np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim), dtype=cfg.input_dtype)
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
        sched = _schedule({k: _checked(out, k, (cfg.bh * Tr,), name) for k in BLOCK_FIELDS}, Tr)
    info = dict(out.get("info", {}))
    info.setdefault("device", live_gpu().name)
    return Result(output=O.astype(cfg.output_dtype, copy=False), lse=lse.astype(np.float32, copy=False),
                  backend="cupy", algorithm=algorithm,
                  kernel=kernel if algorithm == "flash" else None,
                  trace=tr, schedule=sched, info=info)


def run(cfg: AttentionConfig, q, k, v, algorithm: str = "flash", kernel: str = "teaching",
        trace: bool = False) -> Result:
    """One forward pass on the GPU; NumPy arrays out."""
    from . import naive as gpu_naive
    what = f"{algorithm} attention on the GPU" + (f" ({kernel} kernel)" if algorithm == "flash"
                                                  else "")
    check_arch(cfg.dtype, kernel if algorithm == "flash" else None)
    with GPU_LOCK, gpu_failures(what):
        Q, K, V = (to_device(cfg, x) for x in (q, k, v))
        if algorithm == "naive":
            out = gpu_naive.run(cfg, Q, K, V)
            return to_result(cfg, out, "naive", None, trace=False)
        out = launcher(kernel).launch(cfg, Q, K, V, trace)
        return to_result(cfg, out, "flash", kernel, trace)


def run_fp8(cfg: AttentionConfig, q, k, v, trace: bool = False) -> Result:
    """The FP8 forward on the GPU (the Hopper build, registry "wgmma fp8"): q, k, v (float16,
    bfloat16 or float32 each, (B, H, N, d) NumPy) go over as they are, are quantized there by
    the build's quantize kernel, attention runs on the e4m3 tiles; the Result's output is
    bfloat16 and Result.fp8 holds the scales and the saturated counts (P never saturates in
    the kernel: it is formed from the running max, so P <= 1)."""
    import cupy

    from ..results import Fp8Info
    from .launchers import wgmma_fp8
    check_arch(cfg.dtype, "tensorcore")
    with GPU_LOCK, gpu_failures("FP8 attention on the GPU (the wgmma fp8 kernel)"):
        Q, K, V = (cupy.asarray(np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim)))
                   for x in (q, k, v))
        out = wgmma_fp8.launch(cfg, Q, K, V, trace)
        qz = out.pop("quantized")
        res = to_result(cfg, out, "flash", "tensorcore", trace)
        B, H = cfg.batch, cfg.heads
        sat = [int(n) for n in qz.saturated.get()]
        res.fp8 = Fp8Info(q_scale=qz.q_scale.get().reshape(B, H, cfg.Tr),
                          k_scale=qz.k_scale.get().reshape(B, H, cfg.Tc),
                          v_scale=qz.v_scale.get().reshape(B, H, cfg.Tc),
                          saturated={"q": sat[0], "k": sat[1], "v": sat[2], "p": 0},
                          scaling=cfg.fp8_scaling, rotation=cfg.fp8_rotation)
        return res


def backward_launcher(kernel: str):
    """The launcher module of a flash kernel's backward pass, imported on first use. The
    tensor-core one (engine.gpu.launchers.backward_mma) may be missing from a build: a
    ConfigError then says so."""
    import importlib
    if kernel not in BACKWARD_LAUNCHERS:
        raise ConfigError(f"kernel must be one of {', '.join(BACKWARD_LAUNCHERS)} for the "
                          f"backward pass; got {kernel!r}.")
    name = BACKWARD_LAUNCHERS[kernel]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:            # the module exists but something it imports is broken
            raise
        raise ConfigError(f"The {kernel!r} backward kernel is not available in this build "
                          f"({name} is missing); use kernel='teaching'.") from exc


def flash_backward(cfg: AttentionConfig, kernel: str, trace: bool, Q, K, V, dO):
    """(forward outputs, run, backward outputs) of a flash kernel's backward: the same
    kernel's forward runs once here, for O and lse; run() enqueues the backward alone."""
    backward = backward_launcher(kernel)      # before the forward: fail fast when missing
    if trace and not all(b.traceable for b in registry.builds(kernel, "backward")):
        traced = next(k for k in registry.FAMILIES
                      if all(b.traceable for b in registry.builds(k, "backward")))
        raise ConfigError(f"The {kernel} backward kernel writes no trace; use "
                          f"kernel='{traced}' with trace=True.")
    fwd_cfg = cfg
    if kernel == "tensorcore":
        fwd_cfg = catalog.forward_for_backward(cfg, device_is_hopper())
    fwd = launcher(kernel).launch(fwd_cfg, Q, K, V, False)
    O, lse = fwd["O"], fwd["lse"]
    if kernel == "teaching":
        run, out = backward.prepare(cfg, Q, K, V, O, lse, dO, trace)
        return fwd, run, out
    out = {}

    def run():
        out.update(backward.launch_backward(cfg, Q, K, V, O, lse, dO))

    return fwd, run, out


def _schedule(blocks: dict, tiles: int) -> Schedule:
    """Schedule of the records bh·tiles + t (t: the query tile forward, the key tile backward)."""
    idx = np.arange(len(blocks["sm_id"]))
    return Schedule(block_bh=idx // tiles, block_q_tile=idx % tiles,
                    sm_id=blocks["sm_id"].astype(np.int32),
                    start_ns=blocks["start_ns"].astype(np.int64),
                    end_ns=blocks["end_ns"].astype(np.int64))


def to_gradients(cfg: AttentionConfig, out: dict, lse, algorithm: str, kernel: str | None,
                 trace: bool) -> Gradients:
    """Gradients of NumPy arrays from a backward launcher's CuPy outputs and the forward's lse."""
    B, H, nq, nk, d, Tc, Tr = (cfg.batch, cfg.heads, cfg.seq_q, cfg.seq_k, cfg.head_dim,
                               cfg.Tc, cfg.Tr)
    name = f"{kernel or 'naive'} backward"
    grads = {key: _checked(out, key, (cfg.bh, n, d), name).reshape(B, H, n, d)
             .astype(cfg.dtype, copy=False)
             for key, n in (("dQ", nq), ("dK", nk), ("dV", nk))}
    delta = _checked(out, "delta", (cfg.bh, nq), name).reshape(B, H, nq)
    tr = sched = None
    if trace and algorithm == "flash":
        shapes = {"p_rowsum": (nq, Tc), "dq_norm": (nq, Tc), "dk_norm": (nk, Tr),
                  "dv_norm": (nk, Tr)}
        arrays = {key: _checked(out, key, (cfg.bh, *shapes[key]), name)
                  .reshape(B, H, *shapes[key]) for key in BACKWARD_TRACE_FIELDS}
        tr = BackwardTrace(processed=processed_tiles(cfg), **arrays)
        sched = _schedule({k: _checked(out, k, (cfg.bh * Tc,), name) for k in BLOCK_FIELDS}, Tc)
    info = dict(out.get("info", {}))
    info.setdefault("device", live_gpu().name)
    return Gradients(dq=grads["dQ"], dk=grads["dK"], dv=grads["dV"],
                     delta=delta.astype(np.float32, copy=False),
                     lse=lse.get().reshape(B, H, nq).astype(np.float32, copy=False),
                     backend="cupy", algorithm=algorithm,
                     kernel=kernel if algorithm == "flash" else None,
                     trace=tr, schedule=sched, info=info)


def run_backward(cfg: AttentionConfig, q, k, v, dout, algorithm: str = "flash",
                 kernel: str = "teaching", trace: bool = False) -> Gradients:
    """One backward pass on the GPU, after the forward of the same kernel family (naive: the
    naive forward, whose P it reads; flash: that kernel's forward, for O and lse); NumPy out.
    The caller (engine.run_backward) has checked the limits and the free device memory."""
    from . import naive as gpu_naive
    what = (f"{algorithm} attention's backward pass on the GPU"
            + (f" ({kernel} kernel)" if algorithm == "flash" else ""))
    check_arch(cfg.dtype, kernel if algorithm == "flash" else None, "backward")
    with GPU_LOCK, gpu_failures(what):
        Q, K, V, dO = (to_device(cfg, x) for x in (q, k, v, dout))
        if algorithm == "naive":
            fwd = gpu_naive.forward(cfg, Q, K, V)
            del fwd["S"]                  # only P is read by the backward
            stages, out = gpu_naive.prepare_backward(cfg, Q, K, V, dO, fwd)
            for _, fn in stages:
                fn()
            return to_gradients(cfg, out, fwd["lse"], "naive", None, trace=False)
        fwd, run, out = flash_backward(cfg, kernel, trace, Q, K, V, dO)
        run()
        return to_gradients(cfg, out, fwd["lse"], "flash", kernel, trace)
