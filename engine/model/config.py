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
# block_k sizes beyond BLOCK_SIZES that only the FP8 forward takes (dtype in FP8_DTYPES): its
# Hopper build (wider key tiles share the softmax's fixed costs per tile;
# engine.model.catalog says which shapes run) and its emulation at any head_dim.
FP8_BLOCK_K = (192, 256)
# The dtypes of every pass (forward, backward, decode) on both backends, and of the sidebar.
DTYPES = ("float32", "float16", "bfloat16")
# FP8 (e4m3: 4 exponent bits, 3 mantissa bits, finite, max 448): the flash forward only. Its
# q, k, v come in one of FP8_INPUT_DTYPES (a model's activations; make_inputs gives
# FP8_INPUT_DTYPE) and are quantized by the run itself; the output is FP8_OUTPUT_DTYPE.
FP8_DTYPES = ("float8_e4m3",)
FORWARD_ONLY_DTYPES = FP8_DTYPES
CONFIG_DTYPES = DTYPES + FP8_DTYPES          # what AttentionConfig takes
FP8_INPUT_DTYPES = ("float16", "bfloat16", "float32")
FP8_INPUT_DTYPE = "float16"
FP8_OUTPUT_DTYPE = "bfloat16"
# One scale per Q tile (block_q rows) and per K and V tile (block_k rows) of each
# (batch, head); one per (batch, head) for each of Q, K, V; or none (scale 1).
FP8_SCALINGS = ("tile", "tensor", "none")
INPUT_PRESETS = ("normal", "rising", "outliers")
MAX_SEQ = 1 << 20          # structural bound; resource limits below are the real guard
MAX_BATCH_HEADS = 1 << 16
MAX_LOGIT_SCALE = 1e4
MAX_SEED = 2**32 - 1
DIRECTIONS = ("forward", "backward")
BACKWARD_FLOP_FACTOR = 2.5


class ConfigError(ValueError):
    """A configuration value is not allowed; the message says what is allowed."""


def forward_only_message(what: str, dtype: str, why: str = "") -> str:
    """The one refusal of a forward-only dtype (FORWARD_ONLY_DTYPES) by `what` (the backward
    pass, a decode step, naive attention), naming what is allowed."""
    what = what[0].upper() + what[1:]
    return (f"{what} does not take dtype={dtype}: {', '.join(FORWARD_ONLY_DTYPES)} runs the "
            f"flash forward pass only (engine.run with algorithm='flash'){why}. {what} takes "
            f"dtype {', '.join(DTYPES)}.")


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
    # FP8 only (dtype in FP8_DTYPES; other dtypes ignore them, and their repr and to_dict
    # leave them out, so cache keys, files and links of those dtypes stay as they were).
    fp8_scaling: str = "tile"
    fp8_rotation: bool = False

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
        fp8 = isinstance(self.dtype, str) and self.dtype in FP8_DTYPES
        if not fp8 and _is_int(self.block_k) and self.block_k in FP8_BLOCK_K:
            raise ConfigError(f"block_k={self.block_k} is for dtype {', '.join(FP8_DTYPES)} "
                              f"only (the FP8 forward); block_k must be one of "
                              f"{', '.join(map(str, BLOCK_SIZES))}; got {self.block_k!r}.")
        _check_choice("block_k", self.block_k, BLOCK_SIZES + FP8_BLOCK_K if fp8 else BLOCK_SIZES)
        if isinstance(self.dtype, bool) or self.dtype not in CONFIG_DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(CONFIG_DTYPES)} "
                              f"({', '.join(FORWARD_ONLY_DTYPES)}: forward only); "
                              f"got {self.dtype!r}.")
        _check_choice("inputs", self.inputs, INPUT_PRESETS)
        _check_choice("fp8_scaling", self.fp8_scaling, FP8_SCALINGS)
        if not isinstance(self.fp8_rotation, bool):
            raise ConfigError(f"fp8_rotation must be True or False; got {self.fp8_rotation!r}.")
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
    def is_fp8(self) -> bool:
        return self.dtype in FP8_DTYPES

    @property
    def input_dtype(self) -> str:
        """The dtype of make_inputs' q, k, v: the config's, except FP8's (FP8_INPUT_DTYPE:
        float16, a model's activations, which the run quantizes)."""
        return FP8_INPUT_DTYPE if self.is_fp8 else self.dtype

    @property
    def output_dtype(self) -> str:
        """The dtype of the output: the config's, except FP8's (FP8_OUTPUT_DTYPE)."""
        return FP8_OUTPUT_DTYPE if self.is_fp8 else self.dtype

    @property
    def itemsize(self) -> int:
        """Bytes of one Q, K or V element as the flash kernel reads it (FP8: 1)."""
        return 1 if self.is_fp8 else 4 if self.dtype == "float32" else 2

    @property
    def io_itemsize(self) -> int:
        """Bytes of one element of the inputs given and of the output written (input_dtype and
        output_dtype: both 16-bit for FP8)."""
        return 4 if self.output_dtype == "float32" else 2

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
        """Every field, less the FP8 ones when the dtype is not FP8 (they mean nothing there:
        a file or link of another dtype stays as it was)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if self.is_fp8 or f.name not in FP8_FIELDS}

    def __repr__(self) -> str:
        # The app's caches key a config by its repr: the FP8 fields only where they count.
        shown = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"AttentionConfig({shown})"


FP8_FIELDS = ("fp8_scaling", "fp8_rotation")


def _check_choice(name, value, allowed):
    if isinstance(value, bool) or value not in allowed:
        shown = ", ".join(str(a) for a in allowed)
        raise ConfigError(f"{name} must be one of {shown}; got {value!r}.")
