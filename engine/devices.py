"""Which device runs the kernels: the live GPU (probed through CuPy, imported lazily) or the
CPU emulating a datasheet profile of engine.model.devices.

`device_info()` never raises: with no CuPy, no GPU, no driver or no NVRTC it reports the CPU,
the reason, and the GPU profile being emulated.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from .model.arch import ptx_override_cc
from .model.devices import DEFAULT_PROFILE, PROFILES, GpuProfile, datasheet_profile


@dataclass(frozen=True)
class DeviceInfo:
    kind: str                 # "gpu" or "cpu"
    name: str                 # GPU name, or "CPU emulation of <profile>"
    gpu: GpuProfile           # the live GPU's figures, or the emulated profile
    profile_key: str | None   # key into PROFILES when emulating, else None
    reason: str               # why this device (e.g. why no GPU is used)
    driver: str = ""
    cuda_runtime: str = ""
    cupy_version: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def probe_gpu() -> tuple[bool, str]:
    """(usable, reason). Usable means CuPy imports, a device exists and NVRTC compiles."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising anything
        return False, f"CuPy is not installed or failed to import ({type(exc).__name__}: {exc})."
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"No usable CUDA driver or GPU ({type(exc).__name__}: {exc})."
    if n < 1:
        return False, "CuPy found no CUDA device."
    try:
        kern = cupy.RawKernel(r'extern "C" __global__ void probe(int* x){ x[0] = 42; }', "probe")
        x = cupy.zeros(1, dtype=cupy.int32)
        kern((1,), (1,), (x,))
        if int(x[0]) != 42:
            return False, "A probe kernel ran but wrote the wrong value."
    except Exception as exc:
        return False, (f"The GPU is present but kernels cannot be compiled or run "
                       f"(NVRTC missing?): {type(exc).__name__}: {exc}")
    return True, "CuPy found a CUDA GPU and compiled a probe kernel."


def _live_gpu() -> DeviceInfo:
    import cupy
    dev = cupy.cuda.Device()
    p = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    cc = f"{p['major']}.{p['minor']}"
    built_for = ptx_override_cc()           # FA_LAB_PTX_ARCH: an older generation's code path
    ptx_note = ""
    if built_for is not None and built_for < float(cc):
        cc = f"{built_for:.1f}"
        ptx_note = f"; kernels built for compute capability {cc} (FA_LAB_PTX_ARCH)"
    sheet = datasheet_profile(name)
    clock_khz = p.get("clockRate")        # gone from the runtime's properties in CUDA 13
    sheet_figures = {} if sheet is None else dict(
        fp32_tflops=sheet.fp32_tflops, l1_smem_per_sm=sheet.l1_smem_per_sm,
        host_link=sheet.host_link, host_gbps=sheet.host_gbps, host_source=sheet.host_source,
        sm_clock_mhz=sheet.sm_clock_mhz, clock_source=sheet.clock_source,
        fp8_tflops=sheet.fp8_tflops, measured_copy_gbps=sheet.measured_copy_gbps,
        measured_matmul_tflops=sheet.measured_matmul_tflops,
        measured_source=sheet.measured_source)
    if clock_khz:
        sheet_figures.update(sm_clock_mhz=clock_khz / 1e3,
                             clock_source="cudaGetDeviceProperties on this machine")
    hbm = _hbm_gbps(p)
    gpu = GpuProfile(
        name=name, sms=int(p["multiProcessorCount"]),
        smem_per_sm=int(p["sharedMemPerMultiprocessor"]),
        smem_per_block_optin=int(p["sharedMemPerBlockOptin"]),
        l2_bytes=int(p["l2CacheSize"]), memory_bytes=int(p["totalGlobalMem"]),
        hbm_gbps=sheet.hbm_gbps if sheet is not None else hbm,   # one figure: the datasheet's
        fp16_tflops=sheet.fp16_tflops if sheet is not None else float("nan"),
        max_blocks_per_sm=int(p.get("maxBlocksPerMultiProcessor", 32)),
        max_threads_per_sm=int(p["maxThreadsPerMultiProcessor"]),
        compute_capability=cc,
        source=(sheet.source if sheet is not None else "no datasheet profile of this GPU")
               + ptx_note,
        props_source="cudaGetDeviceProperties on this machine",
        regs_per_sm=int(p.get("regsPerMultiprocessor", 64 * 1024)), **sheet_figures)
    drv = cupy.cuda.runtime.driverGetVersion()
    rt = cupy.cuda.runtime.runtimeGetVersion()
    return DeviceInfo(kind="gpu", name=name, gpu=gpu, profile_key=None,
                      reason=probe_gpu()[1], driver=_cuda_ver(drv), cuda_runtime=_cuda_ver(rt),
                      cupy_version=cupy.__version__)


def _hbm_gbps(p: dict) -> float:
    """Peak DRAM bandwidth from clock and bus width, where the runtime still reports them."""
    clock_khz, bus_bits = p.get("memoryClockRate"), p.get("memoryBusWidth")
    if not clock_khz or not bus_bits:
        return float("nan")
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9


def _cuda_ver(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def device_info(profile: str | None = None, prefer_gpu: bool = True) -> DeviceInfo:
    """The GPU in use, or the CPU emulating `profile` (default H200) with the reason why."""
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}.")
    reason = "CPU emulation was chosen."
    if prefer_gpu:
        usable, reason = probe_gpu()
        if usable:
            try:
                return _live_gpu()
            except Exception as exc:  # report, never crash
                reason = f"Reading the GPU's properties failed: {exc}"
    key = profile or DEFAULT_PROFILE
    return DeviceInfo(kind="cpu", name=f"CPU emulation of {PROFILES[key].name}",
                      gpu=PROFILES[key], profile_key=key, reason=reason)
