"""Lab: where the Hopper forward's time goes at short sequences (d = 128, N = 1k and 2k,
float16, non-causal), against cuDNN's. Each line is timed at several batch·head counts, so
that the persistent grid's SMs run 1, 2, 4 and 8 items each; a straight line through
time against items per SM splits it into a fixed cost per launch (the intercept: start-up,
the first loads from a flushed L2, the last item's drain) and a cost per item (the slope: its
key tiles and its own fixed cost). The same fit for cuDNN says which of the two the gap is in.
Our builds: the launcher's (persistent, one block per SM), one block per item (--blocks:
PERSISTENT=0), and with --variants builds with other -D switches (e.g. Q_AHEAD=0/Q_AHEAD=1, builds
separated by "/", switches by ","); each checked against float64 first
(lab/overlap_fence.py's check). Timed alternately, engine.gpu.timing.time_stages (L2 flushed,
a hold kernel), median of 30, the better of two rounds.
Run on a Hopper GPU: python3 lab/short_fixed_costs.py [--blocks] [--variants SPEC]"""
import sys

import numpy as np

sys.path[:0] = ["lab", "."]
from fp8_variants import with_options  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128


def main():
    import cupy
    import torch
    from engine.gpu.launchers import wgmma
    from engine.gpu.timing import time_stages
    from engine.model.config import AttentionConfig
    from engine.gpu.runtime import live_gpu
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from engine.gpu.launchers import core
    sms = live_gpu().sms
    rng = np.random.default_rng(11)
    # name -> (PERSISTENT, the -D switches)
    builds = {"ours": (1, {})}
    if "--blocks" in sys.argv:
        builds["ours p0"] = (0, {})
    if "--variants" in sys.argv:       # e.g. --variants Q_AHEAD=0/Q_AHEAD=1,PV_FIRST=0
        spec = sys.argv[sys.argv.index("--variants") + 1]
        builds = {v: (1, dict(kv.split("=") for kv in v.split(","))) for v in spec.split("/")}

    def block_k(name) -> int:
        return int(builds[name][1].get("BLOCK_K", 128))

    def use(name):
        """Set the launcher to build `name` (lab/fp8_variants.py's with_options: switches,
        rings and their shared memory); returns the undo."""
        persistent, defs = builds[name]
        wgmma.PERSISTENT = persistent
        orig = with_options(wgmma, core, **defs)
        return lambda: setattr(wgmma, "build", orig)

    ok = {}
    for name in builds:
        undo = use(name)
        try:
            err = max(check_f16(wgmma, D, c, rng, block_k(name)) for c in (False, True))
        finally:
            undo()
        ok[name] = err < 1e-2
        print(f"{name}: max relative error {err:.2e}", flush=True)
    rows = []
    for n in (1024, 2048):
        tr = n // 128
        for per_sm in ((1, 2) if "--variants" in sys.argv else (1, 2, 4, 8)):
            bh = max(1, per_sm * sms // tr) if per_sm != 2 else 32768 // n   # 2: the sweep's
            cfg = AttentionConfig(batch=1, heads=bh, seq_q=n, seq_k=n, head_dim=D, block_q=128,
                                  block_k=128, dtype="float16")
            x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32)).astype(cupy.float16)
                 for _ in range(3)]
            runs, ours = {}, None
            for name in builds:
                if ok[name]:
                    undo = use(name)
                    try:
                        runs[name], out = wgmma.prepare(cfg.with_(block_k=block_k(name)), *x,
                                                        False)
                    finally:
                        undo()
                    ours = ours or out
            t = [torch.as_tensor(a, device="cuda").view(1, bh, n, D) for a in x]
            keep = {}

            def cudnn():
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    keep["O"] = torch.nn.functional.scaled_dot_product_attention(*t)
            runs["cudnn"] = cudnn
            next(iter(runs.values()))()
            cudnn()
            torch.cuda.synchronize()
            agree = float((keep["O"].float().view(bh, n, D)
                           - torch.as_tensor(ours["O"], device="cuda").float()).abs().max())
            us = {k: 1e9 for k in runs}
            for _ in range(2):
                for name, run in runs.items():
                    us[name] = min(us[name], 1e3 * float(np.median(time_stages([(name, run)], 30, 3)[0])))
            row = {"N": n, "bh": bh, "items_per_sm": bh * tr / sms, "cudnn_vs_ours_max_abs": agree,
                   **{k: round(v, 2) for k, v in us.items()}}
            rows.append(row)
            print(row, flush=True)
            del x, t, keep, runs
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
    print(f"\nd = {D}, float16, non-causal; µs (median of 30, better of 2 rounds); fit: "
          "µs = fixed + per_item · ceil(items / SMs)")
    names = [k for k in rows[0] if k in builds or k == "cudnn"]
    print(f"{'N':>5} {'bh':>4} {'items/SM':>8} " + " ".join(f"{k:>9}" for k in names))
    for r in rows:
        print(f"{r['N']:5} {r['bh']:4} {r['items_per_sm']:8.2f} "
              + " ".join(f"{r[k]:9.2f}" for k in names))
    for n in (1024, 2048):
        sel = [r for r in rows if r["N"] == n]
        rounds = np.array([np.ceil(r["items_per_sm"] - 1e-9) for r in sel])
        for k in names if len(sel) > 2 else []:
            slope, icpt = np.polyfit(rounds, [r[k] for r in sel], 1)
            print(f"N = {n}, {k:8}: fixed {icpt:6.2f} µs, per item {slope:6.2f} µs")


if __name__ == "__main__":
    main()
