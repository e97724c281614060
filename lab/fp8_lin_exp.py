"""Lab: the FP8 forward's exponentials off the special-function unit, one instruction more each.
The FP8 softmax at d = 128, 128 x 192 tiles runs 96 MUFU.EX2 a consumer thread a tile, 768
cycles of its scheduler's special-function unit a warp (8 a warp instruction), more than the
~650 instructions it issues (lab/NOTES.md, "What binds the FP8 steady state"); a cubic on
the FMA pipe cost ~9 instructions an exponential and lost. Here P = 2^x comes from
t = x + 12288 (the FFMA that forms x, its addend changed), clamped at x = -126 (FMNMX), its
bits shifted into the exponent field and biased (one LEA): 2^n (1 + f) with the linear
mantissa's error centred, within 3.1% of 2^x, under half of e4m3's step (12.5%).
The switches are in patches/fp8_lin_exp.diff (`git apply` it onto commit f605092 first):
LAB_EXP=1 drops the exponential (timing only, output wrong), 2 takes one exponential in
EXP_EVERY this way, 3 all of them; with --leave, LAB_LEAVE (timing only) leaves out the row
sums (1) or the O rescale (2) instead.
Run on an H200, 2026-11-29 00:37 and 00:40 UTC (lab/NOTES.md, "What clock each kernel runs
at"): all linear level with the kernel, one in eight 8% slower; without the O rescale 4-6%
faster, without the row sums level.
Errors against float64 for each build (the outliers preset at FP8 per tile + rotation, the
accuracy target's RMSE; normal and rising: relative), then TFLOP/s timed alternately (best of
two medians of 30) at d = 128, non-causal, B·H·N = 32k tokens x 8 heads, beside float16.
The timing is kv_stages.py's since those runs (the same method: alternately, the better of
two medians of 30; its checks print a verdict for each build, which is timed regardless);
the logs show the earlier print format.
Run on a Hopper GPU: python3 lab/fp8_lin_exp.py [--leave]"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from fp8_variants import with_options  # noqa: E402

D, BK = 128, 192
BUILDS = {"kernel": {}, "no exp (timing only)": {"LAB_EXP": 1},
          "lin 1/8": {"LAB_EXP": 2}, "lin 1/4": {"LAB_EXP": 2, "EXP_EVERY": 4},
          "lin 1/2": {"LAB_EXP": 2, "EXP_EVERY": 2}, "lin all": {"LAB_EXP": 3}}
TIMING_ONLY = ("no exp (timing only)",)
if "--leave" in sys.argv:     # the second run: what each piece of the softmax costs now
    BUILDS = {"kernel": {}, "no exp (timing only)": {"LAB_EXP": 1},
              "no row sums (timing only)": {"LAB_LEAVE": 1},
              "no O rescale (timing only)": {"LAB_LEAVE": 2}, "kernel again": {}}
    TIMING_ONLY = tuple(BUILDS)
SEQS = (2048, 8192, 16384)


def errors(name, defs):
    """RMSE on outliers (per tile + rotation), relative error on normal and rising."""
    import engine
    from engine.cpu import precision
    from engine.gpu.launchers import core, wgmma_fp8 as L
    from engine.model.config import AttentionConfig
    orig = with_options(L, core, None, **defs)
    out = {}
    try:
        for inputs, n, heads in (("outliers", 2048, 2), ("normal", 1000, 2), ("rising", 1000, 2)):
            cfg = AttentionConfig(dtype="float8_e4m3", head_dim=D, block_q=128, block_k=BK,
                                  batch=1, heads=heads, seq_q=n, seq_k=n, inputs=inputs,
                                  seed=0, fp8_scaling="tile", fp8_rotation=inputs == "outliers")
            q, k, v = engine.make_inputs(cfg)
            O64, _ = precision.reference(cfg, q, k, v)
            got = engine.run(cfg, q, k, v, backend="cupy", kernel="tensorcore").output
            got = np.asarray(got, np.float64)
            if inputs == "outliers":
                out[inputs] = precision.rmse(got, O64)
            else:
                out[inputs] = float(np.linalg.norm(got - O64) / np.linalg.norm(O64))
    finally:
        L.build = orig
    print(f"{name:<22} RMSE outliers {out['outliers']:.3e}, rel normal {out['normal']:.3e}, "
          f"rel rising {out['rising']:.3e}", flush=True)
    return out


def main():
    """The errors of the builds that compute attention, then kv_stages' checks and timing
    (alternately, the better of two medians of 30), every build timed whatever its check
    says: these builds leave the emulation's algorithm on purpose."""
    import kv_stages
    for name, defs in BUILDS.items():
        if name not in TIMING_ONLY:
            errors(name, defs)
    kv_stages.BUILDS = {"float16": (False, 128, {}),
                        **{name: (True, BK, defs) for name, defs in BUILDS.items()}}
    checked = kv_stages.check
    kv_stages.check = lambda *a: checked(*a) or True
    kv_stages.SEQS = SEQS
    kv_stages.main()


if __name__ == "__main__":
    main()
