"""Time Flash-Decoding steps beside PyTorch's SDPA and write a decode file (benchmarks/results/
decode_*.json, kind "decode" of engine.recorded's schema): per (batch, seq_k) the auto split
count, every other count of --sweep-splits that leaves no split empty, paged caches at the
auto count, then SDPA. The defaults are the H200 decode targets' sweep: batch 1-8, seq_k
32k-128k, heads 32, kv_heads 8, d 128, float16.

Every line is validated before it is timed: the same kernel (the same split count, or the
auto count where it would leave a split empty; the same pages) on a shorter cache of the
shape (batch 1, seq_k at most VALIDATE_KEYS) against float64 attention of the same inputs; a
line whose error passes its dtype's limit is refused and skipped, never recorded. Each record
keeps its validation (error, limit, seq_k).

  python -m benchmarks.decode_sweep --out benchmarks/results/decode_h200_<date>.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.model.config import DTYPES, HEAD_DIMS

from .recording import (Progress, command_line, device_record, ints, job_parser, run_job,
                        stamped, today, write_json)

VALIDATE_KEYS = 8192
# Relative (Frobenius) error a line may have against float64: the decode tests' bounds
# (tests/test_gpu_decode.py: float16 2e-3; bfloat16 rounds its output 8x coarser).
VALIDATION_LIMITS = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1e-2}


def decode64(cfg, q, k, v):
    """The decode step in float64 from its definition: query head h reads KV head
    h // (heads / kv_heads); token t sees keys c <= seq_k - seq_q + t. q (B, H, seq_q, d),
    k, v contiguous (B, kv_heads, seq_k, d). Returns (B, H, seq_q, d)."""
    import numpy as np
    group = cfg.heads // cfg.kv_heads
    K, V = (np.repeat(x.astype(np.float64), group, axis=1) for x in (k, v))
    S = cfg.softmax_scale * np.einsum("bhtd,bhcd->bhtc", q.astype(np.float64), K)
    hidden = np.arange(cfg.seq_k)[None, :] > cfg.seq_k - cfg.seq_q + np.arange(cfg.seq_q)[:, None]
    S[..., hidden] = -np.inf
    P = np.exp(S - S.max(-1, keepdims=True))
    return np.einsum("bhtc,bhcd->bhtd", P, V) / P.sum(-1)[..., None]


def validation_case(base):
    """The shorter cache every line of shape `base` is checked on (batch 1, seq_k at most
    VALIDATE_KEYS): (its config, q and the contiguous caches, their float64 output), made once
    for all the shape's lines."""
    from engine.decode import make_decode_inputs
    small = base.with_(batch=1, seq_k=min(base.seq_k, VALIDATE_KEYS))
    q, k, v = make_decode_inputs(small)
    return small, (q, k, v), decode64(small, q, k, v)


def validate(case, cfg, label: str, splits, sms: int) -> dict:
    """The line (label, cfg's pages, `splits`) on `case` (validation_case of its shape) against
    float64: {"rel_err", "limit", "seq_k"}; ValueError when the error passes the limit (the
    line is refused). A split count that would leave a split of the shorter cache empty gives
    way to its auto count."""
    from engine.decode import run_decode, scatter_pages
    from engine.gpu.decode_bench import sdpa_output
    from engine.model.decode_config import block_table, splits_without_empty
    from .bench_sweep import rel_err
    small, (q, k, v), want = case
    if label == "torch_sdpa":
        got = sdpa_output(small, (q, k, v))
    else:
        small = small.with_(page_size=cfg.page_size)
        if not (splits and splits <= small.seq_k and splits_without_empty(small.seq_k, splits)):
            splits = small.splits_on(sms)
        if small.paged:                      # the same cache, scattered over pages
            table = block_table(small)
            k, v = scatter_pages(small, k, table), scatter_pages(small, v, table)
        got = run_decode(small.with_(num_splits=splits), q, k, v, backend="cupy").output
    err = rel_err(got, want)
    limit = VALIDATION_LIMITS[cfg.dtype]
    if not err <= limit:                       # NaN fails too
        raise ValueError(f"refused: on seq_k={small.seq_k} its output differs from float64 by "
                         f"{err:.2e} (relative), over the limit {limit:.0e}; not timed")
    return {"rel_err": err, "limit": limit, "seq_k": small.seq_k}


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
        inputs, case = {}, None
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
                if case is None:
                    case = validation_case(base)
                checked = validate(case, cfg, label, splits, sms)
                if label == "torch_sdpa":
                    times = time_sdpa(cfg, inputs[None], args.reps, args.warmup, args.budget)
                else:
                    times = time_flash_decode(cfg, splits, inputs[cfg.page_size], args.reps,
                                              args.warmup, args.budget)
                record = decode_record(cfg, label, splits, times, auto)
                record["validated"] = checked
                data["results"].append(record)
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
