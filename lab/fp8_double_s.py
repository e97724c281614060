"""Lab: a second S in flight in the Hopper FP8 forward (kernels/hopper/flash_wgmma.cu,
DOUBLE_S=1, 128 x 128 tiles, where two sets of S fit the registers: 2 x 64 + O 64 + P 16).
Today a warpgroup's tile is: S_ij and P_{i,j-1} V_{j-1} issued, S_ij waited for, its softmax
(while P V runs), P V waited for, O rescaled and P packed. So S_ij's own latency sits on the
warpgroup's path every tile, and only the other warpgroup fills it. With DOUBLE_S the tile is:
S_{i,j+1} into the other set and P_{i,j-1} V_{j-1} issued, the softmax of S_ij (finished at
the tile before) while both run, both waited for. No product is in flight at the loop's back
edge, which is what kept ptxas from serialising the wgmma (patches/fp8_double_s.diff kept
S_{j+1} in flight across it). The loop is unrolled by two so that each set is named at compile
time; the run's last tile issues no S, a run of one tile an unused one.

Checks: every build as lab/kv_stages.py checks it (the emulation and float64), and the DOUBLE_S
builds' outputs and lse against the 128 x 128 build's bit for bit (the same arithmetic), on
ragged shapes, causal and not (runs of one tile, odd and even lengths). Then every build is
timed alternately (median of 30, the better of two rounds), d = 128, non-causal, B·H·N = 32k
tokens x 8 heads, beside float16 and the launcher's FP8 build (128 x 192).
The switch is in patches/fp8_double_s_tile_pairs.diff: `git apply` it onto commit ea77543 first.
Run on an H200, 2026-11-29 03:47 and 03:48 UTC (lab/NOTES.md, "A second S in flight, and
wider tiles"): bit for bit the 128 x 128 build's everywhere; with two stages 28% slower (the
producer's V_{j+1} waits for the stage P V_{j-1} still reads, and K_{j+2} queues behind it),
with three 1% faster at 8k and 2% at 16k than the 128 x 128 build with three stages, 3% slower
at 2k, and 7-9% under the launcher's 128 x 192 build. Not kept.
Run on a Hopper GPU: python3 lab/fp8_double_s.py [--stages]"""
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402
from fp8_wide_tiles import fp8_case  # noqa: E402

SAME_SHAPES = ((300, 1000, False), (300, 1000, True), (1000, 777, False), (1000, 777, True),
               (129, 191, True), (640, 640, True), (2048, 2048, False))


def outputs(name, cfg, dev):
    L, undo = kv_stages.use(name)
    try:
        got = L.launch(cfg, *dev, False, poison=True)
        return got["O"].get(), got["lse"].get()
    finally:
        undo()


def same_as(base, names) -> dict:
    """The builds' outputs and lse against `base`'s, bit for bit."""
    verdict = {}
    for nq, nk, causal in SAME_SHAPES:
        cfg, _, dev = fp8_case(128, batch=1, heads=2, seq_q=nq, seq_k=nk, causal=causal,
                               seed=nq + nk)
        want = outputs(base, cfg, dev)
        for name in names:
            got = outputs(name, cfg, dev)
            ok = all(np.array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
                     for g, w in zip(got, want))
            verdict[name] = verdict.get(name, True) and ok
            print(f"{name} nq={nq} nk={nk} causal={int(causal)}: "
                  f"{'bit for bit' if ok else 'DIFFERS'}", flush=True)
    return verdict


def main():
    kv_stages.BUILDS = {
        "f16": (False, 128, {}),
        "fp8 192": (True, 192, {}),
        "fp8 128": (True, 128, {}),
        "fp8 128 double S": (True, 128, {"DOUBLE_S": 1}),
        "fp8 128 double S, 3 stages": (True, 128, {"DOUBLE_S": 1, "KV_STAGES": 3}),
        "fp8 192 again": (True, 192, {}),
    }
    if "--stages" in sys.argv:      # the second run: deeper rings, with and without
        kv_stages.BUILDS = {
            "f16": (False, 128, {}),
            "fp8 192": (True, 192, {}),
            "fp8 128, 3 stages": (True, 128, {"KV_STAGES": 3}),
            "fp8 128, 4 stages": (True, 128, {"KV_STAGES": 4}),
            "fp8 128 double S, 3 stages": (True, 128, {"DOUBLE_S": 1, "KV_STAGES": 3}),
            "fp8 128 double S, 4 stages": (True, 128, {"DOUBLE_S": 1, "KV_STAGES": 4}),
            "fp8 192 again": (True, 192, {}),
        }
        kv_stages.SHAPES = kv_stages.SHAPES[:1]
    doubles = [n for n in kv_stages.BUILDS if "double" in n]
    base = "fp8 128" if "fp8 128" in kv_stages.BUILDS else "fp8 128, 3 stages"
    print("bit for bit:", same_as(base, doubles), flush=True)
    kv_stages.SEQS = (2048, 8192, 16384)
    kv_stages.main()


if __name__ == "__main__":
    main()
