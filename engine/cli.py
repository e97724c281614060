"""Command line: run one configuration with its trace and save it.

  python -m engine trace --seq-q 300 --seq-k 257 --head-dim 64 --block-q 64 --block-k 32 \\
      --dtype float16 --causal --out trace.npz

The NPZ (engine.trace_io's format) opens on the Downloads page. Recording and analysis jobs
(benchmark sweeps, tile grids, decode sweeps, schedules, compile facts) are not here: they
are the modules of benchmarks/ (`python -m benchmarks.<name> --help`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .model.config import (BLOCK_SIZES, CONFIG_DTYPES, DTYPES, FP8_BLOCK_K, FP8_SCALINGS,
                           HEAD_DIMS, INPUT_PRESETS, AttentionConfig)


def config_arguments(p, dtype: str, dtypes: tuple = DTYPES, **defaults):
    """The AttentionConfig options of one run; defaults overrides sizes. dtypes: the --dtype
    choices (with an FP8 one, also --fp8-scaling and --fp8-rotation)."""
    size = {"batch": 1, "heads": 2, "seq_q": 256, "seq_k": 256, "head_dim": 64, "block_q": 64,
            "block_k": 64, **defaults}
    p.add_argument("--batch", type=int, default=size["batch"])
    p.add_argument("--heads", type=int, default=size["heads"])
    p.add_argument("--seq-q", type=int, default=size["seq_q"])
    p.add_argument("--seq-k", type=int, default=size["seq_k"])
    p.add_argument("--head-dim", type=int, default=size["head_dim"], choices=HEAD_DIMS)
    p.add_argument("--block-q", type=int, default=size["block_q"], choices=BLOCK_SIZES)
    fp8 = any(d not in DTYPES for d in dtypes)
    p.add_argument("--block-k", type=int, default=size["block_k"],
                   choices=BLOCK_SIZES + FP8_BLOCK_K if fp8 else BLOCK_SIZES,
                   help=f"{', '.join(map(str, FP8_BLOCK_K))}: float8_e4m3 only" if fp8 else None)
    p.add_argument("--dtype", default=dtype, choices=dtypes)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--scale", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", default="normal", choices=INPUT_PRESETS)
    p.add_argument("--logit-scale", type=float, default=1.0)
    if any(d not in DTYPES for d in dtypes):
        p.add_argument("--fp8-scaling", default="tile", choices=FP8_SCALINGS,
                       help="float8_e4m3: a scale per tile, per tensor, or none")
        p.add_argument("--fp8-rotation", action="store_true",
                       help="float8_e4m3: rotate Q and K by a random-signed Hadamard matrix")


def config_from(args) -> AttentionConfig:
    return AttentionConfig(batch=args.batch, heads=args.heads, seq_q=args.seq_q,
                           seq_k=args.seq_k, head_dim=args.head_dim, block_q=args.block_q,
                           block_k=args.block_k, dtype=args.dtype, causal=args.causal,
                           scale=args.scale, seed=args.seed, inputs=args.inputs,
                           logit_scale=args.logit_scale,
                           fp8_scaling=getattr(args, "fp8_scaling", "tile"),
                           fp8_rotation=getattr(args, "fp8_rotation", False))


def cmd_trace(args) -> int:
    from .api import run
    from .trace_io import to_npz_bytes
    cfg = config_from(args)
    for _ in range(args.warmup):     # clocks up and the module loaded before the run recorded
        run(cfg, backend=args.backend, algorithm="flash", kernel=args.kernel, trace=True)
    res = run(cfg, backend=args.backend, algorithm="flash", kernel=args.kernel, trace=True)
    Path(args.out).write_bytes(to_npz_bytes(cfg, res))
    print(f"wrote {args.out}: {res.backend} backend, trace of shape {res.trace.rescale.shape}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace", help="run one traced flash forward pass; write NPZ "
                                     "(engine.trace_io format)")
    config_arguments(t, dtype="float32", dtypes=CONFIG_DTYPES)
    t.add_argument("--backend", default="auto", choices=("auto", "numpy", "cupy"))
    t.add_argument("--kernel", default="teaching", choices=("teaching", "tensorcore"))
    t.add_argument("--out", required=True)
    t.add_argument("--warmup", type=int, default=1,
                   help="traced runs before the one recorded (default 1)")
    t.set_defaults(func=cmd_trace)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
