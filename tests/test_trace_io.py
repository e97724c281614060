"""Trace files: a round trip keeps every array; a tampered or hostile file gives a clear error."""
import io
import json

import numpy as np
import pytest

import engine
from engine import trace_io
import seeds

RNG = seeds.rng(6635)


def traced(**kw):
    cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=70, seq_k=45, head_dim=16, block_q=16,
                                 block_k=8, causal=True, seed=int(RNG.integers(1e9)), **kw)
    return cfg, engine.run(cfg, backend="numpy", trace=True)


def test_round_trip_keeps_everything():
    cfg, res = traced(dtype="float16")
    cfg2, res2 = trace_io.from_npz_bytes(trace_io.to_npz_bytes(cfg, res))
    assert cfg2 == cfg and res2.backend == "numpy"
    assert np.array_equal(res2.output, res.output) and res2.output.dtype == np.float16
    for f in trace_io.TRACE_FIELDS:
        assert np.array_equal(getattr(res2.trace, f), getattr(res.trace, f))


def test_csv_has_one_line_per_row_and_tile():
    cfg, res = traced()
    lines = trace_io.to_csv(cfg, res).splitlines()
    assert len(lines) == 1 + 2 * 70 * cfg.Tc
    b, h, r, j, m, l, sc, t = lines[1 + 70 * cfg.Tc + 5 * cfg.Tc + 3].split(",")
    assert (b, h, r, j) == ("0", "1", "5", "3")
    assert float(m) == pytest.approx(res.trace.running_max[0, 1, 5, 3], rel=1e-7)


def _tamper(data, **changes):
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    arrays.update(changes)
    for k, v in list(arrays.items()):
        if v is None:
            del arrays[k]
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_bad_files_are_refused_with_reasons():
    cfg, res = traced()
    good = trace_io.to_npz_bytes(cfg, res)
    cases = {
        b"not a zip at all": "Not a readable NPZ",
        _tamper(good, lse=None): "lacks lse",
        _tamper(good, rescale=np.ones((1, 2, 70, 2), np.float32)): "rescale has shape",
        _tamper(good, config=np.array(json.dumps({**cfg.to_dict(), "block_q": -3}))):
            "config is not valid",
        _tamper(good, processed=np.ones((cfg.Tr, cfg.Tc), bool)): "processed-tile map",
        _tamper(good, backend=np.array("evil")): "backend must be",
    }
    for data, words in cases.items():
        with pytest.raises(trace_io.TraceFileError, match=words):
            trace_io.from_npz_bytes(data)
    obj = io.BytesIO()
    np.savez(obj, config=np.array([{"a": 1}], dtype=object))
    with pytest.raises(trace_io.TraceFileError):
        trace_io.from_npz_bytes(obj.getvalue())
    with pytest.raises(trace_io.TraceFileError, match="at most"):
        trace_io.from_npz_bytes(b"0" * (trace_io.MAX_UPLOAD_BYTES + 1))
