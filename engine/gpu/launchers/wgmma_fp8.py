"""Launcher of the Hopper forward's FP8 build: kernels/hopper/flash_wgmma.cu compiled with
-DFP8=1, e4m3 tiles with a float32 scale each, float32 accumulation, bfloat16 output.

Two steps, as the kernel registry's row "wgmma fp8" names them:
  quantize(cfg, Q, K, V) -> Quantized: Q, K, V (float16, bfloat16 or float32, (B·H, seq, d))
      to e4m3 bytes with a scale per tile (or per tensor, or none: cfg.fp8_scaling), Q and K
      rotated first where cfg.fp8_rotation asks; V8 is written transposed, (B·H, d, keys
      rounded up to 16), its keys permuted within each 16 as the P fragment wants them
      (kernels/hopper/fp8.cuh says why). The scales are computed here in float32 exactly as
      engine.cpu.fp8 computes them, so the bytes match the emulation's.
  prepare(cfg, quantized, trace) -> (run, outputs): the attention kernel on those bytes.
The timing harness times run() alone: quantization is a separate pass, timed apart.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import formats
from ...model.config import AttentionConfig, ConfigError
from ...model.iomodel import p_through_smem, smem_bytes
from ...model.catalog import fp8_build
from ...model.registry import kernel as registry_kernel
from ...results import BLOCK_FIELDS, TRACE_FIELDS
from ..runtime import live_gpu
from . import core
from .wgmma import PERSISTENT, tensor_map, threads, wgmma_ring_options

BUILD = registry_kernel("wgmma fp8")
FUNCTION, QUANTIZE = BUILD.functions[0], BUILD.functions[1]
E4M3_MAX = np.float32(formats.E4M3_MAX)    # the largest finite e4m3 value, 448
V_KEY_GROUP = 16                  # Vᵀ's keys are permuted within groups of 16 (and padded to them)
# Whether the consumer warpgroups take turns issuing their products: no, at either head_dim.
# On an H100 (2026-11-27, N = 8192-16384, B·H·N = 32k tokens · 1024/d heads) turns were 3%
# slower at d = 128 and 7% faster at d = 64 (lab/NOTES.md, "FP8 forward"); on an H200
# (2026-11-29, the kernel of that day) 3-6% slower at d = 64 too, with 128- and 256-key tiles
# alike (lab/NOTES.md, "FP8 key tiles of 256 at d = 64").
PINGPONG = 0
# The softmax fence (the kernel's header): on an H100 (2026-11-27) 1.02-1.05× faster at
# N >= 4096 for both head_dims (lab/NOTES.md, "The softmax fence").
SOFTMAX_FENCE = 1
# The tile max from the scores' bits (engine.gpu.launchers.wgmma.TILE_MAX_BITS), by
# (head_dim, block_k): on an H200 (2026-11-29) 1-4% faster at d = 128 (128×192 tiles), 1-3%
# slower at d = 64 on 128-key tiles with turns, 1-2% faster at d = 64 on 256-key tiles; the
# same outputs bit for bit either way (lab/NOTES.md, "The tile max from the scores' bits" and
# "FP8 key tiles of 256 at d = 64"); at d = 128 on 256-key tiles (P through shared memory)
# the float max was 2% slower (lab/NOTES.md, "FP8: P through shared memory").
TILE_MAX_BITS = {(64, 128): 0, (64, 256): 1, (128, 128): 1, (128, 192): 1, (128, 256): 1}


def vt_box(cfg: AttentionConfig) -> int:
    """Keys (bytes) of one box of V8ᵀ as the kernel loads a tile of block_k keys (its VT_BOX):
    128 (boxes of 128 keys in the 128-byte swizzle) where block_k is a multiple of 128 (one box
    at 128, two at 256), else 64 (block_k = 192: three boxes of 64 keys in the 64-byte
    swizzle)."""
    return 128 if cfg.block_k % 128 == 0 else 64


def check_takes(cfg: AttentionConfig) -> None:
    """ConfigError in the catalog's words (catalog.fp8_build: the one refusal of an FP8
    config) unless this build takes cfg on this GPU."""
    from ..runtime import device_is_hopper
    fp8_build(cfg, device_is_hopper())


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return ("--std=c++17", "-arch=sm_90a", f"-DHEAD_DIM={cfg.head_dim}",
            f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DPINGPONG={PINGPONG}", "-DBF16=0", "-DFP8=1",
            f"-DPERSISTENT={PERSISTENT}", f"-DSOFTMAX_FENCE={SOFTMAX_FENCE}",
            f"-DTILE_MAX_BITS={TILE_MAX_BITS[cfg.head_dim, cfg.block_k]}",
            f"-DP_SMEM={int(p_through_smem(cfg))}",
            *wgmma_ring_options(cfg))


def build(cfg: AttentionConfig, trace: bool) -> core.Build:
    return core.Build(BUILD.source, FUNCTION, compile_options(cfg, trace), threads(cfg),
                      smem_bytes(cfg, BUILD.smem_layout))


def quantize_build(cfg: AttentionConfig) -> core.Build:
    """The quantize kernel lives in the same module (one compile)."""
    return core.Build(BUILD.source, QUANTIZE, compile_options(cfg, False), 256, 0)


@dataclass
class Quantized:
    """The FP8 kernel's operands, on the GPU: e4m3 bytes (uint8 arrays) and float32 scales
    (B·H, tiles); saturated: CuPy uint32 counts of values clipped at ±448 (q, k, v)."""

    q8: object                # (B·H, seq_q, d)
    k8: object                # (B·H, seq_k, d)
    vt8: object               # (B·H, d, seq_k rounded up to 16), keys permuted within 16s
    q_scale: object           # (B·H, Tr)
    k_scale: object           # (B·H, Tc)
    v_scale: object           # (B·H, Tc)
    saturated: object         # (3,) uint32


def as_float32(x):
    """A (B·H, seq, d) CuPy array of float16, bfloat16 (or its uint16 bits) or float32 as
    float32, exactly (bfloat16 is the top half of a float32)."""
    import cupy
    if x.dtype == cupy.float32:
        return x
    if x.dtype == cupy.float16:
        return x.astype(cupy.float32)
    if x.dtype.itemsize == 2:             # bfloat16, or its bits as uint16
        return (x.view(cupy.uint16).astype(cupy.uint32) << 16).view(cupy.float32)
    raise ConfigError(f"FP8 attention takes q, k, v in float16, bfloat16 or float32; got {x.dtype}.")


def tile_scales(x32, tile_rows: int, scaling: str):
    """(scale, inverse) per (batch·head, tile of tile_rows rows), float32: amax / 448 and
    448 / amax (1 and 1 where amax is 0); "tensor": the whole batch·head's amax for every
    tile; "none": ones."""
    import cupy
    bh, rows, d = x32.shape
    tiles = -(-rows // tile_rows)
    if scaling == "none":
        ones = cupy.ones((bh, tiles), dtype=cupy.float32)
        return ones, ones
    a = cupy.abs(x32)
    if tiles * tile_rows != rows:
        a = cupy.concatenate([a, cupy.zeros((bh, tiles * tile_rows - rows, d), cupy.float32)], 1)
    amax = a.reshape(bh, tiles, tile_rows * d).max(axis=2)
    if scaling == "tensor":
        amax = cupy.broadcast_to(amax.max(axis=1, keepdims=True), (bh, tiles))
    zero = amax == 0
    safe = cupy.where(zero, cupy.float32(1), amax)
    scale = cupy.where(zero, cupy.float32(1), safe / E4M3_MAX).astype(cupy.float32)
    inv = cupy.where(zero, cupy.float32(1), E4M3_MAX / safe).astype(cupy.float32)
    return cupy.ascontiguousarray(scale), cupy.ascontiguousarray(inv)


def rotated(cfg: AttentionConfig, x32):
    """x · R rounded to float32, in engine.cpu.fp8.rotate's order of operations (the Hadamard
    product in float64, exact for 16-bit inputs, then the signs and 1/sqrt(d)), so that the
    rotated values, hence the bytes, are the emulation's."""
    import math

    import cupy

    from ...model.rotation import hadamard, rotation_signs
    h = cupy.asarray(hadamard(cfg.head_dim))
    signs = cupy.asarray(rotation_signs(cfg))
    y = cupy.matmul(x32.astype(cupy.float64), h) * signs / math.sqrt(cfg.head_dim)
    return y.astype(cupy.float32)


def quantize(cfg: AttentionConfig, Q, K, V) -> Quantized:
    """Q, K, V ((B·H, seq, d) CuPy arrays) -> the FP8 kernel's operands (module docstring)."""
    import cupy
    check_takes(cfg)
    scaling = cfg.fp8_scaling
    q32, k32, v32 = (as_float32(x) for x in (Q, K, V))
    if cfg.fp8_rotation:
        q32, k32 = rotated(cfg, q32), rotated(cfg, k32)
    bh, d = cfg.bh, cfg.head_dim
    cols = -(-cfg.seq_k // V_KEY_GROUP) * V_KEY_GROUP
    saturated = cupy.zeros(3, dtype=cupy.uint32)
    fn = quantize_build(cfg).compiled()
    sms = live_gpu().sms
    out, scales = [], []
    for n, (x, rows, tile_rows, transpose) in enumerate(
            ((q32, cfg.seq_q, cfg.block_q, 0), (k32, cfg.seq_k, cfg.block_k, 0),
             (v32, cfg.seq_k, cfg.block_k, 1))):
        x = cupy.ascontiguousarray(x)
        scale, inv = tile_scales(x, tile_rows, scaling)
        shape = (bh, d, cols) if transpose else (bh, rows, d)
        x8 = cupy.empty(shape, dtype=cupy.uint8)
        words = x8.size // 4
        blocks = max(1, min(-(-words // 256), 8 * sms))
        fn((blocks,), (256,), (x, inv, x8, np.int32(bh), np.int32(rows), np.int32(d),
                               np.int32(tile_rows), np.int32(transpose), np.int32(cols),
                               saturated[n:n + 1]))
        out.append(x8)
        scales.append(scale)
    return Quantized(*out, *scales, saturated)


def fp8_outputs(cfg: AttentionConfig, trace: bool, poison: bool = False) -> dict:
    """core.forward_outputs with O in the FP8 build's output dtype (cfg.output_dtype)."""
    return core.forward_outputs(cfg, trace, poison, dtype=cfg.output_dtype)


def grid(cfg: AttentionConfig, bh: int, sms: int) -> tuple[int, ...]:
    """One block per work item in launch order, or, PERSISTENT, one per SM (never more
    blocks than items). No stream-K: a part's O would be in units of its own V scale."""
    if PERSISTENT:
        return (min(cfg.Tr * bh, sms), 1)
    return core.item_grid(cfg, sms)(bh)


def prepare(cfg: AttentionConfig, quantized: Quantized, trace: bool,
            outputs: dict | None = None, poison: bool = False):
    """(run, outputs) as engine.gpu.launchers.mma.prepare describes them; outputs["O"] is
    bfloat16."""
    check_takes(cfg)
    b = build(cfg, trace)
    fn = b.compiled()
    qz = quantized
    out = outputs if outputs is not None else fp8_outputs(cfg, trace, poison)
    swizzle = min(cfg.head_dim, 128)            # bytes of a row of Q_i, K_j: 64 or 128
    maps = (tensor_map(qz.q8, cfg.block_q, "uint8", swizzle, swizzle),
            tensor_map(qz.k8, cfg.block_k, "uint8", swizzle, swizzle),
            tensor_map(qz.vt8, cfg.head_dim, "uint8", vt_box(cfg), vt_box(cfg)))
    traced = ([out[k] for k in TRACE_FIELDS] + [out[k] for k in BLOCK_FIELDS]
              if trace else [core.NULL] * 7)
    sms = live_gpu().sms
    launch_grid = grid(cfg, cfg.bh, sms)
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))

    def args_for(bh0, bh1):
        return (*maps, out["O"], out["lse"], *scalars, np.int32(bh0), np.int32(bh1 - bh0),
                np.int32(cfg.Tr), np.int32(core.causal_bh_group(cfg, sms)), np.int32(0),
                core.NULL, core.NULL, *traced, qz.q_scale, qz.k_scale, qz.v_scale)

    if PERSISTENT:
        args = args_for(0, cfg.bh)

        def run():
            fn(launch_grid, (b.threads,), args, shared_mem=b.smem)
    else:
        run = core.launch_loop(fn, b, cfg.Tr, cfg.bh, args_for, core.item_grid(cfg, sms))
    run.operands = qz                  # the tensor maps point into the quantized bytes
    out["info"] = {**b.facts(fn, launch_grid), "stream_k": False}
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Quantize, run the kernel once; the outputs of prepare() plus "quantized"."""
    qz = quantize(cfg, Q, K, V)
    run, out = prepare(cfg, qz, trace, poison=poison)
    run()
    out["quantized"] = qz
    return out
