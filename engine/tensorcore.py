"""The tensor-core FlashAttention forward kernel (kernels/flash_tensorcore.cu) through CuPy.

`SUPPORTED` is the one list of what the kernel takes; `check_supported` quotes it. `launch`
compiles (once per shape and trace switch), launches and returns CuPy arrays. CuPy is imported
only when a kernel is compiled, so the checks work on machines without a GPU.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .config import AttentionConfig, ConfigError

SOURCE_PATH = Path(__file__).resolve().parent.parent / "kernels" / "flash_tensorcore.cu"

# (head_dim, block_q, block_k) whose builds keep every value in registers (no spills), traced
# or not. Four warps per block, each owning block_q / 4 query rows.
SUPPORTED = {
    "dtypes": ("float16",),
    "shapes": ((64, 64, 32), (64, 64, 64), (64, 64, 128), (64, 128, 32), (64, 128, 64),
               (128, 64, 32), (128, 64, 64), (128, 128, 32)),
}
THREADS = 128
MAX_GRID_Y = 65535          # CUDA's limit on gridDim.y, which holds batch·head


def supported_text() -> str:
    """The supported shapes in words, as quoted by every error message and the app."""
    parts = []
    for d in sorted({s[0] for s in SUPPORTED["shapes"]}):
        pairs = ", ".join(f"{bq}×{bk}" for dd, bq, bk in SUPPORTED["shapes"] if dd == d)
        parts.append(f"head_dim {d} with block_q×block_k {pairs}")
    return (f"dtype {' or '.join(SUPPORTED['dtypes'])}; " + "; ".join(parts)
            + f"; batch × heads at most {MAX_GRID_Y}")


def check_supported(cfg: AttentionConfig) -> None:
    """Raise ConfigError unless the tensor-core kernel takes this config."""
    shape = (cfg.head_dim, cfg.block_q, cfg.block_k)
    problems = []
    if cfg.dtype not in SUPPORTED["dtypes"]:
        problems.append(f"dtype={cfg.dtype}")
    if shape not in SUPPORTED["shapes"]:
        problems.append(f"head_dim={cfg.head_dim}, block_q={cfg.block_q}, "
                        f"block_k={cfg.block_k}")
    if cfg.bh > MAX_GRID_Y:
        problems.append(f"batch × heads={cfg.bh}")
    if problems:
        raise ConfigError(f"The tensor-core kernel does not take {'; '.join(problems)}. "
                          f"It supports {supported_text()}.")


def smem_bytes(cfg: AttentionConfig) -> int:
    """Q_i plus two buffers each of K_j and V_j, float16."""
    return (cfg.block_q + 4 * cfg.block_k) * cfg.head_dim * 2


@functools.lru_cache(maxsize=None)
def _kernel(head_dim: int, block_q: int, block_k: int, trace: bool):
    import cupy
    options = ("--std=c++17", f"-DHEAD_DIM={head_dim}", f"-DBLOCK_Q={block_q}",
               f"-DBLOCK_K={block_k}", f"-DTRACE={int(trace)}")
    module = cupy.RawModule(code=SOURCE_PATH.read_text(), options=options)
    kern = module.get_function("flash_tensorcore")
    kern.max_dynamic_shared_size_bytes = (block_q + 4 * block_k) * head_dim * 2
    return kern


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    """Compile facts of the build that runs this config: registers, memory, threads."""
    check_supported(cfg)
    attrs = _kernel(cfg.head_dim, cfg.block_q, cfg.block_k, bool(trace)).attributes
    return {"registers": int(attrs["num_regs"]), "local_bytes": int(attrs["local_size_bytes"]),
            "dynamic_smem_bytes": smem_bytes(cfg), "threads": THREADS,
            "trace": bool(trace), "source": SOURCE_PATH.name}


def _check_operand(name, x, want_shape, dtype):
    import cupy
    if not isinstance(x, cupy.ndarray):
        raise ConfigError(f"{name} must be a CuPy array; got {type(x).__name__}.")
    if x.shape != want_shape or x.dtype != np.dtype(dtype) or not x.flags.c_contiguous:
        raise ConfigError(f"{name} must be a C-contiguous CuPy array of shape {want_shape} "
                          f"(batch·heads, seq, head_dim) and dtype {dtype}; got shape "
                          f"{x.shape}, dtype {x.dtype}, contiguous={x.flags.c_contiguous}.")


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel on (B·H, N, d) CuPy arrays; return a dict of CuPy arrays.

    "O" (B·H, seq_q, d) cfg.dtype and "lse" (B·H, seq_q) float32; with trace also
    "running_max", "running_sum", "rescale", "tile_max" (B·H, seq_q, Tc) float32 and, per
    thread block (index bh·Tr + i), "sm_id" int32, "start_ns" and "end_ns" uint64.
    poison=True fills every output with NaN (or -1 / 0) first, so tests can see unwritten
    elements; it costs a fill, so timings leave it off.
    """
    import cupy
    check_supported(cfg)
    BH, Nq, Nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    _check_operand("Q", Q, (BH, Nq, d), cfg.dtype)
    _check_operand("K", K, (BH, Nk, d), cfg.dtype)
    _check_operand("V", V, (BH, Nk, d), cfg.dtype)
    kern = _kernel(d, cfg.block_q, cfg.block_k, bool(trace))

    def alloc(shape, dtype, fill):
        return cupy.full(shape, fill, dtype=dtype) if poison else cupy.empty(shape, dtype)

    out = {"O": alloc((BH, Nq, d), cfg.dtype, np.nan), "lse": alloc((BH, Nq), np.float32, np.nan)}
    null = np.uint64(0)
    trace_args = (null,) * 7
    if trace:
        stats = ("running_max", "running_sum", "rescale", "tile_max")
        for name in stats:
            out[name] = alloc((BH, Nq, cfg.Tc), np.float32, np.nan)
        n_blocks = BH * cfg.Tr
        out["sm_id"] = alloc((n_blocks,), np.int32, -1)
        out["start_ns"] = alloc((n_blocks,), np.uint64, 0)
        out["end_ns"] = alloc((n_blocks,), np.uint64, 0)
        trace_args = tuple(out[name] for name in (*stats, "sm_id", "start_ns", "end_ns"))
    kern((cfg.Tr, BH, 1), (THREADS, 1, 1),
         (Q, K, V, out["O"], out["lse"], np.int32(Nq), np.int32(Nk),
          np.float32(cfg.softmax_scale), np.int32(cfg.causal), *trace_args),
         shared_mem=smem_bytes(cfg))
    return out
