"""The mma.sync kernel's run log against CUDA events, launch by launch: for whole items and
stream-K, each launch of the RUNS build timed with events (the project's method: L2 flushed,
then a GPU wait so that the host has queued the launch; or warm, without the flush) beside
the span its own log shows (first run's start to last run's end, %globaltimer), and the same
launch of the launcher's own build (whole items: without the log; stream-K: with a log of no
room). What the events hold beyond the span is the launch and the kernel's end, outside every
block. (Before every stream-K launch carried the log, the last line measured it without one:
lab/NOTES.md, "the run log makes the stream-K build faster".)

  python -m benchmarks.run_log_timing [--heads 4 --seq 4096 --causal] [--reps 30]
(on a GPU; prints one table)
"""
from __future__ import annotations

import argparse

import numpy as np


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run_log_timing", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--reps", type=int, default=30)
    return p


def main() -> None:
    args = parser().parse_args()
    import cupy

    import engine
    from engine.gpu.backend import to_device
    from engine.gpu.launchers import core, mma
    from engine.gpu.runtime import live_gpu
    from engine.gpu.timing import HOLD_NS, _flush_buffer
    from kernels.loader import get_function

    cfg = engine.AttentionConfig(batch=1, heads=args.heads, seq_q=args.seq, seq_k=args.seq,
                                 head_dim=128, block_q=128, block_k=32, dtype="float16",
                                 causal=args.causal)
    Q, K, V = (to_device(cfg, x) for x in engine.make_inputs(cfg))
    hold = get_function("baselines/bench_hold.cu", "hold_gpu")
    flush = _flush_buffer()

    def timed(run, rep: int, cold: bool) -> float:
        """µs of one launch between CUDA events, after the L2 flush (cold) and the GPU wait."""
        if cold:
            flush.fill(rep % 251 + 1)
            flush.max()
        hold((1,), (1,), (np.uint64(HOLD_NS),))
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) * 1e3

    print(f"B·H={cfg.bh} N={cfg.seq_q} d=128 128×32 float16 causal={cfg.causal} "
          f"on {live_gpu().name}; µs, median of {args.reps}")
    print(f"{'order':10} {'L2':5} {'events':>8} {'log span':>9} {'outside':>8}")
    for split in (False, True):
        name = "stream-K" if split else "whole"
        run, out, log = mma.logged_launch(cfg, Q, K, V, stream_k=split)
        for _ in range(3):
            log[0] = 0
            run()
        for cold in (True, False):
            rows = []
            for rep in range(args.reps):
                log[0] = 0
                ms = timed(run, rep, cold)
                recs = mma.read_run_log(log)
                rows.append((ms, (int(recs[:, 1].max()) - int(recs[:, 0].min())) / 1e3))
            ev, sp = np.median(np.array(rows), axis=0)
            print(f"{name:10} {'cold' if cold else 'warm':5} {ev:8.1f} {sp:9.1f} {ev - sp:8.1f}")
        # the launcher's own build of the same launch (whole items: no log; stream-K: the log
        # with no room), the same method (cold L2)
        G = int(out["info"]["grid"].split(" × ")[0]) if split else 0
        plain, _ = mma._prepare(cfg, Q, K, V, False, core.forward_outputs(cfg, False), G, None)
        times = [timed(plain, rep, True) for rep in range(args.reps)]
        print(f"{name:10} {'cold':5} {np.median(times):8.1f} {'(launcher)':>9}")

if __name__ == "__main__":
    main()
