"""Launcher of the Hopper warpgroup-MMA FlashAttention kernel, kernels/flash_wgmma.cu, with the
interface of engine.gpu.launchers.mma (prepare / launch / kernel_facts, the same output arrays).

The kernel needs compute capability 9.x (it is built for sm_90a: wgmma, setmaxnreg) and
reads Q, K, V through bulk tensor copies, so each launch carries three tensor maps made by
the driver's cuTensorMapEncodeTiled (called through ctypes; CuPy has no binding for it).
`SHAPES` is the one list of (head_dim, block_q, block_k) it takes.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from ...config import AttentionConfig, ConfigError
from ..runtime import compile_facts
from .mma import BLOCK_KEYS, MAX_GRID_Y, TRACE_KEYS, allocate_outputs, check_operands

SOURCE = "flash_wgmma.cu"
FUNCTION = "flash_wgmma"
DTYPES = ("float16",)
# (head_dim, block_q, block_k): block_q / 64 consumer warpgroups of 64 query rows each, one
# producer warpgroup; block_k is the N of the S = Q Kᵀ wgmma.
SHAPES = ((64, 128, 64), (64, 128, 128), (128, 128, 64), (128, 128, 128))
# 1: the consumer warpgroups take turns issuing their products (see the kernel's header); 0:
# each issues when ready. Both pass the GPU tests; 1 was 1.03-1.05× faster at d = 128 on an H200
# (benchmarks/NOTES.md, "wgmma path").
PINGPONG = 1

# The driver's tensor-map encoding (cuda.h): float16 elements, no interleave, 128-byte swizzle,
# 128-byte L2 promotion, out-of-bounds elements read as zeros.
_FLOAT16, _INTERLEAVE_NONE, _SWIZZLE_128B, _L2_128B, _OOB_ZERO = 6, 0, 3, 2, 0
_TENSOR_MAP = np.dtype({"names": ["opaque"], "formats": [(np.uint64, (16,))]})   # 128 bytes


def threads(cfg: AttentionConfig) -> int:
    return 128 * (cfg.block_q // 64 + 1)


def smem_bytes(cfg: AttentionConfig) -> int:
    """Q_i, two stages each of K_j and V_j, float16; mbarriers; 1024 bytes to align the
    swizzle pattern."""
    return 1024 + (cfg.block_q + 4 * cfg.block_k) * cfg.head_dim * 2 + 128


def device_has_wgmma() -> bool:
    """True when CuPy's current CUDA device has compute capability 9.x (Hopper); False
    without CuPy or a usable GPU."""
    try:
        import cupy
        return cupy.cuda.Device().compute_capability.startswith("9")
    except Exception:  # no CuPy, no driver, no device: no Hopper either
        return False


def takes(cfg: AttentionConfig) -> bool:
    """True when this kernel takes cfg's shape and dtype (any device)."""
    return cfg.dtype in DTYPES and (cfg.head_dim, cfg.block_q, cfg.block_k) in SHAPES


def check_takes(cfg: AttentionConfig) -> None:
    if not takes(cfg):
        shapes = ", ".join(f"head_dim {d} with {bq}×{bk}" for d, bq, bk in SHAPES)
        raise ConfigError(f"The wgmma kernel does not take dtype={cfg.dtype}, head_dim="
                          f"{cfg.head_dim}, block_q={cfg.block_q}, block_k={cfg.block_k}. It "
                          f"takes dtype {' or '.join(DTYPES)}; {shapes}.")
    if not device_has_wgmma():
        raise ConfigError("The wgmma kernel needs a GPU of compute capability 9.x (Hopper).")


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return ("--std=c++17", "-arch=sm_90a", f"-DHEAD_DIM={cfg.head_dim}",
            f"-DBLOCK_Q={cfg.block_q}", f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DPINGPONG={PINGPONG}")


def _function(cfg: AttentionConfig, trace: bool):
    from kernels.loader import get_function
    fn = get_function(SOURCE, FUNCTION, compile_options(cfg, trace))
    if fn.max_dynamic_shared_size_bytes < smem_bytes(cfg):
        fn.max_dynamic_shared_size_bytes = smem_bytes(cfg)
    return fn


@functools.lru_cache(maxsize=1)
def _encode_tiled():
    fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    return fn


def tensor_map(x, box_rows: int) -> np.ndarray:
    """The tensor map of a contiguous (B·H, seq, d) float16 CuPy array, read in boxes of
    64 columns × box_rows rows of one batch·head, as a 1-element array of 128 bytes
    (CuPy passes a structured array element by value)."""
    bh, seq, d = x.shape
    dims = (ctypes.c_uint64 * 3)(d, seq, bh)
    strides = (ctypes.c_uint64 * 2)(d * 2, seq * d * 2)     # bytes, dimensions 1 and 2
    box = (ctypes.c_uint32 * 3)(64, box_rows, 1)
    step = (ctypes.c_uint32 * 3)(1, 1, 1)
    raw = np.zeros(32, dtype=np.uint64)                     # a 128-byte-aligned window in it
    start = (-raw.ctypes.data % 128) // 8
    rc = _encode_tiled()(raw.ctypes.data + start * 8, _FLOAT16, 3, x.data.ptr, dims, strides,
                         box, step, _INTERLEAVE_NONE, _SWIZZLE_128B, _L2_128B, _OOB_ZERO)
    if rc != 0:
        raise ConfigError(f"cuTensorMapEncodeTiled refused a (B·H, seq, d) = {x.shape} float16 "
                          f"tensor with boxes of 64×{box_rows} (CUresult {rc}).")
    out = np.zeros(1, dtype=_TENSOR_MAP)
    out["opaque"][0] = raw[start:start + 16]
    return out


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    check_takes(cfg)
    fn = _function(cfg, trace)
    return {"kernel_source": f"kernels/{SOURCE}",
            "compile_options": " ".join(compile_options(cfg, trace)),
            "registers_per_thread": int(fn.num_regs),
            "local_bytes_per_thread": int(fn.local_size_bytes),
            "threads_per_block": threads(cfg), "dynamic_smem_bytes": smem_bytes(cfg)}


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs) as engine.gpu.launchers.mma.prepare describes them."""
    check_takes(cfg)
    check_operands(cfg, Q, K, V)
    bh = cfg.bh
    fn = _function(cfg, trace)
    out = outputs if outputs is not None else allocate_outputs(cfg, trace, poison)
    maps = (tensor_map(Q, cfg.block_q), tensor_map(K, cfg.block_k), tensor_map(V, cfg.block_k))
    traced = ([out[k] for k in TRACE_KEYS] + [out[k] for k in BLOCK_KEYS]
              if trace else [np.uint64(0)] * 7)                  # null pointers when not traced
    Tr, smem, n_threads = cfg.Tr, smem_bytes(cfg), threads(cfg)
    launches = []
    for bh0 in range(0, bh, MAX_GRID_Y):
        args = (*maps, out["O"], out["lse"], np.int32(cfg.seq_q), np.int32(cfg.seq_k),
                np.float32(cfg.softmax_scale), np.int32(cfg.causal), np.int32(bh0), *traced)
        launches.append(((Tr, min(bh, bh0 + MAX_GRID_Y) - bh0), args))

    def run():
        for grid, args in launches:
            fn(grid, (n_threads,), args, shared_mem=smem)

    run.operands = (Q, K, V)          # the tensor maps point into these: keep them alive
    out["info"] = compile_facts(SOURCE, compile_options(cfg, trace), fn, n_threads, smem,
                                (Tr, bh))
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    run, out = prepare(cfg, Q, K, V, trace, poison=poison)
    run()
    return out
