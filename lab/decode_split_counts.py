"""Lab: split counts at batch 1 that are not powers of two. The auto rule
(engine.model.decode_config.auto_splits) takes the largest power of two with at most two
blocks an SM: on the H200's 132 SMs with 8 KV heads, 32 splits, 256 blocks, so 8 SMs hold
one block and 124 hold two. 33 splits give 264 blocks, two on every SM, each split 3% shorter
(993 keys against 1,024 at 32k). At batch 1 the kernel ran 0.982-0.992x SDPA at 32k-64k in
the recorded sweep (decode_h200_2026-11-28.json), the only cells under 1. Batch 2-8 keep
their counts under either rule (16, 8, 4 are already the largest with at most two blocks an
SM). Prediction: 33 up to 2-3% faster than 32 where the tail binds (32k), level at 128k; 24-31
slower (fewer blocks in flight), 48 and 64 slower (a third block on some SMs, more merging).

Each count is checked first: the kernel's output at that count against float64 on a batch-1
step of 8k keys (test_gpu_decode's tolerance). Then, at batch 1, 32k, 64k and 128k keys
(heads 32, kv_heads 8, d 128, float16, contiguous), every count and SDPA are timed alternately
(median of 30, the better of two rounds, L2 flushed, engine.gpu.decode_bench).
Run on an H200, 2026-11-29 03:57 UTC (lab/NOTES.md, "Decoding: split counts that are not
powers of two"): wrong prediction; 32 the fastest at every length, 33 2-4% slower. The rule
stays.
Run on a Hopper GPU: python3 lab/decode_split_counts.py"""
import sys

import numpy as np

sys.path[:0] = ["tests", "."]

COUNTS = (24, 28, 31, 32, 33, 40, 48)


def check(count: int) -> float:
    """Relative error of the kernel at `count` splits against float64, over its tolerance."""
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    from engine.model.decode_config import DecodeConfig
    from engine.gpu.decode_bench import block_table
    from reference import decode64, rel_err
    from test_gpu_decode import OUT_TOL, contiguous
    cfg = DecodeConfig(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=8192 + 77, head_dim=128,
                       dtype="float16")
    q, k, v = make_decode_inputs(cfg)
    Q, K, V, T = device_inputs(cfg, q, k, v, block_table(cfg))
    run, out = launcher.prepare(cfg, Q, K, V, T, count, trace=False)
    run()
    got = out["O"].get().reshape(np.asarray(q).shape)
    want, _, _ = decode64(q, *contiguous(cfg, k, v))
    return rel_err(got, want) / OUT_TOL[cfg.dtype]


def main():
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_bench import time_flash_decode, time_sdpa
    from engine.gpu.runtime import live_gpu
    from engine.gpu.torch_reference import release_memory
    from engine.model.decode_config import DecodeConfig, auto_splits
    from engine.model.iomodel import decode_kv_bytes
    errs = {c: check(c) for c in COUNTS}
    print("error / tolerance:", {c: round(e, 3) for c, e in errs.items()}, flush=True)
    if max(errs.values()) >= 1:
        raise SystemExit("a count failed its check: nothing is timed")
    sms = live_gpu().sms
    names = [str(c) for c in COUNTS] + ["SDPA"]
    print(f"SMs {sms}; auto at batch 1: {auto_splits(1, 8, 32768, sms)}")
    print(f"{'seq_k':>6} | " + " ".join(f"{n:>7}" for n in names) + " µs | best, /SDPA, TB/s")
    for n in (32768, 65536, 131072):
        cfg = DecodeConfig(batch=1, heads=32, kv_heads=8, seq_q=1, seq_k=n, head_dim=128,
                           dtype="float16")
        release_memory()
        inputs = make_decode_inputs(cfg)
        best = {}
        for _ in range(2):
            for c in COUNTS:
                t = float(np.median(time_flash_decode(cfg, c, inputs, 30, 3)))
                best[str(c)] = min(best.get(str(c), 1e9), t)
            t = float(np.median(time_sdpa(cfg, inputs, 30, 3)))
            best["SDPA"] = min(best.get("SDPA", 1e9), t)
        top = min((best[str(c)], c) for c in COUNTS)
        rate = decode_kv_bytes(cfg) / (top[0] * 1e-3) / 1e12
        print(f"{n:>6} | " + " ".join(f"{best[k] * 1e3:7.1f}" for k in names)
              + f" | {top[1]}, {best['SDPA'] / top[0]:.3f}, {rate:.2f}", flush=True)


if __name__ == "__main__":
    main()
