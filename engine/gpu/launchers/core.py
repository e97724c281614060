"""What every launcher shares: operand checks, output buffers (optionally poisoned), the
compiled build with its shared-memory opt-in and compile facts, and the launch loop over
chunks of gridDim.y (at most 65535 batch·heads per launch).

A launcher describes its kernel as a `Build` and its arguments per chunk; this module does
the rest. CuPy is imported inside the functions, so the module imports without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...model.config import AttentionConfig, ConfigError
from ...model.devices import GpuProfile
from ...model.iomodel import format_bytes, largest_fitting_tiles, smem_budget
from ...results import BLOCK_FIELDS, TRACE_FIELDS

MAX_GRID_Y = 65535             # gridDim.y holds batch·head; more runs in several launches
DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic shared memory a block gets without opting in


@dataclass(frozen=True)
class Build:
    """One compiled variant of a kernel: kernels/<source>, function, -D options, launch shape."""

    source: str
    function: str
    options: tuple[str, ...]
    threads: int
    smem: int

    def compiled(self):
        """The cupy.RawKernel (kernels.loader caches one module per option set), opted in to
        its dynamic shared memory where that and the kernel's static shared memory together
        pass 48 KiB."""
        from kernels.loader import get_function
        fn = get_function(self.source, self.function, self.options)
        if (self.smem + fn.shared_size_bytes > DEFAULT_SMEM_LIMIT
                and fn.max_dynamic_shared_size_bytes < self.smem):
            fn.max_dynamic_shared_size_bytes = self.smem
        return fn

    def blocks_per_sm(self, fn) -> int:
        """Blocks of this build that fit on one SM at once (CUDA's occupancy calculator, asked
        through the driver: the kernel is a driver CUfunction); fn: compiled()."""
        import cupy
        return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            fn.kernel.ptr, self.threads, self.smem))

    def facts(self, fn, grid: tuple[int, ...]) -> dict:
        """What the Kernel page shows about the build that ran."""
        return {"kernel_source": f"kernels/{self.source}",
                "compile_options": " ".join(self.options),
                "registers_per_thread": int(fn.num_regs),
                "local_bytes_per_thread": int(fn.local_size_bytes),
                "threads_per_block": self.threads, "dynamic_smem_bytes": self.smem,
                "grid": " × ".join(str(g) for g in grid)}


class SharedMemoryError(ConfigError):
    """The tiles do not fit in one thread block's shared memory on this GPU."""


def check_smem(cfg: AttentionConfig, gpu: GpuProfile, layout: str, name: str) -> int:
    """Bytes of shared memory per block of the kernel whose layout is `layout`
    (iomodel.smem_parts); SharedMemoryError naming the largest tiles that fit when over."""
    budget = smem_budget(cfg, gpu, layout)
    if not budget.fits:
        best = largest_fitting_tiles(cfg, gpu, layout)
        fit = (", ".join(f"block_q={bq}, block_k={bk}" for bq, bk in best)
               if best else "none of the allowed tile sizes")
        raise SharedMemoryError(
            f"The {name} kernel's tiles block_q={cfg.block_q} × block_k={cfg.block_k} at "
            f"head_dim {cfg.head_dim}, {cfg.dtype}, need {budget.total:,} bytes "
            f"({format_bytes(budget.total)}) of shared memory per thread block; {gpu.name} "
            f"allows {budget.limit:,} bytes. Largest tiles that fit: {fit}.")
    return budget.total


def check_hopper_build(cfg: AttentionConfig, build, name: str, needs: str = "Hopper") -> None:
    """ConfigError unless the registry row `build` takes cfg's dtype and tile shape (the
    message lists what it takes) and the kernels are built for compute capability 9.x (wgmma
    and TMA). name: the kernel as messages call it; needs: what the parenthesis says the GPU
    must have."""
    from ..runtime import device_is_hopper
    if not build.takes(cfg):
        raise ConfigError(f"The {name} kernel does not take dtype={cfg.dtype}, head_dim="
                          f"{cfg.head_dim}, block_q={cfg.block_q}, block_k={cfg.block_k}. It "
                          f"takes {build.text()}.")
    if not device_is_hopper():
        raise ConfigError(f"The {name} kernel needs a GPU of compute capability 9.x ({needs}).")


def check_operands(dtype: str, **operands) -> None:
    """Each operand name=(array, shape) must be a C-contiguous CuPy array of that shape and
    dtype (the launchers' layout: (batch·heads, seq, head_dim))."""
    import cupy
    for name, (x, shape) in operands.items():
        if not isinstance(x, cupy.ndarray):
            raise ConfigError(f"{name} must be a CuPy array; got {type(x).__name__}.")
        if tuple(x.shape) != tuple(shape) or x.dtype != np.dtype(dtype) or not x.flags.c_contiguous:
            raise ConfigError(f"{name} must be a C-contiguous CuPy array of shape {tuple(shape)} "
                              f"and dtype {dtype}; got shape {tuple(x.shape)}, dtype {x.dtype}, "
                              f"contiguous={x.flags.c_contiguous}.")


def allocate(spec: dict, poison: bool = False) -> dict:
    """CuPy buffers name -> (shape, dtype). poison=True sets every bit first: NaN in every
    float dtype (bfloat16 too), -1 in signed and the largest value in unsigned integers, so a
    test can tell that the kernel wrote every element."""
    import cupy
    out = {}
    for name, (shape, dtype) in spec.items():
        x = cupy.empty(shape, dtype=dtype)
        if poison:
            x.view(cupy.uint8).fill(0xFF)
        out[name] = x
    return out


def forward_outputs(cfg: AttentionConfig, trace: bool, poison: bool = False,
                    dtype: str | None = None) -> dict:
    """The outputs every flash forward launcher writes: "O" (B·H, seq_q, d) in dtype (default
    cfg.dtype), "lse" (B·H, seq_q) float32; with trace the four trace arrays (B·H, seq_q, Tc) float32 and
    per thread block (record bh·Tr + i) "sm_id" int32, "start_ns" and "end_ns" uint64."""
    bh, nq = cfg.bh, cfg.seq_q
    spec = {"O": ((bh, nq, cfg.head_dim), dtype or cfg.dtype), "lse": ((bh, nq), np.float32)}
    if trace:
        spec.update({name: ((bh, nq, cfg.Tc), np.float32) for name in TRACE_FIELDS})
        spec.update(block_spec(bh * cfg.Tr))
    return allocate(spec, poison)


def forward_args(Q, K, V, out: dict, scalars: tuple, trace: bool, Tr: int,
                 with_count: bool = False, extra: tuple = ()) -> Callable:
    """args_for(bh0, bh1) of the forward kernels for launch_loop: Q, K, V, O, lse and the
    scalars (with_count: then the chunk's number of batch·heads), the `extra` arguments, then
    the trace arrays and the block records of the chunk (or NULLs untraced)."""
    def args_for(bh0, bh1):
        traced = ([out[k][bh0:bh1] for k in TRACE_FIELDS]
                  + [out[k][bh0 * Tr:bh1 * Tr] for k in BLOCK_FIELDS]
                  if trace else [NULL] * (len(TRACE_FIELDS) + len(BLOCK_FIELDS)))
        count = (np.int32(bh1 - bh0),) if with_count else ()
        return (Q[bh0:bh1], K[bh0:bh1], V[bh0:bh1], out["O"][bh0:bh1], out["lse"][bh0:bh1],
                *scalars, *count, *extra, *traced)
    return args_for


def block_spec(n_blocks: int) -> dict:
    """The per-block schedule records: SM id and %globaltimer at start and end."""
    return dict(zip(BLOCK_FIELDS, (((n_blocks,), np.int32), ((n_blocks,), np.uint64),
                                   ((n_blocks,), np.uint64))))


NULL = np.uint64(0)    # a null pointer argument (trace buffers of an untraced build)

# The tensor-core forward kernels take causal work items heaviest first within groups of
# batch·heads (kernels/include/common.cuh): a group holds at least GROUP_WAVES waves of one block per
# SM, enough for the longest-first order to even out the SMs' ends, while the K and V that its
# running items read stay about GROUP_WAVES · SMs · block_q · head_dim · 4 bytes (35 MB at
# head_dim 128 on 132 SMs), within an H100's or H200's L2.
GROUP_WAVES = 4


def group_for(query_tiles: int, sms: int) -> int:
    """Batch·heads per group of a causal launch of `query_tiles` tiles per batch·head on a
    GPU of `sms` SMs: enough for GROUP_WAVES waves of one block per SM."""
    return max(1, -(-GROUP_WAVES * sms // query_tiles))


def causal_bh_group(cfg: AttentionConfig, sms: int, slots: int | None = None) -> int:
    """Batch·heads per group of the launch order of cfg: group_for under causal, 1 when not
    (batch·head by batch·head). slots: work items per batch·head (default cfg.Tr, the
    forward's query tiles; the backward's are its cfg.Tc key tiles)."""
    return group_for(slots or cfg.Tr, sms) if cfg.causal else 1


def item_grid(cfg: AttentionConfig, sms: int,
              slots: int | None = None) -> Callable[[int], tuple[int, int, int]]:
    """grid_of(bh) for launch_loop: the grid (group, slots, groups) of one block per work
    item that lays the items out in launch order (grid_item_tile, grid_key_tile in
    kernels/include/common.cuh); slots as causal_bh_group; the last group may be partial."""
    slots = slots or cfg.Tr
    group = causal_bh_group(cfg, sms, slots)
    return lambda bh: (min(group, bh), slots, -(-bh // group))


def launch_loop(fn, build: Build, grid_x: int, bh: int,
                args_for: Callable[[int, int], tuple],
                grid_of: Callable[[int], tuple] | None = None) -> Callable[[], None]:
    """run() enqueueing the kernel over grid (grid_x, batch·heads), or grid_of(batch·heads),
    cut into launches of at most MAX_GRID_Y batch·heads; args_for(bh0, bh1) gives each
    launch's arguments."""
    grid = grid_of or (lambda n: (grid_x, n))
    launches = [(grid(min(bh, bh0 + MAX_GRID_Y) - bh0), args_for(bh0, min(bh, bh0 + MAX_GRID_Y)))
                for bh0 in range(0, bh, MAX_GRID_Y)]

    def run():
        for grid, args in launches:
            fn(grid, (build.threads,), args, shared_mem=build.smem)

    return run


def launch_once(prepare: Callable, *args, **kwargs) -> dict:
    """Prepare, run once, return the outputs (the `launch` of every launcher)."""
    run, out = prepare(*args, **kwargs)
    run()
    return out
