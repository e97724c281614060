"""One small launch of each wgmma build against float64, printed: the first thing a device call
runs, so that a hang or a wrong answer shows before the test suite and the benchmark.

Usage: python benchmarks/wgmma_smoke.py PINGPONG   (0 or 1, the build to launch)"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import cupy  # noqa: E402

import engine  # noqa: E402
from engine.gpu.launchers import wgmma
from reference import attention64, rel_err  # noqa: E402

wgmma.PINGPONG = int(sys.argv[1])
for d, bq, bk in wgmma.SHAPES:
    for causal in (False, True):
        cfg = engine.AttentionConfig(batch=1, heads=2, seq_q=300, seq_k=333, head_dim=d,
                                     block_q=bq, block_k=bk, dtype="float16", causal=causal)
        q, k, v = engine.make_inputs(cfg)
        Q, K, V = (cupy.asarray(x.reshape(cfg.bh, -1, d)) for x in (q, k, v))
        out = wgmma.launch(cfg, Q, K, V, False, poison=True)
        cupy.cuda.Device().synchronize()
        O64, lse64 = attention64(q, k, v, cfg.softmax_scale, causal)
        O, lse = out["O"].get(), out["lse"].get()
        print(f"pingpong={wgmma.PINGPONG} d={d} {bq}x{bk} causal={causal}: O rel err "
              f"{rel_err(O.reshape(O64.shape), O64):.2e}, lse rel err "
              f"{rel_err(lse.reshape(lse64.shape), lse64):.2e}, regs "
              f"{out['info']['registers_per_thread']}, local {out['info']['local_bytes_per_thread']}",
              flush=True)
