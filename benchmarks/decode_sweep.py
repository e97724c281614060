"""Time Flash-Decoding steps beside PyTorch's SDPA and write a decode file (benchmarks/results/
decode_*.json, kind "decode" of engine.recorded's schema): per (batch, seq_k) the auto split
count, every other count of --sweep-splits that leaves no split empty, paged caches at the
auto count, then SDPA. The defaults are the H200 decode targets' sweep: batch 1-8, seq_k
32k-128k, heads 32, kv_heads 8, d 128, float16.

  python -m benchmarks.decode_sweep --out benchmarks/results/decode_h200_<date>.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.model.config import DTYPES, HEAD_DIMS

from .recording import (Progress, command_line, device_record, ints, job_parser, run_job,
                        stamped, today, write_json)


def decode_lines(cfg, args, sms: int) -> list[tuple]:
    """(label, config, num_splits, auto) of every timing of one decode shape: the auto split
    count, each other count of --sweep-splits that leaves no split empty, the paged caches
    (auto), then PyTorch's SDPA."""
    from engine.model.decode_config import splits_without_empty
    auto = cfg.splits_on(sms)
    lines = [("flash_decode", cfg, auto, True)]
    lines += [("flash_decode", cfg, s, False) for s in args.sweep_splits
              if s != auto and s <= cfg.seq_k and splits_without_empty(cfg.seq_k, s)]
    lines += [("flash_decode", cfg.with_(page_size=p), auto, True) for p in args.page_sizes]
    if args.torch:
        lines.append(("torch_sdpa", cfg, None, False))
    return lines


def sweep(args) -> int:
    from engine.decode import make_decode_inputs, scatter_pages
    from engine.gpu.decode_bench import decode_method, decode_record, time_flash_decode, time_sdpa
    from engine.gpu.runtime import live_gpu
    from engine.gpu.torch_reference import release_memory
    from engine.model.decode_config import DecodeConfig, block_table
    sms = live_gpu().sms
    out = Path(args.out)
    data = stamped("decode", device=device_record(), date=today(),
                   method=decode_method(args.reps, args.warmup), command=command_line(),
                   results=[], skipped=[])
    shapes = [DecodeConfig(batch=b, heads=args.heads, kv_heads=args.kv_heads, seq_q=args.seq_q,
                           seq_k=n, head_dim=args.head_dim, dtype=args.dtype)
              for n in args.seq_k for b in args.batch]
    plan = [(cfg, decode_lines(cfg, args, sms)) for cfg in shapes]
    bar = Progress(sum(len(lines) for _, lines in plan))
    for base, lines in plan:
        inputs = {}
        for label, cfg, splits, auto in lines:
            bar.step(f"{label} B={cfg.batch} seq_k={cfg.seq_k} splits={splits} "
                     f"page={cfg.page_size}")
            try:
                if None not in inputs:
                    release_memory()
                    inputs[None] = make_decode_inputs(base)
                if cfg.page_size not in inputs:      # the same cache, scattered over pages
                    q, k, v = inputs[None]
                    table = block_table(cfg)
                    inputs[cfg.page_size] = (q, scatter_pages(cfg, k, table),
                                             scatter_pages(cfg, v, table))
                if label == "torch_sdpa":
                    times = time_sdpa(cfg, inputs[None], args.reps, args.warmup, args.budget)
                else:
                    times = time_flash_decode(cfg, splits, inputs[cfg.page_size], args.reps,
                                              args.warmup, args.budget)
                data["results"].append(decode_record(cfg, label, splits, times, auto))
            except (ValueError, RuntimeError, MemoryError) as exc:   # the sweep goes on
                data["skipped"].append({"kernel": label, "config": cfg.to_dict(),
                                        "num_splits": splits,
                                        "reason": f"{type(exc).__name__}: {exc}"})
            write_json(out, data)
        del inputs
    bar.close()
    for r in data["results"]:
        print(f"{r['kernel']:>12} B={r['batch']} seq_k={r['seq_k']:>6} page={r['page_size']} "
              f"splits={r['num_splits']} {r['median_ms']:.4f} ms "
              f"({100 * r['floor_fraction']:.0f}% of the HBM floor)")
    return 0


def parser():
    dc = job_parser(__doc__, "decode_sweep")
    dc.add_argument("--batch", type=ints, default=[1, 2, 4, 8])
    dc.add_argument("--seq-k", type=ints, default=[32768, 65536, 131072])
    dc.add_argument("--heads", type=int, default=32)
    dc.add_argument("--kv-heads", type=int, default=8)
    dc.add_argument("--seq-q", type=int, default=1)
    dc.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    dc.add_argument("--dtype", default="float16", choices=DTYPES)
    dc.add_argument("--sweep-splits", type=ints, default=[1, 2, 4, 8, 16, 32, 64, 128],
                    help="split counts timed beside the auto rule's (1 = the plain kernel)")
    dc.add_argument("--page-sizes", type=ints, default=[16, 64],
                    help="paged caches timed at the auto split count")
    dc.add_argument("--no-torch", dest="torch", action="store_false",
                    help="leave out PyTorch's SDPA")
    dc.add_argument("--reps", type=int, default=50)
    dc.add_argument("--warmup", type=int, default=3)
    dc.add_argument("--budget", type=float, default=0.3,
                    help="seconds per line; repetitions are cut to fit, never below 20")
    dc.add_argument("--out", required=True)
    return dc


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), sweep, argv)


if __name__ == "__main__":
    sys.exit(main())
