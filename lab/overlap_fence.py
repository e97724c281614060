"""Lab: what the softmax fence of the Hopper forward brings (kernels/hopper/flash_wgmma.cu,
SOFTMAX_FENCE): each build (float16, FP8) with the fence and without it, checked against a
float64 reference first, then timed alternately shape by shape at B·H·N = 32k tokens × 1024/d
heads. Run on a Hopper GPU: python3 lab/overlap_fence.py [--quick]"""
import sys

import numpy as np

sys.path.insert(0, "lab")
sys.path.insert(0, ".")
from fp8_first_light import check, fp8cfg  # noqa: E402
from fp8_variants import with_options  # noqa: E402


def check_f16(L, d, causal, rng, block_k=128) -> float:
    """Largest |O - O64| / max|O64| of the float16 build on a ragged small shape."""
    import cupy
    from engine.cpu import precision
    from engine.model.config import AttentionConfig
    bh, nq, nk = 2, 300, 1000
    cfg = AttentionConfig(batch=1, heads=bh, seq_q=nq, seq_k=nk, head_dim=d, block_q=128,
                          block_k=block_k, causal=causal, dtype="float16")
    x = [rng.standard_normal((bh, n, d)).astype(np.float16) for n in (nq, nk, nk)]
    out = L.launch(cfg, *[cupy.asarray(a) for a in x], False)
    ref, _ = precision.reference(cfg, *(a[None] for a in x))      # float64, (1, bh, nq, d)
    return float(np.abs(out["O"].get().astype(np.float64) - ref[0]).max() / np.abs(ref).max())


def inputs(cfg, rng):
    import cupy
    x = [cupy.asarray(rng.standard_normal((cfg.bh, cfg.seq_q, cfg.head_dim), dtype=np.float32))
         .astype(cupy.float16) for _ in range(3)]
    return x


def main():
    from engine.gpu.launchers import core, wgmma, wgmma_fp8
    from engine.gpu.timing import time_stages
    from engine.model.config import AttentionConfig
    quick = "--quick" in sys.argv
    shapes = [(n, d, False) for d in (128, 64) for n in ((4096, 16384) if quick else (1024, 4096, 8192, 16384))]
    shapes.append((16384, 128, True))
    rng = np.random.default_rng(7)
    # Validate every build first.
    ok = {}
    for fence in (0, 1):
        orig = with_options(wgmma_fp8, core, SOFTMAX_FENCE=fence)
        try:
            ok[("fp8", fence)] = all(check(d, c, 300, 1000, 2, t, rng)
                                     for d in (64, 128) for c in (False, True) for t in (False, True))
        finally:
            wgmma_fp8.build = orig
        orig = with_options(wgmma, core, SOFTMAX_FENCE=fence)
        try:
            err = max(check_f16(wgmma, d, c, rng) for d in (64, 128) for c in (False, True))
            ok[("f16", fence)] = err < 1e-2     # float16 P and O: a few units of 2^-11
            print(f"float16 SOFTMAX_FENCE={fence}: max relative error {err:.2e}", flush=True)
        finally:
            wgmma.build = orig
    print("validated:", ok, flush=True)
    rows = []
    for n, d, causal in shapes:
        bh = (32768 // n) * (1024 // d)
        for build in ("f16", "fp8"):
            t = {}
            for fence in (0, 1, 0, 1):
                if not ok[(build, fence)]:
                    continue
                L = wgmma_fp8 if build == "fp8" else wgmma
                orig = with_options(L, core, SOFTMAX_FENCE=fence)
                try:
                    kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, head_dim=d, block_q=128,
                              block_k=128, causal=causal)
                    if build == "fp8":
                        cfg = fp8cfg(**kw)
                        qz = L.quantize(cfg, *inputs(cfg, rng))
                        run, _ = L.prepare(cfg, qz, False)
                    else:
                        cfg = AttentionConfig(dtype="float16", **kw)
                        run, _ = L.prepare(cfg, *inputs(cfg, rng), False)
                    ms = float(np.median(time_stages([("k", run)], 30, 3)[0]))
                    t.setdefault(fence, []).append(cfg.flops / ms / 1e9)
                finally:
                    L.build = orig
            line = {"build": build, "N": n, "d": d, "causal": causal,
                    **{f"fence{f}": round(max(v), 1) for f, v in t.items()}}
            rows.append(line)
            print(line, flush=True)
    print(f"\n{'build':5} {'N':>6} {'d':>4} {'causal':6} {'no fence':>9} {'fence':>7} {'gain':>6}")
    for r in rows:
        a, b = r.get("fence0"), r.get("fence1")
        gain = f"{b / a:.3f}" if a and b else "-"
        print(f"{r['build']:5} {r['N']:6} {r['d']:4} {str(r['causal']):6} {a or '-':>9} {b or '-':>7} {gain:>6}")


if __name__ == "__main__":
    main()
