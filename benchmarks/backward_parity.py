"""The tensor-core backward's builds against PyTorch's FA2 backward, point by point, from
backward bench records (`python -m benchmarks.bench_sweep --direction backward`, with
engine.gpu.launchers.backward_wgmma.DQ_WRITER set for the run): the wgmma build with its dQ
reduced by the consumers (DQ_WRITER = 0) and PyTorch's lines of the same run, the
wgmma build with dQ staged for bulk reductions (DQ_WRITER = 1), and the mma.sync build's
tensor-core line of a recorded sweep (e.g. benchmarks/results/bench_h200_backward.json; its
other lines are not read). Per shape each build's ms, FA2's (torch_flash) and cuDNN's, and
FA2 time / the faster wgmma build's time (at or above 1: FA2's throughput, the backward's
target).
Files that are missing (a sweep cut short) are skipped.

  python -m benchmarks.backward_parity --wgmma out/bwd_wgmma_d64.json out/bwd_wgmma_d128.json \\
      --staged out/bwd_wgmma_staged_d*.json --mma lab/records/backward_mma_sync_h200_2026-11-23.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cudnn_parity import KEY

COLUMNS = ("wgmma", "wgmma staged", "mma.sync", "torch_flash", "torch_cudnn")


def timings(paths: list[str], tensorcore_as: str,
            others: bool = True) -> dict[str, dict[tuple, float]]:
    """{line: {shape key: median ms}} of the bench files that exist among `paths`: their
    tensorcore line named `tensorcore_as`, and (others) the other lines by their kernel."""
    out: dict[str, dict[tuple, float]] = {}
    for path in paths:
        if not Path(path).is_file():
            print(f"skipped (missing): {path}", file=sys.stderr)
            continue
        for r in json.loads(Path(path).read_text())["results"]:
            if r["kernel"] != "tensorcore" and not others:
                continue
            line = tensorcore_as if r["kernel"] == "tensorcore" else r["kernel"]
            out.setdefault(line, {})[tuple(r[k] for k in KEY)] = r["median_ms"]
    return out


def parity_rows(lines: dict[str, dict[tuple, float]]):
    """(shape key, {column: ms or None}, FA2 ms / the faster wgmma build's ms or None) for
    every shape a wgmma build timed."""
    keys = set(lines.get("wgmma", {})) | set(lines.get("wgmma staged", {}))
    for key in sorted(keys):
        ms = {c: lines.get(c, {}).get(key) for c in COLUMNS}
        ours = [m for m in (ms["wgmma"], ms["wgmma staged"]) if m]
        ratio = ms["torch_flash"] / min(ours) if ours and ms["torch_flash"] else None
        yield key, ms, ratio


def _cell(x: float | None, width: int, digits: int) -> str:
    return f"{x:>{width}.{digits}f}" if x is not None else f"{'-':>{width}}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.backward_parity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wgmma", nargs="*", default=[], help="bench files of the wgmma build "
                   "(DQ_WRITER = 0), with PyTorch's lines")
    p.add_argument("--staged", nargs="*", default=[], help="bench files of the wgmma build "
                   "with staged dQ (DQ_WRITER = 1)")
    p.add_argument("--mma", nargs="*", default=[], help="bench files whose tensorcore line is "
                   "the mma.sync build (only that line is read)")
    args = p.parse_args(argv)
    lines = timings(args.wgmma, "wgmma")
    for paths, name in ((args.staged, "wgmma staged"), (args.mma, "mma.sync")):
        for line, ms in timings(paths, name, others=False).items():
            lines.setdefault(line, {}).update(ms)
    print("backward ms per shape; FA2 ÷ wgmma: FA2 time / the faster wgmma build's time (at "
          "or above 1: the wgmma backward has FA2's throughput)")
    print(f"{'N':>6}{'d':>5} {'dtype':<9}{'causal':<7}{'B·H':>5}"
          + "".join(f"{c:>13}" for c in COLUMNS) + f"{'FA2 ÷ wgmma':>13}")
    lowest = None
    for key, ms, ratio in parity_rows(lines):
        n, d, dtype, causal, b, h = key
        print(f"{n:>6}{d:>5} {dtype:<9}{str(causal):<7}{b * h:>5}"
              + "".join(_cell(ms[c], 13, 3) for c in COLUMNS) + _cell(ratio, 13, 3))
        if ratio is not None and n >= 4096:
            lowest = ratio if lowest is None else min(lowest, ratio)
    if lowest is not None:
        print(f"lowest FA2 ÷ wgmma at N >= 4096: {lowest:.3f} "
              f"({'meets' if lowest >= 1 else 'misses'} FA2's throughput)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
