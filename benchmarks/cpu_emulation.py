"""Time the NumPy emulation (flash with the full trace, and naive) on this machine's CPU and
write a raw record, lab/records/cpu_emulation.json.

  python -m benchmarks.cpu_emulation
"""
import argparse
import datetime
import json
import os
import platform
from pathlib import Path

import numpy as np

import engine
from benchmarks.recording import LAB_RECORDS

CONFIGS = [dict(batch=1, heads=8, seq_q=4096, seq_k=4096, head_dim=64, block_q=64, block_k=64)]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    argparse.ArgumentParser(prog="python -m benchmarks.cpu_emulation", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rows = []
    for kw in CONFIGS:
        cfg = engine.AttentionConfig(**kw)
        for algorithm, trace in (("flash", True), ("flash", False), ("naive", False)):
            t = engine.benchmark(cfg, algorithm=algorithm, backend="numpy", trace=trace, reps=5)
            rows.append({**kw, "dtype": cfg.dtype, "algorithm": algorithm, "trace": trace,
                         "median_ms": round(t.median_ms, 1), "p10_ms": round(t.p10_ms, 1),
                         "p90_ms": round(t.p90_ms, 1), "reps": t.reps})
            print(f"{algorithm:6s} trace={trace!s:5s} {t.median_ms:8.1f} ms")
    out = {"machine": f"{cpu_name()}, {os.cpu_count()} cores",
           "python": platform.python_version(), "numpy": np.__version__,
           "date": datetime.date.today().isoformat(), "method": t.method, "results": rows}
    (LAB_RECORDS / "cpu_emulation.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
