"""Run one traced flash forward pass on the GPU and write its block-to-SM schedule (which SM
ran each thread block, when) as a schedule file (benchmarks/results/schedule_*.json, kind
"schedule" of engine.recorded's schema), which the Kernel page shows.

  python -m benchmarks.traced_schedule --kernel teaching --batch 2 --heads 16 --seq-q 4096 \\
      --seq-k 4096 --dtype float16 --label "several waves" --out schedule_x.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from engine.cli import config_arguments, config_from

from .recording import device_record, job_parser, run_job, scalars, stamped, today, write_json


def record(args) -> int:
    from engine.api import run
    cfg = config_from(args)
    for _ in range(args.warmup):     # clocks up and the module loaded before the run recorded
        run(cfg, backend="cupy", algorithm="flash", kernel=args.kernel, trace=True)
    res = run(cfg, backend="cupy", algorithm="flash", kernel=args.kernel, trace=True)
    if res.schedule is None:
        print("no schedule: this run recorded none", file=sys.stderr)
        return 1
    s = res.schedule
    write_json(Path(args.out), stamped(
        "schedule", device=device_record(), date=today(), kernel=res.kernel, label=args.label,
        info=scalars(res.info or {}), config=cfg.to_dict(), block_bh=s.block_bh.tolist(),
        block_q_tile=s.block_q_tile.tolist(), sm_id=s.sm_id.tolist(),
        start_ns=s.start_ns.tolist(), end_ns=s.end_ns.tolist()))
    print(f"wrote {args.out}: {len(s.sm_id)} thread blocks on "
          f"{len(set(s.sm_id.tolist()))} SMs")
    return 0


def parser():
    t = job_parser(__doc__, "traced_schedule")
    config_arguments(t, dtype="float16")
    t.add_argument("--kernel", default="teaching", choices=("teaching", "tensorcore"))
    t.add_argument("--out", required=True, help="the schedule file (schedule_*.json)")
    t.add_argument("--label", default="",
                   help="what the recorded schedule shows, in words (the Kernel page's selector)")
    t.add_argument("--warmup", type=int, default=1,
                   help="traced runs before the one recorded (default 1)")
    return t


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), record, argv)


if __name__ == "__main__":
    sys.exit(main())
