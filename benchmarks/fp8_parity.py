"""The FP8 forward against the other lines of the same bench file (`gpu_run.sh fp8-parity`):
for each shape, FP8's TFLOP/s and its speed-up over the project's float16 kernel, PyTorch's
flash (FA2) and cuDNN, all float16, and over cuDNN's own FP8 forward, all timed in the same
run.

  python -m benchmarks.fp8_parity benchmarks/results/bench_h100_fp8_2026-11-27.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SHAPE = ("seq_q", "head_dim", "causal", "batch", "heads")
LINES = ("tensorcore", "torch_flash", "torch_cudnn")     # the float16 lines FP8 is held against
FP8_PEER = "cudnn_fp8"                                   # and the FP8 line of another library


def parity(results: list[dict], base_dtype: str = "float16") -> list[dict]:
    """One row per shape with an FP8 record: its TFLOP/s and time ratios (line ms / FP8 ms)
    against each float16 line timed at the same shape."""
    fp8 = {tuple(r[k] for k in SHAPE): r for r in results
           if r["dtype"] == "float8_e4m3" and r["kernel"] == "tensorcore"}
    peer = {tuple(r[k] for k in SHAPE): r for r in results
            if r["dtype"] == "float8_e4m3" and r["kernel"] == FP8_PEER}
    base = {(r["kernel"],) + tuple(r[k] for k in SHAPE): r for r in results
            if r["dtype"] == base_dtype}
    rows = []
    for shape in sorted(fp8):
        r = fp8[shape]
        row = {**dict(zip(SHAPE, shape)), "fp8_tflops": r["tflops"], "fp8_ms": r["median_ms"]}
        for line in LINES:
            other = base.get((line,) + shape)
            if other:
                row[f"vs_{line}"] = other["median_ms"] / r["median_ms"]
                row[f"{line}_tflops"] = other["tflops"]
        if shape in peer:
            row[f"vs_{FP8_PEER}"] = peer[shape]["median_ms"] / r["median_ms"]
            row[f"{FP8_PEER}_tflops"] = peer[shape]["tflops"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fp8_parity", description=__doc__)
    p.add_argument("file")
    args = p.parse_args(argv)
    rows = parity(json.loads(Path(args.file).read_text())["results"])
    print("FP8 time against float16 lines' (above 1: FP8 is faster)")
    print(f"{'N':>6} {'d':>4} {'causal':<7}{'FP8 TFLOP/s':>12}{'ours f16':>10}{'FA2':>8}"
          f"{'cuDNN':>8}{'cuDNN FP8':>11}")
    for r in rows:
        cells = [f"{r.get('vs_' + line, float('nan')):>8.2f}" for line in (*LINES, FP8_PEER)]
        print(f"{r['seq_q']:>6} {r['head_dim']:>4} {str(r['causal']):<7}{r['fp8_tflops']:>12.0f}"
              f"{cells[0]:>10}{cells[1]}{cells[2]}{cells[3]:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
