"""AttentionConfig: the one validated description of an attention problem and its tiling.

Every allowed value lives in this module (resource limits: engine.model.limits) and every error
message quotes it, so the UI can show the same text a developer sees.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import ml_dtypes  # noqa: F401  (registers NumPy's "bfloat16" dtype, which CuPy takes too)

# ---- allowed values: the single source quoted by every error message -------------------
HEAD_DIMS = (16, 32, 64, 128, 256)
BLOCK_SIZES = (8, 16, 32, 64, 128)
DTYPES = ("float32", "float16", "bfloat16")
INPUT_PRESETS = ("normal", "rising")
MAX_SEQ = 1 << 20          # structural bound; resource limits below are the real guard
MAX_BATCH_HEADS = 1 << 16
MAX_LOGIT_SCALE = 1e4
MAX_SEED = 2**32 - 1
DIRECTIONS = ("forward", "backward")
BACKWARD_FLOP_FACTOR = 2.5


class ConfigError(ValueError):
    """A configuration value is not allowed; the message says what is allowed."""


class LimitError(ValueError):
    """A request exceeds a resource limit of this server; the message says how to raise it."""


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass(frozen=True)
class AttentionConfig:
    """Shapes, tiling and inputs of one attention forward pass (B, H, seq, head_dim layout)."""

    batch: int = 1
    heads: int = 2
    seq_q: int = 256
    seq_k: int = 256
    head_dim: int = 64
    block_q: int = 64
    block_k: int = 64
    dtype: str = "float32"
    causal: bool = False
    scale: float | None = None
    seed: int = 0
    inputs: str = "normal"
    logit_scale: float = 1.0

    def __post_init__(self):
        for name in ("batch", "heads", "seq_q", "seq_k"):
            val = getattr(self, name)
            if not _is_int(val) or not 1 <= val <= MAX_SEQ:
                raise ConfigError(f"{name} must be a whole number from 1 to {MAX_SEQ}; got {val!r}.")
        if self.batch * self.heads > MAX_BATCH_HEADS:
            raise ConfigError(
                f"batch × heads must be at most {MAX_BATCH_HEADS}; got {self.batch * self.heads}.")
        _check_choice("head_dim", self.head_dim, HEAD_DIMS)
        _check_choice("block_q", self.block_q, BLOCK_SIZES)
        _check_choice("block_k", self.block_k, BLOCK_SIZES)
        _check_choice("dtype", self.dtype, DTYPES)
        _check_choice("inputs", self.inputs, INPUT_PRESETS)
        if not isinstance(self.causal, bool):
            raise ConfigError(f"causal must be True or False; got {self.causal!r}.")
        if self.scale is not None and (
                not _is_real(self.scale) or not math.isfinite(self.scale) or self.scale <= 0):
            raise ConfigError(f"scale must be a finite number > 0, or None for 1/sqrt(head_dim); "
                              f"got {self.scale!r}.")
        if (not _is_real(self.logit_scale) or not math.isfinite(self.logit_scale)
                or not 0 < self.logit_scale <= MAX_LOGIT_SCALE):
            raise ConfigError(f"logit_scale must be a number in (0, {MAX_LOGIT_SCALE:g}]; "
                              f"got {self.logit_scale!r}.")
        if not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be a whole number from 0 to {MAX_SEED}; got {self.seed!r}.")

    # ---- derived quantities ----------------------------------------------------------
    @property
    def softmax_scale(self) -> float:
        return float(self.scale) if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def Tr(self) -> int:
        return -(-self.seq_q // self.block_q)

    @property
    def Tc(self) -> int:
        return -(-self.seq_k // self.block_k)

    @property
    def bh(self) -> int:
        return self.batch * self.heads

    @property
    def itemsize(self) -> int:
        return 4 if self.dtype == "float32" else 2

    @property
    def flops(self) -> float:
        """4·B·H·Nq·Nk·d, halved for causal (the convention used for every TFLOP/s figure)."""
        f = 4.0 * self.bh * self.seq_q * self.seq_k * self.head_dim
        return f / 2 if self.causal else f

    def flops_of(self, direction: str = "forward") -> float:
        """FLOPs counted for a direction: the backward's five matrix products count as
        BACKWARD_FLOP_FACTOR times the forward's two."""
        return self.flops * (BACKWARD_FLOP_FACTOR if direction == "backward" else 1.0)

    def with_(self, **changes) -> "AttentionConfig":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _check_choice(name, value, allowed):
    if isinstance(value, bool) or value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        raise ConfigError(f"{name} must be one of {shown}; got {value!r}.")
