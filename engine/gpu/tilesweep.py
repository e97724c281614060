"""Time every (block_q, block_k) a flash kernel takes for one config on the GPU: the live
sweep of the Tile sizes page and of `python -m benchmarks.tile_grid`.

Each shape is timed with engine.benchmark (the project's timing method; it holds the GPU
lock for each run, so other sessions' jobs interleave between shapes, never inside one) and
its occupancy read from CUDA's occupancy calculator. A sweep larger than the server's
LIMITS["tile_sweep_points"], or a config over the server's limits, raises LimitError before
anything runs.
"""
from __future__ import annotations

from typing import Callable

from ..model.config import BLOCK_SIZES, AttentionConfig
from ..model.guards import check_tile_sweep
from ..inputs import make_inputs
from ..model.iomodel import smem_budget
from ..model.limits import check_limits
from ..results import timing_record
from ..model import catalog
from .occupancy import kernel_occupancy
from .runtime import device_is_hopper, live_gpu
from .timing import benchmark_gpu

KERNELS = ("teaching", "tensorcore")
SWEEP_REPS = 20          # the GPU harness's minimum: enough for a median, quick over 30 shapes
SWEEP_WARMUP = 2         # runs before timing each shape (the first compiles it)


def shapes_taken(cfg: AttentionConfig, kernel: str) -> list[tuple[int, int]]:
    """(block_q, block_k) that `kernel` takes for cfg on this machine's GPU: the teaching
    kernel every shape whose tiles fit its shared memory, the tensor-core kernel the shapes
    of its builds (engine.model.catalog)."""
    gpu, hopper = live_gpu(), device_is_hopper()
    out = []
    for bq in BLOCK_SIZES:
        for bk in BLOCK_SIZES:
            c = cfg.with_(block_q=bq, block_k=bk)
            if (smem_budget(c, gpu).fits if kernel == "teaching"
                    else catalog.tensorcore_takes(c, hopper)):
                out.append((bq, bk))
    return out


def sweep_tiles(cfg: AttentionConfig, kernels: tuple[str, ...] = KERNELS,
                reps: int = SWEEP_REPS,
                on_point: Callable[[int, int, str], None] | None = None) -> tuple[list, list]:
    """(results, skipped): a benchmarks/*.json timing record per shape and kernel, with the
    CUDA occupancy (blocks_per_sm, registers_per_thread, threads_per_block, smem_bytes) added;
    and {kernel, block_q, block_k, reason} for each shape that failed. on_point(done, total,
    label) reports progress after every run."""
    check_limits(cfg, "flash")
    plan = [(kernel, bq, bk) for kernel in kernels for bq, bk in shapes_taken(cfg, kernel)]
    check_tile_sweep(len(plan))
    results, skipped = [], []
    inputs = make_inputs(cfg)            # the tiles do not change Q, K, V: drawn once
    for done, (kernel, bq, bk) in enumerate(plan, start=1):
        c = cfg.with_(block_q=bq, block_k=bk)
        try:
            occupancy = kernel_occupancy(c, kernel)
            t = benchmark_gpu(c, "flash", kernel, False, reps, SWEEP_WARMUP, inputs=inputs)
            results.append({**timing_record(c, kernel, t), **occupancy, "method": t.method})
        except ValueError as exc:
            skipped.append({"kernel": kernel, "block_q": bq, "block_k": bk,
                            "reason": f"{type(exc).__name__}: {exc}"})
        if on_point:
            on_point(done, len(plan), f"{kernel} kernel, block_q {bq} × block_k {bk}")
    return results, skipped
