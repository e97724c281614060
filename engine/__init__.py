"""FlashAttention Lab engine: config, inputs, NumPy and CuPy backends, timing, IO model.

Never imports streamlit or altair.
"""
from .api import (ALGORITHMS, BACKENDS, KERNELS, GpuUnavailableError, benchmark, run,
                  run_backward)
from .config import (BLOCK_SIZES, DTYPES, HEAD_DIMS, INPUT_PRESETS, LIMITS, AttentionConfig,
                     ConfigError, LimitError, check_limits)
from .devices import PROFILES, DeviceInfo, GpuProfile, device_info, probe_gpu
from .inputs import make_dout, make_inputs
from .results import BackwardTrace, Gradients, Result, Schedule, Timing, Trace

__all__ = [
    "ALGORITHMS", "BACKENDS", "BLOCK_SIZES", "DTYPES", "HEAD_DIMS", "INPUT_PRESETS", "KERNELS",
    "LIMITS", "PROFILES", "AttentionConfig", "BackwardTrace", "ConfigError", "DeviceInfo",
    "GpuProfile", "GpuUnavailableError", "Gradients", "LimitError", "Result", "Schedule",
    "Timing", "Trace", "benchmark", "check_limits", "device_info", "make_dout", "make_inputs",
    "probe_gpu", "run", "run_backward",
]
