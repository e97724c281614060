"""Naive attention on the GPU, the fair baseline: S = QKᵀ and O = PV through cuBLAS
(cupy.matmul) with one fused row-softmax kernel (kernels/naive_softmax.cu) between them.

S and P are materialised in the input dtype, as a framework's matmul-softmax-matmul does;
the softmax does its arithmetic in float32, applies the scale and the causal mask, and
writes each row's log-sum-exp.
"""
from __future__ import annotations

import numpy as np

from kernels.loader import get_function

from .config import AttentionConfig, ConfigError
from .gpu_runtime import live_gpu

SOURCE = "naive_softmax.cu"
FUNCTION = "row_softmax"
NUM_THREADS = 256               # NUM_THREADS in the source
DEFAULT_SMEM_LIMIT = 48 * 1024
STAGES = ("S = QKᵀ (cuBLAS)", "softmax (fused kernel)", "O = PV (cuBLAS)")


class NaiveRowTooLongError(ConfigError):
    """A row of S does not fit in one thread block's shared memory."""


def compile_options(cfg: AttentionConfig) -> tuple[str, ...]:
    return ("-DELEM_T=" + ("float" if cfg.dtype == "float32" else "half_bits"),)


def row_smem_bytes(cfg: AttentionConfig) -> int:
    return 4 * cfg.seq_k


def device_bytes(cfg: AttentionConfig) -> int:
    """Device memory the naive run holds: Q, K, V, O, S, P (input dtype) and lse."""
    e, bh = cfg.itemsize, cfg.bh
    return (bh * (2 * cfg.seq_q + 2 * cfg.seq_k) * cfg.head_dim * e
            + 2 * bh * cfg.seq_q * cfg.seq_k * e + 4 * bh * cfg.seq_q)


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
    K_T = K.transpose(0, 2, 1)
    args = (out["S"], out["P"], out["lse"], np.int32(nq), np.int32(nk),
            np.float32(cfg.softmax_scale), np.int32(cfg.causal))

    def scores():
        cupy.matmul(Q, K_T, out=out["S"])

    def softmax():
        fn((bh * nq,), (NUM_THREADS,), args, shared_mem=smem)

    def output():
        cupy.matmul(out["P"], V, out=out["O"])

    return list(zip(STAGES, (scores, softmax, output))), out


def run(cfg: AttentionConfig, Q, K, V) -> dict:
    stages, out = prepare(cfg, Q, K, V)
    for _, fn in stages:
        fn()
    return {"O": out["O"], "lse": out["lse"]}
