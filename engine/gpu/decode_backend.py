"""CuPy side of engine.run_decode: the free-memory check and one decode step through the
Flash-Decoding launcher, returned as a DecodeResult of NumPy arrays."""
from __future__ import annotations

import numpy as np

from ..model.config import LimitError
from ..model.decode_config import DecodeConfig, decode_block_k, split_bounds
from ..model.guards import HEADROOM
from ..model.iomodel import decode_peak_memory, format_bytes
from ..results import DecodeResult, DecodeTrace
from .lock import GPU_LOCK
from .runtime import GpuRunError, check_arch, gpu_failures


def check_decode_fits(cfg: DecodeConfig, num_splits: int, trace: bool) -> None:
    """LimitError, before any allocation, when the step's device memory exceeds the free."""
    import cupy
    free, _ = cupy.cuda.runtime.memGetInfo()
    free += cupy.get_default_memory_pool().free_bytes()
    need = decode_peak_memory(cfg, num_splits, trace)
    if need > HEADROOM * free:
        raise LimitError(f"This decode step would need {format_bytes(need)} of device memory "
                         f"(q, both caches, the split partials); this GPU has "
                         f"{format_bytes(free)} free. Use a shorter cache or a smaller batch.")


def device_inputs(cfg: DecodeConfig, q, k_cache, v_cache, table):
    """NumPy inputs on the device: contiguous CuPy arrays (the table as int32 when paged)."""
    import cupy
    arrays = [cupy.asarray(np.ascontiguousarray(x, dtype=cfg.dtype)) for x in (q, k_cache, v_cache)]
    arrays.append(cupy.asarray(np.ascontiguousarray(table, dtype=np.int32)) if cfg.paged
                  else None)
    return arrays


def run_decode(cfg: DecodeConfig, q, k_cache, v_cache, table: np.ndarray, num_splits: int,
               trace: bool) -> DecodeResult:
    from .launchers import decode as launcher
    check_arch(cfg.dtype, "decode", "decode")
    with GPU_LOCK, gpu_failures("Flash-Decoding step"):
        Q, K, V, T = device_inputs(cfg, q, k_cache, v_cache, table)
        out = launcher.launch(cfg, Q, K, V, T, num_splits, trace)
        host = {name: out[name].get() for name in out if name != "info"}
    if not np.isfinite(host["lse"]).all():
        raise GpuRunError("The Flash-Decoding kernel wrote a non-finite lse: a kernel bug "
                          "(or a cache whose padding rows were read).")
    tr = None
    if trace:
        tr = DecodeTrace(split_max=host["m_part"], split_sum=host["l_part"],
                         split_out=host["O_part"], m_final=host["m_final"],
                         rescale=host["rescale"], l_final=host["l_final"])
    return DecodeResult(output=host["O"], lse=host["lse"], num_splits=num_splits,
                        bounds=split_bounds(cfg.seq_k, num_splits), block_table=table,
                        backend="cupy", trace=tr,
                        info={**out["info"], "block_k": decode_block_k(cfg.head_dim)})
