"""Lab: the FP8 and float16 forwards under Nsight Compute, to see what binds FP8's steady
state. Three FP8 changes that timing-only builds promised gains for lost when built for real
(2026-11-29: the exponentials on the FMA pipes, a conditional O rescale, the rescale under
the next S; lab/NOTES.md). The counters say which resource is short: issue slots, the
tensor pipe, the special-function unit, or warps waiting on each other.
What it runs: the launchers' float16 and FP8 (128 x 192) forwards at d = 128, N = 8192,
B·H·N = 32k tokens x 8 heads, non-causal: one launch of each to compile and warm, then one
of each to profile (both kernels are named flash_wgmma: --launch-skip 2 --launch-count 2).
Run on a Hopper GPU with Nsight Compute (Firecracker machines), about 2 minutes:
  ncu --clock-control none -k flash_wgmma --launch-skip 2 --launch-count 2 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
      --section WarpStateStats --section InstructionStats --section Occupancy \
      --csv --page details --log-file $OUT/ncu_fp8.csv python3 lab/fp8_profile.py
The stall reasons of the FP8 launch instruction by instruction (PC sampling):
  ncu --clock-control none -k flash_wgmma --launch-skip 3 --launch-count 1 \
      --section SourceCounters --section WarpStateStats --page source --print-source sass \
      --csv --log-file $OUT/ncu_fp8_source.csv python3 lab/fp8_profile.py
  python3 lab/fp8_profile.py --summarize $OUT/ncu_fp8_source.csv   (no GPU: the table by
      reason, by opcode and the 40 instructions with the most samples)
Run on an H200, 2026-11-29 00:49-00:50 UTC (lab/NOTES.md, "What clock each kernel runs at");
logs/h200_2026-11-29_ncu_fp8*.csv and the summary of the sampled run,
logs/h200_2026-11-29_ncu_fp8_source_summary.txt. --block-k 256: the FP8 launch on the
launcher's 128 x 256 tiles (P through shared memory; 2026-11-29 08:55 UTC,
logs/h200_2026-11-29_ncu_fp8_256_source_summary.txt)."""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]


def summarize(path):
    """Stall samples of an `ncu --page source --csv` log: by reason, by opcode, the top 40."""
    import collections
    import csv
    import io
    lines = open(path).read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))

    def num(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0
    reasons = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]
    total = collections.Counter()
    by_op = collections.defaultdict(collections.Counter)
    for r in rows:
        words = r["Source"].split()
        op = (words[1] if words and words[0].startswith("@") else (words or [""])[0])
        for k in reasons:
            total[k] += num(r[k])
            by_op[op.split(".")[0]][k] += num(r[k])
    n = sum(total.values())
    print(f"{int(n)} samples; by reason:")
    for k, v in total.most_common():
        if v:
            print(f"  {k[6:]:<18} {v:8.0f} {100 * v / n:5.1f}%")
    print("by opcode (the three largest reasons):")
    for op, c in sorted(by_op.items(), key=lambda kv: -sum(kv[1].values()))[:14]:
        t = sum(c.values())
        print(f"  {op:<10} {t:7.0f} {100 * t / n:5.1f}%  "
              + ", ".join(f"{k[6:]} {v:.0f}" for k, v in c.most_common(3)))
    print("the 40 instructions with the most samples (address's last 5 digits):")
    for r in sorted(rows, key=lambda r: -sum(num(r[k]) for k in reasons))[:40]:
        c = collections.Counter({k[6:]: num(r[k]) for k in reasons})
        print(f"  {r['Address'][-5:]} {r['Source'][:56]:<56} {sum(c.values()):6.0f}  "
              + ", ".join(f"{k} {v:.0f}" for k, v in c.most_common(2)))


def main():
    if "--summarize" in sys.argv:
        summarize(sys.argv[sys.argv.index("--summarize") + 1])
        return
    import cupy
    from engine.gpu.launchers import wgmma, wgmma_fp8
    from engine.model.config import AttentionConfig
    n, d, bh = 8192, 128, 32
    kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=False, head_dim=d, block_q=128)
    rng = np.random.default_rng(3)
    x = [cupy.asarray(rng.standard_normal((bh, n, d), dtype=np.float32)).astype(cupy.float16)
         for _ in range(3)]
    f16 = AttentionConfig(dtype="float16", block_k=128, **kw)
    bk = int(sys.argv[sys.argv.index("--block-k") + 1]) if "--block-k" in sys.argv else 192
    fp8 = AttentionConfig(dtype="float8_e4m3", block_k=bk, **kw)
    run16, _ = wgmma.prepare(f16, *x, False)
    run8, _ = wgmma_fp8.prepare(fp8, wgmma_fp8.quantize(fp8, *x), False)
    for _ in range(2):       # the first pair compiles and warms; ncu profiles the second
        run16()
        run8()
        cupy.cuda.Device().synchronize()
    print("launched float16 and FP8 twice each", flush=True)


if __name__ == "__main__":
    main()
