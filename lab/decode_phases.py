"""Lab: where a batch-1 decode step's time goes, block by block.

Why: at batch 1 our step trails SDPA's by about 1% (lab/NOTES.md, "Decoding: the ticket's
fences"), and under Nsight Compute cuDNN's split kernel is 3-4 us shorter than our split
phase ("Batch 1 under Nsight Compute"), while a key tile costs both about the same (a fit of
the 32k and 128k steps: about 1.86 us a 64-key tile a block, and some 10 us of a step that no
tile count explains). Which phase holds those 10 us: the blocks' start, the first tile's
arrival, the main loop's spread over the SMs, writing the state, the ticket, or the merge?

What it does: the kernel's PHASE_CLOCK build (kernels/decode/flash_decode.cu: thread 0 of each
block stamps %globaltimer at its start and end and clock64 at nine points, and its SM), first
checked against float64 over the GPU tests' decode cases (decode_tensor_cores.check), then
run at batch 1 / 32k and 128k and batch 8 / 32k (heads 32, kv_heads 8, d 128, float16,
contiguous, the auto split count), the L2 flushed before each run as the timing harness does,
and the stamps read back. The instrumented build holds 128 registers against the kernel's 100
(nvcc 13.0, copy engine): its phases are the kernel's to within what that changes, so the
same run also times both builds with the harness.

Prints, a shape a line, medians over the runs (us): the step (first block's start to the last
block's end), the spread of the blocks' starts, each phase's median and maximum over the
blocks, the merging blocks' merge, and the block that ended last, phase by phase.

Prediction (before any run): the starts spread under 1 us; the first tile lands 1.5-2.5 us
after a block starts; the main loop's maximum over the blocks is 2-4 us above its median
(the SMs that hold two blocks against the eight that hold one), and that spread, not any
fixed phase, is most of the 10 us.

Needs the PHASE_CLOCK switch, out of the kernel since commit b0a487e: git apply
patches/decode_phase_clock.diff (onto b0a487e; it brings WARP_MERGE_PARALLEL back too). Run on
a Hopper GPU: python3 lab/decode_phases.py [--reps 5] [--with A=1,B=1]   (about 1 minute;
--with: more -D switches of the kernel in the stamped build)
Run on an H200, 2026-11-28 20:38 and 20:40 UTC (logs/h200_2026-11-28_decode_phases_first.log,
logs/h200_2026-11-28_decode_phases.log; lab/NOTES.md, "Decoding: a batch-1 step block by
block"): the starts spread 0.26 us and the first tile lands after 2.8; the loop's maximum is
2.4-7.8 us above its median; the end of a split took 1.6 us, 1.0 of it the warps' merge.
"""
import argparse
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]

from decode_tensor_cores import check, force, kernel_args, spec  # noqa: E402

BLOCKS = 4096            # PHASE_CLOCK: the blocks that stamp (the grids here have 256)
PHASES = ("start", "Q ready", "first tile", "loop done", "warps met", "O merged",
          "state written", "ticket drawn", "end")     # the kernel's Phase
SLOTS = len(PHASES) + 3  # the kernel's PHASE_SLOTS: 2 timers, a clock a phase, the SM
LOOP = PHASES.index("loop done") - 1    # the main loop's column of the lengths
SHAPES = ((1, 32768), (1, 131072), (8, 32768))


def build(switches: str) -> dict:
    """force()'s arguments of the PHASE_CLOCK build with more -D switches ("A=1,B=1")."""
    more = tuple(x for x in switches.split(",") if x)
    return spec(defines=(f"PHASE_CLOCK={BLOCKS}", *more))


def stamps(cfg, splits: int, inputs: tuple, reps: int) -> list:
    """reps runs of the PHASE_CLOCK build, the L2 flushed before each: the (blocks, SLOTS)
    stamps of each run."""
    import cupy
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    from engine.gpu.runtime import live_gpu
    from engine.gpu.timing import _flush_buffer
    from engine.model.decode_config import block_table
    from kernels.loader import load_module
    Q, K, V, T = device_inputs(cfg, *inputs, block_table(cfg))
    run, out = launcher.prepare(cfg, Q, K, V, T, splits, trace=False)
    gpu = live_gpu()
    build = launcher.build(cfg, gpu, launcher.uses_tma(cfg, gpu, splits), splits)
    module = load_module(build.source, build.options)      # the module prepare() ran
    clock = cupy.ndarray((BLOCKS, SLOTS), dtype=cupy.uint64,
                         memptr=module.get_global("phase_clock"))
    flush = _flush_buffer()
    for _ in range(3):
        run()
    runs = []
    for rep in range(reps):
        flush.fill(rep % 251 + 1)
        flush.max()
        clock.fill(0)
        run()
        cupy.cuda.Device().synchronize()
        runs.append(cupy.asnumpy(clock))
    del out, Q, K, V, T
    return runs


def phases(run: np.ndarray, blocks: int) -> dict:
    """One run's stamps as µs: each block's start (from the first block's), each phase's
    length, and the step."""
    r = run[:blocks].astype(np.float64)
    n = len(PHASES)
    t0, t1, cyc, sm = r[:, 0], r[:, 1], r[:, 2:2 + n], r[:, 2 + n]
    ghz = np.median((cyc[:, -1] - cyc[:, 0]) / np.maximum(t1 - t0, 1.0))  # clock64 per ns
    lengths = np.diff(cyc, axis=1) / ghz / 1e3                            # µs, n - 1 phases
    merging = lengths[:, -1] > 0.2       # a block that did not merge stamps its end at once
    return {"step": (t1.max() - t0.min()) / 1e3, "start spread": (t0.max() - t0.min()) / 1e3,
            "lengths": lengths, "merging": merging, "ghz": ghz, "last": int(np.argmax(t1)),
            "sm": sm, "starts": (t0 - t0.min()) / 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--with", dest="switches", default="",
                    help="more switches of the kernel for the stamped build, e.g. "
                         "MERGE_IN_FLIGHT=16 (a patch's: MERGE_BULK=1)")
    args = ap.parse_args()
    stamped = build(args.switches)
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_bench import time_flash_decode
    from engine.gpu.runtime import live_gpu
    from engine.gpu.torch_reference import release_memory
    from engine.model.decode_config import DecodeConfig
    worst = check(stamped)
    print(f"PHASE_CLOCK build {args.switches} against float64: worst {worst:.2f} of the "
          "limit", flush=True)
    if worst >= 1:
        raise SystemExit("the instrumented build failed its check: nothing is read")
    sms = live_gpu().sms
    names = PHASES[1:]
    print("µs, medians over the runs; each phase: median / max over the blocks")
    for batch, seq_k in SHAPES:
        cfg = DecodeConfig(batch=batch, heads=32, kv_heads=8, seq_q=1, seq_k=seq_k,
                           head_dim=128, dtype="float16")
        release_memory()
        inputs = make_decode_inputs(cfg)
        splits = cfg.splits_on(sms)
        blocks = splits * cfg.kv_heads * cfg.batch
        kernel_ms = float(np.median(time_flash_decode(cfg, splits, inputs, 30, 3)))
        undo = force(**kernel_args(stamped))
        try:
            stamped_ms = float(np.median(time_flash_decode(cfg, splits, inputs, 30, 3)))
            runs = [phases(r, blocks) for r in stamps(cfg, splits, inputs, args.reps)]
        finally:
            undo()
        med = lambda key: float(np.median([p[key] for p in runs]))   # noqa: E731
        print(f"B {batch} seq_k {seq_k}: {splits} splits, {blocks} blocks; timed: kernel "
              f"{kernel_ms * 1e3:.1f}, PHASE_CLOCK build {stamped_ms * 1e3:.1f}; stamped step "
              f"{med('step'):.1f}, starts spread {med('start spread'):.2f}, "
              f"clock {np.median([p['ghz'] for p in runs]):.2f} GHz")
        for i, name in enumerate(names):
            col = [p["lengths"][:, i] for p in runs]
            if name == "end":
                col = [p["lengths"][p["merging"], i] for p in runs]
                name = "merge (merging blocks)"
            print(f"  to {name:24s} {np.median([np.median(c) for c in col]):7.2f} / "
                  f"{np.median([c.max() for c in col]):7.2f}")
        p = runs[len(runs) // 2]
        last = p["last"]
        sm = p["sm"].astype(int)
        shared = np.bincount(sm)[sm] > 1            # a block whose SM held another
        print(f"  last block to end (run {len(runs) // 2}): block {last}, SM {int(sm[last])}, "
              f"started at {p['starts'][last]:.2f}, phases "
              + " ".join(f"{x:.2f}" for x in p["lengths"][last])
              + f"; loop on SMs with one block / more: "
              f"{np.median(p['lengths'][~shared, LOOP]) if (~shared).any() else np.nan:.2f}"
              f" / {np.median(p['lengths'][shared, LOOP]):.2f}", flush=True)


if __name__ == "__main__":
    main()
