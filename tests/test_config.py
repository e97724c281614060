"""Config validation and resource limits: a bad value always gives a ValueError with a message."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
from engine.model.limits import LIMITS, check_limits

FIELDS = ["batch", "heads", "seq_q", "seq_k", "head_dim", "block_q", "block_k", "dtype",
          "causal", "scale", "seed", "inputs", "logit_scale"]

anything = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.lists(st.integers(), max_size=3), st.sampled_from(["float16", "bfloat16", "evil", "64"]))


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), value=anything)
def test_any_value_is_accepted_or_rejected_with_a_message(field, value):
    try:
        cfg = engine.AttentionConfig(**{field: value})
    except ValueError as exc:
        assert str(exc) and field in str(exc)
        return
    assert getattr(cfg, field) == value


@pytest.mark.parametrize("field,value,allowed", [
    ("head_dim", 48, "16, 32, 64, 128, 256"),
    ("block_q", 96, "8, 16, 32, 64, 128"),
    ("block_k", 3, "8, 16, 32, 64, 128"),
    ("dtype", "float64", "float32, float16"),
    ("seq_q", 0, "1 to"),
    ("scale", -1.0, "> 0"),
    ("logit_scale", 1e9, "(0, 10000]"),
])
def test_messages_state_what_is_allowed(field, value, allowed):
    with pytest.raises(ValueError) as exc:
        engine.AttentionConfig(**{field: value})
    assert allowed in str(exc.value) and repr(value) in str(exc.value)


def test_config_is_frozen_and_derives_tiles():
    cfg = engine.AttentionConfig(seq_q=300, seq_k=257, block_q=64, block_k=32, head_dim=64)
    with pytest.raises(Exception):
        cfg.seq_q = 5
    assert (cfg.Tr, cfg.Tc) == (5, 9)
    assert math.isclose(cfg.softmax_scale, 0.125)
    assert cfg.flops == 4 * 2 * 300 * 257 * 64
    assert cfg.with_(causal=True).flops == cfg.flops / 2


def test_limits_name_the_limit_the_value_and_the_variable(monkeypatch):
    cfg = engine.AttentionConfig(batch=1, heads=8, seq_q=8192, seq_k=8192, head_dim=64)
    with pytest.raises(engine.LimitError) as exc:
        engine.run(cfg, backend="numpy", algorithm="naive")
    msg = str(exc.value)
    assert "naive_bytes" in msg and "FA_LAB_MAX_NAIVE_BYTES" in msg and "GiB" in msg
    monkeypatch.setenv("FA_LAB_MAX_QKV_ELEMENTS", "1000")
    small = engine.AttentionConfig(seq_q=64, seq_k=64, head_dim=16)
    with pytest.raises(engine.LimitError, match="FA_LAB_MAX_QKV_ELEMENTS"):
        engine.run(small, backend="numpy")
    monkeypatch.setenv("FA_LAB_MAX_QKV_ELEMENTS", str(10**9))
    monkeypatch.setenv("FA_LAB_MAX_TRACE_BYTES", "100")
    with pytest.raises(engine.LimitError, match="trace_bytes"):
        check_limits(small, trace=True)
    check_limits(small, trace=False)
    monkeypatch.setenv("FA_LAB_MAX_NAIVE_BYTES", str(2 * 4 * 8 * 8192 * 8192))
    check_limits(cfg, algorithm="naive")
    assert LIMITS["naive_bytes"].value > 2 << 30


@pytest.mark.parametrize("kwargs,word", [
    (dict(backend="tpu"), "backend"), (dict(algorithm="fast"), "algorithm"),
    (dict(kernel="magic"), "kernel"), (dict(trace="yes"), "trace"),
])
def test_run_rejects_bad_arguments(kwargs, word):
    cfg = engine.AttentionConfig(seq_q=16, seq_k=16, head_dim=16, block_q=8, block_k=8)
    with pytest.raises(ValueError, match=word):
        engine.run(cfg, **kwargs)


def test_run_checks_input_shapes_and_dtypes():
    cfg = engine.AttentionConfig(seq_q=16, seq_k=24, head_dim=16, block_q=8, block_k=8)
    q, k, v = engine.make_inputs(cfg)
    with pytest.raises(ValueError, match="shape"):
        engine.run(cfg, q, v[:, :, :5], v, backend="numpy")
    with pytest.raises(ValueError, match="dtype"):
        engine.run(cfg, q.astype("float16"), k, v, backend="numpy")
    with pytest.raises(ValueError, match="all of q, k and v"):
        engine.run(cfg, q, None, None, backend="numpy")


def test_device_memory_guard_names_both_needs():
    from engine.model.guards import check_device_memory, check_sweep
    cfg = engine.AttentionConfig(batch=4, heads=16, seq_q=32768, seq_k=32768, head_dim=64,
                                 dtype="float16")
    with pytest.raises(engine.LimitError) as exc:
        check_device_memory(cfg, "naive", False, free_bytes=12_100_000_000)
    msg = str(exc.value)
    # S and P: 2 · 64 · 32768² · 2 bytes = 256 GiB; 12.1e9 bytes free = 11.27 GiB, written to
    # three significant digits (engine.model.units)
    assert "256 GiB" in msg and "for S and P" in msg and "11.3 GiB free" in msg
    check_device_memory(cfg, "flash", False, free_bytes=12_100_000_000)
    check_sweep(10)
    with pytest.raises(engine.LimitError, match="FA_LAB_MAX_SWEEP_POINTS"):
        check_sweep(10_000)
