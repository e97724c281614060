"""Threads per block of every kernel build, as its CUDA source and its launcher fix them: the
launchers (engine.gpu.launchers, engine.gpu.naive) launch with these counts and the tile
model (engine.model.tilemodel) computes occupancy from them. Shared memory per block is in
engine.model.iomodel. Pure Python."""
from __future__ import annotations

from .config import AttentionConfig

TEACHING_THREADS = 128            # NUM_THREADS in kernels/teaching/flash_teaching.cu
BACKWARD_TEACHING_THREADS = 128   # NUM_THREADS in kernels/teaching/flash_backward_teaching.cu
MMA_SYNC_THREADS = 128            # four warps, each owning block_q / 4 query rows
DECODE_THREADS = 128              # NUM_THREADS in kernels/decode/flash_decode.cu


def wgmma_threads(cfg: AttentionConfig) -> int:
    """Forward wgmma kernel: one producer warpgroup and block_q / 64 consumer warpgroups."""
    return 128 * (cfg.block_q // 64 + 1)


def backward_mma_threads(cfg: AttentionConfig) -> int:
    """Backward mma.sync kernel: one warp per 16 keys of the key tile."""
    return cfg.block_k // 16 * 32


def backward_wgmma_threads(cfg: AttentionConfig) -> int:
    """Backward wgmma kernel: one producer warpgroup and block_k / 64 consumer warpgroups of
    64 keys each."""
    return 128 * (cfg.block_k // 64 + 1)


def naive_row_threads(cfg: AttentionConfig) -> int:
    """Naive softmax kernels: threads per row, about 8 keys each, a multiple of 32, from 32 to
    256."""
    return min(256, 32 * max(1, -(-cfg.seq_k // 256)))
