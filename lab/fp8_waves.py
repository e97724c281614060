"""Lab: what the last, partial wave of items costs the Hopper forward at d = 128, non-causal,
float16 and FP8 (128 × 192) as the launchers build them. The persistent kernel runs one block
an SM, and block b takes items b, b + G, b + 2G, ... (G = the SMs). At the FP8 sweep's shapes
(32k tokens × 8 heads: B·H = 32 at N = 8k, 16 at 16k) there are 2,048 items of 128 query rows,
15.5 waves on 132 SMs, so 64 SMs sit idle for the last item's time: 3% of the launch if every
item costs the same. With B·H = 33 the items fill 16 (8k) or 32 (16k) whole waves. Predicted:
items a second up 3% at B·H = 33 over 32 (8k) and over 16 and 32 (16k), for FP8; float16 less,
where it runs at the power limit (its last wave runs on fewer SMs, so at a higher clock).
What FP8 gains there is what an even share of the work (stream-K, which the FP8 build does not
take) could bring it at the sweep's shapes. Each build is checked first (FP8: the emulation and
float64, lab/fp8_wide_tiles.py; float16: float64), then timed alternately (median of 30, the
better of two rounds). Run on a Hopper GPU: python3 lab/fp8_waves.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from fp8_wide_tiles import check, fp8_config  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128
BK = 192                                    # the FP8 launcher's key tile at d = 128
SHAPES = ((8192, (32, 33)), (16384, (16, 32, 33)))   # N, the B·H values timed


def main():
    import cupy
    from engine.gpu.launchers import wgmma, wgmma_fp8
    from engine.gpu.runtime import live_gpu
    from engine.gpu.timing import time_stages
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(132)
    ok8 = all([check(BK, nq, nk, c, int(rng.integers(2**31)), inputs)
               for nq, nk, inputs in ((300, 1000, "rising"), (1000, 777, "normal"))
               for c in (False, True)])
    err = max(check_f16(wgmma, D, c, rng) for c in (False, True))
    ok16 = err < 1e-2
    print(f"validated: FP8 {ok8}, float16 {ok16} (max relative error {err:.2e})", flush=True)
    if not (ok8 and ok16):
        sys.exit("a build failed its check: nothing timed")
    sms = live_gpu().sms
    rows = []
    for n, bhs in SHAPES:
        for bh in bhs:
            kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=False)
            x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32))
                 .astype(cupy.float16) for _ in range(3)]
            c8 = fp8_config(BK, **kw)
            c16 = AttentionConfig(dtype="float16", head_dim=D, block_q=128, block_k=128, **kw)
            runs = {"f16": wgmma.prepare(c16, *x, False)[0],
                    "fp8": wgmma_fp8.prepare(c8, wgmma_fp8.quantize(c8, *x), False)[0]}
            tf = dict.fromkeys(runs, 0.0)
            for _ in range(2):
                for name, run in runs.items():
                    ms = float(np.median(time_stages([(name, run)], 30, 3)[0]))
                    tf[name] = max(tf[name], c16.flops / ms / 1e9)
            items = c16.Tr * bh
            rows.append((n, bh, items, items / sms, tf["f16"], tf["fp8"]))
            print(rows[-1], flush=True)
            del runs, x
            cupy.get_default_memory_pool().free_all_blocks()
    print(f"\nd = {D}, non-causal, {sms} SMs; TFLOP/s (median of 30, better of 2 rounds)")
    print(f"{'N':>6} {'B·H':>4} {'items':>6} {'waves':>6} {'float16':>8} {'FP8':>8} {'ratio':>6}")
    for n, bh, items, waves, f16, f8 in rows:
        print(f"{n:6} {bh:4} {items:6} {waves:6.2f} {f16:8.1f} {f8:8.1f} {f8 / f16:6.3f}")


if __name__ == "__main__":
    main()
