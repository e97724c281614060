"""The rates every model uses, picked from a GpuProfile (engine.model.devices) for what runs:
the arithmetic rate of a config's dtype on the units its kernel computes on, and the bandwidth
a decode step's HBM floor is drawn at.

Which units a build computes on (engine.model.registry):
- the teaching kernels ("teaching", "backward teaching") and Flash-Decoding ("decode") load
  any dtype and compute in float32 on the CUDA cores: the FP32 rate;
- the tensor-core builds ("tensorcore", "mma.sync", "wgmma", "backward mma.sync", "backward
  wgmma") take float16 and bfloat16 on the tensor cores, accumulating in float32: the dense
  16-bit tensor-core rate;
- naive attention ("naive", "naive_softmax", "naive_backward") multiplies through cuBLAS in
  its default math mode: float32 on the CUDA cores (no TF32), 16-bit on the tensor cores.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import FP8_DTYPES
from .devices import GpuProfile
from .registry import BY_KEY, FAMILIES
from .units import format_gbps, format_tflops

CUDA_CORE_KERNELS = ("teaching", "backward teaching", "decode")
NAIVE_KERNELS = ("naive", "naive_softmax", "naive_backward")
TENSOR_CORE_KERNELS = ("tensorcore",) + tuple(
    k for f in FAMILIES.values() if f.key == "tensorcore" for k in f.forward + f.backward)
SIXTEEN_BIT = ("float16", "bfloat16")
BF16_MIN_CC = 8.0        # no bfloat16 tensor cores before Ampere


@dataclass(frozen=True)
class Rate:
    tflops: float        # NaN where the GPU has no such units or no source states the rate
    units: str           # "FP32 on CUDA cores", "16-bit tensor cores (dense)", ...
    source: str          # "datasheet" (every rate a model uses is the datasheet's)

    @property
    def label(self) -> str:
        """'67 TFLOP/s, FP32 on CUDA cores (datasheet)'; 'no rate: <why>' where none."""
        if not self.tflops == self.tflops:
            return f"no rate: {self.units}"
        return f"{format_tflops(self.tflops)}, {self.units} ({self.source})"


def _units(dtype: str, kernel: str) -> str:
    if kernel in CUDA_CORE_KERNELS:
        return "fp32"
    if kernel in NAIVE_KERNELS:
        return "fp32" if dtype == "float32" else "tensor16"
    if kernel in TENSOR_CORE_KERNELS:
        return "tensor16"
    known = ", ".join(CUDA_CORE_KERNELS + NAIVE_KERNELS + TENSOR_CORE_KERNELS)
    raise ValueError(f"kernel must be one of {known}; got {kernel!r}.")


def peak_rate(gpu: GpuProfile, dtype: str, kernel: str) -> Rate:
    """The datasheet arithmetic rate `kernel` (a registry key, a kernel= family or "naive")
    computes `dtype` at on `gpu`."""
    if kernel not in BY_KEY and kernel not in FAMILIES and kernel != "naive":
        _units(dtype, kernel)                         # raises, naming every kernel
    if dtype in FP8_DTYPES:                           # the FP8 build: e4m3 tensor cores
        return Rate(gpu.fp8_tflops, "8-bit tensor cores (FP8, dense)", "datasheet")
    if _units(dtype, kernel) == "fp32":
        return Rate(gpu.fp32_tflops, "FP32 on CUDA cores", "datasheet")
    units = f"16-bit tensor cores, dense ({dtype})"
    if dtype not in SIXTEEN_BIT:
        return Rate(float("nan"), f"no tensor-core build takes {dtype}", "datasheet")
    if dtype == "bfloat16" and float(gpu.compute_capability) < BF16_MIN_CC:
        return Rate(float("nan"), f"no bfloat16 tensor cores on compute capability "
                                  f"{gpu.compute_capability}", "datasheet")
    return Rate(gpu.fp16_tflops, units, "datasheet")


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    label: str           # '4.8 TB/s (datasheet)'


def hbm_floor_bandwidth(gpu: GpuProfile) -> Bandwidth:
    """The bandwidth every HBM floor is drawn at: the datasheet's, the one figure no stream
    passes. A measured copy is not a floor for a read-only stream: a copy's bytes are half
    writes, and on the project's H200 PyTorch's decode step read K and V at 4.6 TB/s, faster
    than the 4.3 TB/s copy (benchmarks/results/decode_h200_*.json, caches of 0.5 to 4 GiB,
    far beyond the 60 MiB L2)."""
    return Bandwidth(gpu.hbm_gbps * 1e9, f"{format_gbps(gpu.hbm_gbps)} (datasheet)")
