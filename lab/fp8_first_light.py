"""First light of the FP8 wgmma build on a Hopper GPU (a lab script, not the product): the
quantized bytes against NumPy's rounding of the same float32 products, the output and trace
against a float64 reference of the same tiled algorithm on the dequantized operands, then a
few timings beside the 16-bit kernel. Run: python3 lab/fp8_first_light.py [--time]"""
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, ".")
from engine.model.config import AttentionConfig  # noqa: E402

E4 = ml_dtypes.float8_e4m3fn
LOG2E = 1.4426950408889634


def fp8cfg(**kw):
    try:
        return AttentionConfig(dtype="float8_e4m3", **kw)
    except ValueError:
        c = AttentionConfig(dtype="bfloat16", **kw)
        object.__setattr__(c, "dtype", "float8_e4m3")
        return c


def perm16():
    s = np.arange(16)
    return 2 * (s >> 2) + (s & 1) + 8 * ((s >> 1) & 1)


def np_quant(x32, T):
    bh, n, d = x32.shape
    tiles = -(-n // T)
    out = np.empty(x32.shape, E4)
    sc = np.empty((bh, tiles), np.float32)
    for b in range(bh):
        for t in range(tiles):
            blk = x32[b, t * T:(t + 1) * T]
            am = np.float32(np.abs(blk).max())
            s, inv = (np.float32(am / np.float32(448)), np.float32(np.float32(448) / am)) if am else (np.float32(1), np.float32(1))
            out[b, t * T:(t + 1) * T] = np.clip(blk * inv, -448, 448).astype(E4)
            sc[b, t] = s
    return out, sc


def ref_tiled(q8, k8, v8, qs, ks, vs, scale, causal, Br, Bc):
    """Float64 of the kernel's algorithm (P cast to e4m3 against the running max)."""
    bh, nq, d = q8.shape
    nk = k8.shape[1]
    Tc = -(-nk // Bc)
    O = np.zeros((bh, nq, d)); lse = np.zeros((bh, nq))
    rm = np.zeros((bh, nq, Tc)); rs = np.zeros((bh, nq, Tc)); ra = np.zeros((bh, nq, Tc)); tm = np.zeros((bh, nq, Tc))
    for b in range(bh):
        q = q8[b].astype(np.float64); k = k8[b].astype(np.float64); v = v8[b].astype(np.float64)
        rows = np.arange(nq)
        f_q = np.repeat(qs[b], Br)[:nq]
        m = np.full(nq, -np.inf); l = np.zeros(nq); acc = np.zeros((nq, d))
        for j in range(Tc):
            c0, c1 = j * Bc, min(nk, (j + 1) * Bc)
            s = q @ k[c0:c1].T
            if causal:
                s = np.where(np.arange(c0, c1)[None, :] > rows[:, None], -np.inf, s)
            f = scale * LOG2E * f_q * ks[b, j]
            t2 = s.max(1) * f
            mn = np.maximum(m, t2)
            a = np.where(mn == m, 1.0, np.exp2(m - mn))
            p = np.exp2(s * f[:, None] - np.where(np.isinf(mn), 0, mn)[:, None])
            l = a * l + p.sum(1)
            p8 = p.astype(np.float32).astype(E4).astype(np.float64)
            acc = acc * a[:, None] + (p8 @ v[c0:c1]) * vs[b, j]
            m = mn
            rm[b, :, j] = m / LOG2E; rs[b, :, j] = l; ra[b, :, j] = np.where(j == 0, 0, a); tm[b, :, j] = t2 / LOG2E
        O[b] = acc / l[:, None]; lse[b] = m / LOG2E + np.log(l)
    return O, lse, dict(running_max=rm, running_sum=rs, rescale=ra, tile_max=tm)


def check(d, causal, nq, nk, bh, trace, rng):
    import cupy
    from engine.gpu.launchers import wgmma_fp8 as L
    cfg = fp8cfg(batch=1, heads=bh, seq_q=nq, seq_k=nk, head_dim=d, block_q=128, block_k=128,
                 causal=causal)
    x = [rng.standard_normal((bh, n, d)).astype(np.float32) * sc for n, sc in ((nq, 1.5), (nk, 1.0), (nk, 2.0))]
    x16 = [a.astype(ml_dtypes.bfloat16) for a in x]
    dev = [cupy.asarray(a.view(np.uint16)) for a in x16]
    out = L.launch(cfg, *dev, trace, poison=True)
    qz = out["quantized"]
    x32 = [a.astype(np.float32) for a in x16]
    q8, qs = np_quant(x32[0], 128); k8, ks = np_quant(x32[1], 128); v8, vs = np_quant(x32[2], 128)
    g_q8 = qz.q8.get().view(E4); g_k8 = qz.k8.get().view(E4)
    vt = qz.vt8.get().view(E4)                   # (bh, d, cols), keys permuted within 16
    cols = vt.shape[2]
    key = (np.arange(cols) & ~15) + perm16()[np.arange(cols) & 15]
    g_v8 = np.zeros((bh, cols, d), E4)
    g_v8[:, key, :] = np.transpose(vt, (0, 2, 1))
    bytes_ok = (np.array_equal(g_q8.view(np.uint8), q8.view(np.uint8))
                and np.array_equal(g_k8.view(np.uint8), k8.view(np.uint8))
                and np.array_equal(g_v8[:, :nk].view(np.uint8), v8.view(np.uint8))
                and not g_v8[:, nk:].view(np.uint8).any()
                and np.array_equal(qz.q_scale.get(), qs) and np.array_equal(qz.k_scale.get(), ks)
                and np.array_equal(qz.v_scale.get(), vs))
    O = out["O"].get().view(ml_dtypes.bfloat16).astype(np.float64)
    lse = out["lse"].get()
    Oref, lref, tref = ref_tiled(q8, k8, v8, qs, ks, vs, cfg.softmax_scale, causal, 128, 128)
    rel = np.linalg.norm(O - Oref) / np.linalg.norm(Oref)
    # against float64 attention of the original bf16 inputs
    s = np.einsum("bqd,bkd->bqk", x32[0].astype(np.float64), x32[1].astype(np.float64)) * cfg.softmax_scale
    if causal:
        s = np.where(np.arange(nk)[None, None, :] > np.arange(nq)[None, :, None], -np.inf, s)
    p = np.exp(s - s.max(2, keepdims=True)); p /= p.sum(2, keepdims=True)
    Otrue = p @ x32[2].astype(np.float64)
    rel_true = np.linalg.norm(O - Otrue) / np.linalg.norm(Otrue)
    lse_err = np.abs(lse - lref).max()
    tr_err = {}
    if trace:
        for k in ("running_max", "running_sum", "rescale", "tile_max"):
            g = out[k].get().astype(np.float64); r = tref[k]
            fin = np.isfinite(r)
            tr_err[k] = float(np.max(np.abs(g[fin] - r[fin]) / np.maximum(1, np.abs(r[fin])))) if fin.any() else 0.0
            tr_err[k + "_inf"] = bool(np.array_equal(np.isfinite(g), fin))
    ok = bytes_ok and rel < 1e-2 and lse_err < 5e-3 and np.isfinite(O).all() and all(
        (v < 1e-2 if isinstance(v, float) else v) for v in tr_err.values())
    print(f"d={d} causal={int(causal)} nq={nq} nk={nk} bh={bh} trace={int(trace)}: bytes={bytes_ok} "
          f"rel(kernel algo)={rel:.2e} rel(true)={rel_true:.2e} lse={lse_err:.1e} trace={tr_err} "
          f"sat={qz.saturated.get().tolist()} {'OK' if ok else 'FAIL'}", flush=True)
    return ok


def timings():
    import cupy
    import engine
    from engine.gpu.launchers import wgmma_fp8 as L
    from engine.gpu.timing import time_stages
    rows = []
    for d in (128, 64):
        for causal in (False, True):
            for n in (1024, 4096, 8192, 16384):
                bh = (32768 // n) * (1024 // d)
                kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, head_dim=d, block_q=128,
                          block_k=128, causal=causal)
                cfg = fp8cfg(**kw)
                rng = np.random.default_rng(0)
                x = [cupy.asarray(rng.standard_normal((bh, n, d), dtype=np.float32)).astype(cupy.float16) for _ in range(3)]
                qz = L.quantize(cfg, *x)
                run, out = L.prepare(cfg, qz, False)
                t8 = float(np.median(time_stages([("k", run)], 30, 3)[0]))
                qt = float(np.median(time_stages([("q", lambda: L.quantize(cfg, *x))], 10, 2)[0]))
                c16 = AttentionConfig(dtype="float16", block_k=128 if d == 64 else 128, **{k: v for k, v in kw.items() if k != "block_k"})
                t16 = engine.benchmark(c16, backend="cupy", kernel="tensorcore", reps=30).median_ms
                fl = cfg.flops
                rows.append((d, causal, n, bh, t16, t8, fl / t16 / 1e9, fl / t8 / 1e9, t16 / t8, qt))
                print(f"d={d} causal={int(causal)} N={n} bh={bh}: fp16 {t16:.3f} ms ({fl/t16/1e9:.0f} TF/s)  fp8 {t8:.3f} ms ({fl/t8/1e9:.0f} TF/s)  x{t16/t8:.2f}  quantize {qt:.3f} ms", flush=True)
    return rows


if __name__ == "__main__":
    rng = np.random.default_rng(1)
    t0 = time.time()
    results = []
    for d in (128, 64):
        for causal in (False, True):
            for (nq, nk) in ((256, 256), (300, 1000), (1000, 777)):
                for trace in (False, True):
                    try:
                        results.append(check(d, causal, nq, nk, 3, trace, rng))
                    except Exception as exc:  # keep going: one report for the whole grid
                        print(f"d={d} causal={causal} nq={nq} nk={nk} trace={trace}: ERROR {type(exc).__name__}: {exc}", flush=True)
                        results.append(False)
    print(f"parity: {sum(results)}/{len(results)} passed in {time.time() - t0:.0f} s", flush=True)
    if "--time" in sys.argv and all(results):
        timings()
