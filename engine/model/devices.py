"""Datasheet profiles of GPUs (each figure with its source) and the GPU memory pyramid.
Pure Python: the live GPU is probed by engine.devices, which builds a GpuProfile from its
properties; the CPU emulation uses these profiles.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    # The memory pyramid (engine.devices.memory_levels); NaN or "" where no source states it.
    fp32_tflops: float = float("nan")  # datasheet FP32 rate on the CUDA cores (no tensor cores)
    l1_smem_per_sm: int = 0            # bytes of the unified L1 / shared-memory array per SM
    regs_per_sm: int = 64 * 1024       # 32-bit registers per SM (64K from cc 5.0 to 9.0)
    sm_clock_mhz: float = float("nan")
    clock_source: str = ""
    host_link: str = ""                # the link to host memory
    host_gbps: float = float("nan")    # its bandwidth, GB/s, both directions together
    host_source: str = ""


# Shared-memory, block, thread and register limits and the L1 / shared-memory array per SM:
# CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability" and the
# sections on compute capabilities 7.5, 8.x and 9.0. Other figures: the sources named beside
# them (vendor datasheets and whitepapers); a figure no source states is left out (NaN).
_A100 = dict(fp32_tflops=19.5, l1_smem_per_sm=192 * KB, sm_clock_mhz=1410,
             clock_source="NVIDIA A100 Tensor Core GPU Architecture whitepaper (boost clock)",
             host_link="PCIe Gen4 x16", host_gbps=64,
             host_source="NVIDIA A100 datasheet: PCIe Gen4 64 GB/s")
PROFILES = {
    "A100 40GB": GpuProfile("NVIDIA A100-SXM4-40GB", 108, 164 * KB, 163 * KB, 40 * MB, 40 * GB,
                            1555, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 40GB); CUDA guide, cc 8.0", **_A100),
    "A100 80GB": GpuProfile("NVIDIA A100-SXM4-80GB", 108, 164 * KB, 163 * KB, 40 * MB, 80 * GB,
                            2039, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 80GB); CUDA guide, cc 8.0", **_A100),
    "H100 SXM": GpuProfile("NVIDIA H100 80GB HBM3", 132, 228 * KB, 227 * KB, 50 * MB, 80 * GB,
                           3350, 989, 32, 2048, "9.0",
                           "NVIDIA H100 datasheet (SXM5); CUDA guide, cc 9.0",
                           fp32_tflops=67, l1_smem_per_sm=256 * KB, host_link="PCIe Gen5 x16",
                           host_gbps=128,
                           host_source="NVIDIA H100 datasheet (SXM): PCIe Gen5 128 GB/s"),
    "H200": GpuProfile("NVIDIA H200", 132, 228 * KB, 227 * KB, 60 * MB, 141 * GB,
                       4800, 989, 32, 2048, "9.0",
                       "NVIDIA H200 datasheet (SXM); CUDA guide, cc 9.0; L2 as PyTorch reports "
                       "it on an H200",
                       fp32_tflops=67, l1_smem_per_sm=256 * KB, sm_clock_mhz=1980,
                       clock_source="SM clock nvidia-smi read on the project's H200 before "
                                    "the 2026-11-21 runs",
                       host_link="PCIe Gen5 x16", host_gbps=128,
                       host_source="NVIDIA H200 datasheet (SXM): PCIe Gen5 128 GB/s"),
    "L4": GpuProfile("NVIDIA L4", 58, 100 * KB, 99 * KB, 48 * MB, 24 * GB,
                     300, 121, 24, 1536, "8.9",
                     "NVIDIA L4 datasheet; CUDA guide, cc 8.9",
                     fp32_tflops=30.3, l1_smem_per_sm=128 * KB, host_link="PCIe Gen4 x16",
                     host_gbps=64, host_source="NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s"),
    "T4": GpuProfile("Tesla T4", 40, 64 * KB, 64 * KB, 4 * MB, 16 * GB,
                     320, 65, 16, 1024, "7.5",
                     "NVIDIA T4 datasheet; CUDA guide, cc 7.5",
                     fp32_tflops=8.1, l1_smem_per_sm=96 * KB, sm_clock_mhz=1590,
                     clock_source="NVIDIA Turing architecture whitepaper (Tesla T4 boost clock)",
                     host_link="PCIe Gen3 x16", host_gbps=32,
                     host_source="NVIDIA T4 datasheet: interconnect bandwidth 32 GB/s"),
    "RTX 4090": GpuProfile("NVIDIA GeForce RTX 4090", 128, 100 * KB, 99 * KB, 72 * MB, 24 * GB,
                           1008, 165, 24, 1536, "8.9",
                           "NVIDIA Ada (AD102) architecture whitepaper; CUDA guide, cc 8.9",
                           fp32_tflops=82.6, l1_smem_per_sm=128 * KB, sm_clock_mhz=2520,
                           clock_source="NVIDIA Ada (AD102) architecture whitepaper (boost "
                                        "clock)",
                           host_link="PCIe Gen4 x16", host_gbps=64,
                           host_source="NVIDIA GeForce RTX 4090 specifications: PCIe 4.0 x16 "
                                       "(16 GT/s per lane: about 64 GB/s both directions)"),
}
DEFAULT_PROFILE = "H200"


def datasheet_profile(name: str) -> GpuProfile | None:
    """The profile of the GPU called `name` (as the driver names it), or None."""
    return next((p for p in PROFILES.values() if p.name == name), None)


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the GPU memory pyramid: capacity and bandwidth, each with its source
    (None where no source states the figure)."""
    name: str
    scope: str                  # who shares it
    capacity_bytes: float | None
    capacity_source: str
    bandwidth_bytes_s: float | None
    bandwidth_source: str


SMEM_BYTES_PER_CLOCK = 32 * 4   # 32 banks, each 32 bits per clock (CUDA guide, shared memory)


def memory_levels(gpu: GpuProfile) -> list[MemoryLevel]:
    """Registers, shared memory/L1, L2, device memory (HBM or GDDR) and host memory of `gpu`,
    fastest first."""
    guide = f"CUDA C++ Programming Guide, compute capability {gpu.compute_capability}"
    clock_known = gpu.sm_clock_mhz == gpu.sm_clock_mhz
    smem_bw = SMEM_BYTES_PER_CLOCK * gpu.sms * gpu.sm_clock_mhz * 1e6 if clock_known else None
    smem_bw_source = (f"derived: 32 banks × 4 B per clock per SM ({guide}) × {gpu.sms} SMs × "
                      f"{gpu.sm_clock_mhz:.0f} MHz ({gpu.clock_source})" if clock_known else
                      "no clock figure with a source for this GPU")
    hbm_known = gpu.hbm_gbps == gpu.hbm_gbps
    host_known = gpu.host_gbps == gpu.host_gbps
    return [
        MemoryLevel("registers", "each thread its own", 4 * gpu.regs_per_sm * gpu.sms,
                    f"{gpu.regs_per_sm // 1024}K 32-bit registers per SM ({guide}) × "
                    f"{gpu.sms} SMs", None, "not published by NVIDIA"),
        MemoryLevel("shared memory / L1", "one thread block (shared memory), one SM (L1)",
                    gpu.l1_smem_per_sm * gpu.sms if gpu.l1_smem_per_sm else None,
                    f"{gpu.l1_smem_per_sm // 1024} KiB per SM ({guide}) × {gpu.sms} SMs; a "
                    f"block may use up to {gpu.smem_per_block_optin // 1024} KiB as shared "
                    f"memory" if gpu.l1_smem_per_sm else "not known for this GPU",
                    smem_bw, smem_bw_source),
        MemoryLevel("L2 cache", "all SMs", gpu.l2_bytes, gpu.source, None,
                    "not published by NVIDIA"),
        MemoryLevel("device memory (HBM or GDDR)", "all SMs", gpu.memory_bytes, gpu.source,
                    gpu.hbm_gbps * 1e9 if hbm_known else None,
                    gpu.source if hbm_known else "not known for this GPU"),
        MemoryLevel(f"host memory ({gpu.host_link or 'link not known'})", "the CPU and the GPU",
                    None, "the host's RAM: not a figure of the GPU",
                    gpu.host_gbps * 1e9 if host_known else None,
                    gpu.host_source or "not known for this GPU"),
    ]
