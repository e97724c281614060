"""Lab: where a Hopper backward tile's time goes, from clock stamps in its consumers' loop.

`patches/backward_phase_clock.diff` (apply it onto commit 44ff332) adds flash_backward_wgmma.cu's
PHASE_CLOCK switch: thread 0 of each consumer warpgroup adds the clock cycles between the
stamps of its loop into a device array (summed over tiles and blocks; PHASES names them).
`patches/backward_dq_first_red_v4.diff` (onto c310b26) is the same instrument on the kernel
before dQ's accumulator went to tile order, with the two switches timed first: DQ_FIRST
(dQ_i's product before dK_j's) and RED_V4 (dQ's row-order reductions as 16-byte ones, lanes
trading a pair of columns); BUILDS then named those switches.
Every build is first checked against float64 gradients on ragged shapes (its head_dim,
causal and not, the wgmma build's tiles, both dtypes); then each is timed the sweep's way
(backward alone, median of 20, L2 flushed; B = 32768 / N, H = 1024 / d, float16), alternately,
best of two rounds, with cuDNN's backward in the same run. Last, the stamped builds once
more, to read the phases per tile at N = 8192.
Run on a Hopper GPU: python3 lab/backward_phases.py [N ...]"""
import itertools
import sys

import numpy as np

sys.path[:0] = ["tests", "."]

PHASES = ("wait Q_i, dO_i (and loop)", "issue S, dP", "wait S", "P; issue dV", "wait dP",
          "dS", "store dS", "consumers' barrier", "issue dQ, dK; wait dQ", "dQ_i out",
          "wait dK", "before the loop")
# Builds per head_dim: -D values over the launcher's (DQ_WRITER: 1 at 128, 0 at 64). The
# module setting BUILDS is what main() checks, times and stamps.
BUILDS = {64: {"now": {}, "staged": {"DQ_WRITER": 1}},
          128: {"now": {}, "red": {"DQ_WRITER": 0}}}
STAMPS = True        # read the phases last (needs patches/backward_phase_clock.diff)
DTYPES = ("float16",)  # the dtypes main() times (check() covers float16 and bfloat16)


def with_defs(defs):
    """Make backward_wgmma's builds take the -D values in defs; returns the undo."""
    from engine.gpu.launchers import backward_wgmma as L
    orig = L.compile_options

    def compile_options(cfg):
        opts = [o for o in orig(cfg) if not any(o.startswith(f"-D{k}=") for k in defs)]
        return tuple(opts + [f"-D{k}={v}" for k, v in defs.items()])
    L.compile_options = compile_options
    return lambda: setattr(L, "compile_options", orig)


def check(defs, head_dim) -> float:
    """Largest relative error of dQ, dK, dV against float64 over the wgmma cases."""
    import engine
    from engine.gpu.launchers import backward_mma
    from engine.inputs import make_dout
    from reference import rel_err
    from test_gpu_backward_mma import CASES, config, gradients64, run_backward
    backward_mma.HOPPER_WGMMA = 1
    undo, worst = with_defs(defs), 0.0
    try:
        for d, bq, bk, nq, nk, causal in CASES:
            if (d, bq) not in ((64, 128), (128, 64)) or bk != 128 or d != head_dim:
                continue
            for dtype in ("float16", "bfloat16"):
                cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk,
                             causal=causal, dtype=dtype)
                q, k, v = engine.make_inputs(cfg)
                dout = make_dout(cfg)
                got, _, info = run_backward(cfg, q, k, v, dout)
                assert info["kernel_source"].endswith("flash_backward_wgmma.cu"), info
                want, _ = gradients64(q, k, v, dout, cfg.softmax_scale, causal)
                for name in ("dQ", "dK", "dV"):
                    err = rel_err(got[name], want[name])
                    assert err <= 1e-2, (defs, name, err, cfg)
                    worst = max(worst, err)
    finally:
        undo()
    return worst


def timed(cfg, defs) -> float:
    from engine.gpu.timing import benchmark_gpu
    undo = with_defs(defs)
    try:
        return benchmark_gpu(cfg, "flash", "tensorcore", False, 20, 3,
                             direction="backward").median_ms
    finally:
        undo()


def phases(cfg, defs):
    """Cycles per tile of each phase, per consumer warpgroup, from one stamped run."""
    import cupy
    from engine.gpu.launchers import backward_wgmma
    from engine.gpu.timing import benchmark_gpu
    from kernels.loader import load_module
    undo = with_defs({**defs, "PHASE_CLOCK": 1})
    try:
        b = backward_wgmma.build(cfg)
        mod = load_module(b.source, b.options)
        ph = cupy.ndarray((8, 2, len(PHASES)), dtype=cupy.uint64,
                          memptr=mod.get_global("bwd_phase"))
        tiles = cupy.ndarray((8, 2), dtype=cupy.uint64, memptr=mod.get_global("bwd_tiles"))
        ph.fill(0)
        tiles.fill(0)
        benchmark_gpu(cfg, "flash", "tensorcore", False, 20, 1, direction="backward")
        cupy.cuda.Device().synchronize()
        per = ph.get().sum(0).astype(np.float64) / np.maximum(tiles.get().sum(0), 1)[:, None]
        return per, int(tiles.get().sum())
    finally:
        undo()


def main():
    import engine
    from engine.gpu.torch_reference import benchmark_torch
    ns = [int(a) for a in sys.argv[1:]] or [4096, 8192]
    for d, builds in BUILDS.items():
        for name, defs in builds.items():
            print(f"check d={d} {name}: worst gradient error {check(defs, d):.2e}", flush=True)
    for d in (64, 128):
        bq = 64 if d == 128 else 128
        for n, dtype in itertools.product(ns, DTYPES):
            for causal in (False, True):
                cfg = engine.AttentionConfig(batch=32768 // n, heads=1024 // d, seq_q=n,
                                             seq_k=n, head_dim=d, block_q=bq, block_k=128,
                                             causal=causal, dtype=dtype)
                best = {name: timed(cfg, defs) for name, defs in BUILDS[d].items()}
                for name, defs in BUILDS[d].items():
                    best[name] = min(best[name], timed(cfg, defs))
                cudnn = benchmark_torch(cfg, "torch_cudnn", 20, 3,
                                        direction="backward").median_ms
                flops = 2.5 * 4 * cfg.bh * n * n * d * (0.5 if causal else 1.0)
                row = "  ".join(f"{k} {v:.3f} ms ({flops / v / 1e9:.0f} TF, cuDNN/ours "
                                f"{cudnn / v:.3f})" for k, v in best.items())
                print(f"d={d} N={n} {dtype} causal={causal}: {row}; cuDNN {cudnn:.3f} ms",
                      flush=True)
    for d, n in ((64, 8192), (128, 8192)) if STAMPS else ():
        bq = 64 if d == 128 else 128
        cfg = engine.AttentionConfig(batch=32768 // n, heads=1024 // d, seq_q=n, seq_k=n,
                                     head_dim=d, block_q=bq, block_k=128, causal=False,
                                     dtype="float16")
        for name, defs in BUILDS[d].items():
            per, count = phases(cfg, defs)
            print(f"phases d={d} N={n} {name} ({count} tiles stamped), cycles per tile, "
                  "consumer 0 / 1:")
            for k, label in enumerate(PHASES):
                print(f"  {label:28s} {per[0, k]:8.0f} {per[1, k]:8.0f}")
            print(f"  {'sum':28s} {per[0].sum():8.0f} {per[1].sum():8.0f}", flush=True)


if __name__ == "__main__":
    main()
