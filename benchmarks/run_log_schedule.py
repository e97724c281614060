"""Log every run of the mma.sync kernel's untraced build (whole items or stream-K: which block
ran which key tiles [j_lo, j_hi) of which item, on which SM, when) and write it as a schedule
file of "unit": "run" (benchmarks/results/schedule_*.json, kind "schedule" of
engine.recorded's schema), which the Kernel page shows.

  python -m benchmarks.run_log_schedule --batch 1 --heads 4 --seq-q 4096 --seq-k 4096 \\
      --head-dim 128 --block-q 128 --block-k 32 --causal --order stream-k --out schedule_runs.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.cli import config_arguments, config_from
from engine.inputs import make_inputs

from .recording import device_record, job_parser, run_job, scalars, stamped, today, write_json


def record(args) -> int:
    from engine.gpu.backend import to_device
    from engine.gpu.launchers import mma
    from engine.gpu.runtime import gpu_failures, live_gpu
    from engine.model.limits import check_limits
    from engine.recorded import schedule_of_runs
    cfg = config_from(args)
    check_limits(cfg)
    live_gpu()          # GpuRunError, with the reason, where no GPU can run the kernel
    with gpu_failures("the mma.sync kernel's logged launch"):
        q, k, v = make_inputs(cfg)
        Q, K, V = (to_device(cfg, x) for x in (q, k, v))
        out, records = mma.record_runs(cfg, Q, K, V, stream_k=args.order == "stream-k",
                                       warmup=args.warmup)
    sched = schedule_of_runs(records)
    write_json(Path(args.out), stamped(
        "schedule", device=device_record(), date=today(), kernel="tensorcore",
        label=args.label, info=scalars(out.get("info", {})), config=cfg.to_dict(), **sched))
    blocks = len(set(sched["block"]))
    span = (max(sched["end_ns"]) - min(sched["start_ns"])) / 1e3 if records.size else 0.0
    print(f"wrote {args.out}: {len(records)} runs of {blocks} blocks on "
          f"{len(set(sched['sm_id']))} SMs, {span:.1f} µs from the first start to the last end")
    return 0


def parser():
    r = job_parser(__doc__, "run_log_schedule")
    config_arguments(r, dtype="float16", heads=4, seq_q=4096, seq_k=4096, head_dim=128,
                     block_q=128, block_k=32)
    r.add_argument("--order", default="stream-k", choices=("whole", "stream-k"),
                   help="one block per item, or stream-K over the blocks that fit at once")
    r.add_argument("--out", required=True, help="the schedule file (schedule_*.json)")
    r.add_argument("--label", default="", help="what it shows, in words (the Kernel page's "
                                               "selector)")
    r.add_argument("--warmup", type=int, default=2, help="launches before the one logged")
    return r


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), record, argv)


if __name__ == "__main__":
    sys.exit(main())
