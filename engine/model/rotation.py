"""The incoherent-processing rotation of the FP8 forward (docs/DESIGN.md, "The FP8 forward
contract"): R = H_d · diag(signs) / sqrt(d), H_d the Sylvester Hadamard matrix, the signs drawn
from the config's seed. Q and K are multiplied by R before they are quantized; R is orthogonal,
so (Q R)(K R)ᵀ = Q Kᵀ while an outlier's weight is spread over every column. Pure NumPy: the
emulation (engine.cpu.fp8) and the GPU launcher (engine.gpu.launchers.wgmma_fp8) both take R
from here, in the same order of operations."""
from __future__ import annotations

import math

import numpy as np

from .config import AttentionConfig, ConfigError


def hadamard(d: int) -> np.ndarray:
    """The d×d Sylvester Hadamard matrix (entries ±1, float64), d a power of two."""
    if d < 1 or d & (d - 1):
        raise ConfigError(f"the Hadamard rotation needs head_dim a power of two; got {d}.")
    H = np.ones((1, 1))
    while H.shape[0] < d:
        H = np.block([[H, H], [H, -H]])
    return H


def rotation_signs(cfg: AttentionConfig) -> np.ndarray:
    """(d,) float64 of ±1: the random signs of the rotation, drawn from the config's seed."""
    return np.random.default_rng([cfg.seed, 8]).choice([-1.0, 1.0], size=cfg.head_dim)


def rotation_matrix(cfg: AttentionConfig) -> np.ndarray:
    """R = H_d · diag(signs) / sqrt(d), float64, orthogonal: (Q R)(K R)ᵀ = Q Kᵀ."""
    return hadamard(cfg.head_dim) * rotation_signs(cfg)[None, :] / math.sqrt(cfg.head_dim)
