"""Lab: the three-consumer FP8 forward (lab/fp8_three_consumers.py: 192 × 128 tiles, one product
at a time a warpgroup) on stream-K's even shares, so that its last partial wave of items goes.
At the FP8 sweep's shapes its 192-row query tiles make 1,376 items (B·H = 32 at 8k, 16 at
16k), 10.4 waves on 132 SMs: the last wave leaves 5% of the launch idle, against 3% for the
launchers' 128-row tiles. The kernel copy's stream-K (`patches/fp8_three_consumers.diff`, onto
commit 7fc9609): each part of a cut item posts O in true units (O_acc · its V scale), m in
log2 units, l; the part that draws the last ticket merges them with weights exp2(m_p - m) and
writes O and lse, as the float16 kernel's parts do. The line is the launchers' (three
positions of head an item, engine.model.stream_k), over one block an SM; this lab turns it on
at every shape (the launchers' rule, for launches of few items, never would).

First the stream-K build is checked on small ragged shapes where every item is cut into
parts (its output against float64, as close as the emulation's within the FP8 tests'
tolerance, since a part casts P to e4m3 from its own running max; lse against the
emulation), and at N = 8k against the same kernel without stream-K. Then the launchers'
float16 and FP8, and the three-consumer build without and with stream-K are timed alternately
(median of 30, the better of two rounds) at d = 128, non-causal, B·H·N = 32k tokens × 8
heads.
Run on a Hopper GPU, with the patch applied: python3 lab/fp8_three_stream_k.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import fp8_three_consumers as three  # noqa: E402
import fp8_wide_tiles  # noqa: E402
from kv_stages import print_ratios, time_shapes  # noqa: E402
from test_gpu_fp8 import OUT_TOL, rel  # noqa: E402

D, BQ, BK = 128, 192, 128
HEAD = 3                      # the line's positions of head an item (the launchers' WGMMA_HEAD)
BUILD = "fp8 192x128 serial, 3 stages"
three.BUILDS[BUILD][3]["SK_HEAD"] = HEAD
SEQS = (2048, 8192, 16384)


def prepare_stream_k(cfg, qz):
    """(run, outputs) of the three-consumer build on the stream-K line (wgmma.prepare's
    stream-K arguments, with the FP8 build's operands)."""
    import cupy
    from engine.gpu.launchers import core, wgmma, wgmma_fp8 as L
    from engine.gpu.runtime import live_gpu
    from engine.model.stream_k import total_tiles, workspace_floats
    b = L.build(cfg, False)
    fn = b.compiled()
    out = L.fp8_outputs(cfg, False, poison=True)
    swizzle = min(cfg.head_dim, 128)
    maps = (wgmma.tensor_map(qz.q8, cfg.block_q, "uint8", swizzle, swizzle),
            wgmma.tensor_map(qz.k8, cfg.block_k, "uint8", swizzle, swizzle),
            wgmma.tensor_map(qz.vt8, cfg.head_dim, "uint8", L.vt_box(cfg), L.vt_box(cfg)))
    sms = live_gpu().sms
    G = wgmma.stream_k_blocks(cfg, cfg.bh, sms, HEAD)
    workspace = (cupy.empty(workspace_floats(cfg, G), dtype=np.float32),
                 cupy.zeros(cfg.Tr * cfg.bh, dtype=np.int32))
    args = (*maps, out["O"], out["lse"], np.int32(cfg.seq_q), np.int32(cfg.seq_k),
            np.float32(cfg.softmax_scale), np.int32(cfg.causal), np.int32(0),
            np.int32(cfg.bh), np.int32(cfg.Tr), np.int32(core.causal_bh_group(cfg, sms)),
            np.int32(total_tiles(cfg, cfg.bh, HEAD)), *workspace, *[core.NULL] * 7,
            qz.q_scale, qz.k_scale, qz.v_scale)

    def run():
        fn((G, 1), (b.threads,), args, shared_mem=b.smem)
    run.operands = (qz, workspace)
    return run, out


def check_small(nq, nk, causal, seed, inputs) -> bool:
    """The stream-K build on a small shape (every item cut), as fp8_wide_tiles.check checks
    the output: against the emulation and float64."""
    import ml_dtypes
    from engine.cpu import fp8 as emulation
    from engine.gpu.launchers import wgmma_fp8 as L
    cfg, (q, k, v), dev = fp8_wide_tiles.fp8_case(BK, batch=1, heads=2, seq_q=nq, seq_k=nk,
                                                  causal=causal, seed=seed, inputs=inputs)
    run, out = prepare_stream_k(cfg, L.quantize(cfg, *dev))
    run()
    run()                                  # twice: the tickets are back at 0 after a launch
    want = emulation.emulate(cfg, q, k, v, trace=False)
    O = out["O"].get().view(ml_dtypes.bfloat16).reshape(want.output.shape)
    err = rel(O, want.output)
    close64, err64, err64_emulated = fp8_wide_tiles.float64_verdict(cfg, q, k, v, O, want)
    lse_ok = fp8_wide_tiles.scores_close(out["lse"].get().reshape(want.lse.shape), want.lse)
    # A part's P is cast to e4m3 from its own running max, not the whole row's, so its
    # roundings are not the emulation's: the output is held to float64 (as close as the
    # emulation's, within OUT_TOL), and its distance from the emulation is only shown.
    ok = lse_ok and close64
    print(f"stream-K FP8 {BQ}x{BK} nq={nq} nk={nk} causal={int(causal)} {inputs}: "
          f"rel(emulation)={err:.2e} rel(float64)={err64:.2e} (emulation's "
          f"{err64_emulated:.2e}) lse={lse_ok} {'OK' if ok else 'FAIL'}", flush=True)
    return ok


def main():
    import cupy
    import ml_dtypes
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(1920)
    L, undo = three.use(BUILD)
    try:
        ok = all([check_small(nq, nk, c, int(rng.integers(2**31)), x)
                  for nq, nk, x in three.SHAPES for c in (False, True)])
        # N = 8k: stream-K against the same kernel's whole items (the merge rounds alike to
        # within the output's bfloat16)
        cfg = three.fp8_config(BQ, BK, batch=1, heads=32, seq_q=8192, seq_k=8192, causal=False)
        x = [cupy.asarray(rng.standard_normal((32, 8192, D), dtype=np.float32))
             .astype(cupy.float16) for _ in range(3)]
        qz = L.quantize(cfg, *x)
        whole_run, whole = L.prepare(cfg, qz, False)
        sk_run, sk = prepare_stream_k(cfg, qz)
        whole_run()
        sk_run()
        a, b = (o["O"].get().view(ml_dtypes.bfloat16).astype(np.float32) for o in (whole, sk))
        err8k = rel(b, a)
        ok = ok and np.isfinite(b).all() and err8k <= OUT_TOL
        print(f"N = 8k, stream-K against whole items: rel {err8k:.2e}", flush=True)
        del x, qz, whole_run, sk_run, whole, sk
    finally:
        undo()
    print("stream-K validated:", ok, flush=True)
    if not ok:
        sys.exit("the stream-K build failed its check: nothing timed")
    names = ("f16 128x128", "fp8 128x192", BUILD, BUILD + ", stream-K")
    def make_runs(kw, x):
        runs = {}
        for name in names:
            fp8, bq, bk, *_ = three.BUILDS[name.replace(", stream-K", "")]
            L, undo = three.use(name.replace(", stream-K", ""))
            try:
                if not fp8:
                    cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=bq, block_k=bk,
                                          **kw)
                    runs[name], _ = L.prepare(cfg, *x, False)
                    continue
                cfg = three.fp8_config(bq, bk, **kw)
                qz = L.quantize(cfg, *x)
                runs[name] = (prepare_stream_k(cfg, qz) if name.endswith("stream-K")
                              else L.prepare(cfg, qz, False))[0]
            finally:
                undo()
        return runs
    rows = time_shapes([(n, (32768 // n) * 8) for n in SEQS], make_runs, rng)
    print_ratios(rows, names, f"d = {D}, non-causal, B·H·N = 32k tokens × 8 heads")


if __name__ == "__main__":
    main()
