"""Lab: deeper K_j / V_j rings in the Hopper forward (kernels/hopper/flash_wgmma.cu, KV_STAGES,
Q_BUFFERS): more key tiles in flight give each load more time to arrive. float16 at d = 128
has room for a third stage only with one Q_i buffer (2 × 32 KiB + 3 × 64 KiB is over the
227 KiB block); FP8's tiles are half the bytes, so its 128 × 192 build takes three or four
stages beside two Q_i buffers. Each build is checked first (FP8: lab/fp8_wide_tiles.py's
check against the emulation and float64; float16: lab/overlap_fence.py's against float64),
then timed alternately (engine.gpu.timing.time_stages, median of 30, the better of two rounds)
at d = 128, non-causal, B·H·N = 32k tokens × 8 heads, N = 2k, 8k and 16k.
Run on a Hopper GPU: python3 lab/kv_stages.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
from fp8_wide_tiles import check, fp8_config  # noqa: E402
from fp8_variants import with_options  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128
BUILDS = {   # name -> (FP8, block_k, -D switches[, a kernel source in place of the build's])
    "f16 2 stages": (False, 128, {"KV_STAGES": 2, "Q_BUFFERS": 2}),
    "f16 3 stages, 1 Q": (False, 128, {"KV_STAGES": 3, "Q_BUFFERS": 1}),
    "fp8 192, 2 stages": (True, 192, {"KV_STAGES": 2}),
    "fp8 192, 3 stages": (True, 192, {"KV_STAGES": 3}),
    "fp8 192, 4 stages": (True, 192, {"KV_STAGES": 4}),
}

# The timed sequence lengths, and the checks' shapes: (seq_q, seq_k, input preset), each
# causal and not.
SEQS = (2048, 8192, 16384)
SHAPES = ((300, 1000, "rising"), (1000, 777, "normal"), (129, 191, "normal"))


def use(name):
    """Point the launcher at build `name` (lab/fp8_variants.py's with_options: switches,
    rings and their shared memory); returns (the launcher, the undo)."""
    from engine.gpu.launchers import core, wgmma, wgmma_fp8
    fp8, _, defs, *other = BUILDS[name]
    L = wgmma_fp8 if fp8 else wgmma
    orig = with_options(L, core, other[0] if other else None, **defs)
    return L, lambda: setattr(L, "build", orig)


def best_tflops(runs: dict, flops: float, rounds: int = 2) -> dict:
    """TFLOP/s of each run ({name: run}), timed alternately (engine.gpu.timing.time_stages,
    median of 30), the better of `rounds` rounds."""
    from engine.gpu.timing import time_stages
    tf = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, run in runs.items():
            ms = float(np.median(time_stages([(name, run)], 30, 3)[0]))
            tf[name] = max(tf[name], flops / ms / 1e9)
    return tf


def time_shapes(shapes, make_runs, rng) -> list:
    """For each (N, B·H) of `shapes` (d = 128, non-causal): float16 q, k, v of shape
    (B·H, N, d) drawn from rng, the runs make_runs(kw, x) builds ({name: run}; kw: the
    config's batch, heads, seq_q, seq_k, causal), timed by best_tflops; returns the rows
    (N, B·H, {name: TFLOP/s}) that print_ratios takes."""
    import cupy
    rows = []
    for n, bh in shapes:
        kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, causal=False)
        x = [cupy.asarray(rng.standard_normal((bh, n, D), dtype=np.float32)).astype(cupy.float16)
             for _ in range(3)]
        runs = make_runs(kw, x)
        tf = best_tflops(runs, 4 * bh * n * n * D)
        rows.append((n, bh, tf))
        print(n, bh, {k: round(v, 1) for k, v in tf.items()}, flush=True)
        del runs, x
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def print_ratios(rows, names, title: str) -> None:
    """The table at the end of a timing lab: for each (N, B·H, {name: TFLOP/s}) row, every
    build's TFLOP/s and its ratio to names[0]'s."""
    print(f"\nTFLOP/s, {title}; ratio: over {names[0]!r}")
    for n, bh, tf in rows:
        base = tf.get(names[0]) or float("nan")
        print(f"N = {n:5} (B·H = {bh}): " + ", ".join(
            f"{k} {tf[k]:.0f} ({tf[k] / base:.3f})" for k in names if k in tf))


def main():
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(33)
    shapes = SHAPES
    ok = {}
    for name, (fp8, bk, *_) in BUILDS.items():
        L, undo = use(name)
        try:
            if fp8:
                ok[name] = all(check(bk, nq, nk, c, int(rng.integers(2**31)), inputs)
                               for nq, nk, inputs in shapes for c in (False, True))
            else:
                ok[name] = max(check_f16(L, D, c, rng) for c in (False, True)) < 1e-2
        finally:
            undo()
    print("validated:", ok, flush=True)
    def make_runs(kw, x):
        runs = {}
        for name, (fp8, bk, *_) in BUILDS.items():
            if not ok[name]:
                continue
            L, undo = use(name)
            try:
                if fp8:
                    cfg = fp8_config(bk, **kw)
                    runs[name], _ = L.prepare(cfg, L.quantize(cfg, *x), False)
                else:
                    cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=128, block_k=bk,
                                          **kw)
                    runs[name], _ = L.prepare(cfg, *x, False)
            finally:
                undo()
        return runs
    rows = time_shapes([(n, (32768 // n) * 8) for n in SEQS], make_runs, rng)
    print_ratios(rows, list(BUILDS), f"d = {D}, non-causal, B·H·N = 32k tokens × 8 heads")


if __name__ == "__main__":
    main()
