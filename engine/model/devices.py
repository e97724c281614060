"""GPU profiles: every figure of a GPU the app shows or a model uses, each with its source,
and the GPU memory pyramid. The one place device figures come from (pages print them through
engine.model.units, rates for a kernel through engine.model.rates).

Each figure has one of four kinds of source (figure_source):
- "CUDA attribute": read by cudaGetDeviceProperties, on the live GPU or, for the H100 and H200
  profiles, on the project's own machines (the device block of benchmarks/results/*.json);
- "CUDA guide": the CUDA C++ Programming Guide's table per compute capability;
- "datasheet": the vendor's datasheet or whitepaper (rates: dense, no sparsity);
- "measured": measured on the project's machines, with the date.

Pure Python: the live GPU is probed by engine.devices, which builds a GpuProfile from its
properties; the CPU emulation uses these profiles.
"""
from __future__ import annotations

from dataclasses import dataclass

from .units import GiB, KiB, MiB, format_bytes, format_gbps, format_tflops

NAN = float("nan")


@dataclass(frozen=True)
class GpuProfile:
    name: str
    sms: int
    smem_per_sm: int            # bytes of shared memory per SM (largest carve-out)
    smem_per_block_optin: int   # bytes one thread block may use after opting in
    l2_bytes: int
    memory_bytes: int           # device memory (totalGlobalMem where props_source says so)
    hbm_gbps: float             # datasheet memory bandwidth, GB/s (decimal)
    fp16_tflops: float          # datasheet dense 16-bit (FP16/BF16) tensor-core rate, FP32 acc.
    max_blocks_per_sm: int
    max_threads_per_sm: int
    compute_capability: str
    source: str                 # the datasheet (and guide) the figures come from
    # The memory pyramid (engine.devices.memory_levels); NaN or "" where no source states it.
    fp32_tflops: float = NAN           # datasheet FP32 rate on the CUDA cores (no tensor cores)
    l1_smem_per_sm: int = 0            # bytes of the unified L1 / shared-memory array per SM
    regs_per_sm: int = 64 * 1024       # 32-bit registers per SM (64K from cc 5.0 to 9.0)
    sm_clock_mhz: float = NAN
    clock_source: str = ""
    host_link: str = ""                # the link to host memory
    host_gbps: float = NAN             # its bandwidth, GB/s, both directions together
    host_source: str = ""
    fp8_tflops: float = NAN            # datasheet dense 8-bit float (FP8) tensor-core rate
    # Where sms, smem_per_block_optin, l2_bytes and memory_bytes were read as CUDA attributes
    # ("" when they are the datasheet's and the guide's).
    props_source: str = ""
    # Measured on the project's machines (NaN where not): a large device-to-device copy
    # (bytes read + written per second, GB/s) and a large 16-bit matrix product (TFLOP/s).
    measured_copy_gbps: float = NAN
    measured_matmul_tflops: float = NAN
    measured_source: str = ""


PROPERTY_FIGURES = ("sms", "smem_per_block_optin", "l2_bytes", "memory_bytes")
GUIDE_FIGURES = ("smem_per_sm", "max_blocks_per_sm", "max_threads_per_sm", "regs_per_sm",
                 "l1_smem_per_sm")
MEASURED_FIGURES = ("measured_copy_gbps", "measured_matmul_tflops")


def figure_source(gpu: GpuProfile, figure: str) -> tuple[str, str]:
    """(kind, source) of one figure of `gpu` (a GpuProfile field name): kind is "CUDA
    attribute", "CUDA guide", "datasheet" or "measured"."""
    if figure in MEASURED_FIGURES:
        return "measured", gpu.measured_source or "not measured"
    if gpu.props_source and (figure in PROPERTY_FIGURES
                             or (figure in GUIDE_FIGURES and gpu.props_source.endswith(
                                 "on this machine"))):
        return "CUDA attribute", gpu.props_source
    if figure in GUIDE_FIGURES:
        return "CUDA guide", f"CUDA C++ Programming Guide, compute capability " \
                             f"{gpu.compute_capability}"
    return "datasheet", gpu.source


# Shared-memory, block, thread and register limits and the L1 / shared-memory array per SM:
# CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability" and the
# sections on compute capabilities 7.5, 8.x and 9.0. Other figures: the sources named beside
# them (vendor datasheets and whitepapers, dense rates without sparsity); a figure no source
# states is left out (NaN). Device memory is the datasheet's nominal size in GiB (the driver
# reports a little less) except where props_source gives the size read on a real card.
_A100 = dict(fp32_tflops=19.5, l1_smem_per_sm=192 * KiB, sm_clock_mhz=1410,
             clock_source="NVIDIA A100 Tensor Core GPU Architecture whitepaper (boost clock)",
             host_link="PCIe Gen4 x16", host_gbps=64,
             host_source="NVIDIA A100 datasheet: PCIe Gen4 64 GB/s")
# Read by cudaGetDeviceProperties on the project's machines (the device block every file of
# benchmarks/results/ records): H200 from 2026-11-21, H100 on 2026-11-25.
H200_PROPS = "cudaGetDeviceProperties on the project's H200, 2026-11-21"
H100_PROPS = "cudaGetDeviceProperties on the project's H100, 2026-11-25"
PROFILES = {
    "A100 40GB": GpuProfile("NVIDIA A100-SXM4-40GB", 108, 164 * KiB, 163 * KiB, 40 * MiB,
                            40 * GiB, 1555, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 40GB); CUDA guide, cc 8.0", **_A100),
    "A100 80GB": GpuProfile("NVIDIA A100-SXM4-80GB", 108, 164 * KiB, 163 * KiB, 40 * MiB,
                            80 * GiB, 2039, 312, 32, 2048, "8.0",
                            "NVIDIA A100 datasheet (SXM4 80GB); CUDA guide, cc 8.0", **_A100),
    "H100 SXM": GpuProfile("NVIDIA H100 80GB HBM3", 132, 228 * KiB, 232448, 52428800,
                           85017493504, 3350, 989, 32, 2048, "9.0",
                           "NVIDIA H100 datasheet (SXM5); CUDA guide, cc 9.0",
                           fp32_tflops=67, l1_smem_per_sm=256 * KiB, host_link="PCIe Gen5 x16",
                           host_gbps=128,
                           host_source="NVIDIA H100 datasheet (SXM): PCIe Gen5 128 GB/s",
                           fp8_tflops=1979, props_source=H100_PROPS),
    "H200": GpuProfile("NVIDIA H200", 132, 228 * KiB, 232448, 62914560, 150109880320,
                       4800, 989, 32, 2048, "9.0",
                       "NVIDIA H200 datasheet (SXM); CUDA guide, cc 9.0",
                       fp32_tflops=67, l1_smem_per_sm=256 * KiB, sm_clock_mhz=1980,
                       clock_source="SM clock nvidia-smi read on the project's H200 before "
                                    "the 2026-11-21 runs",
                       host_link="PCIe Gen5 x16", host_gbps=128,
                       host_source="NVIDIA H200 datasheet (SXM): PCIe Gen5 128 GB/s",
                       fp8_tflops=1979, props_source=H200_PROPS,
                       # engine.gpu.timing.KNOWN_CEILINGS: the fastest of several 8192³
                       # bfloat16 products (769-798 TFLOP/s) and a large copy.
                       measured_copy_gbps=4300, measured_matmul_tflops=798,
                       measured_source="measured on the project's H200 machines, 2026-10-28 "
                                       "and 2026-11-04: a large device-to-device copy (bytes "
                                       "read + written), the fastest 8192³ bfloat16 matrix "
                                       "product"),
    "L4": GpuProfile("NVIDIA L4", 58, 100 * KiB, 99 * KiB, 48 * MiB, 24 * GiB,
                     300, 121, 24, 1536, "8.9",
                     "NVIDIA L4 datasheet; CUDA guide, cc 8.9",
                     fp32_tflops=30.3, l1_smem_per_sm=128 * KiB, host_link="PCIe Gen4 x16",
                     host_gbps=64, host_source="NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s",
                     fp8_tflops=242.5),
    "T4": GpuProfile("Tesla T4", 40, 64 * KiB, 64 * KiB, 4 * MiB, 16 * GiB,
                     320, 65, 16, 1024, "7.5",
                     "NVIDIA T4 datasheet; CUDA guide, cc 7.5",
                     fp32_tflops=8.1, l1_smem_per_sm=96 * KiB, sm_clock_mhz=1590,
                     clock_source="NVIDIA Turing architecture whitepaper (Tesla T4 boost clock)",
                     host_link="PCIe Gen3 x16", host_gbps=32,
                     host_source="NVIDIA T4 datasheet: interconnect bandwidth 32 GB/s"),
    "RTX 4090": GpuProfile("NVIDIA GeForce RTX 4090", 128, 100 * KiB, 99 * KiB, 72 * MiB,
                           24 * GiB, 1008, 165, 24, 1536, "8.9",
                           "NVIDIA Ada (AD102) architecture whitepaper; CUDA guide, cc 8.9",
                           fp32_tflops=82.6, l1_smem_per_sm=128 * KiB, sm_clock_mhz=2520,
                           clock_source="NVIDIA Ada (AD102) architecture whitepaper (boost "
                                        "clock)",
                           host_link="PCIe Gen4 x16", host_gbps=64,
                           host_source="NVIDIA GeForce RTX 4090 specifications: PCIe 4.0 x16 "
                                       "(16 GT/s per lane: about 64 GB/s both directions)",
                           fp8_tflops=330.3),
}
DEFAULT_PROFILE = "H200"


def datasheet_profile(name: str) -> GpuProfile | None:
    """The profile of the GPU called `name` (as the driver names it), or None."""
    return next((p for p in PROFILES.values() if p.name == name), None)


@dataclass(frozen=True)
class DeviceFact:
    """One figure of a GPU as a page shows it: its label, its value in the one unit system
    (engine.model.units), the kind of its source and the source."""
    key: str
    label: str
    text: str
    kind: str          # "CUDA attribute", "CUDA guide", "datasheet" or "measured"
    source: str


# (field, label, formatter) of every figure device_facts lists, in the order pages show them.
_FACTS = (
    ("sms", "SMs", str),
    ("smem_per_sm", "shared memory per SM", format_bytes),
    ("smem_per_block_optin", "shared memory per block", format_bytes),
    ("l2_bytes", "L2 cache", format_bytes),
    ("memory_bytes", "device memory", format_bytes),
    ("hbm_gbps", "memory bandwidth", format_gbps),
    ("fp32_tflops", "FP32 on CUDA cores", format_tflops),
    ("fp16_tflops", "16-bit tensor cores (FP16/BF16, dense)", format_tflops),
    ("fp8_tflops", "8-bit tensor cores (FP8, dense)", format_tflops),
    ("measured_copy_gbps", "copy bandwidth (read + written)", format_gbps),
    ("measured_matmul_tflops", "16-bit matrix product", format_tflops),
)


def device_facts(gpu: GpuProfile) -> list[DeviceFact]:
    """Every figure of `gpu` with its source, formatted once; measured figures only where
    measured, and a missing rate as "not known" (no FP8 before compute capability 8.9)."""
    out = []
    for field, label, fmt in _FACTS:
        value = getattr(gpu, field)
        if field in MEASURED_FIGURES and not value == value:
            continue
        kind, source = figure_source(gpu, field)
        if not value == value:
            kind, source = "datasheet", (f"no such units on compute capability "
                                        f"{gpu.compute_capability}" if field == "fp8_tflops"
                                        else "no source states it")
        out.append(DeviceFact(field, label, fmt(value), kind, source))
    return out


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
                    f"{format_bytes(gpu.l1_smem_per_sm)} per SM ({guide}) × {gpu.sms} SMs; a "
                    f"block may use up to {format_bytes(gpu.smem_per_block_optin)} as shared "
                    f"memory" if gpu.l1_smem_per_sm else "not known for this GPU",
                    smem_bw, smem_bw_source),
        MemoryLevel("L2 cache", "all SMs", gpu.l2_bytes, figure_source(gpu, "l2_bytes")[1], None,
                    "not published by NVIDIA"),
        MemoryLevel("device memory (HBM or GDDR)", "all SMs", gpu.memory_bytes,
                    figure_source(gpu, "memory_bytes")[1],
                    gpu.hbm_gbps * 1e9 if hbm_known else None,
                    gpu.source if hbm_known else "not known for this GPU"),
        MemoryLevel(f"host memory ({gpu.host_link or 'link not known'})", "the CPU and the GPU",
                    None, "the host's RAM: not a figure of the GPU",
                    gpu.host_gbps * 1e9 if host_known else None,
                    gpu.host_source or "not known for this GPU"),
    ]
