"""The GPU's measured matrix-product ceilings in 16-bit and FP8, the bound an attention kernel's
rate is held against (docs/RESULTS.md): an M = N = K product through PyTorch, bfloat16
(torch.matmul) and e4m3 with float32 accumulation and bfloat16 output (torch._scaled_mm, unit
scales), on random data, timed by the project's harness (engine.gpu.timing.time_stages: CUDA
events, warm-up, L2 flush, median). Writes a small JSON file.

  python -m benchmarks.matmul_ceiling --size 8192 --out matmul_ceiling_h100.json
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .recording import command_line, device_record, stamped, today, write_json


def products(size: int) -> dict:
    """{line: enqueue one size³ product} on random data: "bfloat16" and "float8_e4m3"."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(size, size, device="cuda", generator=g)
    b = torch.randn(size, size, device="cuda", generator=g)
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()     # column-major, as _scaled_mm wants
    one = torch.ones((), device="cuda")
    keep = {}
    return {
        "bfloat16": lambda: keep.__setitem__("c", torch.matmul(a16, b16)),
        "float8_e4m3": lambda: keep.__setitem__(
            "c", torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
    }


def measure(size: int, reps: int) -> dict:
    from engine.gpu.timing import time_stages
    out = {}
    for name, fn in products(size).items():
        totals, _ = time_stages([(name, fn)], reps, 3)
        ms = float(np.median(totals))
        out[name] = {"median_ms": ms, "tflops": 2 * size**3 / (ms * 1e-3) / 1e12}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.matmul_ceiling", description=__doc__)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    lines = measure(args.size, args.reps)
    write_json(args.out, stamped("matmul_ceiling", device=device_record(), date=today(),
                                 command=command_line(), size=args.size, lines=lines))
    for name, r in lines.items():
        print(f"{name:<12} {r['median_ms']:.3f} ms  {r['tflops']:.0f} TFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
