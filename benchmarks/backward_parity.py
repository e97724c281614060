"""The tensor-core backward's two builds against PyTorch's FA2 backward, point by point, from
the bench records that `bash benchmarks/gpu_run.sh bwd-wgmma` writes (`python -m engine bench
--direction backward`, once with engine.gpu.launchers.backward_mma.HOPPER_WGMMA = 1 and its
PyTorch lines, once with 0): per shape the wgmma build's ms, the mma.sync build's, FA2's
(torch_flash) and cuDNN's, and FA2 time / wgmma time (at or above 1: the wgmma backward has
FA2's throughput, issue 10's goal). Files that are missing (a sweep cut short) are skipped.

  python benchmarks/backward_parity.py --wgmma out/bwd_wgmma_d64.json out/bwd_wgmma_d128.json \\
      --mma out/bwd_mma_d64.json out/bwd_mma_d128.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cudnn_parity import KEY

COLUMNS = ("wgmma", "mma.sync", "torch_flash", "torch_cudnn")


def timings(paths: list[str], tensorcore_as: str) -> dict[str, dict[tuple, float]]:
    """{line: {shape key: median ms}} of the bench files that exist among `paths`: their
    tensorcore line named `tensorcore_as`, the others by their kernel."""
    out: dict[str, dict[tuple, float]] = {}
    for path in paths:
        if not Path(path).is_file():
            print(f"skipped (missing): {path}", file=sys.stderr)
            continue
        for r in json.loads(Path(path).read_text())["results"]:
            line = tensorcore_as if r["kernel"] == "tensorcore" else r["kernel"]
            out.setdefault(line, {})[tuple(r[k] for k in KEY)] = r["median_ms"]
    return out


def parity_rows(lines: dict[str, dict[tuple, float]]):
    """(shape key, {column: ms or None}, FA2 ms / wgmma ms or None) for every shape that
    either build timed."""
    keys = set(lines.get("wgmma", {})) | set(lines.get("mma.sync", {}))
    for key in sorted(keys):
        ms = {c: lines.get(c, {}).get(key) for c in COLUMNS}
        ratio = ms["torch_flash"] / ms["wgmma"] if ms["wgmma"] and ms["torch_flash"] else None
        yield key, ms, ratio


def _cell(x: float | None, width: int, digits: int) -> str:
    return f"{x:>{width}.{digits}f}" if x is not None else f"{'-':>{width}}"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wgmma", nargs="*", default=[], help="bench files of the wgmma build "
                   "(HOPPER_WGMMA = 1), with PyTorch's lines")
    p.add_argument("--mma", nargs="*", default=[], help="bench files of the mma.sync build "
                   "(HOPPER_WGMMA = 0)")
    args = p.parse_args(argv)
    lines = timings(args.wgmma, "wgmma")
    for line, ms in timings(args.mma, "mma.sync").items():
        lines.setdefault(line, {}).update(ms)
    print("backward ms per shape; FA2 ÷ wgmma: FA2 time / wgmma time (at or above 1: the "
          "wgmma backward has FA2's throughput)")
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
    raise SystemExit(main(sys.argv[1:]))
