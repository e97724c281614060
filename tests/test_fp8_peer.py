"""cuDNN's FP8 line in the FP8 sweeps (engine/gpu/cudnn_fp8.py, benchmarks/bench_sweep.py,
benchmarks/fp8_parity.py), on the CPU: which configs it times, the error it may have and
why, its column in the parity rows, and the message when its bindings are missing. The line
itself runs in tests/test_gpu_fp8.py."""
import numpy as np
import pytest

import engine
from benchmarks import bench_sweep
from benchmarks.bench_sweep import E4M3_OUTPUT_ROUNDING, attention64, times, validation_limit
from benchmarks.fp8_parity import parity
from reference import per_tensor_e4m3_64


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=64, block_q=128,
                block_k=128, dtype="float8_e4m3", seed=5)
    return engine.AttentionConfig(**{**base, **changes})


def per_tensor_fp8_attention(cfg, q, k, v) -> np.ndarray:
    """What a correct per-tensor FP8 forward with e4m3 O returns: float64 attention of q, k,
    v each rounded to e4m3 at one scale (amax to 448), O rounded to e4m3 the same way."""
    return per_tensor_e4m3_64(attention64(cfg, *map(per_tensor_e4m3_64, (q, k, v))))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8_e4m3"])
def test_an_fp8_config_times_our_fp8_build_and_cudnns_fp8_and_nothing_else(dtype):
    cfg = config(dtype=dtype)
    timed = [line for line in bench_sweep.KERNEL_CHOICES if line != "torch" and times(cfg, line)]
    if dtype == "float8_e4m3":
        assert timed == ["tensorcore", "cudnn_fp8"]
    else:
        assert "cudnn_fp8" not in timed and "tensorcore" in timed and "torch_cudnn" in timed


def test_cudnns_fp8_line_may_add_the_e4m3_output_rounding_and_no_more():
    cfg = config()
    q, k, v = engine.make_inputs(cfg)
    O64 = attention64(cfg, q, k, v)
    ours = validation_limit(cfg, q, k, v, O64, "tensorcore")
    assert validation_limit(cfg, q, k, v, O64, "cudnn_fp8") == pytest.approx(
        ours + E4M3_OUTPUT_ROUNDING)
    assert 0.01 < ours < 0.1           # the quantization's own error, as the emulation has it


@pytest.mark.parametrize("inputs", ["normal", "rising"])
def test_a_correct_per_tensor_fp8_output_passes_and_a_wrong_one_is_refused(monkeypatch, inputs):
    monkeypatch.setattr(bench_sweep, "line_output",
                        lambda cfg, line, q, k, v: per_tensor_fp8_attention(cfg, q, k, v))
    bench_sweep.reference.cache_clear()
    cfg = config(inputs=inputs)
    checked = bench_sweep.validate(cfg, "cudnn_fp8")
    assert checked["rel_err"] < checked["limit"]
    monkeypatch.setattr(bench_sweep, "line_output",
                        lambda cfg, line, q, k, v: 1.2 * per_tensor_fp8_attention(cfg, q, k, v))
    with pytest.raises(ValueError, match="refused"):
        bench_sweep.validate(cfg, "cudnn_fp8")
    bench_sweep.reference.cache_clear()


def record(kernel, dtype, ms, seq=8192):
    return {"kernel": kernel, "dtype": dtype, "seq_q": seq, "head_dim": 128, "causal": False,
            "batch": 4, "heads": 8, "median_ms": ms, "tflops": 1.0 / ms}


def test_the_parity_rows_hold_cudnns_fp8_time_over_ours_where_it_ran():
    rows = parity([record("tensorcore", "float8_e4m3", 1.0),
                   record("cudnn_fp8", "float8_e4m3", 1.05),
                   record("tensorcore", "float16", 1.5),
                   record("tensorcore", "float8_e4m3", 2.0, seq=16384)])
    assert rows[0]["vs_cudnn_fp8"] == pytest.approx(1.05)
    assert rows[0]["cudnn_fp8_tflops"] == pytest.approx(1 / 1.05)
    assert rows[0]["vs_tensorcore"] == pytest.approx(1.5)
    assert "vs_cudnn_fp8" not in rows[1]            # no cuDNN FP8 line at 16k


def test_without_the_frontend_the_line_says_what_to_install(monkeypatch):
    from engine.gpu import cudnn_fp8

    def missing():
        raise cudnn_fp8.TorchUnavailableError("PyTorch is not importable (test).")
    monkeypatch.setattr(cudnn_fp8, "torch_module", missing)
    with pytest.raises(cudnn_fp8.CudnnFp8Unavailable, match="nvidia-cudnn-frontend"):
        cudnn_fp8.frontend()
    assert issubclass(cudnn_fp8.CudnnFp8Unavailable, ValueError)    # a sweep skips the line
