"""Time every (block_q, block_k) each kernel takes at one N, d and dtype (engine.gpu.tilesweep,
the Tile sizes page's live sweep), one kernel after the other, and write a tile grid
(benchmarks/results/tiles_*.json, kind "tiles" of engine.recorded's schema). sweep_s holds
each kernel's wall time, compiles included (the target: the teaching kernel's sweep at
N = 4096, d = 64 under 20 s on an H200).

  python -m benchmarks.tile_grid --seq 4096 --head-dim 64 --dtype float16 \\
      --kernels teaching,tensorcore --out benchmarks/results/tiles_h200_<date>.json
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from engine.model.config import DTYPES, HEAD_DIMS, AttentionConfig

from .recording import (Progress, command_line, device_record, job_parser, names, run_job,
                        stamped, today, write_json)


def grid(args) -> int:
    from engine.gpu.tilesweep import sweep_tiles
    cfg = AttentionConfig(batch=args.batch, heads=args.heads, seq_q=args.seq, seq_k=args.seq,
                          head_dim=args.head_dim, dtype=args.dtype, causal=args.causal)
    results, skipped, sweep_s = [], [], {}
    for kernel in args.kernels:
        bar = Progress(1)

        def progress(done, total, label):
            bar.total = total
            bar.step(label)

        start = time.perf_counter()
        got, missed = sweep_tiles(cfg, (kernel,), args.reps, progress)
        sweep_s[kernel] = time.perf_counter() - start
        bar.close()
        results += got
        skipped += missed
    config = {k: v for k, v in cfg.to_dict().items() if k not in ("block_q", "block_k")}
    write_json(Path(args.out), stamped(
        "tiles", device=device_record(), date=today(),
        method=results[0]["method"] if results else "", command=command_line(),
        config=config, sweep_s=sweep_s,
        results=[{k: v for k, v in r.items() if k != "method"} for r in results],
        skipped=skipped))
    for r in results:
        print(f"{r['kernel']:<11} {r['block_q']:>4} × {r['block_k']:<4} {r['median_ms']:9.4f} ms "
              f"{r['tflops']:7.2f} TFLOP/s  {r['blocks_per_sm']} blocks/SM")
    for s in skipped:
        print(f"skipped {s['kernel']} {s['block_q']} × {s['block_k']}: {s['reason'][:160]}")
    for kernel, seconds in sweep_s.items():
        print(f"{kernel} sweep: {seconds:.1f} s")
    print(f"wrote {args.out}: {len(results)} shapes timed, {len(skipped)} skipped")
    return 0


def parser():
    g = job_parser(__doc__, "tile_grid")
    g.add_argument("--seq", type=int, required=True, help="N = seq_q = seq_k")
    g.add_argument("--head-dim", type=int, default=64, choices=HEAD_DIMS)
    g.add_argument("--dtype", default="float16", choices=DTYPES)
    g.add_argument("--causal", action="store_true")
    g.add_argument("--batch", type=int, default=1)
    g.add_argument("--heads", type=int, default=16)
    g.add_argument("--kernels", type=names(("teaching", "tensorcore")),
                   default=["teaching", "tensorcore"])
    g.add_argument("--reps", type=int, default=20,
                   help="repetitions per shape (default 20, as the page's live sweep)")
    g.add_argument("--out", required=True)
    return g


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), grid, argv)


if __name__ == "__main__":
    sys.exit(main())
