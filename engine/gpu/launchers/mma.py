"""Launcher of the tensor-core FlashAttention kernel, kernels/flash_tensorcore.cu, on CuPy
arrays, with the interface every flash launcher shares (see engine.gpu.launchers.teaching).

`SUPPORTED` is the one list of what the kernel takes; `check_supported` and
`supported_text` quote it. CuPy is imported only when a kernel is prepared, so the checks
work on machines without a GPU.
"""
from __future__ import annotations

import numpy as np

from ...config import AttentionConfig, ConfigError
from ..runtime import compile_facts

SOURCE = "flash_tensorcore.cu"
FUNCTION = "flash_tensorcore"

# (head_dim, block_q, block_k) whose builds keep every value in registers (no spills), traced
# or not. Four warps per block, each owning block_q / 4 query rows.
# "hopper_shapes": taken only on GPUs of compute capability 9.x, where they run, traced or not,
# on the warpgroup-MMA kernel of engine.gpu.launchers.wgmma (kernels/flash_wgmma.cu).
SUPPORTED = {
    "dtypes": ("float16", "bfloat16"),
    "hopper_dtypes": ("float16",),
    "shapes": ((64, 64, 32), (64, 64, 64), (64, 64, 128), (64, 128, 32), (64, 128, 64),
               (128, 64, 32), (128, 64, 64), (128, 128, 32)),
    "hopper_shapes": ((64, 128, 128), (128, 128, 64), (128, 128, 128)),
}
THREADS = 128
MAX_GRID_Y = 65535          # gridDim.y holds batch·head; larger B·H runs in several launches
TRACE_KEYS = ("running_max", "running_sum", "rescale", "tile_max")
BLOCK_KEYS = ("sm_id", "start_ns", "end_ns")


def supported_text() -> str:
    """The supported shapes in words, as quoted by every error message and the app."""
    parts = []
    for d in sorted({s[0] for s in SUPPORTED["shapes"]}):
        pairs = ", ".join(f"{bq}×{bk}" for dd, bq, bk in SUPPORTED["shapes"] if dd == d)
        parts.append(f"head_dim {d} with block_q×block_k {pairs}")
    hopper = "; ".join(
        f"head_dim {d} with block_q×block_k "
        + ", ".join(f"{bq}×{bk}" for dd, bq, bk in SUPPORTED["hopper_shapes"] if dd == d)
        for d in sorted({s[0] for s in SUPPORTED["hopper_shapes"]}))
    return (f"dtype {' or '.join(SUPPORTED['dtypes'])}: " + "; ".join(parts)
            + f"; on GPUs of compute capability 9.x also, in "
              f"{' or '.join(SUPPORTED['hopper_dtypes'])}, {hopper} (wgmma kernel)")


def on_wgmma(cfg: AttentionConfig) -> bool:
    """True when cfg runs on the Hopper warpgroup-MMA kernel (engine.gpu.launchers.wgmma)."""
    from . import wgmma
    return ((cfg.head_dim, cfg.block_q, cfg.block_k) in SUPPORTED["hopper_shapes"]
            and cfg.dtype in SUPPORTED["hopper_dtypes"] and wgmma.device_has_wgmma())


def check_supported(cfg: AttentionConfig) -> None:
    """Raise ConfigError unless the tensor-core kernel takes this config."""
    if on_wgmma(cfg):
        return
    problems = []
    if cfg.dtype not in SUPPORTED["dtypes"]:
        problems.append(f"dtype={cfg.dtype}")
    if (cfg.head_dim, cfg.block_q, cfg.block_k) not in SUPPORTED["shapes"]:
        problems.append(f"head_dim={cfg.head_dim}, block_q={cfg.block_q}, "
                        f"block_k={cfg.block_k}")
    if problems:
        raise ConfigError(f"The tensor-core kernel does not take {'; '.join(problems)}. "
                          f"It supports {supported_text()}.")


def smem_bytes(cfg: AttentionConfig) -> int:
    """Q_i plus two buffers each of K_j and V_j, 16-bit elements."""
    return (cfg.block_q + 4 * cfg.block_k) * cfg.head_dim * 2


def compile_options(cfg: AttentionConfig, trace: bool) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DBF16={int(cfg.dtype == 'bfloat16')}")


def _function(cfg: AttentionConfig, trace: bool):
    """The compiled kernel (kernels.loader caches one module per option set)."""
    from kernels.loader import get_function
    fn = get_function(SOURCE, FUNCTION, compile_options(cfg, trace))
    if fn.max_dynamic_shared_size_bytes < smem_bytes(cfg):
        fn.max_dynamic_shared_size_bytes = smem_bytes(cfg)
    return fn


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    """Compile facts of the build that runs this config."""
    if on_wgmma(cfg):
        from . import wgmma
        return wgmma.kernel_facts(cfg, trace)
    check_supported(cfg)
    fn = _function(cfg, trace)
    return {"kernel_source": f"kernels/{SOURCE}",
            "compile_options": " ".join(compile_options(cfg, trace)),
            "registers_per_thread": int(fn.num_regs),
            "local_bytes_per_thread": int(fn.local_size_bytes),
            "threads_per_block": THREADS, "dynamic_smem_bytes": smem_bytes(cfg)}


def check_operands(cfg: AttentionConfig, Q, K, V) -> None:
    """Q, K, V as the launchers take them: C-contiguous CuPy (B·H, seq, d) of cfg.dtype."""
    import cupy
    bh, d = cfg.bh, cfg.head_dim
    for name, x, want in (("Q", Q, (bh, cfg.seq_q, d)), ("K", K, (bh, cfg.seq_k, d)),
                          ("V", V, (bh, cfg.seq_k, d))):
        if not isinstance(x, cupy.ndarray):
            raise ConfigError(f"{name} must be a CuPy array; got {type(x).__name__}.")
        if x.shape != want or x.dtype != np.dtype(cfg.dtype) or not x.flags.c_contiguous:
            raise ConfigError(f"{name} must be a C-contiguous CuPy array of shape {want} "
                              f"(batch·heads, seq, head_dim) and dtype {cfg.dtype}; got shape "
                              f"{x.shape}, dtype {x.dtype}, contiguous={x.flags.c_contiguous}.")


def allocate_outputs(cfg: AttentionConfig, trace: bool, poison: bool = False) -> dict:
    """Output buffers. poison=True fills them first (all bits set: NaN in every float dtype,
    -1 for sm_id; 0 for the times, which %globaltimer never reads), so a test can tell every
    element was written. Filled bytewise, which works for bfloat16 too."""
    import cupy

    def alloc(shape, dtype, fill):
        x = cupy.empty(shape, dtype)
        if poison:
            x.view(cupy.uint8).fill(0 if fill == 0 else 0xFF)
        return x

    bh, nq = cfg.bh, cfg.seq_q
    out = {"O": alloc((bh, nq, cfg.head_dim), cfg.dtype, np.nan),
           "lse": alloc((bh, nq), np.float32, np.nan)}
    if trace:
        for key in TRACE_KEYS:
            out[key] = alloc((bh, nq, cfg.Tc), np.float32, np.nan)
        n_blocks = bh * cfg.Tr
        out["sm_id"] = alloc((n_blocks,), np.int32, -1)
        out["start_ns"] = alloc((n_blocks,), np.uint64, 0)
        out["end_ns"] = alloc((n_blocks,), np.uint64, 0)
    return out


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel, writing into outputs. Compiles on first use.

    Q (B·H, seq_q, d), K and V (B·H, seq_k, d): contiguous CuPy arrays of cfg.dtype.
    outputs: "O" (B·H, seq_q, d) cfg.dtype, "lse" (B·H, seq_q) float32; with trace also
    "running_max", "running_sum", "rescale", "tile_max" (B·H, seq_q, Tc) float32 and per
    thread block (record bh·Tr + i) "sm_id" int32, "start_ns" and "end_ns" uint64; and
    "info", the compile facts.
    """
    if on_wgmma(cfg):
        from . import wgmma
        return wgmma.prepare(cfg, Q, K, V, trace, outputs, poison)
    check_supported(cfg)
    check_operands(cfg, Q, K, V)
    bh = cfg.bh
    fn = _function(cfg, trace)
    out = outputs if outputs is not None else allocate_outputs(cfg, trace, poison)
    Tr, smem = cfg.Tr, smem_bytes(cfg)
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))
    launches = []
    for bh0 in range(0, bh, MAX_GRID_Y):
        bh1 = min(bh, bh0 + MAX_GRID_Y)
        rec = slice(bh0 * Tr, bh1 * Tr)
        traced = ([out[k][bh0:bh1] for k in TRACE_KEYS] + [out[k][rec] for k in BLOCK_KEYS]
                  if trace else [np.uint64(0)] * 7)     # null pointers when not traced
        args = (Q[bh0:bh1], K[bh0:bh1], V[bh0:bh1], out["O"][bh0:bh1], out["lse"][bh0:bh1],
                *scalars, *traced)
        launches.append(((Tr, bh1 - bh0), args))

    def run():
        for grid, args in launches:
            fn(grid, (THREADS,), args, shared_mem=smem)

    out["info"] = compile_facts(SOURCE, compile_options(cfg, trace), fn, THREADS, smem, (Tr, bh))
    return run, out


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    run, out = prepare(cfg, Q, K, V, trace, poison=poison)
    run()
    return out
