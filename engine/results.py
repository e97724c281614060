"""Plain containers returned by engine.run and engine.benchmark (NumPy arrays only)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# The four per-row arrays of the forward trace, and the per-block schedule records: every
# backend, launcher, file format and test takes these names from here.
TRACE_FIELDS = ("running_max", "running_sum", "rescale", "tile_max")
BLOCK_FIELDS = ("sm_id", "start_ns", "end_ns")
# The backward trace's arrays: per query row and key tile, then per key and query tile.
BACKWARD_TRACE_FIELDS = ("p_rowsum", "dq_norm", "dk_norm", "dv_norm")


@dataclass
class Trace:
    """Online-softmax state per query row after each key tile (see docs/DESIGN.md).

    Arrays of shape (B, H, seq_q, Tc), float32, in natural-log units of the scaled scores;
    `processed` is (Tr, Tc) bool.
    """

    running_max: np.ndarray
    running_sum: np.ndarray
    rescale: np.ndarray
    tile_max: np.ndarray
    processed: np.ndarray


@dataclass
class Schedule:
    """Per thread block, as recorded by a GPU kernel: which SM ran it, and when (ns)."""

    block_bh: np.ndarray      # (n_blocks,) batch·head index
    block_q_tile: np.ndarray  # (n_blocks,) query tile index i
    sm_id: np.ndarray         # (n_blocks,) %smid
    start_ns: np.ndarray      # (n_blocks,) %globaltimer at block start
    end_ns: np.ndarray        # (n_blocks,) %globaltimer at block end


# The operands an FP8 run quantizes and counts, and the keys of Fp8Info.saturated.
FP8_OPERANDS = ("q", "k", "v", "p")


@dataclass
class Fp8Info:
    """What an FP8 forward (dtype float8_e4m3) quantized, per (batch, head) (docs/DESIGN.md,
    "The FP8 forward contract"). Scales are float32: x ≈ scale · x8.

    q_scale (B, H, Tr), k_scale and v_scale (B, H, Tc): one per tile; "tensor" repeats the
    one value of each (batch, head) over its tiles, "none" is all ones.
    saturated: {"q", "k", "v", "p"} -> elements whose |x·inv_scale| exceeded 448 before the
    saturating cast (P: elements of P above 448, only possible with the emulation's
    rescale_threshold).
    scaling, rotation: the config's fp8_scaling and fp8_rotation.
    rescale_threshold: the emulation's conditional rescaling (log2 units; None: the kernel's
    rule, the max always moves); rescales: (row, key tile) updates after the first where the
    running max moved; rescales_skipped: those where the tile's max exceeded the running max
    but by no more than the threshold, so it stayed (0 without a threshold).
    """

    q_scale: np.ndarray
    k_scale: np.ndarray
    v_scale: np.ndarray
    saturated: dict
    scaling: str
    rotation: bool
    rescale_threshold: float | None = None
    rescales: int = 0
    rescales_skipped: int = 0

    def as_info(self) -> dict:
        """The same as Result.info keys: q_scale, k_scale, v_scale, saturated (a dict) and
        fp8_scaling, fp8_rotation."""
        return {"q_scale": self.q_scale, "k_scale": self.k_scale, "v_scale": self.v_scale,
                "saturated": dict(self.saturated), "fp8_scaling": self.scaling,
                "fp8_rotation": self.rotation}


@dataclass
class Result:
    output: np.ndarray        # (B, H, seq_q, d), input dtype (FP8: bfloat16)
    lse: np.ndarray           # (B, H, seq_q) float32
    backend: str              # "numpy" or "cupy"
    algorithm: str            # "flash" or "naive"
    kernel: str | None = None  # flash kernel name on CuPy, else None
    trace: Trace | None = None
    schedule: Schedule | None = None
    info: dict = field(default_factory=dict)  # backend notes (device, compile facts, ...)
    fp8: Fp8Info | None = None  # FP8 runs only: scales and saturation counts


@dataclass
class BackwardTrace:
    """What the backward pass adds up, per row and tile (see docs/DESIGN.md), float32.

    p_rowsum, dq_norm: (B, H, seq_q, Tc); dk_norm, dv_norm: (B, H, seq_k, Tr);
    `processed` is (Tr, Tc) bool, the forward's rule.
    """

    processed: np.ndarray
    p_rowsum: np.ndarray      # sum over the visible keys of key tile j of P = exp(s - lse)
    dq_norm: np.ndarray       # ||dQ_r|| after key tiles 0..j
    dk_norm: np.ndarray       # ||dK_c|| after query tiles 0..i
    dv_norm: np.ndarray       # ||dV_c|| after query tiles 0..i


@dataclass
class Gradients:
    dq: np.ndarray            # (B, H, seq_q, d), input dtype
    dk: np.ndarray            # (B, H, seq_k, d), input dtype
    dv: np.ndarray            # (B, H, seq_k, d), input dtype
    delta: np.ndarray         # (B, H, seq_q) float32: D_r = sum_d dout[r] * O[r]
    lse: np.ndarray           # (B, H, seq_q) float32: the forward's lse
    backend: str              # "numpy" or "cupy"
    algorithm: str            # "flash" or "naive"
    kernel: str | None = None  # flash kernel name on CuPy, else None
    trace: BackwardTrace | None = None
    schedule: Schedule | None = None   # one record per block bh·Tc + j; block_q_tile holds j
    info: dict = field(default_factory=dict)


@dataclass
class Timing:
    """Summary of repeated timings of one configuration."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    reps: int
    tflops: float
    peak_bytes: int
    method: str
    backend: str = ""
    algorithm: str = ""
    kernel: str | None = None
    stages: dict = field(default_factory=dict)   # stage name -> median ms (naive baseline)
    samples_ms: list = field(default_factory=list)
    # The spread of samples_ms (engine.model.timing_stats.spread_of): quartiles, the
    # interquartile range over the median, and whether that is too wide to trust the median
    # (NaN and False when the calls were not kept); the untimed warm-up calls made first.
    q1_ms: float = float("nan")
    q3_ms: float = float("nan")
    iqr_rel: float = float("nan")
    noisy: bool = False
    warmup: int = 0


def timing_record(cfg, kernel: str, t: Timing, direction: str = "forward") -> dict:
    """One timing as benchmarks/*.json record it (the format engine.recorded reads)."""
    return {"kernel": kernel, "direction": direction, "batch": cfg.batch, "heads": cfg.heads, "seq_q": cfg.seq_q,
            "seq_k": cfg.seq_k, "head_dim": cfg.head_dim, "dtype": cfg.dtype,
            "causal": cfg.causal, "block_q": cfg.block_q, "block_k": cfg.block_k,
            "trace": False, "median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
            "reps": t.reps, "tflops": t.tflops, "peak_bytes": t.peak_bytes,
            "stages": t.stages}


# The decode trace (engine.run_decode): per split, then the merge (see docs/DESIGN.md).
DECODE_TRACE_FIELDS = ("split_max", "split_sum", "split_out", "m_final", "rescale", "l_final")


@dataclass
class DecodeTrace:
    """Each split's partial softmax state and the log-sum-exp merge, float32, in natural-log
    units of the scaled scores. Per split s (last axis S): split_max m_s, split_sum l_s
    (B, H, seq_q, S); split_out O_s (B, H, seq_q, S, d), each split's own normalised output.
    The merge: m_final = max_s m_s and l_final = Σ_s rescale_s · l_s (B, H, seq_q);
    rescale_s = exp(m_s - m_final) (B, H, seq_q, S)."""

    split_max: np.ndarray
    split_sum: np.ndarray
    split_out: np.ndarray
    m_final: np.ndarray
    rescale: np.ndarray
    l_final: np.ndarray


@dataclass
class DecodeResult:
    output: np.ndarray        # (B, H, seq_q, d), input dtype
    lse: np.ndarray           # (B, H, seq_q) float32: m_final + log(l_final)
    num_splits: int           # the split count that ran ("auto" resolved)
    bounds: np.ndarray        # (num_splits + 1,) split s holds keys [bounds[s], bounds[s+1])
    block_table: np.ndarray   # (batch, pages_per_seq) int32; (batch, 0) when contiguous
    backend: str              # "numpy" or "cupy"
    trace: DecodeTrace | None = None
    info: dict = field(default_factory=dict)
