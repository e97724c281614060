"""Lab: the width of the FP8 forward's first key tile (flash_wgmma.cu, FIRST_KEYS) with the
key tiles visited last first. For each N, the builds FIRST_KEYS = 192 (a full first tile,
masked) and each narrower width that holds the ragged last tile (64 and/or 128) run on the
same inputs; their outputs are compared with each other (the products are the same, so they
should agree to the last bit or nearly) and with float64 on a sample of rows, then they are
timed alternately (median of 30, the better of two rounds), d = 128, non-causal,
B·H·N = 32k tokens × 8 heads.
Needs `git apply lab/patches/fp8_keys_last_first.diff` onto commit 94576de (not kept).
Run on a Hopper GPU: python3 lab/fp8_first_width.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from fp8_variants import with_options  # noqa: E402
from fp8_wide_tiles import fp8_config  # noqa: E402

D = 128


def main():
    import cupy
    import ml_dtypes
    from engine.gpu.launchers import core, wgmma_fp8 as L
    from engine.gpu.timing import time_stages
    rng = np.random.default_rng(7)
    for n in (int(a) for a in (sys.argv[1:] or ["4096", "8192", "16384"])):
        bh = (32768 // n) * 8
        cfg = fp8_config(192, batch=1, heads=bh, seq_q=n, seq_k=n, causal=False)
        last = n - (cfg.Tc - 1) * 192
        widths = [w for w in (64, 128) if last <= w] + [192]
        x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32)).astype(cupy.float16)
             for _ in range(3)]
        qz = L.quantize(cfg, *x)
        runs, outs = {}, {}
        for w in widths:
            orig = with_options(L, core, None, FIRST_KEYS=w)
            try:
                run, out = L.prepare(cfg, qz, False)
            finally:
                L.build = orig
            run()
            cupy.cuda.Device().synchronize()
            runs[w], outs[w] = run, out["O"].get().view(ml_dtypes.bfloat16).astype(np.float32)
        # float64 on 64 rows of the first batch·head, from the quantized operands' values
        rows = np.arange(0, n, n // 64)
        xs = [a[0].get().astype(np.float64) for a in x]
        s = xs[0][rows] @ xs[1].T / np.sqrt(D)
        p = np.exp(s - s.max(1, keepdims=True))
        ref = (p @ xs[2]) / p.sum(1, keepdims=True)
        for w in widths:
            o = outs[w]
            same = np.array_equal(o, outs[192])
            diff = float(np.abs(o - outs[192]).max())
            err = float(np.linalg.norm(o[0, rows] - ref) / np.linalg.norm(ref))
            print(f"N={n} FIRST_KEYS={w}: finite={np.isfinite(o).all()} same as 192={same} "
                  f"max diff {diff:.3g} rel(float64, 64 rows)={err:.3e}", flush=True)
        flops = 4 * bh * n * n * D
        tf = {w: 0.0 for w in widths}
        for _ in range(2):
            for w, run in runs.items():
                ms = float(np.median(time_stages([(str(w), run)], 30, 3)[0]))
                tf[w] = max(tf[w], flops / ms / 1e9)
        print(f"N={n} (B·H={bh}, last tile {last} keys) TFLOP/s: "
              + ", ".join(f"FIRST_KEYS={w} {tf[w]:.0f}" for w in widths), flush=True)
        del runs, outs, x, qz
        cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
