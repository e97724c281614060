"""Naive attention on the GPU, the fair baseline: S = scale · QKᵀ and O = PV through cuBLAS with one
fused row-softmax kernel (kernels/baselines/naive_softmax.cu) between them; and its backward pass: four
cuBLAS products around one fused softmax-backward kernel (kernels/baselines/naive_backward.cu).

S and P are materialised in the input dtype, as a framework's matmul-softmax-matmul does;
the softmax scale is cuBLAS's alpha in S = scale · QKᵀ (no extra pass, and a float16 S then
overflows only where the scaled scores do); the softmax does its arithmetic in float32,
applies the causal mask and writes each row's log-sum-exp. The two products call cuBLAS's strided batched GEMM
directly, on CuPy's cuBLAS handle, as PyTorch does: float32 accumulation, tensor cores allowed
for float16 and bfloat16 (plain float32 stays float32, no TF32), Kᵀ by a transpose flag rather than a copy.
On an H200 with CuPy 14.2, cupy.matmul ran these float16 products several times slower
(lab/NOTES.md).
"""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig, ConfigError
from ..model.iomodel import naive_backward_row_smem_bytes, naive_row_smem_bytes
from ..model.launch import naive_row_threads
from ..model.registry import BY_KEY
from .launchers import core
from .runtime import ELEM_TYPES, live_gpu

SOURCE = BY_KEY["naive_softmax"].source
CUDA_R_16BF = 14      # cudaDataType_t of bfloat16 (library_types.h)
FUNCTION = BY_KEY["naive_softmax"].function
# Stage names as recorded results carry them (S is scaled by the GEMM's alpha all the same).
STAGES = ("S = QKᵀ (cuBLAS)", "softmax (fused kernel)", "O = PV (cuBLAS)")
BACKWARD_SOURCE = BY_KEY["naive_backward"].source
BACKWARD_FUNCTION = BY_KEY["naive_backward"].function
BACKWARD_STAGES = ("dV = Pᵀ dO (cuBLAS)", "dP = dO Vᵀ (cuBLAS)",
                   "dS = P ∘ (dP − D) (fused kernel)", "dQ = scale · dS K (cuBLAS)",
                   "dK = scale · dSᵀ Q (cuBLAS)")


class NaiveRowTooLongError(ConfigError):
    """A row of S does not fit in one thread block's shared memory."""


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("-DELEM_T=" + ELEM_TYPES[cfg.dtype],
            f"-DNUM_THREADS={naive_row_threads(cfg)}")


def batched_gemm(transa: bool, m: int, n: int, k: int, A, lda: int, B, ldb: int, C, ldc: int,
                 batch: int, transb: bool = False, alpha: float = 1.0):
    """Column-major C_b (m × n) = alpha · op(A_b) · op(B_b) for b < batch, one cuBLAS call on
    the current stream. Row-major arrays are read as their column-major transposes."""
    import cupy
    from cupy_backends.cuda.libs import cublas
    runtime = cupy.cuda.runtime
    dtype = C.dtype
    cuda_type = {np.dtype(np.float16): runtime.CUDA_R_16F, np.dtype(np.float32):
                 runtime.CUDA_R_32F}.get(np.dtype(dtype), CUDA_R_16BF)
    alpha32, zero = np.full(1, alpha, np.float32), np.zeros(1, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
    cublas.setMathMode(handle, cublas.CUBLAS_DEFAULT_MATH)
    cublas.gemmStridedBatchedEx(
        handle, cublas.CUBLAS_OP_T if transa else cublas.CUBLAS_OP_N,
        cublas.CUBLAS_OP_T if transb else cublas.CUBLAS_OP_N,
        m, n, k, alpha32.ctypes.data,
        A.data.ptr, cuda_type, lda, A.size // batch,
        B.data.ptr, cuda_type, ldb, B.size // batch,
        zero.ctypes.data, C.data.ptr, cuda_type, ldc, C.size // batch,
        batch, cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)


def check_row_fits(cfg: AttentionConfig, smem: int, what: str, gpu) -> int:
    """smem, or NaiveRowTooLongError when one row's shared memory exceeds the GPU's limit."""
    if smem > gpu.smem_per_block_optin:
        per_key = smem // cfg.seq_k
        raise NaiveRowTooLongError(
            f"The naive {what} keeps one row in shared memory: seq_k={cfg.seq_k} needs "
            f"{smem:,} bytes; {gpu.name} allows {gpu.smem_per_block_optin:,}. Use seq_k ≤ "
            f"{gpu.smem_per_block_optin // per_key}, or the flash algorithm.")
    return smem


def prepare(cfg: AttentionConfig, Q, K, V):
    """(stages, outputs): stages is [(name, fn)], each fn enqueuing one stage on the current
    stream; outputs holds "O", "lse" and the intermediates "S", "P"."""
    import cupy
    gpu = live_gpu()
    smem = check_row_fits(cfg, naive_row_smem_bytes(cfg), "softmax (a row of S, float32)",
                          gpu)
    threads = naive_row_threads(cfg)
    fn = core.Build(SOURCE, FUNCTION, compile_options(cfg), threads, smem).compiled()
    bh, nq, nk = cfg.bh, cfg.seq_q, cfg.seq_k
    out = {"S": cupy.empty((bh, nq, nk), dtype=cfg.dtype),
           "P": cupy.empty((bh, nq, nk), dtype=cfg.dtype),
           "O": cupy.empty((bh, nq, cfg.head_dim), dtype=cfg.dtype),
           "lse": cupy.empty((bh, nq), dtype=cupy.float32)}
    d = cfg.head_dim
    args = (out["S"], out["P"], out["lse"], np.int32(nq), np.int32(nk), np.int32(cfg.causal))

    def scores():   # row-major S = scale · Q Kᵀ is column-major Sᵀ (nk × nq) = scale · K · Qᵀ
        batched_gemm(True, nk, nq, d, K, d, Q, d, out["S"], nk, bh, alpha=cfg.softmax_scale)

    def softmax():
        fn((bh * nq,), (threads,), args, shared_mem=smem)

    def output():   # row-major O = P V is column-major Oᵀ (d × nq) = V (d × nk) · P (nk × nq)
        batched_gemm(False, d, nq, nk, V, d, out["P"], nk, out["O"], d, bh)

    return list(zip(STAGES, (scores, softmax, output))), out


def forward(cfg: AttentionConfig, Q, K, V) -> dict:
    """Run the naive forward once: "O", "lse" and the intermediates "S", "P"."""
    stages, out = prepare(cfg, Q, K, V)
    for _, fn in stages:
        fn()
    return out


def run(cfg: AttentionConfig, Q, K, V) -> dict:
    out = forward(cfg, Q, K, V)
    return {"O": out["O"], "lse": out["lse"]}


def backward_vec(cfg: AttentionConfig) -> int:
    """Elements per load in the softmax backward: 16 bytes' worth when every row of P starts
    16-byte aligned (seq_k a multiple of it), else 1."""
    vec = 16 // cfg.itemsize
    return vec if cfg.seq_k % vec == 0 else 1


def backward_compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return compile_options(cfg) + (f"-DVEC={backward_vec(cfg)}",)


def prepare_backward(cfg: AttentionConfig, Q, K, V, dO, fwd: dict, poison: bool = False):
    """(stages, outputs) of the naive backward, given the naive forward's outputs `fwd` (its
    P is read; its S is not needed). Outputs: "dQ", "dK", "dV" (B·H, seq, d) in cfg.dtype,
    "delta" (B·H, seq_q) float32 (D_r = sum_c P_rc dP_rc), and the intermediates "dP", "dS"
    (B·H, seq_q, seq_k) in cfg.dtype; poison=True fills them with NaN first (tests)."""
    gpu = live_gpu()
    bh, nq, nk, d = cfg.bh, cfg.seq_q, cfg.seq_k, cfg.head_dim
    core.check_operands(cfg.dtype, Q=(Q, (bh, nq, d)), K=(K, (bh, nk, d)), V=(V, (bh, nk, d)),
                        dO=(dO, (bh, nq, d)), P=(fwd.get("P"), (bh, nq, nk)))
    smem = check_row_fits(cfg, naive_backward_row_smem_bytes(cfg),
                          f"softmax backward (a row of P and of dP, {cfg.dtype})", gpu)
    threads = naive_row_threads(cfg)
    fn = core.Build(BACKWARD_SOURCE, BACKWARD_FUNCTION, backward_compile_options(cfg), threads,
                    smem).compiled()
    P, scale = fwd["P"], cfg.softmax_scale
    out = core.allocate({"dQ": ((bh, nq, d), cfg.dtype), "dK": ((bh, nk, d), cfg.dtype),
                         "dV": ((bh, nk, d), cfg.dtype), "delta": ((bh, nq), np.float32),
                         "dP": ((bh, nq, nk), cfg.dtype), "dS": ((bh, nq, nk), cfg.dtype)},
                        poison)
    args = (P, out["dP"], out["dS"], out["delta"], np.int32(nk))

    # Row-major X (r × c) is column-major Xᵀ (c × r): each product is written for cuBLAS as the
    # column-major transpose of the row-major one.
    def grad_v():   # dV = Pᵀ dO: dVᵀ (d × nk) = dOᵀ (d × nq) · P (nq × nk)
        batched_gemm(False, d, nk, nq, dO, d, P, nk, out["dV"], d, bh, transb=True)

    def grad_p():   # dP = dO Vᵀ: dPᵀ (nk × nq) = V (nk × d) · dOᵀ (d × nq)
        batched_gemm(True, nk, nq, d, V, d, dO, d, out["dP"], nk, bh)

    def grad_s():
        fn((bh * nq,), (threads,), args, shared_mem=smem)

    def grad_q():   # dQ = scale · dS K: dQᵀ (d × nq) = scale · Kᵀ (d × nk) · dSᵀ (nk × nq)
        batched_gemm(False, d, nq, nk, K, d, out["dS"], nk, out["dQ"], d, bh, alpha=scale)

    def grad_k():   # dK = scale · dSᵀ Q: dKᵀ (d × nk) = scale · Qᵀ (d × nq) · dS (nq × nk)
        batched_gemm(False, d, nk, nq, Q, d, out["dS"], nk, out["dK"], d, bh, transb=True,
                     alpha=scale)

    return list(zip(BACKWARD_STAGES, (grad_v, grad_p, grad_s, grad_q, grad_k))), out
