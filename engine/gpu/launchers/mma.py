"""Launcher of kernel="tensorcore": dispatches each config to the build engine.model.catalog
names for it — the mma.sync kernel here (kernels/ampere/flash_tensorcore.cu), or the Hopper wgmma
kernel (engine.gpu.launchers.wgmma) — with the interface of every flash launcher
(prepare / launch / kernel_facts, the outputs of core.forward_outputs).
"""
from __future__ import annotations

import numpy as np

from ...model.config import AttentionConfig, ConfigError
from ...model.iomodel import smem_bytes
from ...recorded import RUN_RECORD
from ...model.stream_k import (MMA_SYNC_COSTS, MMA_SYNC_HEAD, blocks, total_tiles, use_stream_k,
                               workspace_floats)
from ...model import catalog
from ...model.launch import MMA_SYNC_THREADS
from ..runtime import check_arch, GpuRunError, device_is_hopper, gpu_failures, live_gpu
from . import core, wgmma

FUNCTION = catalog.MMA_SYNC.function
THREADS = MMA_SYNC_THREADS   # four warps, each owning block_q / 4 query rows
MAX_BLOCKS_PER_SM = 32       # CUDA's limit on any GPU: launches of more than two items per
                             # such slot never run stream-K, so their build is not compiled
# 1: untraced launches that engine.model.stream_k.use_stream_k picks with the mma.sync kernel's costs
# (launches of fewer items than the GPU holds blocks at once, or whose longest causal rows
# outlast an even share) run the STREAM_K build: as many blocks as fit on the GPU at once,
# each an even share of the key tiles, cut items merged (engine/model/stream_k.py); 0: one block per
# item always. Traced runs take whole items.
STREAM_K = 1
RUN_FIELDS = len(RUN_RECORD)  # u64 fields of one record of the RUNS build's run log
# The stream-K build always carries the run log (-DRUNS=1; outside
# `python -m benchmarks.run_log_schedule` its log has no room, so it only counts): on the H200
# (2026-11-24) it ran 4-7% faster with the log's two thread-0 operations at each run's ends
# than without them (lab/NOTES.md,
# "the run log makes the stream-K build faster"). The whole-item build has it only to record.


def chosen(cfg: AttentionConfig) -> catalog.TensorCoreBuild:
    """The build that runs cfg on this machine's GPU (ConfigError when none takes it)."""
    check_arch(cfg.dtype, "tensorcore", "forward")   # before any compile (engine.model.arch)
    return catalog.tensorcore_build(cfg, device_is_hopper())


def compile_options(cfg: AttentionConfig, trace: bool, split: bool = False,
                    runs: bool = False) -> tuple[str, ...]:
    return ("--std=c++17", f"-DHEAD_DIM={cfg.head_dim}", f"-DBLOCK_Q={cfg.block_q}",
            f"-DBLOCK_K={cfg.block_k}", f"-DTRACE={int(bool(trace))}",
            f"-DBF16={int(cfg.dtype == 'bfloat16')}", f"-DSTREAM_K={int(split)}",
            *((f"-DSK_HEAD={MMA_SYNC_HEAD}",) if split else ()),
            *(("-DRUNS=1",) if split or runs else ()))


def build(cfg: AttentionConfig, trace: bool, split: bool = False,
          runs: bool = False) -> core.Build:
    return core.Build(catalog.MMA_SYNC.source, FUNCTION, compile_options(cfg, trace, split, runs),
                      THREADS, smem_bytes(cfg, catalog.MMA_SYNC.name))


def stream_k_slots(cfg: AttentionConfig) -> int:
    """The blocks of cfg's STREAM_K build that run at once: the GPU's SMs times the blocks
    that fit on one SM (CUDA's occupancy calculator)."""
    b = build(cfg, False, split=True)
    with gpu_failures("occupancy of the stream-K mma.sync build"):
        return live_gpu().sms * max(1, b.blocks_per_sm(b.compiled()))


def stream_k_blocks(cfg: AttentionConfig, bh: int, trace: bool) -> int:
    """G, the blocks of a stream-K launch of bh batch·heads, or 0 where whole items run (traced,
    STREAM_K off, or the cost model against it), over stream_k_slots(cfg)."""
    if trace or not STREAM_K or cfg.Tr * bh > 2 * MAX_BLOCKS_PER_SM * live_gpu().sms:
        return 0
    slots = stream_k_slots(cfg)
    if not use_stream_k(cfg, bh, slots, MMA_SYNC_COSTS, MMA_SYNC_HEAD):
        return 0
    return blocks(cfg, bh, slots, MMA_SYNC_HEAD)


def kernel_facts(cfg: AttentionConfig, trace: bool) -> dict:
    """Compile facts of the build that runs this config."""
    if chosen(cfg) is catalog.WGMMA:
        return wgmma.kernel_facts(cfg, trace)
    G = stream_k_blocks(cfg, cfg.bh, trace)
    b = build(cfg, trace, split=G > 0)
    grid = (G, 1) if G else core.item_grid(cfg, live_gpu().sms)(cfg.bh)
    return {**b.facts(b.compiled(), grid), "stream_k": G > 0}


def prepare(cfg: AttentionConfig, Q, K, V, trace: bool, outputs: dict | None = None,
            poison: bool = False):
    """(run, outputs): run() enqueues the kernel, writing into outputs. Compiles on first use.
    Q (B·H, seq_q, d), K and V (B·H, seq_k, d): contiguous CuPy arrays of cfg.dtype."""
    if chosen(cfg) is catalog.WGMMA:
        return wgmma.prepare(cfg, Q, K, V, trace, outputs, poison)
    core.check_operands(cfg.dtype, Q=(Q, (cfg.bh, cfg.seq_q, cfg.head_dim)),
                        K=(K, (cfg.bh, cfg.seq_k, cfg.head_dim)),
                        V=(V, (cfg.bh, cfg.seq_k, cfg.head_dim)))
    G = stream_k_blocks(cfg, cfg.bh, trace)
    out = outputs if outputs is not None else core.forward_outputs(cfg, trace, poison)
    return _prepare(cfg, Q, K, V, trace, out, G, run_log=None)


def _prepare(cfg: AttentionConfig, Q, K, V, trace: bool, out: dict, G: int, run_log):
    """prepare()'s launch of the mma.sync kernel: G stream-K blocks (0: one block per item);
    run_log: the RUNS build's log (None: none recorded; a stream-K launch then gets a log
    with no room, which only counts its runs)."""
    bh, Tr = cfg.bh, cfg.Tr
    if G and run_log is None:
        import cupy
        run_log = cupy.zeros(RUN_FIELDS, dtype=np.uint64)     # count 0, room 0
    b = build(cfg, trace, split=G > 0, runs=run_log is not None)
    fn = b.compiled()
    scalars = (np.int32(cfg.seq_q), np.int32(cfg.seq_k), np.float32(cfg.softmax_scale),
               np.int32(cfg.causal))
    # Stream-K: the kernel gets the work's key tiles (0: whole items), the parts' states (2
    # slots a block) and a ticket counter per item, 0 between launches (the merging part sets
    # it back).
    workspace = (core.NULL, core.NULL)
    if G:
        import cupy
        workspace = (cupy.empty(workspace_floats(cfg, G), dtype=np.float32),
                     cupy.zeros(Tr * bh, dtype=np.int32))
    line = total_tiles(cfg, bh, MMA_SYNC_HEAD) if G else 0
    extra = (np.int32(Tr), np.int32(line), *workspace, core.NULL if run_log is None else run_log)
    args_for = core.forward_args(Q, K, V, out, scalars, trace, Tr, with_count=True, extra=extra)
    if G:
        args = args_for(0, bh)

        def run():
            fn((G, 1), (b.threads,), args, shared_mem=b.smem)
        launch_grid = (G, 1)
    else:
        grid_of = core.item_grid(cfg, live_gpu().sms)
        run = core.launch_loop(fn, b, Tr, bh, args_for, grid_of)
        launch_grid = grid_of(bh)
    run.operands = (*workspace, run_log)     # kept alive while run() may be called
    out["info"] = {**b.facts(fn, launch_grid), "stream_k": G > 0}
    return run, out


def new_run_log(room: int):
    """A run log (CuPy) with room for `room` records: count 0, then the room, then records."""
    import cupy
    log = cupy.zeros((room + 1) * RUN_FIELDS, dtype=np.uint64)
    log[1] = room
    return log


def read_run_log(log) -> np.ndarray:
    """The records a launch wrote to `log` (new_run_log, its count set to 0 before the launch):
    (runs, RUN_FIELDS) uint64, in the order the runs ended."""
    counted, room = (int(x) for x in log[:2].get())
    if counted > room:
        raise GpuRunError(f"The kernel logged {counted} runs; the log holds {room}.")
    records = log[RUN_FIELDS:(counted + 1) * RUN_FIELDS].get().reshape(counted, RUN_FIELDS)
    return records[np.argsort(records[:, 1], kind="stable")]


def logged_launch(cfg: AttentionConfig, Q, K, V, stream_k: bool):
    """(run, outputs, log) of the untraced mma.sync kernel's launch of cfg with its run log:
    whole items (stream_k False) or stream-K over stream_k_slots(cfg) blocks (True, whatever
    the cost model would pick). Set log[0] to 0 before each run() that read_run_log reads."""
    if chosen(cfg) is not catalog.MMA_SYNC:
        raise ConfigError("The run log is built into the mma.sync kernel only; this config "
                          "runs the wgmma kernel. Pick tiles that the mma.sync kernel takes: "
                          f"{catalog.MMA_SYNC.shapes_text()}.")
    if cfg.bh > core.MAX_GRID_Y:
        raise ConfigError(f"A logged launch takes at most {core.MAX_GRID_Y} batch·heads; "
                          f"got {cfg.bh}.")
    core.check_operands(cfg.dtype, Q=(Q, (cfg.bh, cfg.seq_q, cfg.head_dim)),
                        K=(K, (cfg.bh, cfg.seq_k, cfg.head_dim)),
                        V=(V, (cfg.bh, cfg.seq_k, cfg.head_dim)))
    G = blocks(cfg, cfg.bh, stream_k_slots(cfg), MMA_SYNC_HEAD) if stream_k else 0
    log = new_run_log(cfg.Tr * cfg.bh + G)   # every item once, plus at most one cut a block
    run, out = _prepare(cfg, Q, K, V, False, core.forward_outputs(cfg, False), G, log)
    return run, out, log


def record_runs(cfg: AttentionConfig, Q, K, V, stream_k: bool, warmup: int = 1):
    """(outputs, records): logged_launch's launch, `warmup` times and then once logged;
    records as read_run_log returns them."""
    run, out, log = logged_launch(cfg, Q, K, V, stream_k)
    for _ in range(warmup + 1):
        log[0] = 0
        run()
    return out, read_run_log(log)


def launch(cfg: AttentionConfig, Q, K, V, trace: bool, *, poison: bool = False) -> dict:
    """Run the kernel once; the dict of CuPy arrays that prepare() describes."""
    return core.launch_once(prepare, cfg, Q, K, V, trace, poison=poison)
