"""Lab: the next run's first softmax under the run's last P V (SOFTMAX_AHEAD=1 in
kernels/hopper/flash_wgmma.cu; FP8, persistent, untraced builds) on the launcher's FP8 build at
d = 128 (128 x 256, P through shared memory), with and without turns (PINGPONG). The run's
end issues the next run's first S_ij0, then its last P V behind it; the next run's softmax
runs while that P V computes, and the run's output is written after it. The same arithmetic
in the same order, so each build's output must equal the launcher's bit for bit: checked on
launches of more items than SMs (every block runs several runs), runs of one key tile, causal
and not. Then lab/kv_stages.py's checks (bytes, trace and output against the emulation,
output against float64) and its timing (alternately, median of 30, the better of two rounds),
d = 128, non-causal, B·H·N = 32k tokens x 8 heads, N = 2k, 8k, 16k.
Needs patches/fp8_ahead_256.diff (`git apply` it onto commit 637dad7 first).
Run on an H200, 2026-11-29 09:45 UTC: 1.0-4.7% slower with turns, 1.3-3.4% without; not kept.
Run on a Hopper GPU: python3 lab/fp8_ahead_256.py"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402
from fp8_wide_tiles import fp8_case  # noqa: E402

BUILDS = {
    "fp8 256 (launcher)": (True, 256, {}),
    "ahead": (True, 256, {"SOFTMAX_AHEAD": 1}),
    "ahead, turns": (True, 256, {"SOFTMAX_AHEAD": 1, "PINGPONG": 1}),
    "turns": (True, 256, {"PINGPONG": 1}),
    "fp8 256 again": (True, 256, {}),
    "f16": (False, 128, {}),
}
# (batch, heads, seq_q, seq_k, causal): 320 and more items on 132 SMs, runs of 8 tiles, of one
# tile (seq_k 200), and causal runs of 1 .. 8 tiles.
SAME = ((1, 48, 1000, 2000, False), (2, 20, 2048, 200, False), (1, 40, 1000, 1000, True),
        (1, 33, 777, 1500, False))


def bitwise(rng) -> dict:
    """Each SOFTMAX_AHEAD build's O and lse against the launcher's, bit for bit."""
    from engine.gpu.launchers import wgmma_fp8 as L
    verdict = {}
    for b, h, nq, nk, causal in SAME:
        cfg, _, dev = fp8_case(256, batch=b, heads=h, seq_q=nq, seq_k=nk, causal=causal,
                               seed=int(rng.integers(2**31)), inputs="normal")
        out = {}
        for name in ("fp8 256 (launcher)", "ahead", "ahead, turns"):
            _, undo = kv_stages.use(name)
            try:
                got = L.launch(cfg, *dev, False, poison=True)
                out[name] = (got["O"].get().view(np.uint16).copy(), got["lse"].get().copy())
            finally:
                undo()
        base = out["fp8 256 (launcher)"]
        for name in ("ahead", "ahead, turns"):
            same = (np.array_equal(out[name][0], base[0])
                    and np.array_equal(out[name][1].view(np.uint32), base[1].view(np.uint32)))
            verdict[name] = verdict.get(name, True) and same
            print(f"{name}: B={b} H={h} nq={nq} nk={nk} causal={int(causal)}: "
                  f"bit for bit {same}", flush=True)
    return verdict


def main():
    kv_stages.BUILDS = BUILDS
    kv_stages.SEQS = (2048, 8192, 16384)
    verdict = bitwise(np.random.default_rng(7))
    print("bit for bit:", verdict, flush=True)
    if not all(verdict.values()):
        for name, same in verdict.items():
            if not same:
                del BUILDS[name]
    kv_stages.main()


if __name__ == "__main__":
    main()
