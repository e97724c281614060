"""Saving a traced run to NPZ/CSV, and loading an uploaded NPZ safely.

Loading never unpickles (allow_pickle=False), caps the size, and checks every array's name,
shape and dtype against the config stored beside it, so a visitor's file can only ever become
a valid trace or a clear error.
"""
from __future__ import annotations

import io
import json

import numpy as np

from .model.config import AttentionConfig, ConfigError
from .model.limits import check_limits
from .model.tiles import processed_tiles
from .results import TRACE_FIELDS, Result, Trace

MAX_UPLOAD_BYTES = 64 << 20


class TraceFileError(ValueError):
    """An uploaded trace file is not one this app wrote; the message says what is wrong."""


def to_npz_bytes(cfg: AttentionConfig, res: Result) -> bytes:
    if res.trace is None:
        raise ValueError("This result has no trace: run with trace=True and algorithm='flash'.")
    buf = io.BytesIO()
    arrays = {name: getattr(res.trace, name) for name in TRACE_FIELDS}
    np.savez_compressed(buf, config=np.array(json.dumps(cfg.to_dict())),
                        backend=np.array(res.backend), output=_stored(res.output), lse=res.lse,
                        processed=res.trace.processed, **arrays)
    return buf.getvalue()


def _stored(output: np.ndarray) -> np.ndarray:
    """NPZ keeps only NumPy's own dtypes: bfloat16 goes in as its 16-bit patterns."""
    return output.view(np.uint16) if output.dtype == np.dtype("bfloat16") else output


def to_csv(cfg: AttentionConfig, res: Result) -> str:
    """One line per (batch, head, query row, key tile) with the four trace values."""
    if res.trace is None:
        raise ValueError("This result has no trace: run with trace=True and algorithm='flash'.")
    t = res.trace
    B, H, N, Tc = t.running_max.shape
    idx = np.indices((B, H, N, Tc)).reshape(4, -1).T.astype(np.float64)
    cols = np.stack([getattr(t, f).reshape(-1) for f in TRACE_FIELDS], axis=1)
    buf = io.StringIO()
    np.savetxt(buf, np.concatenate([idx, cols], axis=1), delimiter=",", comments="",
               fmt=["%d"] * 4 + ["%.9g"] * 4,
               header="batch,head,row,key_tile," + ",".join(TRACE_FIELDS))
    return buf.getvalue()


def from_npz_bytes(data: bytes) -> tuple[AttentionConfig, Result]:
    """Validate and load a file written by to_npz_bytes."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise TraceFileError(f"The file is {len(data):,} bytes; at most {MAX_UPLOAD_BYTES:,} "
                             f"bytes are accepted.")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except Exception as exc:
        raise TraceFileError(f"Not a readable NPZ file ({type(exc).__name__}).") from None
    need = {"config", "backend", "output", "lse", "processed", *TRACE_FIELDS}
    missing = need - arrays.keys()
    if missing:
        raise TraceFileError(f"The file lacks {', '.join(sorted(missing))}; expected the arrays "
                             f"{', '.join(sorted(need))}.")
    try:
        cfg = AttentionConfig(**json.loads(str(arrays["config"])))
    except (ConfigError, TypeError, ValueError) as exc:
        raise TraceFileError(f"The stored config is not valid: {exc}") from None
    if cfg.output_dtype == "bfloat16" and arrays["output"].dtype == np.uint16:
        arrays["output"] = arrays["output"].view("bfloat16")
    check_limits(cfg, trace=True)
    B, H, N, d, Tc = cfg.batch, cfg.heads, cfg.seq_q, cfg.head_dim, cfg.Tc
    expect = {"output": ((B, H, N, d), np.dtype(cfg.output_dtype)), "lse": ((B, H, N), np.float32),
              "processed": ((cfg.Tr, cfg.Tc), np.bool_),
              **{f: ((B, H, N, Tc), np.float32) for f in TRACE_FIELDS}}
    for name, (shape, dtype) in expect.items():
        a = arrays[name]
        if a.shape != shape or a.dtype != dtype:
            raise TraceFileError(f"{name} has shape {a.shape} and dtype {a.dtype}; this config "
                                 f"needs shape {shape} and dtype {np.dtype(dtype)}.")
    if not np.array_equal(arrays["processed"], processed_tiles(cfg)):
        raise TraceFileError("The processed-tile map does not match the config's causal mask.")
    backend = str(arrays["backend"])
    if backend not in ("numpy", "cupy"):
        raise TraceFileError(f"backend must be 'numpy' or 'cupy'; got {backend!r}.")
    trace = Trace(processed=arrays["processed"], **{f: arrays[f] for f in TRACE_FIELDS})
    return cfg, Result(output=arrays["output"], lse=arrays["lse"], backend=backend,
                       algorithm="flash", trace=trace, info={"source": "uploaded file"})
