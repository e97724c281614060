"""Lab: where Flash-Decoding's reads differ from PyTorch SDPA's, by the hardware's counters.

Why: the recorded H100 decode sweep has ours at 0.92-0.96x SDPA (enable_gqa) at every shape,
2.9-3.0 TB/s against SDPA's 3.1 (lab/NOTES.md, "Decoding against SDPA: tensor cores, deeper
rings, L2 prefetch"). Timing variants ruled out issue (tensor-core products were no faster),
bytes in flight (a third stage), the split count and wider or cooperative tiles. What is
left is how the reads reach DRAM, which only counters can show: DRAM bytes and throughput,
L2 hit rate and sectors per request, the warps' stall reasons, the tail of each launch.

What it does: one decode step at each shape (heads 32, kv_heads 8, d 128, float16, one query
token, contiguous; the auto split count), ours checked against SDPA's output first (a wrong
kernel is not profiled), then `--launches` launches of ours and of SDPA, nothing else on the
GPU between them (no timing harness: Nsight Compute flushes the caches before each launch it
profiles, as the harness does). Without Nsight Compute it lists the kernels SDPA runs and
their times (torch.profiler), which says which backend PyTorch picked.

Run on a GPU (Nsight Compute is on the device image; Firecracker only, see the tool's
KINDS.md), about 2 minutes:
  ncu --clock-control none --target-processes all -k regex:'flash|fmha|splitkv|combine' \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section Occupancy --section LaunchStats --section SchedulerStats \
      --csv --page details --log-file $OUT/ncu_decode.csv python3 lab/decode_profile.py
  python3 lab/decode_profile.py --kernels        (no ncu: SDPA's kernels by torch.profiler)

Prediction (before any run): ours reads the same DRAM bytes as SDPA (K and V once, within
1%) at a lower DRAM throughput; the difference shows as fewer warps resident or more long
scoreboard stalls per issued instruction, not as more bytes.

Run on an H200, 2026-11-28 (lab/NOTES.md, "Decoding against SDPA: what the counters show"):
the same bytes and a lower DRAM throughput (85% of peak against cuDNN's 97%), as predicted;
but the same resident warps and fewer long-scoreboard stalls, not more.

--paged P (run once, --small, 2026-11-28 14:47 UTC, logs/h200_2026-11-28_decode_ncu_paged.csv:
the same bytes and balance as the contiguous cache): ours also on a paged cache of P-key pages in
order, the layout that read 3-7% faster than the contiguous cache (lab/NOTES.md, "Scattered
pages or heads side by side?"), profiled beside the contiguous one. Add to the ncu line above
  --metrics dram__bytes_read.sum,dram__bytes_read.sum.per_second,lts__t_sectors.max,\
lts__t_sectors.min,dram__bytes_read.max,dram__bytes_read.min
(the .max/.min rollups compare the L2 slices and the memory partitions). Prediction: the same
DRAM bytes; if the paged cache's lead is how evenly its reads spread, its max/min ratios are
nearer 1 than the contiguous cache's; if not, the difference lies below the counters ncu has
(DRAM rows), and what stays is the layout itself."""
import argparse
import sys

import numpy as np

sys.path[:0] = ["."]

SHAPES = ((1, 32768), (8, 131072))          # (batch, seq_k): the grid's two corners


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=2, help="launches of each kernel")
    ap.add_argument("--prefetch", type=int, choices=(0, 128, 256),
                    help="profile ours built with this L2_PREFETCH (default: as committed)")
    ap.add_argument("--kernels", action="store_true",
                    help="list SDPA's kernels and times with torch.profiler instead")
    ap.add_argument("--small", action="store_true", help="batch 1 / 32k only")
    ap.add_argument("--paged", type=int, choices=(16, 64),
                    help="ours also on a paged cache of this many keys a page, pages in order")
    args = ap.parse_args()
    import cupy
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.decode_bench import _sdpa_step
    from engine.gpu.launchers import decode as launcher
    from engine.gpu.runtime import live_gpu
    from engine.gpu.torch_reference import release_memory, torch_module
    from engine.model.decode_config import DecodeConfig, block_table
    if args.prefetch is not None:
        sys.path[:0] = ["lab"]
        from decode_tensor_cores import force
        force(prefetch=args.prefetch)
    torch = torch_module()
    sms = live_gpu().sms
    for batch, seq_k in SHAPES[:1] if args.small else SHAPES:
        cfg = DecodeConfig(batch=batch, heads=32, kv_heads=8, seq_q=1, seq_k=seq_k,
                           head_dim=128, dtype="float16")
        release_memory()
        inputs = make_decode_inputs(cfg)
        splits = cfg.splits_on(sms)
        Q, K, V, T = device_inputs(cfg, *inputs, block_table(cfg))
        ours, out = launcher.prepare(cfg, Q, K, V, T, splits, trace=False)
        sdpa, keep = _sdpa_step(cfg, inputs)
        ours()
        sdpa()
        cupy.cuda.get_current_stream().synchronize()
        torch.cuda.synchronize()
        got = cupy.asnumpy(out["O"]).astype(np.float64).reshape(-1)
        want = keep["O"].float().cpu().numpy().astype(np.float64).reshape(-1)
        err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        print(f"batch {batch}, seq_k {seq_k}, {splits} splits: ours against SDPA {err:.2e}",
              flush=True)
        if err > 1e-2:
            raise SystemExit("ours disagrees with SDPA: nothing is profiled")
        if args.kernels:
            with torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(args.launches):
                    sdpa()
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8), flush=True)
            continue
        for _ in range(args.launches):
            ours()
        cupy.cuda.get_current_stream().synchronize()
        for _ in range(args.launches):
            sdpa()
        torch.cuda.synchronize()
        del ours, out, sdpa, keep, Q, K, V, T
        if args.paged:
            profile_paged(cfg, args.paged, splits, args.launches, got)


def profile_paged(cfg, page_size: int, splits: int, launches: int, contiguous_out):
    """`launches` launches of ours on cfg's cache as pages of page_size keys in order (sequence
    b's page j at b · pages_per_seq + j), its output first checked against ours on the
    contiguous cache (contiguous_out, float64, flat: the same keys and values)."""
    from dataclasses import replace

    import cupy
    sys.path[:0] = ["lab"]
    from decode_tensor_cores import table_order
    from engine.decode import make_decode_inputs
    from engine.gpu.decode_backend import device_inputs
    from engine.gpu.launchers import decode as launcher
    from engine.gpu.torch_reference import release_memory
    import engine.decode as host
    paged = replace(cfg, page_size=page_size)
    release_memory()
    undo = table_order("in order")
    try:
        inputs = make_decode_inputs(paged)
        table = host.block_table(paged)
    finally:
        undo()
    Q, K, V, T = device_inputs(paged, *inputs, table)
    run, out = launcher.prepare(paged, Q, K, V, T, splits, trace=False)
    run()
    cupy.cuda.get_current_stream().synchronize()
    got = cupy.asnumpy(out["O"]).astype(np.float64).reshape(-1)
    err = float(np.abs(got - contiguous_out).max() / max(np.abs(contiguous_out).max(), 1e-30))
    print(f"  pages of {page_size} in order ({out['info']['copies']}): against the contiguous "
          f"cache's output {err:.2e}", flush=True)
    if err > 1e-3:
        raise SystemExit("ours on the paged cache disagrees with the contiguous cache's output: "
                         "it is not profiled")
    for _ in range(launches):
        run()
    cupy.cuda.get_current_stream().synchronize()
    del run, out, Q, K, V, T


if __name__ == "__main__":
    main()
