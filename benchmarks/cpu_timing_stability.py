"""Is the Timings page's CPU timing stable? Time one config again and again in this one process
through the page's own code path (engine.facade.benchmark_cpu_together: warm-ups, then naive
and flash interleaved until the budget is spent) and check that the medians of the repeats lie
within --limit (default 25%) of each other: largest / smallest - 1 <= limit. For contrast it
also times each repeat the old way (one warm-up, the median of 5 calls, one algorithm after
the other, NumPy's BLAS with its own threads), which is reported but not checked. Exit status
1 when the check fails.

  python -m benchmarks.cpu_timing_stability [--repeats 8] [--seq 256] [--record]

--record writes lab/records/cpu_timing_stability.json (machine, date, every median).
"""
import argparse
import datetime
import json
import sys
import time

import numpy as np

import engine
from benchmarks.cpu_emulation import cpu_name
from benchmarks.recording import LAB_RECORDS
from engine.facade import benchmark_cpu_together

ALGORITHMS = ("naive", "flash")


def spread_of_medians(medians: list[float]) -> float:
    """largest / smallest - 1 of the repeats' medians."""
    return max(medians) / min(medians) - 1


def old_way(cfg: engine.AttentionConfig, algorithm: str) -> float:
    """The method the page used before: one warm-up, the median of 5 calls (ms), on NumPy's
    BLAS as it comes (all cores' threads)."""
    q, k, v = engine.make_inputs(cfg)
    engine.run(cfg, q, k, v, backend="numpy", algorithm=algorithm)
    calls = []
    for _ in range(5):
        t0 = time.perf_counter()
        engine.run(cfg, q, k, v, backend="numpy", algorithm=algorithm)
        calls.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(calls))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cpu_timing_stability",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--seq", type=int, default=engine.AttentionConfig().seq_q,
                    help="N_q = N_k of the default config (default %(default)s)")
    ap.add_argument("--limit", type=float, default=0.25)
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args(argv)
    cfg = engine.AttentionConfig(seq_q=args.seq, seq_k=args.seq)
    now = {a: [] for a in ALGORITHMS}
    old = {a: [] for a in ALGORITHMS}
    noisy = 0
    for i in range(args.repeats):
        timings = benchmark_cpu_together(cfg, list(ALGORITHMS))
        for a, t in zip(ALGORITHMS, timings):
            now[a].append(t.median_ms)
            noisy += t.noisy
        for a in ALGORITHMS:
            old[a].append(old_way(cfg, a))
        print(f"repeat {i + 1}: " + ", ".join(
            f"{a} {now[a][-1]:.3f} ms ({timings[j].reps} calls; old way {old[a][-1]:.3f})"
            for j, a in enumerate(ALGORITHMS)))
    ok = True
    for a in ALGORITHMS:
        s_now, s_old = spread_of_medians(now[a]), spread_of_medians(old[a])
        ok &= s_now <= args.limit
        print(f"{a}: medians {min(now[a]):.3f}–{max(now[a]):.3f} ms, spread {100 * s_now:.0f}% "
              f"({'within' if s_now <= args.limit else 'OVER'} {100 * args.limit:.0f}%); "
              f"old way {min(old[a]):.3f}–{max(old[a]):.3f} ms, spread {100 * s_old:.0f}%")
    print(f"{noisy} of {args.repeats * len(ALGORITHMS)} timings warned as noisy.")
    if args.record:
        LAB_RECORDS.mkdir(parents=True, exist_ok=True)
        out = {"machine": cpu_name(), "date": datetime.date.today().isoformat(),
               "config": cfg.to_dict(), "limit": args.limit, "medians_ms": now,
               "old_way_medians_ms": old, "noisy": noisy, "ok": bool(ok),
               "method": timings[0].method}
        (LAB_RECORDS / "cpu_timing_stability.json").write_text(json.dumps(out, indent=1) + "\n")
    print("OK: the medians agree." if ok else "FAILED: the medians disagree by more than the "
          "limit.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
