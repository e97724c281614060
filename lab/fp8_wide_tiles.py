"""Lab: the Hopper FP8 forward with key tiles of 192 (BLOCK_K = 192, d = 128) beside its
128 × 128 build: wider tiles share the softmax's fixed costs per tile (the row max and its
shuffles, the O rescale, the barriers) among more keys (lab/NOTES.md, "FP8 forward" and "The
softmax fence"; FlashAttention-3 takes 128 × 224 for FP8 at d = 128).

First each FP8 build is checked on small ragged shapes, non-causal and causal, traced and
not: its quantized bytes and scales against the emulation's (engine.cpu.fp8) bit for bit, its
output, lse and trace against the emulation, its output against float64 attention of the
inputs; the float16 build likewise against float64. Then the builds are timed alternately
(engine.gpu.timing.time_stages, median of 30, the better of two rounds) at d = 128, N = 4k,
8k, 16k non-causal and 16k causal, B·H·N = 32k tokens × 8 heads, with the float16 kernel
(128 × 128) for the ratio. Run on a Hopper GPU: python3 lab/fp8_wide_tiles.py [--heads H] [--turns]
(--heads: 32k tokens × H heads at N = 8k and 16k, non-causal; --turns: the FP8 consumers take
turns, PINGPONG=1)"""
import sys

import ml_dtypes
import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from overlap_fence import check_f16  # noqa: E402
# The GPU test's tolerances and helpers, so that the lab checks what the tests check.
from test_gpu_fp8 import (OUT_TOL, RESCALE_RTOL, assert_scores_close, rel,  # noqa: E402
                          sum_tolerance, unpermuted_v8)

D = 128
BLOCK_KS = (128, 192)


def fp8_config(bk, **kw):
    from engine.model.config import AttentionConfig
    return AttentionConfig(dtype="float8_e4m3", head_dim=D, block_q=128, block_k=bk, **kw)


def fp8_case(bk, **kw):
    """(cfg, (q, k, v) as engine.make_inputs gives them, the same on the GPU as (B·H, seq, d)
    CuPy arrays) of an FP8 config (fp8_config's keywords)."""
    import cupy
    import engine
    cfg = fp8_config(bk, **kw)
    qkv = engine.make_inputs(cfg)
    dev = [cupy.asarray(np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim)))
           for x in qkv]
    return cfg, qkv, dev


def scores_close(got, want) -> bool:
    """test_gpu_fp8's score check as a verdict."""
    try:
        assert_scores_close(got, want, "")
    except AssertionError:
        return False
    return True


def float64_verdict(cfg, q, k, v, O, want) -> tuple:
    """The kernel's output O (in want.output's shape) against float64 attention of q, k, v:
    (finite and within the emulation's own error + OUT_TOL, its error, the emulation's)."""
    from engine.cpu import precision
    O64, _ = precision.reference(cfg, q, k, v)
    err64, err64_emulated = rel(O, O64), rel(want.output, O64)
    ok = bool(np.isfinite(O.astype(np.float32)).all()) and err64 <= err64_emulated + OUT_TOL
    return ok, err64, err64_emulated


def trace_fields(tr, want) -> dict:
    """The traced launch's fields against the emulation's trace, a verdict each (test_gpu_fp8's
    tolerances), printing the first values off."""
    fields = {n: scores_close(tr[n].get().reshape(getattr(want, n).shape), getattr(want, n))
              for n in ("running_max", "tile_max")}
    for n, rtol in (("running_sum", sum_tolerance(want.running_max)), ("rescale", RESCALE_RTOL)):
        w = getattr(want, n).astype(np.float64)
        g = tr[n].get().reshape(w.shape).astype(np.float64)
        bad = np.abs(g - w) / np.maximum(np.abs(w), 1e-3) > rtol
        fields[n] = not bad.any()
        if bad.any():
            at = np.argwhere(bad)[:3].tolist()
            print(f"  {n}: {int(bad.sum())} values off, first at (bh, row, tile) {at}: "
                  f"kernel {[float(g[tuple(a)]) for a in at]} emulation "
                  f"{[float(w[tuple(a)]) for a in at]}", flush=True)
    return fields


def check(bk, nq, nk, causal, seed, inputs) -> bool:
    """One FP8 build (block_k = bk) on one shape, traced and not (see the module's docstring)."""
    from engine.cpu import fp8 as emulation
    from engine.gpu.launchers import wgmma_fp8 as L
    cfg, (q, k, v), dev = fp8_case(bk, batch=1, heads=2, seq_q=nq, seq_k=nk, causal=causal,
                                   seed=seed, inputs=inputs)
    got = {t: L.launch(cfg, *dev, t, poison=True) for t in (False, True)}
    want = emulation.emulate(cfg, q, k, v, trace=True)
    wq = emulation.quantize_inputs(cfg, q, k, v)
    qz = got[False]["quantized"]
    v8, padding = unpermuted_v8(cfg, qz.vt8.get())
    bytes_ok = (np.array_equal(qz.q8.get(), wq.q8.reshape(cfg.bh, nq, D).view(np.uint8))
                and np.array_equal(qz.k8.get(), wq.k8.reshape(cfg.bh, nk, D).view(np.uint8))
                and np.array_equal(v8, wq.v8.reshape(cfg.bh, nk, D).view(np.uint8))
                and not padding.any()
                and all(np.array_equal(getattr(qz, n).get(), getattr(wq, n).reshape(cfg.bh, -1))
                        for n in ("q_scale", "k_scale", "v_scale")))
    O = {t: got[t]["O"].get().view(ml_dtypes.bfloat16).reshape(want.output.shape) for t in got}
    same = np.array_equal(O[False].view(np.uint16), O[True].view(np.uint16))
    err = rel(O[False], want.output)
    close64, err64, err64_emulated = float64_verdict(cfg, q, k, v, O[False], want)
    lse_ok = scores_close(got[False]["lse"].get().reshape(want.lse.shape), want.lse)
    fields = trace_fields(got[True], want.trace)
    trace_ok = all(fields.values())
    if not trace_ok:
        print(f"  trace fields: {fields}", flush=True)
    # Timing needs the untraced build right; a traced build that is off is reported apart.
    ok = bytes_ok and same and err <= OUT_TOL and lse_ok and close64
    print(f"FP8 128x{bk} nq={nq} nk={nk} causal={int(causal)} {inputs}: bytes={bytes_ok} "
          f"traced=untraced {same} rel(emulation)={err:.2e} rel(float64)={err64:.2e} "
          f"(emulation's {err64_emulated:.2e}) lse={lse_ok} trace={trace_ok} "
          f"{'OK' if ok else 'FAIL'}", flush=True)
    return ok


def main():
    import cupy
    from engine.gpu.launchers import wgmma, wgmma_fp8
    from engine.gpu.timing import time_stages
    from engine.model.config import AttentionConfig
    if "--turns" in sys.argv:            # the FP8 consumers take turns at d = 128 as well
        wgmma_fp8.PINGPONG = {**wgmma_fp8.PINGPONG, D: 1}
        print("FP8 builds with PINGPONG=1", flush=True)
    rng = np.random.default_rng(192)
    shapes = ((300, 1000, "rising"), (1000, 777, "normal"), (129, 191, "normal"))
    ok = {bk: all([check(bk, nq, nk, c, int(rng.integers(2**31)), inputs)
                   for nq, nk, inputs in shapes for c in (False, True)])
          for bk in BLOCK_KS}
    err = max(check_f16(wgmma, D, c, rng) for c in (False, True))
    ok["f16"] = err < 1e-2
    print(f"float16 128x128: max relative error {err:.2e}", flush=True)
    print("validated:", ok, flush=True)
    rows = []
    # --heads H: B·H·N = 32k tokens × H heads (8 by default; 1 is the recorded parity grid's)
    per = int(sys.argv[sys.argv.index("--heads") + 1]) if "--heads" in sys.argv else 8
    shapes = ((8192, False), (16384, False)) if "--heads" in sys.argv else \
        ((4096, False), (8192, False), (16384, False), (16384, True))
    for n, causal in shapes:
        bh = (32768 // n) * per
        kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=causal)
        x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32)).astype(cupy.float16)
             for _ in range(3)]
        runs, flops = {}, None
        for bk in BLOCK_KS:
            if ok[bk]:
                cfg = fp8_config(bk, **kw)
                qz = wgmma_fp8.quantize(cfg, *x)
                runs[f"fp8 128x{bk}"], _ = wgmma_fp8.prepare(cfg, qz, False)
                flops = cfg.flops
        if ok["f16"]:
            cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=128, block_k=128, **kw)
            runs["f16 128x128"], _ = wgmma.prepare(cfg, *x, False)
            flops = cfg.flops
        tflops = {name: 0.0 for name in runs}
        for _ in range(2):                               # alternately: round after round
            for name, run in runs.items():
                ms = float(np.median(time_stages([(name, run)], 30, 3)[0]))
                tflops[name] = max(tflops[name], flops / ms / 1e9)
        row = {"N": n, "causal": causal, "bh": bh, **{k: round(v, 1) for k, v in tflops.items()}}
        rows.append(row)
        print(row, flush=True)
        del runs, x
        cupy.get_default_memory_pool().free_all_blocks()
    names = ["fp8 128x128", "fp8 128x192", "f16 128x128"]
    print(f"\nTFLOP/s at d = {D}, B·H·N = 32k tokens × {per} heads (median of 30, better of 2 "
          f"rounds)")
    print(f"{'N':>6} {'causal':6} " + " ".join(f"{n:>12}" for n in names)
          + f" {'192/128':>8} {'128/f16':>8} {'192/f16':>8}")
    for r in rows:
        a, b, h = (r.get(n) for n in names)
        ratio = lambda x, y: f"{x / y:.3f}" if x and y else "-"
        print(f"{r['N']:6} {str(r['causal']):6} " + " ".join(f"{r.get(n, '-'):>12}" for n in names)
              + f" {ratio(b, a):>8} {ratio(a, h):>8} {ratio(b, h):>8}")


if __name__ == "__main__":
    main()
