"""Lab: what binds the FP8 forward's steady state (d = 128, 128 × 192 tiles)? A tile's two
products take about 1.0 µs at the measured e4m3 matmul ceiling; the SASS of its main loop
issues about 700 instructions a consumer thread a tile (98 each of FFMA, FADD and MUFU.EX2,
102 FMNMX, 72 FMUL, 48 F2FP), two consumer warps a scheduler, and S_{j+1} cannot start before
tile j's softmax has read S_j. Three sets of builds, each timed alternately beside the float16
kernel at N = 2k, 8k, 16k, 32k tokens × 8 heads, non-causal (lab/kv_stages.py's harness, median
of 30, the better of two rounds):

  --set units   every k-th exponential on the FMA units instead of the special-function unit
                (EXP2_POLY = k, a cubic of 7.5e-5 relative error, common.cuh's exp2_poly), and
                the K_j, V_j scales of a run's first tile loaded before its S is waited for
                (SCALES_AHEAD); checked against the emulation and float64 first
  --set bound   timing only, wrong results, not checked: the row sums' additions dropped
                (LAB_NO_ROWSUM: what a column of ones in V would save) or most of the tile max
                (LAB_NO_MAX)
  --set chains  the row max and sums as c independent chains (SOFTMAX_CHAINS = c); checked
  --set vref    O_i kept in units of the run's largest V scale so far, each P_ij carrying its
                tile's share (folded into the exponent's shift), and O's rescale skipped while
                no row's max and not that scale moved (V_RUNMAX); its errors shown, then timed

The switches are not in the kernel: apply lab/patches/fp8_softmax_variants.diff (the first
three sets; made against commit 7a334c2) or lab/patches/fp8_run_top_v_scale.diff (vref;
against e101f10) to that commit first (git checkout, git apply).
Run on a Hopper GPU: python3 lab/fp8_softmax_issue.py --set S"""
import argparse
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402

SETS = {   # name -> (FP8, block_k, -D switches)
    "units": {
        "f16": (False, 128, {}),
        "fp8": (True, 192, {}),
        "fp8 scales ahead": (True, 192, {"SCALES_AHEAD": 1}),
        **{f"fp8 poly 1/{k}": (True, 192, {"SCALES_AHEAD": 1, "EXP2_POLY": k})
           for k in (8, 4, 3, 2)},
    },
    "bound": {
        "f16": (False, 128, {}),
        "fp8": (True, 192, {}),
        "fp8 no row sums": (True, 192, {"LAB_NO_ROWSUM": 1}),
        "fp8 no tile max": (True, 192, {"LAB_NO_MAX": 1}),
        "fp8 neither": (True, 192, {"LAB_NO_ROWSUM": 1, "LAB_NO_MAX": 1}),
    },
    "vref": {
        "f16": (False, 128, {}),
        "fp8": (True, 192, {}),
        "fp8 run's top V scale": (True, 192, {"V_RUNMAX": 1}),
    },
    "chains": {
        "f16": (False, 128, {}),
        "f16 4 chains": (False, 128, {"SOFTMAX_CHAINS": 4}),
        "fp8": (True, 192, {}),
        **{f"fp8 {c} chains": (True, 192, {"SOFTMAX_CHAINS": c}) for c in (2, 4, 8)},
    },
}


def time_unchecked(builds):
    """The bound set: every build timed, none checked (their results are wrong)."""
    import cupy
    from engine.gpu.timing import time_stages
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(34)
    for n in (2048, 8192, 16384):
        bh = (32768 // n) * 8
        kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=False)
        x = [cupy.asarray(rng.standard_normal((bh, n, 128), dtype=np.float32)).astype(cupy.float16)
             for _ in range(3)]
        runs = {}
        for name, (fp8, bk, _) in builds.items():
            L, undo = kv_stages.use(name)
            try:
                if fp8:
                    cfg = kv_stages.fp8_config(bk, **kw)
                    runs[name], _ = L.prepare(cfg, L.quantize(cfg, *x), False)
                else:
                    cfg = AttentionConfig(dtype="float16", head_dim=128, block_q=128, block_k=bk,
                                          **kw)
                    runs[name], _ = L.prepare(cfg, *x, False)
            finally:
                undo()
        tf = {name: 0.0 for name in runs}
        for _ in range(2):
            for name, run in runs.items():
                ms = float(np.median(time_stages([(name, run)], 30, 3)[0]))
                tf[name] = max(tf[name], 4 * bh * n * n * 128 / ms / 1e9)
        print(f"N = {n:5}: " + ", ".join(f"{k} {v:.0f} ({v / tf['fp8']:.3f})"
                                        for k, v in tf.items()), flush=True)
        del runs, x
        cupy.get_default_memory_pool().free_all_blocks()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), required=True)
    args = ap.parse_args()
    kv_stages.BUILDS = SETS[args.set]
    if args.set == "bound":
        time_unchecked(SETS["bound"])
    elif args.set == "vref":     # its errors shown (the emulation rounds P unshared), then timed
        from fp8_wide_tiles import check
        for name, (fp8, bk, _) in SETS["vref"].items():
            if fp8:
                L, undo = kv_stages.use(name)
                try:
                    for nq, nk, inputs in ((300, 1000, "rising"), (1000, 777, "normal")):
                        for c in (False, True):
                            print(name, end=": ")
                            check(bk, nq, nk, c, 7, inputs)
                finally:
                    undo()
        time_unchecked(SETS["vref"])
    else:
        kv_stages.main()


if __name__ == "__main__":
    main()
