"""Lab: time builds of the FP8 forward that differ in compile switches (PINGPONG: whether the
consumers take turns; the tries that were removed, such as HALF_EXP, are in NOTES.md),
checking each against the first-light reference first: python3 lab/fp8_variants.py"""
import sys

import numpy as np

sys.path.insert(0, "lab")
sys.path.insert(0, ".")
from fp8_first_light import check, fp8cfg  # noqa: E402


def with_options(L, core, source=None, **defs):
    """Make L.build compile with the -D values in defs replaced or added (and from `source`,
    a kernel file under kernels/, where given). Where defs set the rings (Q_BUFFERS,
    KV_STAGES), the build's BAR_AREA, Q_AHEAD (unless given) and shared memory follow them,
    counted as the launchers count theirs (engine.model.iomodel.wgmma_parts). Returns the
    original L.build, to put back."""
    from engine.model.iomodel import wgmma_barrier_bytes, wgmma_parts, wgmma_ring
    orig = L.build

    def build(cfg, trace):
        b = orig(cfg, trace)
        wanted, smem = dict(defs), b.smem
        if "Q_BUFFERS" in defs or "KV_STAGES" in defs:
            q0, s0 = wgmma_ring(cfg)
            ring = (int(defs.get("Q_BUFFERS", q0)), int(defs.get("KV_STAGES", s0)))
            wanted["BAR_AREA"] = wgmma_barrier_bytes(*ring)
            wanted.setdefault("Q_AHEAD", int(ring[0] == 2))
            smem = sum(wgmma_parts(cfg, ring).values())
        opts = [o for o in b.options if not any(o.startswith(f"-D{k}=") for k in wanted)]
        opts += [f"-D{k}={v}" for k, v in wanted.items()]
        return core.Build(source or b.source, b.function, tuple(opts), b.threads, smem)
    L.build = build
    return orig


def main():
    import cupy
    from engine.gpu.launchers import core, wgmma_fp8 as L
    from engine.gpu.timing import time_stages
    for pp in (0, 1):
        orig = with_options(L, core, PINGPONG=pp)
        try:
            rng = np.random.default_rng(5)
            ok = all(check(d, c, 300, 1000, 2, t, rng) for d in (64, 128) for c in (False, True) for t in (False, True))
            for d, n in ((128, 8192), (128, 16384), (64, 16384)):
                bh = (32768 // n) * (1024 // d)
                cfg = fp8cfg(batch=1, heads=bh, seq_q=n, seq_k=n, head_dim=d, block_q=128, block_k=128)
                x = [cupy.asarray(rng.standard_normal((bh, n, d), dtype=np.float32)).astype(cupy.float16) for _ in range(3)]
                qz = L.quantize(cfg, *x)
                run, out = L.prepare(cfg, qz, False)
                t = float(np.median(time_stages([("k", run)], 30, 3)[0]))
                print(f"PINGPONG={pp} parity={'ok' if ok else 'FAIL'} d={d} N={n}: "
                      f"{t:.3f} ms {cfg.flops / t / 1e9:.0f} TF/s", flush=True)
        finally:
            L.build = orig


if __name__ == "__main__":
    main()
