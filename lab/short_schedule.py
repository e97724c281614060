"""Lab: the Hopper forward's schedule at short sequences (d = 128, N = 1k, float16, non-causal,
the traced build): for each SM, when its items' first S_ij was issued and when their outputs
were written (the kernel's own global timer), beside the launch's time by CUDA events; so the
launch's start-up (events' start to the first item's first product), its items and its drain
(the last output to the events' end) can be told apart. B·H = 16 (one item an SM) and 32
(two). Run on a Hopper GPU: python3 lab/short_schedule.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "."]


def main():
    import cupy
    from engine.gpu.launchers import wgmma
    from engine.model.config import AttentionConfig
    rng = np.random.default_rng(3)
    for bh in (16, 32):
        cfg = AttentionConfig(batch=1, heads=bh, seq_q=1024, seq_k=1024, head_dim=128,
                              block_q=128, block_k=128, dtype="float16")
        x = [cupy.asarray(rng.standard_normal((bh, 1024, 128), dtype=np.float32)).astype(cupy.float16)
             for _ in range(3)]
        for trace in (False, True):
            run, out = wgmma.prepare(cfg, *x, trace)
            ev = [cupy.cuda.Event() for _ in range(2)]
            times = []
            for _ in range(20):
                run()
                cupy.cuda.Device().synchronize()
                ev[0].record()
                run()
                ev[1].record()
                ev[1].synchronize()
                times.append(cupy.cuda.get_elapsed_time(ev[0], ev[1]) * 1e3)
            print(f"bh {bh} trace {trace}: kernel {np.median(times):.2f} µs (events, warm L2, "
                  f"median of 20)")
        s = out["start_ns"].get().astype(np.int64)
        e = out["end_ns"].get().astype(np.int64)
        sm = out["sm_id"].get()
        t0 = s.min()
        order = np.lexsort((s, sm))
        print(f"  span first S to last output {(e.max() - t0) / 1e3:.2f} µs; items {len(s)}")
        firsts = [(s[sm == k].min() - t0) / 1e3 for k in np.unique(sm)]
        print(f"  first item's first S after the earliest: p50 {np.median(firsts):.2f}, "
              f"max {max(firsts):.2f} µs")
        rank = np.zeros(len(s), int)
        for k in np.unique(sm):
            idx = np.where(sm == k)[0]
            rank[idx[np.argsort(s[idx])]] = np.arange(len(idx))
        for r in range(rank.max() + 1):
            d = (e[rank == r] - s[rank == r]) / 1e3
            print(f"  item {r} of its SM: duration p50 {np.median(d):.2f}, min {d.min():.2f}, "
                  f"max {d.max():.2f} µs ({len(d)} items)")
        ends = [(e[sm == k].max() - t0) / 1e3 for k in np.unique(sm)]
        print(f"  SMs' last output: p50 {np.median(ends):.2f}, max {max(ends):.2f} µs")
        del order


if __name__ == "__main__":
    main()
