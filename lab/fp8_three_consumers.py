"""Lab: three consumer warpgroups in the Hopper FP8 forward (BLOCK_Q = 192, 192 × 128 tiles),
each doing one product at a time (SERIAL_PRODUCTS: P V, then S, then the softmax), so that the
other two fill the tensor cores while one runs its softmax. Why: the FP8 kernel's warps wait on
their own softmax's dependent steps, and only the other warpgroup can fill those gaps
(lab/NOTES.md, "What binds the FP8 steady state"); a third warpgroup is a third chain. The
cost: 512 threads leave each consumer 160 registers (setmaxnreg), where S, O and P together
with the pipelined products need more (nvcc 13.0: with them, ptxas spills and serialises every
wgmma; one product at a time, no spills and no serialisation, the traced build 120 bytes of
spills). The kernel is a copy, kernels/hopper/flash_wgmma_three.cu, that
`patches/fp8_three_consumers.diff` creates (`git apply` it onto commit 7fc9609 first).
Each build is checked as lab/fp8_wide_tiles.py checks one (the emulation at its block_q and
block_k, bytes, trace, and float64), then timed alternately (median of 30, the better of two
rounds) at d = 128, non-causal, B·H·N = 32k tokens × 8 heads, beside the launchers' float16
and FP8 builds, and the two-consumer 128 × 192 build with the serial products (what the
serial order costs alone).
With --narrow, also three consumers on 192 × 64 tiles with the products pipelined as in the
kernel (their registers fit the 160), and serial.
Run on a Hopper GPU: python3 lab/fp8_three_consumers.py [--waves | --narrow]"""
import sys
from dataclasses import replace

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import fp8_wide_tiles  # noqa: E402
from fp8_variants import with_options  # noqa: E402
from kv_stages import print_ratios, time_shapes  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128
THREE = "hopper/flash_wgmma_three.cu"
BUILDS = {   # name -> (FP8, block_q, block_k, -D switches, kernel source or None)
    "f16 128x128": (False, 128, 128, {}, None),
    "fp8 128x192": (True, 128, 192, {}, None),
    "fp8 192x128 serial, 3 stages": (True, 192, 128, {"SERIAL_PRODUCTS": 1, "KV_STAGES": 3},
                                     THREE),
    "fp8 192x128 serial, 2 stages": (True, 192, 128, {"SERIAL_PRODUCTS": 1, "KV_STAGES": 2},
                                     THREE),
    "fp8 128x192 serial": (True, 128, 192, {"SERIAL_PRODUCTS": 1}, THREE),
    # --narrow: 64-key tiles, where S 32, O 64 and P 8 registers leave room for the pipelined
    # products within the 160
    "fp8 192x64, 3 stages": (True, 192, 64, {"KV_STAGES": 3}, THREE),
    "fp8 192x64, 4 stages": (True, 192, 64, {"KV_STAGES": 4}, THREE),
    "fp8 192x64 serial, 4 stages": (True, 192, 64, {"SERIAL_PRODUCTS": 1, "KV_STAGES": 4},
                                    THREE),
}
NARROW = ("fp8 192x64, 3 stages", "fp8 192x64, 4 stages", "fp8 192x64 serial, 4 stages")
SEQS = (2048, 8192, 16384)
SHAPES = ((300, 1000, "rising"), (1000, 777, "normal"), (129, 191, "normal"))
CONFIG = fp8_wide_tiles.fp8_config          # the checks' config maker, block_q 128


def shapes():
    """(N, B·H) pairs to time: 32k tokens × 8 heads at SEQS, or, with --waves, B·H values that
    fill whole waves of items on 132 SMs for both query tiles (128 and 192 rows) beside the
    sweep's: 132 at 8k (64 and 43 waves), 66 at 16k (64 and 43 waves)."""
    if "--waves" in sys.argv:
        return ((8192, 32), (8192, 132), (16384, 16), (16384, 66))
    return tuple((n, (32768 // n) * 8) for n in SEQS)


def fp8_config(bq, bk, **kw):
    """An FP8 config at block_q = bq (192 is outside the config's sizes: set past its check)."""
    cfg = CONFIG(bk, **kw)
    object.__setattr__(cfg, "block_q", bq)
    return cfg


def use(name):
    """Point the launcher (and the checks' configs) at build `name`; returns (launcher, undo)."""
    from engine.gpu.launchers import core, wgmma, wgmma_fp8
    fp8, bq, bk, defs, source = BUILDS[name]
    L = wgmma_fp8 if fp8 else wgmma
    orig = with_options(L, core, source, **defs)
    orig_config, orig_takes = fp8_wide_tiles.fp8_config, wgmma_fp8.check_takes
    orig_quantize = wgmma_fp8.quantize_build
    if fp8 and bq != 128:
        fp8_wide_tiles.fp8_config = lambda k, **kw: fp8_config(bq, k, **kw)
        wgmma_fp8.check_takes = lambda cfg: None       # the catalog knows no block_q 192
        # the quantize kernel, compiled with the build's -D values, from the copy too
        wgmma_fp8.quantize_build = lambda cfg: replace(orig_quantize(cfg), source=source)

    def undo():
        L.build = orig
        fp8_wide_tiles.fp8_config, wgmma_fp8.check_takes = orig_config, orig_takes
        wgmma_fp8.quantize_build = orig_quantize
    return L, undo


def main():
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(192)
    if "--waves" in sys.argv:               # the launchers' builds and the three consumers'
        for name in ("fp8 192x128 serial, 2 stages", "fp8 128x192 serial", *NARROW):
            del BUILDS[name]
    elif "--narrow" in sys.argv:            # those and the 64-key tiles
        for name in ("fp8 192x128 serial, 2 stages", "fp8 128x192 serial"):
            del BUILDS[name]
    else:
        for name in NARROW:
            del BUILDS[name]
    ok = {}
    for name, (fp8, bq, bk, *_) in BUILDS.items():
        L, undo = use(name)
        try:
            if fp8:
                ok[name] = all([fp8_wide_tiles.check(bk, nq, nk, c, int(rng.integers(2**31)), x)
                                for nq, nk, x in SHAPES for c in (False, True)])
            else:
                ok[name] = max(check_f16(L, D, c, rng) for c in (False, True)) < 1e-2
        finally:
            undo()
        print(f"{name}: {'OK' if ok[name] else 'FAILED its check'}", flush=True)
    print("validated:", ok, flush=True)
    def make_runs(kw, x):
        runs = {}
        for name, (fp8, bq, bk, *_) in BUILDS.items():
            if not ok[name]:
                continue
            L, undo = use(name)
            try:
                if fp8:
                    cfg = fp8_config(bq, bk, **kw)
                    runs[name], _ = L.prepare(cfg, L.quantize(cfg, *x), False)
                else:
                    cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=bq, block_k=bk,
                                          **kw)
                    runs[name], _ = L.prepare(cfg, *x, False)
            finally:
                undo()
        return runs
    rows = time_shapes(shapes(), make_runs, rng)
    print_ratios(rows, list(BUILDS), f"d = {D}, non-causal")


if __name__ == "__main__":
    main()
