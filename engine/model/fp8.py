"""What FP8 quantization takes from a config alone, for both backends (the NumPy emulation
engine.cpu.fp8 and the GPU launcher engine.gpu.launchers.wgmma_fp8): the rotation of Q and K
(fp8_rotation), a random-signed Hadamard matrix drawn from the seed. Pure.

R = H_d · diag(signs) / √d, H_d the d×d Sylvester Hadamard matrix, signs =
np.random.default_rng([seed, 8]).choice([-1.0, 1.0], size=d). R is orthogonal, so
(Q R)(K R)ᵀ = Q Kᵀ: the scores do not change, while an outlier's energy spreads over the
row, which lowers each tile's amax against its typical value.
"""
from __future__ import annotations

import math

import numpy as np

from .config import ConfigError


def hadamard(d: int) -> np.ndarray:
    """The d×d Sylvester Hadamard matrix (entries ±1, float64), d a power of two."""
    if not isinstance(d, int) or d < 1 or d & (d - 1):
        raise ConfigError(f"the Hadamard rotation needs head_dim a power of two; got {d!r}.")
    H = np.ones((1, 1))
    while H.shape[0] < d:
        H = np.block([[H, H], [H, -H]])
    return H


def rotation_signs(head_dim: int, seed: int) -> np.ndarray:
    """(head_dim,) float64 of ±1: the rotation's random signs, drawn from the seed."""
    return np.random.default_rng([seed, 8]).choice([-1.0, 1.0], size=head_dim)


def rotation_matrix(head_dim: int, seed: int) -> np.ndarray:
    """R = H_d · diag(signs) / sqrt(d), float64 (head_dim × head_dim), orthogonal."""
    return (hadamard(head_dim) * rotation_signs(head_dim, seed)[None, :]
            / math.sqrt(head_dim))
