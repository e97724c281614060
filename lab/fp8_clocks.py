"""Lab: what clock does each kernel run at, and is it the power limit that sets it?
The FP8 forward at d = 128 sits at 66% of the measured e4m3 matmul ceiling where the float16
kernel sits at 83% of its own (lab/NOTES.md, "What binds the FP8 steady state"), and a build
whose SASS was unchanged ran 5-7% slower on data that left fewer zero bytes in P
("FP8: P from the running max"): a hint that power, not instructions, may set FP8's pace.
This samples nvidia-smi every 20 ms (SM clock, power, the clock-event reasons) while each
workload runs for a few seconds, twice: under the project's timing method
(engine.gpu.timing.time_stages: L2 flush and a GPU wait before every repetition) and back to
back. Workloads: the launchers' float16 and FP8 (128 x 192) forwards at d = 128, N = 8192,
B·H·N = 32k tokens x 8 heads, non-causal, each checked first (lab/kv_stages.py's checks); the
FP8 forward again with Q and K all zero (the same instructions, every P one byte value); the
bfloat16 and e4m3 matmuls of benchmarks/matmul_ceiling.py at 8192. Reads the card's settings
only. Run on a Hopper GPU: python3 lab/fp8_clocks.py"""
import subprocess
import sys
import threading
import time

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402
from fp8_wide_tiles import check, fp8_config  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

FIELDS = ("clocks.sm", "clocks.max.sm", "power.draw.instant", "power.draw",
          "enforced.power.limit", "temperature.gpu", "clocks_event_reasons.sw_power_cap",
          "clocks_event_reasons.hw_slowdown", "clocks_event_reasons.sw_thermal_slowdown",
          "clocks_event_reasons.hw_power_brake_slowdown")
N, D, SECONDS = 8192, 128, 3.0


def fields_supported():
    ok = []
    for f in FIELDS:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={f}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            ok.append(f)
            print(f"  {f}: {r.stdout.strip()}", flush=True)
        else:
            print(f"  {f}: not supported ({r.stdout.strip() or r.stderr.strip()})", flush=True)
    return ok


class Sampler:
    """nvidia-smi's readings every 20 ms, each with the host's time of arrival."""

    def __init__(self, fields):
        self.fields, self.rows = fields, []
        self.p = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
             "-lms", "20"], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.rows.append((time.time(), [x.strip() for x in line.split(",")]))

    def window(self, t0, t1):
        return [r for t, r in self.rows if t0 <= t <= t1]

    def stop(self):
        self.p.terminate()


def num(x):
    try:
        return float(x)
    except ValueError:
        return float("nan")


def summary(fields, rows):
    """Median SM clock and power, highest power, share of samples with each reason active."""
    col = {f: [r[i] for r in rows] for i, f in enumerate(fields)}
    out = {"samples": len(rows)}
    for f in ("clocks.sm", "power.draw.instant", "power.draw", "temperature.gpu"):
        if f in col:
            v = np.array([num(x) for x in col[f]])
            out[f] = (float(np.nanmedian(v)), float(np.nanmin(v)), float(np.nanmax(v)))
    for f in fields:
        if f.startswith("clocks_event_reasons."):
            out[f.split(".")[1]] = float(np.mean([x == "Active" for x in col[f]]))
    return out


def workloads(rng):
    """name -> (enqueue one run, FLOPs a run); each attention build checked first."""
    import cupy
    from benchmarks.matmul_ceiling import products
    from engine.gpu.launchers import wgmma, wgmma_fp8
    from engine.model.config import AttentionConfig
    ok = {"f16": max(check_f16(wgmma, D, c, rng) for c in (False, True)) < 1e-2,
          "fp8 192": all(check(192, nq, nk, c, int(rng.integers(2**31)), inputs)
                         for nq, nk, inputs in kv_stages.SHAPES for c in (False, True))}
    print("validated:", ok, flush=True)
    bh = (32768 // N) * 8
    kw = dict(batch=1, heads=bh, seq_q=N, seq_k=N, causal=False)
    x = [cupy.asarray(rng.standard_normal((bh, N, D), dtype=np.float32)).astype(cupy.float16)
         for _ in range(3)]
    zeros = cupy.zeros_like(x[0])
    out, attn = {}, 4 * bh * N * N * D
    if ok["f16"]:
        cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=128, block_k=128, **kw)
        out["f16 attention"] = (wgmma.prepare(cfg, *x, False)[0], attn)
    if ok["fp8 192"]:
        cfg = fp8_config(192, **kw)
        q8 = wgmma_fp8.quantize(cfg, *x)
        out["fp8 attention"] = (wgmma_fp8.prepare(cfg, q8, False)[0], attn)
        zeros8 = wgmma_fp8.quantize(cfg, zeros, zeros, x[2])
        out["fp8 attention, Q K zero"] = (wgmma_fp8.prepare(cfg, zeros8, False)[0], attn)
    size = 8192
    mm = products(size)
    out["bf16 matmul"] = (mm["bfloat16"], 2 * size**3)
    out["e4m3 matmul"] = (mm["float8_e4m3"], 2 * size**3)
    return out


def run_for(fn, flops, mode):
    """Run `fn` for SECONDS; TFLOP/s over the run (the method's medians, or back to back)."""
    import cupy
    from engine.gpu.timing import time_stages
    t_end, rates = time.time() + SECONDS, []
    while time.time() < t_end:
        if mode == "method":
            ms = float(np.median(time_stages([("x", fn)], 30, 1)[0]))
        else:
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record()
            for _ in range(20):
                fn()
            e1.record()
            e1.synchronize()
            ms = cupy.cuda.get_elapsed_time(e0, e1) / 20
        rates.append(flops / ms / 1e9)
    return float(np.median(rates))


def sampled(work: dict, fields, modes=("method", "back to back"), rounds: int = 2) -> list:
    """Each workload (name -> (enqueue one run, FLOPs a run)) run for SECONDS in each mode,
    `rounds` times, under nvidia-smi's readings: [(round, name, mode, TFLOP/s, summary)]."""
    import cupy
    for fn, _ in work.values():       # warm: compiled and loaded before the clocks are read
        fn()
    cupy.cuda.Device().synchronize()
    sampler = Sampler(fields)
    time.sleep(1.0)
    rows = []
    try:
        for rnd in range(rounds):
            for name, (fn, flops) in work.items():
                for mode in modes:
                    t0 = time.time()
                    tf = run_for(fn, flops, mode)
                    t1 = time.time()
                    s = summary(fields, sampler.window(t0 + 0.5, t1))
                    rows.append((rnd, name, mode, tf, s))
                    print(rnd, name, mode, round(tf, 1), s, flush=True)
                    time.sleep(1.0)
            idle = summary(fields, sampler.window(time.time() - 0.8, time.time()))
            print("idle:", idle, flush=True)
    finally:
        sampler.stop()
    return rows


def main():
    print("nvidia-smi fields:", flush=True)
    fields = fields_supported()
    rng = np.random.default_rng(7)
    rows = sampled(workloads(rng), fields)
    print("\nround, workload, mode: TFLOP/s | SM MHz median (min-max) | W median (max) | "
          "power cap active | TFLOP/s per GHz")
    for rnd, name, mode, tf, s in rows:
        print(f"{rnd} {name:<26} {mode:<13} {readings(tf, s)}")


def readings(tf, s) -> str:
    """A row's TFLOP/s and its window's readings: SM MHz median (min-max) | W median (max) |
    share of samples with the power cap active | TFLOP/s per GHz."""
    mhz = s.get("clocks.sm", (float("nan"),) * 3)
    w = s.get("power.draw.instant") or s.get("power.draw") or (float("nan"),) * 3
    return (f"{tf:7.1f} | {mhz[0]:5.0f} ({mhz[1]:.0f}-{mhz[2]:.0f}) | {w[0]:4.0f} ({w[2]:.0f}) | "
            f"{s.get('sw_power_cap', float('nan')):.2f} | {tf / mhz[0] * 1e3:6.1f}")


if __name__ == "__main__":
    main()
