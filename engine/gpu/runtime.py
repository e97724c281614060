"""What the CuPy-side modules share: the live GPU's figures and the translation of GPU
failures (out of memory, launch failure) into clear ValueErrors."""
from __future__ import annotations

import contextlib
import functools

from ..model.devices import GpuProfile
from ..devices import device_info


# How the kernels in kernels/ spell each config dtype (kernels/include/common.cuh defines the 16-bit ones).
ELEM_TYPES = {"float32": "float", "float16": "half_bits", "bfloat16": "bf16_bits"}


class GpuRunError(ValueError):
    """A GPU run failed (out of memory, launch failure); the message says what to try."""


@functools.lru_cache(maxsize=1)
def live_gpu() -> GpuProfile:
    """Figures of the GPU in use, read from the device (raises GpuRunError without one)."""
    info = device_info(prefer_gpu=True)
    if info.kind != "gpu":
        raise GpuRunError(f"No usable GPU: {info.reason}")
    return info.gpu


def device_is_hopper() -> bool:
    """True when CuPy's current CUDA device has compute capability 9.x (Hopper: wgmma, TMA);
    False without CuPy or a usable GPU."""
    try:
        import cupy
        return cupy.cuda.Device().compute_capability.startswith("9")
    except Exception:  # no CuPy, no driver, no device: no Hopper either
        return False


def check_fits(cfg, algorithm: str, trace: bool, direction: str = "forward") -> None:
    """Refuse, before allocating, a run whose peak memory exceeds the GPU's free memory."""
    import cupy
    from ..model.guards import check_device_memory
    free, _ = cupy.cuda.runtime.memGetInfo()
    free += cupy.get_default_memory_pool().free_bytes()   # cached blocks can be reused
    check_device_memory(cfg, algorithm, trace, free, direction)


def free_device_bytes() -> int:
    """Free device memory as the driver reports it (cached pool blocks count as used)."""
    import cupy
    return cupy.cuda.runtime.memGetInfo()[0]


def free_pool() -> None:
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()


@contextlib.contextmanager
def gpu_failures(what: str):
    """Turn CuPy's out-of-memory and CUDA errors inside the block into GpuRunError."""
    import cupy
    from cupy_backends.cuda.libs import cublas
    cuda_errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
                   cublas.CUBLASError)
    try:
        yield
    except cupy.cuda.memory.OutOfMemoryError as exc:
        free_pool()
        raise GpuRunError(f"{what}: the GPU ran out of memory ({exc}). The memory pool was "
                          f"freed; use a smaller batch, heads or sequence length.") from exc
    except cuda_errors as exc:
        with contextlib.suppress(Exception):
            free_pool()
        raise GpuRunError(f"{what}: a CUDA call failed ({exc}). If it says 'illegal address' "
                          f"or 'launch failure', the GPU context is lost until the process "
                          f"restarts.") from exc
