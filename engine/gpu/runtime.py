"""What the CuPy-side modules share: the live GPU's figures and the translation of GPU
failures (out of memory, launch failure) into clear ValueErrors."""
from __future__ import annotations

import contextlib
import functools

from ..model.arch import GENERATIONS, cc_number, generation, ptx_override_cc, refusal
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


def ptx_arch() -> str | None:
    """FA_LAB_PTX_ARCH ("compute_75", "compute_80"): build every kernel but the Hopper ones
    as PTX for that architecture and let the driver compile it for this GPU, so a Hopper
    GPU runs the Turing or Ampere code path of each build (kernels/loader.py); None: builds
    for this GPU, as always. Dispatch then behaves as on a GPU of that compute capability."""
    import os
    value = os.environ.get("FA_LAB_PTX_ARCH", "").strip()
    if value and ptx_override_cc() is None:
        names = ", ".join("compute_" + g.cc.replace(".", "") for g in GENERATIONS)
        raise GpuRunError(f"FA_LAB_PTX_ARCH must be one of {names}; got {value!r}.")
    return value or None


def device_cc() -> float:
    """The compute capability the kernels are built for: CuPy's current device's (7.5,
    8.6, 9.0), or FA_LAB_PTX_ARCH's when that is lower; 0.0 without CuPy or a usable GPU."""
    try:
        import cupy
        cc = cc_number(cupy.cuda.Device().compute_capability)
    except Exception:  # no CuPy, no driver, no device
        return 0.0
    ptx_arch()                                    # a wrong value is refused, not ignored
    override = ptx_override_cc()
    return min(cc, override) if override else cc


def block_smem_optin() -> int:
    """Bytes of shared memory one thread block may use on this GPU, or on the generation
    FA_LAB_PTX_ARCH names where that is less (its code path and limits are what runs)."""
    limit = live_gpu().smem_per_block_optin
    override = ptx_override_cc()
    return min(limit, generation(override).smem_optin) if override else limit


def device_is_hopper() -> bool:
    """True when the kernels are built for compute capability 9.x (Hopper: wgmma, TMA);
    False without CuPy or a usable GPU, or under an older FA_LAB_PTX_ARCH."""
    return device_cc() >= 9.0


def check_arch(dtype: str, family: str | None, direction: str = "forward") -> None:
    """ConfigError, before any compile, when no build of the request runs on this GPU
    (engine.model.arch words what it lacks and what runs instead). family: a kernel= value,
    or None for naive attention."""
    from ..model.config import ConfigError
    cc = device_cc()
    if not cc:              # no GPU here: nothing is compiled, and live_gpu() says why later
        return
    message = refusal(live_gpu().name, cc, dtype, family, direction)
    if message:
        raise ConfigError(message)


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
