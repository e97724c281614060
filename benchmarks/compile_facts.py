"""Compile every kernel of the project on this GPU and record its registers, spills, shared
memory and blocks per SM (engine.gpu.facts) in a compile-facts file (benchmarks/results/
kernel_facts_*.json, kind "kernel_facts" of engine.recorded's schema), which the Kernel page
shows without a GPU. Exit status 1 when a kernel failed to compile.

  python -m benchmarks.compile_facts --out benchmarks/results/kernel_facts_h200.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from .recording import device_record, job_parser, run_job, stamped, today, write_json


def record(args) -> int:
    from engine.gpu.facts import record_all
    facts, failures = record_all()
    write_json(Path(args.out), stamped(
        "kernel_facts", device=device_record(), date=today(),
        method="CuPy RawKernel attributes (num_regs, local_size_bytes, shared_size_bytes) and "
               "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        facts=facts, failures=failures))
    for f in facts:
        c = f["config"]
        print(f"{f['kernel']:<18} d={c['head_dim']:<4} {c['block_q']}×{c['block_k']:<4} "
              f"trace={int(f['traced'])} regs={f['registers_per_thread']:<4} "
              f"local={f['local_bytes_per_thread']:<5} smem={f['dynamic_smem_bytes']:<7} "
              f"blocks/SM={f['blocks_per_sm']}")
    for f in failures:
        print(f"FAILED {f['kernel']} {f['config']['head_dim']}: {f['error']}", file=sys.stderr)
    return 1 if failures else 0


def parser():
    k = job_parser(__doc__, "compile_facts")
    k.add_argument("--out", required=True)
    return k


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), record, argv)


if __name__ == "__main__":
    sys.exit(main())
