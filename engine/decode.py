"""engine.run_decode: one decode step (Flash-Decoding) against a contiguous or paged KV cache,
with grouped-query heads; validation, inputs, dispatch to the NumPy emulation or the GPU."""
from __future__ import annotations

import numpy as np

from .model.config import ConfigError
from .model.decode_config import DecodeConfig, block_table, key_positions
from .model.devices import GpuProfile
from .devices import device_info
from .model.limits import check_decode_limits
from .results import DecodeResult


def make_decode_inputs(cfg: DecodeConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q (batch, heads, seq_q, d) and k_cache, v_cache (cfg.cache_shape), standard normal in
    cfg.dtype, fixed by cfg.seed (a stream of its own). A paged cache holds the same keys and
    values as the contiguous one of the same seed, scattered over the pages of
    block_table(cfg); the padding rows of each sequence's last page are NaN, so a kernel that
    reads them shows it."""
    rng = np.random.default_rng([cfg.seed, 3])
    b, d = cfg.batch, cfg.head_dim
    q = rng.standard_normal(cfg.q_shape, dtype=np.float32)
    k = rng.standard_normal((b, cfg.kv_heads, cfg.seq_k, d), dtype=np.float32)
    v = rng.standard_normal((b, cfg.kv_heads, cfg.seq_k, d), dtype=np.float32)
    if cfg.paged:
        table = block_table(cfg)
        k, v = (scatter_pages(cfg, x, table) for x in (k, v))
    return tuple(x.astype(cfg.dtype) for x in (q, k, v))


def scatter_pages(cfg: DecodeConfig, cache: np.ndarray, table: np.ndarray) -> np.ndarray:
    """A contiguous cache (batch, kv_heads, seq_k, d) laid out in the paged pool
    (num_pages, kv_heads, page_size, d) through the block table; padding rows are NaN."""
    pool = np.full(cfg.cache_shape, np.nan, dtype=cache.dtype)
    keys = np.arange(cfg.seq_k)
    page, row = key_positions(cfg, table, keys)                 # (batch, seq_k), (seq_k,)
    pool[page, :, row[None, :], :] = cache.transpose(0, 2, 1, 3)
    return pool


def gather_pages(cfg: DecodeConfig, pool: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The paged pool read back as a contiguous cache (batch, kv_heads, seq_k, d)."""
    keys = np.arange(cfg.seq_k)
    page, row = key_positions(cfg, table, keys)
    return pool[page, :, row[None, :], :].transpose(0, 2, 1, 3)


def resolve_device(backend: str, gpu: GpuProfile | None) -> tuple[str, GpuProfile]:
    """(backend that runs, the GPU profile "auto" splits for): the live GPU on CuPy, else
    `gpu` or the default emulated profile."""
    from .api import resolve_backend
    be = resolve_backend(backend)
    if be == "cupy":
        from .gpu.runtime import live_gpu
        return be, live_gpu()
    if gpu is not None and not isinstance(gpu, GpuProfile):
        raise ConfigError(f"gpu must be an engine.GpuProfile (e.g. engine.PROFILES['H200']) or "
                          f"None; got {type(gpu).__name__}.")
    return be, gpu or device_info(prefer_gpu=False).gpu


def _check_array(cfg: DecodeConfig, name: str, x, shape, layout: str) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != shape or x.dtype != np.dtype(cfg.dtype):
        raise ConfigError(f"{name} must have shape {shape} ({layout}) and dtype {cfg.dtype} for "
                          f"this config; got shape {x.shape}, dtype {x.dtype}.")
    return x


def check_decode_inputs(cfg: DecodeConfig, q, k_cache, v_cache):
    """q, k_cache, v_cache as given, checked; all None: make_decode_inputs(cfg)."""
    given = [x is not None for x in (q, k_cache, v_cache)]
    if not any(given):
        return make_decode_inputs(cfg)
    if not all(given):
        raise ConfigError("Pass all of q, k_cache and v_cache, or none of them (then "
                          "make_decode_inputs(cfg)).")
    layout = ("num_pages, kv_heads, page_size, head_dim" if cfg.paged else
              "batch, kv_heads, seq_k, head_dim")
    return (_check_array(cfg, "q", q, cfg.q_shape, "batch, heads, seq_q, head_dim"),
            _check_array(cfg, "k_cache", k_cache, cfg.cache_shape, layout),
            _check_array(cfg, "v_cache", v_cache, cfg.cache_shape, layout))


def run_decode(cfg: DecodeConfig, q=None, k_cache=None, v_cache=None, backend: str = "numpy",
               trace: bool = False, gpu: GpuProfile | None = None) -> DecodeResult:
    """One decode step; NumPy arrays whatever the backend. backend "numpy", "cupy" or "auto";
    num_splits="auto" is resolved for the live GPU on CuPy, else for `gpu` (default: the
    emulated profile, H200)."""
    if not isinstance(cfg, DecodeConfig):
        raise ConfigError(f"cfg must be an engine.DecodeConfig; got {type(cfg).__name__}.")
    if not isinstance(trace, bool):
        raise ConfigError(f"trace must be True or False; got {trace!r}.")
    be, profile = resolve_device(backend, gpu)
    num_splits = cfg.splits_on(profile.sms)
    check_decode_limits(cfg, num_splits, trace)
    if be == "cupy":                       # refuse before any input is even generated
        from .gpu.decode_backend import check_decode_fits
        check_decode_fits(cfg, num_splits, trace)
    q, k_cache, v_cache = check_decode_inputs(cfg, q, k_cache, v_cache)
    table = block_table(cfg)
    if be == "numpy":
        from .cpu.decode import decode
        return decode(cfg, q, k_cache, v_cache, table, num_splits, trace)
    from .gpu.decode_backend import run_decode as run_on_gpu
    return run_on_gpu(cfg, q, k_cache, v_cache, table, num_splits, trace)
