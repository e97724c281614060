"""The project's tensor-core forward against cuDNN's SDPA, point by point, from bench records
(`python -m benchmarks.bench_sweep ... --kernels tensorcore,torch`): each shape's ratio cuDNN time /
ours (above 1: ours is faster) and PyTorch's flash likewise, then causal time / non-causal
time of every line. Several files may be given (e.g. one build each and a PyTorch run); a
line named in more than one file is labelled with its file.

  python -m benchmarks.cudnn_parity benchmarks/results/bench_h200_forward.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

KEY = ("seq_q", "head_dim", "dtype", "causal", "batch", "heads")


def lines_of(paths: list[str]) -> dict[str, dict[tuple, float]]:
    """{line label: {shape key: median ms}}; a kernel in several files is told apart by file."""
    records = [(Path(p).stem, json.loads(Path(p).read_text())["results"]) for p in paths]
    seen: dict[str, int] = {}
    for _, results in records:
        for kernel in {r["kernel"] for r in results}:
            seen[kernel] = seen.get(kernel, 0) + 1
    out: dict[str, dict[tuple, float]] = {}
    for stem, results in records:
        for r in results:
            label = r["kernel"] if seen[r["kernel"]] == 1 else f"{r['kernel']} ({stem})"
            out.setdefault(label, {})[tuple(r[k] for k in KEY)] = r["median_ms"]
    return out


def parity_rows(lines: dict[str, dict[tuple, float]], reference: str = "torch_cudnn"):
    """(shape key, {line: reference ms / line ms}) for every shape the reference timed."""
    ref = lines.get(reference, {})
    for key in sorted(ref):
        yield key, {name: ref[key] / ms[key] for name, ms in lines.items()
                    if name != reference and key in ms}


def causal_ratios(lines: dict[str, dict[tuple, float]]):
    """(line, shape key without causal, causal ms / non-causal ms)."""
    for name, ms in lines.items():
        for key, t in sorted(ms.items()):
            if key[3]:
                plain = key[:3] + (False,) + key[4:]
                if plain in ms:
                    yield name, key, t / ms[plain]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cudnn_parity", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", help="bench files (bench_*.json layout)")
    lines = lines_of(p.parse_args(argv).files)
    ours = sorted(n for n in lines if not n.startswith("torch_"))
    print("cuDNN time / this line's time (above 1: faster than cuDNN)")
    print(f"{'N':>6}{'d':>5} {'dtype':<9}{'causal':<7}{'B·H':>5}" + "".join(f"{n:>26}" for n in ours)
          + f"{'torch_flash':>13}")
    worst: dict[str, float] = {}
    for key, ratios in parity_rows(lines):
        n, d, dtype, causal, b, h = key
        cells = "".join(f"{ratios[o]:>26.3f}" if o in ratios else f"{'-':>26}" for o in ours)
        flash = ratios.get("torch_flash")
        print(f"{n:>6}{d:>5} {dtype:<9}{str(causal):<7}{b * h:>5}{cells}"
              + (f"{flash:>13.3f}" if flash else f"{'-':>13}"))
        for o in ours:
            if o in ratios and n >= 1024:
                worst[o] = min(worst.get(o, ratios[o]), ratios[o])
    for o, w in worst.items():
        print(f"lowest at N >= 1024, {o}: {w:.3f}")
    print("causal / non-causal time")
    for name, key, ratio in causal_ratios(lines):
        n, d, dtype, _, b, h = key
        print(f"  {name:<28} N={n:<6} d={d:<4} {dtype:<9} B·H={b * h:<4} {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
