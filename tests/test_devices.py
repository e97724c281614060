"""Device detection never crashes; profiles carry their sources."""
import builtins
import sys

import pytest

import engine
from engine import devices


def test_profiles_are_complete_and_sourced():
    assert {"A100 40GB", "A100 80GB", "H100 SXM", "H200", "L4", "T4", "RTX 4090"} <= set(
        engine.PROFILES)
    for p in engine.PROFILES.values():
        assert p.sms > 0 and p.smem_per_block_optin <= p.smem_per_sm and p.source


def test_cpu_emulation_names_the_profile_and_reason():
    info = engine.device_info(profile="T4", prefer_gpu=False)
    assert info.kind == "cpu" and "T4" in info.name and info.reason
    assert info.gpu.smem_per_block_optin == 64 * 1024
    with pytest.raises(ValueError, match="profile must be one of"):
        engine.device_info(profile="Voodoo2")


def test_missing_cupy_falls_back_to_cpu(monkeypatch):
    real_import = builtins.__import__

    def no_cupy(name, *args, **kwargs):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(builtins, "__import__", no_cupy)
    devices.probe_gpu.cache_clear()
    try:
        usable, reason = devices.probe_gpu()
        assert not usable and "CuPy" in reason
        info = engine.device_info()
        assert info.kind == "cpu" and info.reason == reason
        cfg = engine.AttentionConfig(seq_q=16, seq_k=16, head_dim=16, block_q=8, block_k=8)
        assert engine.run(cfg, backend="auto").backend == "numpy"
        with pytest.raises(engine.GpuUnavailableError, match="backend='cupy' needs a usable GPU"):
            engine.run(cfg, backend="cupy")
    finally:
        devices.probe_gpu.cache_clear()
