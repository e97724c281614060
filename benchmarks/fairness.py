"""The naive baseline against PyTorch's matmul-softmax-matmul at one shape (float16, N = 4096,
d = 64, B·H = 64), stage by stage (engine.gpu.torch_reference.fairness): exit status 1 when
naive / PyTorch is above the limit. With --out, a raw record (lab/records/fairness_*.json).

  python -m benchmarks.fairness --out lab/records/fairness_h200.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from .recording import device_record, job_parser, run_job, today, write_json


def compare(args) -> int:
    from engine.gpu.torch_reference import fairness
    got = fairness(reps=args.reps)
    rows = {}
    for who in ("naive", "torch"):
        t = got[who]
        rows[who] = {"median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
                     "reps": t.reps, "tflops": t.tflops, "peak_bytes": t.peak_bytes,
                     "stages": t.stages}
        print(f"{who:<6} {t.median_ms:9.4f} ms (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f})  "
              + ", ".join(f"{k}: {v:.4f}" for k, v in t.stages.items()))
    print(f"naive / PyTorch = {got['ratio']:.3f} (limit {got['limit']})")
    if args.out:
        write_json(Path(args.out), {"device": device_record(), "date": today(),
                                    "method": got["naive"].method, "config": got["config"],
                                    **rows, "ratio": got["ratio"], "limit": got["limit"]})
    return 0 if got["ratio"] <= got["limit"] else 1


def parser():
    f = job_parser(__doc__, "fairness")
    f.add_argument("--reps", type=int, default=30)
    f.add_argument("--out", default=None)
    return f


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), compare, argv)


if __name__ == "__main__":
    sys.exit(main())
