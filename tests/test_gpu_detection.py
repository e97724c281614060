"""GPU detection falls back to the NumPy backend, with a reason, whenever CuPy imports but
the GPU is unusable: no device, no driver, or no working NVRTC. CuPy is faked here."""
import sys
import types

import numpy as np
import pytest

import engine
from engine import devices


class FakeRuntimeError(RuntimeError):
    pass


def fake_cupy(device_count=1, count_error=None, compile_error=None):
    """A stand-in for the cupy module with just what probe_gpu touches."""
    def get_device_count():
        if count_error is not None:
            raise count_error
        return device_count

    class RawKernel:
        def __init__(self, code, name):
            if compile_error is not None:
                raise compile_error

        def __call__(self, grid, block, args):
            args[0][0] = 42

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime),
                                 RawKernel=RawKernel, int32=np.int32,
                                 zeros=lambda n, dtype: np.zeros(n, dtype=dtype))


@pytest.fixture
def with_cupy(monkeypatch):
    def install(module):
        monkeypatch.setitem(sys.modules, "cupy", module)
        devices.probe_gpu.cache_clear()
    yield install
    devices.probe_gpu.cache_clear()


CASES = [
    (dict(device_count=0), "found no CUDA device"),
    (dict(count_error=FakeRuntimeError("cudaErrorNoDevice")), "No usable CUDA driver or GPU"),
    (dict(count_error=FakeRuntimeError("cudaErrorInsufficientDriver")), "InsufficientDriver"),
    (dict(compile_error=OSError("libnvrtc.so not found")), "cannot be compiled"),
]


@pytest.mark.parametrize("fake,why", CASES)
def test_unusable_gpu_falls_back_to_numpy_with_the_reason(with_cupy, fake, why):
    with_cupy(fake_cupy(**fake))
    usable, reason = engine.probe_gpu()
    assert not usable and why in reason
    info = engine.device_info()
    assert info.kind == "cpu" and info.reason == reason and "CPU emulation" in info.name
    cfg = engine.AttentionConfig(seq_q=24, seq_k=20, head_dim=16, block_q=8, block_k=8,
                                 causal=True)
    res = engine.run(cfg, backend="auto", trace=True)
    assert res.backend == "numpy" and res.trace is not None
    timing = engine.benchmark(cfg, backend="auto", reps=2)
    assert timing.backend == "numpy" and "CPU" in timing.method
    for call in (lambda: engine.run(cfg, backend="cupy"),
                 lambda: engine.benchmark(cfg, backend="cupy")):
        with pytest.raises(engine.GpuUnavailableError, match=why):
            call()


def test_a_working_fake_gpu_is_reported_usable(with_cupy):
    with_cupy(fake_cupy())
    assert engine.probe_gpu() == (True, "CuPy found a CUDA GPU and compiled a probe kernel.")
