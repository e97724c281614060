"""Which device runs the kernels, and datasheet profiles of GPUs for CPU emulation.

`device_info()` never raises: with no CuPy, no GPU, no driver or no NVRTC it reports the CPU,
the reason, and the GPU profile being emulated.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

KB, MB, GB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class GpuProfile:
    name: str
    sms: int
    smem_per_sm: int            # bytes of shared memory per SM (largest carve-out)
    smem_per_block_optin: int   # bytes one thread block may use after opting in
    l2_bytes: int
    memory_bytes: int
    hbm_gbps: float             # datasheet memory bandwidth, GB/s
    fp16_tflops: float          # datasheet dense fp16 tensor-core rate, fp32 accumulate
    max_blocks_per_sm: int
    max_threads_per_sm: int
    compute_capability: str
    source: str


# Shared-memory, block and thread limits: CUDA C++ Programming Guide, table "Technical
# Specifications per Compute Capability" (8.0, 8.9, 9.0, 7.5). Other figures: the vendor
# datasheets named in each `source`.
PROFILES = {
    "A100 40GB": GpuProfile("NVIDIA A100-SXM4-40GB", 108, 164 * KB, 163 * KB, 40 * MB, 40 * GB,
                            1555, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 40GB); CUDA guide, cc 8.0"),
    "A100 80GB": GpuProfile("NVIDIA A100-SXM4-80GB", 108, 164 * KB, 163 * KB, 40 * MB, 80 * GB,
                            2039, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 80GB); CUDA guide, cc 8.0"),
    "H100 SXM": GpuProfile("NVIDIA H100 80GB HBM3", 132, 228 * KB, 227 * KB, 50 * MB, 80 * GB,
                           3350, 989, 32, 2048, "9.0",
                           "NVIDIA H100 datasheet (SXM5); CUDA guide, cc 9.0"),
    "H200": GpuProfile("NVIDIA H200", 132, 228 * KB, 227 * KB, 60 * MB, 141 * GB,
                       4800, 989, 32, 2048, "9.0",
                       "NVIDIA H200 datasheet (SXM); CUDA guide, cc 9.0; L2 as PyTorch reports "
                       "it on an H200"),
    "L4": GpuProfile("NVIDIA L4", 58, 100 * KB, 99 * KB, 48 * MB, 24 * GB,
                     300, 121, 24, 1536, "8.9",
                     "NVIDIA L4 datasheet; CUDA guide, cc 8.9"),
    "T4": GpuProfile("Tesla T4", 40, 64 * KB, 64 * KB, 4 * MB, 16 * GB,
                     320, 65, 16, 1024, "7.5",
                     "NVIDIA T4 datasheet; CUDA guide, cc 7.5"),
    "RTX 4090": GpuProfile("NVIDIA GeForce RTX 4090", 128, 100 * KB, 99 * KB, 72 * MB, 24 * GB,
                           1008, 165, 24, 1536, "8.9",
                           "NVIDIA Ada (AD102) architecture whitepaper; CUDA guide, cc 8.9"),
}
DEFAULT_PROFILE = "H200"


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
    gpu = GpuProfile(
        name=name, sms=int(p["multiProcessorCount"]),
        smem_per_sm=int(p["sharedMemPerMultiprocessor"]),
        smem_per_block_optin=int(p["sharedMemPerBlockOptin"]),
        l2_bytes=int(p["l2CacheSize"]), memory_bytes=int(p["totalGlobalMem"]),
        hbm_gbps=_hbm_gbps(p),
        fp16_tflops=float("nan"),
        max_blocks_per_sm=int(p.get("maxBlocksPerMultiProcessor", 32)),
        max_threads_per_sm=int(p["maxThreadsPerMultiProcessor"]),
        compute_capability=cc, source="cudaGetDeviceProperties on this machine")
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
