"""Lab: where a Hopper forward run's time goes, from clock64 stamps in the kernel
(flash_wgmma.cu's PHASE_CLOCK switch, `patches/phase_clock.diff`): for each consumer of each
persistent block, at six points of each run (run top; first S_ij done; first tile's softmax
done; main loop done; last P V done; output written). Per run: the wait for the first S, the
first tile's softmax, the main loop (per tile), the last P V, the epilogue, and the other
consumer's phase (its stamps minus consumer 0's). Builds: float16 (d = 128, 128 × 128, the
launcher's rings) at N = 1k and 8k, FP8 128 × 192 at 8k; 8 heads, B·H·N = 32k tokens × 8,
non-causal. Each build's output is checked against float64 on 64 rows first, and each is timed
with and without the stamps (median of 30), so their cost shows.
Needs `git apply lab/patches/phase_clock.diff` onto commit 34ede12 (not kept).
Run on a Hopper GPU: python3 lab/phase_clock.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from fp8_variants import with_options  # noqa: E402

D = 128
STAMPS = ("run top", "first S done", "first tile done", "loop done", "last P V done",
          "output written")


def setup(fp8, n, defs):
    import cupy
    from engine.gpu.launchers import core, wgmma, wgmma_fp8
    from engine.model.config import AttentionConfig
    bh = (32768 // n) * 8
    L = wgmma_fp8 if fp8 else wgmma
    rng = np.random.default_rng(5)
    x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32)).astype(cupy.float16)
         for _ in range(3)]
    kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=False, head_dim=D, block_q=128)
    cfg = (AttentionConfig(dtype="float8_e4m3", block_k=192, **kw) if fp8
           else AttentionConfig(dtype="float16", block_k=128, **kw))
    orig = with_options(L, core, None, **defs)
    try:
        b = L.build(cfg, False)
        run, out = (L.prepare(cfg, L.quantize(cfg, *x), False) if fp8
                    else L.prepare(cfg, *x, False))
    finally:
        L.build = orig
    return cfg, x, b, run, out


def check(cfg, x, out):
    import ml_dtypes
    o = out["O"].get()
    o = (o.view(ml_dtypes.bfloat16) if cfg.is_fp8 else o.view(np.float16)).astype(np.float64)
    rows = np.arange(0, cfg.seq_q, cfg.seq_q // 64)
    q, k, v = (a[0].get().astype(np.float64) for a in x)
    s = q[rows] @ k.T / np.sqrt(D)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p @ v) / p.sum(1, keepdims=True)
    o = o.reshape(cfg.bh, cfg.seq_q, D)[0, rows]
    return float(np.linalg.norm(o - ref) / np.linalg.norm(ref))


def main():
    import cupy
    from engine.gpu.timing import time_stages
    from kernels.loader import load_module
    for fp8, n in ((False, 1024), (False, 8192), (True, 8192)):
        name = f"{'FP8 128x192' if fp8 else 'float16 128x128'} N={n}"
        cfg, x, b, run, out = setup(fp8, n, {"PHASE_CLOCK": 1})
        _, _, _, plain, _ = setup(fp8, n, {})
        run()
        cupy.cuda.Device().synchronize()
        err = check(cfg, x, out)
        flops = 4 * cfg.bh * n * n * D
        tf = {}
        for label, r in (("stamps", run), ("plain", plain)):
            ms = min(float(np.median(time_stages([(label, r)], 30, 3)[0])) for _ in range(2))
            tf[label] = flops / ms / 1e9
        ptr = load_module(b.source, b.options).get_global("phase_clock")
        size = 160 * 64 * 2 * 6
        clock = cupy.ndarray((size,), dtype=cupy.uint64, memptr=ptr)
        clock.fill(0)
        run()
        cupy.cuda.Device().synchronize()
        c = clock.get().reshape(160, 64, 2, 6).astype(np.int64)
        used = c[:, :, 0, 0] > 0
        tiles = cfg.Tc
        print(f"\n{name}: rel(float64, 64 rows) {err:.2e}; TFLOP/s plain {tf['plain']:.0f}, "
              f"with stamps {tf['stamps']:.0f}; runs stamped {int(used.sum())}, "
              f"{tiles} key tiles a run", flush=True)
        for wg in (0, 1):
            s = c[:, :, wg, :]
            parts = {"wait for first S": s[..., 1] - s[..., 0],
                     "first tile (softmax)": s[..., 2] - s[..., 1],
                     "main loop, per tile": (s[..., 3] - s[..., 2]) / max(tiles - 1, 1),
                     "last P V (+ next S issued)": s[..., 4] - s[..., 3],
                     "epilogue": s[..., 5] - s[..., 4]}
            nxt = np.roll(s[..., 0], -1, axis=1)
            whole = nxt - s[..., 0]
            ok = used & np.roll(used, -1, axis=1)
            ok[:, -1] = False
            parts["whole run (to the next run's top)"] = whole
            line = ", ".join(f"{k} {np.median(v[ok if 'whole' in k else used]):.0f}"
                             for k, v in parts.items())
            print(f"  consumer {wg} (cycles, medians): {line}", flush=True)
        for k in range(6):
            off = c[:, :, 1, k] - c[:, :, 0, k]
            q = np.percentile(off[used], [10, 50, 90])
            print(f"  consumer 1 minus consumer 0 at '{STAMPS[k]}': p10 {q[0]:.0f}, "
                  f"median {q[1]:.0f}, p90 {q[2]:.0f} cycles", flush=True)
        del run, plain, out, x
        cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
