"""Naive attention on the GPU, the fair baseline: S = QKᵀ and O = PV through cuBLAS with one
fused row-softmax kernel (kernels/naive_softmax.cu) between them.

S and P are materialised in the input dtype, as a framework's matmul-softmax-matmul does;
the softmax does its arithmetic in float32, applies the scale and the causal mask, and
writes each row's log-sum-exp. The two products call cuBLAS's strided batched GEMM
directly, on CuPy's cuBLAS handle, as PyTorch does: float32 accumulation, tensor cores allowed
for float16 and bfloat16 (plain float32 stays float32, no TF32), Kᵀ by a transpose flag rather than a copy.
On an H200 with CuPy 14.2, cupy.matmul ran these float16 products several times slower
(benchmarks/NOTES.md).
"""
from __future__ import annotations

import numpy as np

from kernels.loader import get_function

from ..config import AttentionConfig, ConfigError
from .runtime import ELEM_TYPES, live_gpu

SOURCE = "naive_softmax.cu"
CUDA_R_16BF = 14      # cudaDataType_t of bfloat16 (library_types.h)
FUNCTION = "row_softmax"
DEFAULT_SMEM_LIMIT = 48 * 1024
STAGES = ("S = QKᵀ (cuBLAS)", "softmax (fused kernel)", "O = PV (cuBLAS)")


class NaiveRowTooLongError(ConfigError):
    """A row of S does not fit in one thread block's shared memory."""


def row_threads(cfg: AttentionConfig) -> int:
    """Threads per softmax row: about 8 keys each, a multiple of 32, from 32 to 256."""
    return min(256, 32 * max(1, -(-cfg.seq_k // 256)))


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("-DELEM_T=" + ELEM_TYPES[cfg.dtype],
            f"-DNUM_THREADS={row_threads(cfg)}")


def batched_gemm(transa: bool, m: int, n: int, k: int, A, lda: int, B, ldb: int, C, ldc: int,
                 batch: int):
    """Column-major C_b (m × n) = op(A_b) · B_b for b < batch, one cuBLAS call on the current
    stream. Row-major arrays are read as their column-major transposes."""
    import cupy
    from cupy_backends.cuda.libs import cublas
    runtime = cupy.cuda.runtime
    dtype = C.dtype
    cuda_type = {np.dtype(np.float16): runtime.CUDA_R_16F, np.dtype(np.float32):
                 runtime.CUDA_R_32F}.get(np.dtype(dtype), CUDA_R_16BF)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.setMathMode(handle, cublas.CUBLAS_DEFAULT_MATH)
    cublas.gemmStridedBatchedEx(
        handle, cublas.CUBLAS_OP_T if transa else cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N,
        m, n, k, one.ctypes.data,
        A.data.ptr, cuda_type, lda, A.size // batch,
        B.data.ptr, cuda_type, ldb, B.size // batch,
        zero.ctypes.data, C.data.ptr, cuda_type, ldc, C.size // batch,
        batch, cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)


def row_smem_bytes(cfg: AttentionConfig) -> int:
    return 4 * cfg.seq_k


def prepare(cfg: AttentionConfig, Q, K, V):
    """(stages, outputs): stages is [(name, fn)], each fn enqueuing one stage on the current
    stream; outputs holds "O", "lse" and the intermediates "S", "P"."""
    import cupy
    gpu = live_gpu()
    smem = row_smem_bytes(cfg)
    if smem > gpu.smem_per_block_optin:
        raise NaiveRowTooLongError(
            f"The naive softmax keeps one row of S in shared memory: seq_k={cfg.seq_k} needs "
            f"{smem:,} bytes; {gpu.name} allows {gpu.smem_per_block_optin:,}. Use seq_k ≤ "
            f"{gpu.smem_per_block_optin // 4}, or the flash algorithm.")
    fn = get_function(SOURCE, FUNCTION, compile_options(cfg))
    if smem > DEFAULT_SMEM_LIMIT and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    bh, nq, nk = cfg.bh, cfg.seq_q, cfg.seq_k
    out = {"S": cupy.empty((bh, nq, nk), dtype=cfg.dtype),
           "P": cupy.empty((bh, nq, nk), dtype=cfg.dtype),
           "O": cupy.empty((bh, nq, cfg.head_dim), dtype=cfg.dtype),
           "lse": cupy.empty((bh, nq), dtype=cupy.float32)}
    d = cfg.head_dim
    args = (out["S"], out["P"], out["lse"], np.int32(nq), np.int32(nk),
            np.float32(cfg.softmax_scale), np.int32(cfg.causal))
    threads = row_threads(cfg)

    def scores():   # row-major S = Q Kᵀ is column-major Sᵀ (nk × nq) = Kᵀ-of-(d × nk) · Q
        batched_gemm(True, nk, nq, d, K, d, Q, d, out["S"], nk, bh)

    def softmax():
        fn((bh * nq,), (threads,), args, shared_mem=smem)

    def output():   # row-major O = P V is column-major Oᵀ (d × nq) = V (d × nk) · P (nk × nq)
        batched_gemm(False, d, nq, nk, V, d, out["P"], nk, out["O"], d, bh)

    return list(zip(STAGES, (scores, softmax, output))), out


def run(cfg: AttentionConfig, Q, K, V) -> dict:
    stages, out = prepare(cfg, Q, K, V)
    for _, fn in stages:
        fn()
    return {"O": out["O"], "lse": out["lse"]}
