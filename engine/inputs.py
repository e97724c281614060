"""Deterministic Q, K, V for a config, with presets that make the online softmax visible."""
from __future__ import annotations

import numpy as np

from .model.config import AttentionConfig, ConfigError, forward_only_message


def make_inputs(cfg: AttentionConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return q, k, v of shape (batch, heads, seq, head_dim) in cfg.input_dtype (cfg.dtype; for
    FP8, float16: a model's activations, which the run quantizes), fixed by cfg.seed.

    Presets (cfg.inputs):
      "normal": standard normal entries.
      "rising": scores grow along the key sequence, so the running max rises at every
                key tile and the rescale factor is visibly below 1.
      "outliers": the normal entries plus, on each entry with probability OUTLIER_RATE
                (0.1%, drawn from the seed), an extra N(0, OUTLIER_STD²) term: FA3's
                N(0, 1) + N(0, 100)·Bernoulli(0.001), the inputs FP8 scaling and rotation
                are for.
    cfg.logit_scale multiplies q, hence every score (a temperature knob).
    """
    rng = np.random.default_rng(cfg.seed)
    b, h, d = cfg.batch, cfg.heads, cfg.head_dim
    q = rng.standard_normal((b, h, cfg.seq_q, d), dtype=np.float32)
    k = rng.standard_normal((b, h, cfg.seq_k, d), dtype=np.float32)
    v = rng.standard_normal((b, h, cfg.seq_k, d), dtype=np.float32)
    if cfg.inputs == "rising":
        # A shared unit direction u: q leans on u, k's component along u grows with position,
        # so q_r·k_c rises by about 8 (after 1/sqrt(d)) from the first key to the last.
        u = rng.standard_normal(d).astype(np.float32)
        u /= np.linalg.norm(u)
        ramp = np.linspace(0.0, 4.0 * np.sqrt(d), cfg.seq_k, dtype=np.float32)
        q = 0.5 * q + 2.0 * u
        k = 0.5 * k + ramp[:, None] * u
    elif cfg.inputs == "outliers":
        q, k, v = (x + _outliers(rng, x.shape) for x in (q, k, v))
    q = q * np.float32(cfg.logit_scale)
    dt = np.dtype(cfg.input_dtype)
    if dt == np.float16:  # keep extreme logit scales finite in half precision (bfloat16
        # has float32's range)
        lim = np.float32(np.finfo(np.float16).max)
        q = np.clip(q, -lim, lim)
    return q.astype(dt), k.astype(dt), v.astype(dt)


OUTLIER_RATE = 1e-3
OUTLIER_STD = 10.0


def _outliers(rng: np.random.Generator, shape) -> np.ndarray:
    """N(0, OUTLIER_STD²) on the entries a Bernoulli(OUTLIER_RATE) draw picks, else 0."""
    picked = rng.random(shape, dtype=np.float32) < OUTLIER_RATE
    return np.where(picked, np.float32(OUTLIER_STD)
                    * rng.standard_normal(shape, dtype=np.float32), np.float32(0))


def make_dout(cfg: AttentionConfig) -> np.ndarray:
    """dout, the gradient the backward pass starts from: (batch, heads, seq_q, head_dim) in
    cfg.dtype, standard normal, fixed by cfg.seed on a stream independent of make_inputs'."""
    if cfg.is_fp8:
        raise ConfigError(forward_only_message("the backward pass", cfg.dtype))
    rng = np.random.default_rng([cfg.seed, 1])
    shape = (cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim)
    return rng.standard_normal(shape, dtype=np.float32).astype(cfg.dtype)
