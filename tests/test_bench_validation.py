"""The bench sweep's backward validation (benchmarks/bench_sweep.py): the float64 gradients it
checks a line against, a line that passes, and one refused, on the CPU (our lines through the
NumPy backward; the GPU's lines are checked in tests/test_gpu_backward.py)."""
import numpy as np
import pytest

import engine
from benchmarks import bench_sweep
from benchmarks.bench_sweep import (BACKWARD_VALIDATION_LIMITS, gradients64, rel_err,
                                    validate_backward)


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=96, seq_k=96, head_dim=32, block_q=32, block_k=32,
                dtype="float32", seed=11)
    return engine.AttentionConfig(**{**base, **changes})


@pytest.mark.parametrize("causal", [False, True])
def test_float64_gradients_match_the_numpy_backward(causal):
    """gradients64's closed forms against the NumPy backward in float32: the same gradients
    to float32's accuracy (relative 1e-4 leaves a hundredfold margin over what these seeded
    inputs give; dS's cancellation is mild for random inputs)."""
    cfg = config(causal=causal)
    q, k, v = engine.make_inputs(cfg)
    dout = engine.make_dout(cfg)
    want = gradients64(cfg, q, k, v, dout)
    got = engine.run_backward(cfg, q, k, v, dout, backend="numpy")
    for name in ("dq", "dk", "dv"):
        assert want[name].shape == (1, 2, 96, 32)
        assert rel_err(getattr(got, name), want[name]) <= 1e-4, name


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_validate_backward_passes_a_right_line_and_records_each_error(dtype):
    cfg = config(dtype=dtype, seq_q=256, seq_k=256, causal=True)
    checked = validate_backward(cfg, "tensorcore", backend="numpy")
    assert checked["seq"] == 256 and checked["limit"] == BACKWARD_VALIDATION_LIMITS[dtype]
    assert set(checked["rel_errs"]) == {"dq", "dk", "dv"}
    assert checked["rel_err"] == max(checked["rel_errs"].values()) <= checked["limit"]
    assert checked["rel_err"] > 0


def test_validate_backward_checks_a_short_run_of_a_long_config(monkeypatch):
    seen = {}

    def line_gradients(cfg, line, q, k, v, dout, backend):
        seen.update(cfg=cfg, line=line, shape=q.shape)
        return gradients64(cfg, q, k, v, dout)
    monkeypatch.setattr(bench_sweep, "line_gradients", line_gradients)
    cfg = config(batch=4, heads=8, seq_q=4096, seq_k=4096, dtype="float16")
    checked = validate_backward(cfg, "torch_cudnn")
    assert seen["line"] == "torch_cudnn" and seen["shape"] == (1, 2, 1024, 32)
    assert checked["seq"] == bench_sweep.VALIDATE_N == 1024 and checked["rel_err"] == 0.0


@pytest.mark.parametrize("wrong", ["scaled", "nan"])
def test_validate_backward_refuses_a_wrong_gradient(monkeypatch, wrong):
    def line_gradients(cfg, line, q, k, v, dout, backend):
        g = gradients64(cfg, q, k, v, dout)
        if wrong == "scaled":
            g["dk"] = g["dk"] * 1.05          # 5% off: five times float16's limit
        else:
            g["dv"] = np.full_like(g["dv"], np.nan)
        return g
    monkeypatch.setattr(bench_sweep, "line_gradients", line_gradients)
    name = "dk" if wrong == "scaled" else "dv"
    with pytest.raises(ValueError, match=f"refused: on N=96 its {name} differs from float64"):
        validate_backward(config(dtype="float16"), "tensorcore")


def test_the_lines_of_one_configuration_share_one_reference(monkeypatch):
    """The sweep checks each line of a configuration in turn: the inputs and their float64
    gradients are made once for all of them, not once a line."""
    made = []

    def make_inputs(cfg):
        made.append(cfg)
        return engine.make_inputs(cfg)
    monkeypatch.setattr(bench_sweep, "make_inputs", make_inputs)
    bench_sweep.reference.cache_clear()
    cfg = config(dtype="float16", seed=12)
    for line in ("naive", "tensorcore"):
        validate_backward(cfg, line, backend="numpy")
    assert made == [bench_sweep.shorter_run(cfg)]
