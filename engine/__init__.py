"""FlashAttention Lab engine: config, inputs, NumPy and CuPy backends, timing, IO model.

Never imports streamlit or altair.
"""
from .api import (ALGORITHMS, BACKENDS, KERNELS, GpuUnavailableError, benchmark, run,
                  run_backward)
from .model.config import (BLOCK_SIZES, DTYPES, FP8_DTYPES, FP8_SCALINGS, HEAD_DIMS,
                           INPUT_PRESETS, AttentionConfig, ConfigError, LimitError)
from .decode import make_decode_inputs, run_decode
from .model.decode_config import DecodeConfig
from .model.devices import PROFILES, GpuProfile
from .devices import DeviceInfo, device_info, probe_gpu
from .inputs import make_dout, make_inputs
from .model.limits import LIMITS, check_limits
from .results import (BackwardTrace, DecodeResult, DecodeTrace, Fp8Info, Gradients, Result,
                      Schedule, Timing, Trace)

__all__ = [
    "ALGORITHMS", "BACKENDS", "BLOCK_SIZES", "DTYPES", "FP8_DTYPES", "FP8_SCALINGS", "HEAD_DIMS",
    "INPUT_PRESETS", "KERNELS",
    "LIMITS", "PROFILES", "AttentionConfig", "BackwardTrace", "ConfigError", "DecodeConfig",
    "DecodeResult", "DecodeTrace", "DeviceInfo", "Fp8Info",
    "GpuProfile", "GpuUnavailableError", "Gradients", "LimitError", "Result", "Schedule",
    "Timing", "Trace", "benchmark", "check_limits", "device_info", "make_decode_inputs", "make_dout",
    "make_inputs", "probe_gpu", "run", "run_backward", "run_decode",
]
