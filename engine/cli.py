"""Command line: record GPU benchmarks and traces.

  python -m engine bench --seq 256,512,1024 --head-dim 64,128 --dtype float16,float32 \\
      --causal both --kernels naive,teaching,torch --out benchmarks/bench_x.json
  python -m engine bench --direction backward --seq 1024,4096 --kernels naive,tensorcore,torch \\
      --out benchmarks/bench_x_backward.json      (the backward pass alone)
  python -m engine trace --seq-q 300 --seq-k 257 --head-dim 64 --block-q 64 --block-k 32 \\
      --dtype float16 --causal --out trace.npz [--schedule-out schedule.json]
  python -m engine runs --batch 1 --heads 4 --seq-q 4096 --seq-k 4096 --head-dim 128 \
      --block-q 128 --block-k 32 --causal --order stream-k --out schedule_runs.json
      (the mma.sync kernel's run log: which block ran which key tiles of which item, when)
  python -m engine fairness --out fairness.json
  python -m engine facts --out benchmarks/results/kernel_facts_h200.json   (compile facts)
  python -m engine tiles --seq 4096 --head-dim 64 --dtype float16 \\
      --kernels teaching,tensorcore --out benchmarks/results/tiles_h200_<date>.json
  python -m engine decode-bench --out benchmarks/results/decode_h200_<date>.json
      (Flash-Decoding: the issue's H200 sweep, split counts, paged against contiguous, SDPA)

bench writes its JSON after every configuration (the format engine/recorded.py reads), so
an interrupted sweep keeps what it measured. Sizes whose naive S and P (backward: P, dP and
dS) would not fit in free GPU memory are skipped with a note, never attempted.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path


from .model.config import BLOCK_SIZES, DIRECTIONS, DTYPES, HEAD_DIMS, AttentionConfig
from .inputs import make_dout, make_inputs
from .results import timing_record

TORCH_LINES = ("torch_flash", "torch_cudnn", "torch_math")
KERNEL_CHOICES = ("naive", "teaching", "tensorcore", "torch", *TORCH_LINES)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers; got {text!r}")


def _names(allowed):
    def parse(text: str) -> list[str]:
        got = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in got if x not in allowed]
        if bad or not got:
            raise argparse.ArgumentTypeError(
                f"choose from {', '.join(allowed)} (comma-separated); got {text!r}")
        return got
    return parse


def _causal(text: str) -> list[bool]:
    table = {"both": [False, True], "true": [True], "false": [False]}
    if text not in table:
        raise argparse.ArgumentTypeError(f"--causal is both, true or false; got {text!r}")
    return table[text]


class Progress:
    """A plain-text progress bar on stderr."""

    def __init__(self, total: int, width: int = 30):
        self.total, self.width, self.done = max(total, 1), width, 0

    def step(self, label: str):
        self.done += 1
        filled = self.width * self.done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] "
                         f"{self.done}/{self.total} {label[:70]:<70}")
        sys.stderr.flush()

    def close(self):
        sys.stderr.write("\n")


def device_record() -> dict:
    from .devices import device_info
    from .gpu.torch_reference import torch_version
    info = device_info()
    gpu = info.gpu
    record = {"name": info.name, "kind": info.kind, "sms": gpu.sms,
              "compute_capability": gpu.compute_capability, "l2_bytes": gpu.l2_bytes,
              "memory_bytes": gpu.memory_bytes, "smem_per_block_optin": gpu.smem_per_block_optin,
              "driver": _nvidia_driver(), "cuda_driver_api": info.driver,
              "cuda_runtime": info.cuda_runtime, "cupy_version": info.cupy_version,
              "torch_version": torch_version()}
    return record


def _nvidia_driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        return ""


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def _write_json(path: Path, data: dict):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _free_device_bytes() -> int:
    from .gpu.runtime import free_device_bytes     # CuPy only where a sweep runs
    from .gpu.torch_reference import release_memory
    release_memory()                                # PyTorch's and CuPy's cached blocks
    return free_device_bytes()


def _lines(kernels: list[str]) -> list[str]:
    out = []
    for k in kernels:
        out.extend(TORCH_LINES if k == "torch" else [k])
    return out


def _configs(args) -> list[AttentionConfig]:
    cfgs = []
    for d in args.head_dim:
        for dtype in args.dtype:
            for causal in args.causal:
                for n in args.seq:
                    batch = args.batch or max(1, args.tokens // n)
                    heads = args.heads or max(1, args.model_dim // d)
                    cfgs.append(AttentionConfig(batch=batch, heads=heads, seq_q=n, seq_k=n,
                                                head_dim=d, block_q=args.block_q,
                                                block_k=args.block_k, dtype=dtype,
                                                causal=causal))
    return cfgs


def _bench_one(cfg, line, args, inputs):
    """inputs: q, k, v (and dout for the backward), made once per configuration."""
    from .gpu.timing import benchmark_gpu
    from .gpu.torch_reference import benchmark_torch
    if line in TORCH_LINES:              # PyTorch draws dout itself, from make_dout(cfg)
        return benchmark_torch(cfg, line, args.reps, args.warmup, args.budget, inputs[:3],
                               direction=args.direction)
    algorithm = "naive" if line == "naive" else "flash"
    return benchmark_gpu(cfg, algorithm, line, False, args.reps, args.warmup, args.budget,
                         inputs, direction=args.direction)


def _naive_need(cfg: AttentionConfig, direction: str) -> int:
    from .model.iomodel import peak_memory
    return peak_memory(cfg, "naive", direction=direction)


def cmd_bench(args) -> int:
    from .gpu.timing import method_text
    lines = _lines(args.kernels)
    cfgs = _configs(args)
    out = Path(args.out)
    backward = args.direction == "backward"
    data = {"device": device_record(), "date": _today(), "direction": args.direction,
            "method": method_text(args.reps, args.warmup,
                                  " Repetitions are cut to fit --budget seconds per line, never "
                                  "below 20." if args.budget else "", direction=args.direction),
            "command": " ".join(sys.argv[1:]), "results": [], "skipped": []}
    bar = Progress(len(cfgs) * len(lines))
    for cfg in cfgs:
        inputs = make_inputs(cfg) + ((make_dout(cfg),) if backward else ())
        for line in lines:
            label = (f"{line} N={cfg.seq_q} d={cfg.head_dim} {cfg.dtype}"
                     f"{' causal' if cfg.causal else ''}{' backward' if backward else ''}")
            bar.step(label)
            reason = None
            free = _free_device_bytes()
            if line in ("naive", "torch_math"):
                need = _naive_need(cfg, args.direction)
                if need > 0.8 * free:
                    held = "P, dP and dS" if backward else "S and P"
                    reason = (f"naive {held} would need {need / 1e9:.1f} GB; "
                              f"{free / 1e9:.1f} GB free")
            if reason is None:
                try:
                    timing = _bench_one(cfg, line, args, inputs)
                    data["results"].append(timing_record(cfg, line, timing, args.direction))
                except (ValueError, RuntimeError, MemoryError) as exc:   # out of memory too:
                    reason = f"{type(exc).__name__}: {exc}"               # the sweep goes on
            if reason is not None:
                data["skipped"].append({"kernel": line, "config": cfg.to_dict(),
                                        "reason": reason})
            _write_json(out, data)
    bar.close()
    _print_table(data)
    return 0


def _print_table(data: dict):
    print(f"{data['direction']} pass")
    print(f"{'kernel':<12}{'N':>7}{'d':>5} {'dtype':<8}{'causal':<7}{'median ms':>11}"
          f"{'TFLOP/s':>9}{'peak MB':>9}")
    for r in data["results"]:
        print(f"{r['kernel']:<12}{r['seq_q']:>7}{r['head_dim']:>5} {r['dtype']:<8}"
              f"{str(r['causal']):<7}{r['median_ms']:>11.4f}{r['tflops']:>9.2f}"
              f"{r['peak_bytes'] / 1e6:>9.1f}")
    for s in data["skipped"]:
        c = s["config"]
        print(f"skipped {s['kernel']} N={c['seq_q']} d={c['head_dim']} {c['dtype']} "
              f"causal={c['causal']}: {s['reason'][:160]}")


def _config_from(args) -> AttentionConfig:
    return AttentionConfig(batch=args.batch, heads=args.heads, seq_q=args.seq_q,
                           seq_k=args.seq_k, head_dim=args.head_dim, block_q=args.block_q,
                           block_k=args.block_k, dtype=args.dtype, causal=args.causal,
                           scale=args.scale, seed=args.seed, inputs=args.inputs,
                           logit_scale=args.logit_scale)


def cmd_trace(args) -> int:
    from .api import run
    from .trace_io import to_npz_bytes
    cfg = _config_from(args)
    for _ in range(args.warmup):     # clocks up and the module loaded before the run recorded
        run(cfg, backend=args.backend, algorithm="flash", kernel=args.kernel, trace=True)
    res = run(cfg, backend=args.backend, algorithm="flash", kernel=args.kernel, trace=True)
    Path(args.out).write_bytes(to_npz_bytes(cfg, res))
    print(f"wrote {args.out}: {res.backend} backend, trace of shape {res.trace.rescale.shape}")
    if args.schedule_out:
        if res.schedule is None:
            print("no schedule: the NumPy backend records none", file=sys.stderr)
            return 1
        s = res.schedule
        _write_json(Path(args.schedule_out), {
            "device": device_record(), "date": _today(), "kernel": res.kernel,
            "label": args.label, "info": _scalars(res.info or {}),
            "config": cfg.to_dict(), "block_bh": s.block_bh.tolist(),
            "block_q_tile": s.block_q_tile.tolist(), "sm_id": s.sm_id.tolist(),
            "start_ns": s.start_ns.tolist(), "end_ns": s.end_ns.tolist()})
        print(f"wrote {args.schedule_out}: {len(s.sm_id)} thread blocks on "
              f"{len(set(s.sm_id.tolist()))} SMs")
    return 0


def cmd_runs(args) -> int:
    from .model.limits import check_limits
    from .gpu.backend import to_device
    from .gpu.launchers import mma
    from .gpu.runtime import gpu_failures, live_gpu
    from .recorded import schedule_of_runs
    cfg = _config_from(args)
    check_limits(cfg)
    live_gpu()          # GpuRunError, with the reason, where no GPU can run the kernel
    with gpu_failures("the mma.sync kernel's logged launch"):
        q, k, v = make_inputs(cfg)
        Q, K, V = (to_device(cfg, x) for x in (q, k, v))
        out, records = mma.record_runs(cfg, Q, K, V, stream_k=args.order == "stream-k",
                                       warmup=args.warmup)
    sched = schedule_of_runs(records)
    _write_json(Path(args.out), {
        "device": device_record(), "date": _today(), "kernel": "tensorcore",
        "label": args.label, "info": _scalars(out.get("info", {})), "config": cfg.to_dict(),
        **sched})
    blocks = len(set(sched["block"]))
    span = (max(sched["end_ns"]) - min(sched["start_ns"])) / 1e3 if records.size else 0.0
    print(f"wrote {args.out}: {len(records)} runs of {blocks} blocks on "
          f"{len(set(sched['sm_id']))} SMs, {span:.1f} µs from the first start to the last end")
    return 0


def _scalars(info: dict) -> dict:
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool))}


def cmd_facts(args) -> int:
    from .gpu.facts import record_all
    facts, failures = record_all()
    _write_json(Path(args.out), {"device": device_record(), "date": _today(),
                                 "method": "CuPy RawKernel attributes (num_regs, "
                                           "local_size_bytes, shared_size_bytes) and "
                                           "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                 "facts": facts, "failures": failures})
    for f in facts:
        c = f["config"]
        print(f"{f['kernel']:<18} d={c['head_dim']:<4} {c['block_q']}×{c['block_k']:<4} "
              f"trace={int(f['traced'])} regs={f['registers_per_thread']:<4} "
              f"local={f['local_bytes_per_thread']:<5} smem={f['dynamic_smem_bytes']:<7} "
              f"blocks/SM={f['blocks_per_sm']}")
    for f in failures:
        print(f"FAILED {f['kernel']} {f['config']['head_dim']}: {f['error']}", file=sys.stderr)
    return 1 if failures else 0


def cmd_fairness(args) -> int:
    from .gpu.torch_reference import fairness
    got = fairness(reps=args.reps)
    rows = {}
    for who in ("naive", "torch"):
        t = got[who]
        rows[who] = {"median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
                     "reps": t.reps, "tflops": t.tflops, "peak_bytes": t.peak_bytes,
                     "stages": t.stages}
        print(f"{who:<6} {t.median_ms:9.4f} ms (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f})  "
              + ", ".join(f"{k}: {v:.4f}" for k, v in t.stages.items()))
    print(f"naive / PyTorch = {got['ratio']:.3f} (limit {got['limit']})")
    if args.out:
        _write_json(Path(args.out), {"device": device_record(), "date": _today(),
                                     "method": got["naive"].method, "config": got["config"],
                                     **rows, "ratio": got["ratio"], "limit": got["limit"]})
    return 0 if got["ratio"] <= got["limit"] else 1


def cmd_tiles(args) -> int:
    """Time every (block_q, block_k) each kernel takes at one N, d, dtype
    (engine.gpu.tilesweep), one kernel after the other; sweep_s holds each kernel's wall time,
    compiles included (the issue's target: the teaching kernel's sweep at N = 4096, d = 64
    under 20 s on an H200)."""
    from .gpu.tilesweep import sweep_tiles
    cfg = AttentionConfig(batch=args.batch, heads=args.heads, seq_q=args.seq, seq_k=args.seq,
                          head_dim=args.head_dim, dtype=args.dtype, causal=args.causal)
    results, skipped, sweep_s = [], [], {}
    for kernel in args.kernels:
        bar = Progress(1)

        def progress(done, total, label):
            bar.total = total
            bar.step(label)

        start = time.perf_counter()
        got, missed = sweep_tiles(cfg, (kernel,), args.reps, progress)
        sweep_s[kernel] = time.perf_counter() - start
        bar.close()
        results += got
        skipped += missed
    config = {k: v for k, v in cfg.to_dict().items() if k not in ("block_q", "block_k")}
    _write_json(Path(args.out), {
        "device": device_record(), "date": _today(),
        "method": results[0]["method"] if results else "", "command": " ".join(sys.argv[1:]),
        "config": config, "sweep_s": sweep_s,
        "results": [{k: v for k, v in r.items() if k != "method"} for r in results],
        "skipped": skipped})
    for r in results:
        print(f"{r['kernel']:<11} {r['block_q']:>4} × {r['block_k']:<4} {r['median_ms']:9.4f} ms "
              f"{r['tflops']:7.2f} TFLOP/s  {r['blocks_per_sm']} blocks/SM")
    for s in skipped:
        print(f"skipped {s['kernel']} {s['block_q']} × {s['block_k']}: {s['reason'][:160]}")
    for kernel, seconds in sweep_s.items():
        print(f"{kernel} sweep: {seconds:.1f} s")
    print(f"wrote {args.out}: {len(results)} shapes timed, {len(skipped)} skipped")
    return 0


def merge_bench(parts: list[dict]) -> dict:
    """One bench record from several of the same device, direction and method: their results
    and skipped lines in order, their commands joined; ValueError when they differ."""
    first = parts[0]
    for key in ("device", "direction", "method"):
        if any(p.get(key) != first.get(key) for p in parts[1:]):
            raise ValueError(f"the files differ in {key!r}; only files of one run can be merged")
    return {**first, "date": max(p["date"] for p in parts),
            "command": " ; ".join(p["command"] for p in parts),
            "results": [r for p in parts for r in p["results"]],
            "skipped": [r for p in parts for r in p.get("skipped", [])]}


def cmd_merge(args) -> int:
    parts = []
    for name in args.files:
        try:
            parts.append(json.loads(Path(name).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"cannot read {name}: {exc}", file=sys.stderr)
            return 2
    try:
        merged = merge_bench(parts)
    except ValueError as exc:
        print(f"cannot merge: {exc}", file=sys.stderr)
        return 2
    _write_json(Path(args.out), merged)
    _print_table(merged)
    return 0


def _decode_lines(cfg, args, sms: int) -> list[tuple]:
    """(label, config, num_splits, auto) of every timing of one decode shape: the auto split
    count, each other count of --sweep-splits that leaves no split empty, the paged caches
    (auto), then PyTorch's SDPA."""
    from .model.decode_config import splits_without_empty
    auto = cfg.splits_on(sms)
    lines = [("flash_decode", cfg, auto, True)]
    lines += [("flash_decode", cfg, s, False) for s in args.sweep_splits
              if s != auto and s <= cfg.seq_k and splits_without_empty(cfg.seq_k, s)]
    lines += [("flash_decode", cfg.with_(page_size=p), auto, True) for p in args.page_sizes]
    if args.torch:
        lines.append(("torch_sdpa", cfg, None, False))
    return lines


def cmd_decode_bench(args) -> int:
    from .decode import make_decode_inputs, scatter_pages
    from .model.decode_config import DecodeConfig, block_table
    from .gpu.decode_bench import decode_method, decode_record, time_flash_decode, time_sdpa
    from .gpu.runtime import live_gpu
    from .gpu.torch_reference import release_memory
    sms = live_gpu().sms
    out = Path(args.out)
    data = {"kind": "decode", "device": device_record(), "date": _today(),
            "method": decode_method(args.reps, args.warmup), "command": " ".join(sys.argv[1:]),
            "results": [], "skipped": []}
    shapes = [DecodeConfig(batch=b, heads=args.heads, kv_heads=args.kv_heads, seq_q=args.seq_q,
                           seq_k=n, head_dim=args.head_dim, dtype=args.dtype)
              for n in args.seq_k for b in args.batch]
    plan = [(cfg, _decode_lines(cfg, args, sms)) for cfg in shapes]
    bar = Progress(sum(len(lines) for _, lines in plan))
    for base, lines in plan:
        inputs = {}
        for label, cfg, splits, auto in lines:
            bar.step(f"{label} B={cfg.batch} seq_k={cfg.seq_k} splits={splits} "
                     f"page={cfg.page_size}")
            try:
                if None not in inputs:
                    release_memory()
                    inputs[None] = make_decode_inputs(base)
                if cfg.page_size not in inputs:      # the same cache, scattered over pages
                    q, k, v = inputs[None]
                    table = block_table(cfg)
                    inputs[cfg.page_size] = (q, scatter_pages(cfg, k, table),
                                             scatter_pages(cfg, v, table))
                if label == "torch_sdpa":
                    times = time_sdpa(cfg, inputs[None], args.reps, args.warmup, args.budget)
                else:
                    times = time_flash_decode(cfg, splits, inputs[cfg.page_size], args.reps,
                                              args.warmup, args.budget)
                data["results"].append(decode_record(cfg, label, splits, times, auto))
            except (ValueError, RuntimeError, MemoryError) as exc:   # the sweep goes on
                data["skipped"].append({"kernel": label, "config": cfg.to_dict(),
                                        "num_splits": splits,
                                        "reason": f"{type(exc).__name__}: {exc}"})
            _write_json(out, data)
        del inputs
    bar.close()
    for r in data["results"]:
        print(f"{r['kernel']:>12} B={r['batch']} seq_k={r['seq_k']:>6} page={r['page_size']} "
              f"splits={r['num_splits']} {r['median_ms']:.4f} ms "
              f"({100 * r['floor_fraction']:.0f}% of the HBM floor)")
    return 0


def _config_arguments(p, dtype: str, **defaults):
    """The AttentionConfig options of one run (trace, runs); defaults overrides sizes."""
    size = {"batch": 1, "heads": 2, "seq_q": 256, "seq_k": 256, "head_dim": 64, "block_q": 64,
            "block_k": 64, **defaults}
    p.add_argument("--batch", type=int, default=size["batch"])
    p.add_argument("--heads", type=int, default=size["heads"])
    p.add_argument("--seq-q", type=int, default=size["seq_q"])
    p.add_argument("--seq-k", type=int, default=size["seq_k"])
    p.add_argument("--head-dim", type=int, default=size["head_dim"], choices=HEAD_DIMS)
    p.add_argument("--block-q", type=int, default=size["block_q"], choices=BLOCK_SIZES)
    p.add_argument("--block-k", type=int, default=size["block_k"], choices=BLOCK_SIZES)
    p.add_argument("--dtype", default=dtype, choices=DTYPES)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--scale", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", default="normal")
    p.add_argument("--logit-scale", type=float, default=1.0)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="sweep sequence lengths and kernels; write JSON")
    b.add_argument("--seq", type=_ints, required=True, help="sequence lengths, e.g. 256,512")
    b.add_argument("--head-dim", type=_ints, default=[64])
    b.add_argument("--dtype", type=_names(DTYPES), default=["float16"])
    b.add_argument("--causal", type=_causal, default=[False], help="both, true or false")
    b.add_argument("--kernels", type=_names(KERNEL_CHOICES), default=["naive", "teaching"],
                   help="naive, teaching, tensorcore, torch (adds the SDPA backends), or "
                        "one SDPA backend: torch_flash, torch_cudnn, torch_math")
    b.add_argument("--block-q", type=int, default=64, choices=BLOCK_SIZES)
    b.add_argument("--block-k", type=int, default=64, choices=BLOCK_SIZES)
    b.add_argument("--tokens", type=int, default=16384,
                   help="batch = tokens // seq unless --batch is given (default 16384)")
    b.add_argument("--model-dim", type=int, default=1024,
                   help="heads = model_dim // head_dim unless --heads is given (default 1024)")
    b.add_argument("--batch", type=int, default=0)
    b.add_argument("--heads", type=int, default=0)
    b.add_argument("--reps", type=int, default=30)
    b.add_argument("--warmup", type=int, default=2)
    b.add_argument("--budget", type=float, default=None,
                   help="seconds per line; cuts repetitions (never below 20)")
    b.add_argument("--direction", default="forward", choices=DIRECTIONS,
                   help="forward (default) or backward: the backward pass alone, its forward "
                        "outputs made before timing; torch adds PyTorch's SDPA backward lines")
    b.add_argument("--out", required=True)
    b.set_defaults(func=cmd_bench)

    t = sub.add_parser("trace", help="run one traced flash forward pass; write NPZ (engine.trace_io format)")
    _config_arguments(t, dtype="float32")
    t.add_argument("--backend", default="auto", choices=("auto", "numpy", "cupy"))
    t.add_argument("--kernel", default="teaching", choices=("teaching", "tensorcore"))
    t.add_argument("--out", required=True)
    t.add_argument("--schedule-out", default=None,
                   help="also write the block-to-SM schedule (benchmarks/schedule_*.json format)")
    t.add_argument("--label", default="",
                   help="what the recorded schedule shows, in words (the Kernel page's selector)")
    t.add_argument("--warmup", type=int, default=1,
                   help="traced runs before the one recorded (default 1)")
    t.set_defaults(func=cmd_trace)

    r = sub.add_parser("runs", help="log every run of the mma.sync kernel's untraced build "
                                    "(whole items or stream-K); write a schedule file")
    _config_arguments(r, dtype="float16", heads=4, seq_q=4096, seq_k=4096, head_dim=128,
                      block_q=128, block_k=32)
    r.add_argument("--order", default="stream-k", choices=("whole", "stream-k"),
                   help="one block per item, or stream-K over the blocks that fit at once")
    r.add_argument("--out", required=True, help="the schedule file (schedule_*.json)")
    r.add_argument("--label", default="", help="what it shows, in words (the Kernel page's "
                                               "selector)")
    r.add_argument("--warmup", type=int, default=2, help="launches before the one logged")
    r.set_defaults(func=cmd_runs)

    g = sub.add_parser("tiles", help="time every tile shape of each kernel at one N and d; "
                                     "write JSON (benchmarks/results/tiles_*.json)")
    g.add_argument("--seq", type=int, required=True, help="N = seq_q = seq_k")
    g.add_argument("--head-dim", type=int, default=64, choices=HEAD_DIMS)
    g.add_argument("--dtype", default="float16", choices=DTYPES)
    g.add_argument("--causal", action="store_true")
    g.add_argument("--batch", type=int, default=1)
    g.add_argument("--heads", type=int, default=16)
    g.add_argument("--kernels", type=_names(("teaching", "tensorcore")),
                   default=["teaching", "tensorcore"])
    g.add_argument("--reps", type=int, default=20,
                   help="repetitions per shape (default 20, as the page's live sweep)")
    g.add_argument("--out", required=True)
    g.set_defaults(func=cmd_tiles)

    m = sub.add_parser("merge", help="join bench files of one device and direction into one "
                                     "(e.g. sweeps run at different tiles per head_dim)")
    m.add_argument("files", nargs="+")
    m.add_argument("--out", required=True)
    m.set_defaults(func=cmd_merge)

    k = sub.add_parser("facts", help="compile every kernel of the project and record its "
                                     "registers, spills, shared memory and blocks per SM")
    k.add_argument("--out", required=True)
    k.set_defaults(func=cmd_facts)

    dc = sub.add_parser("decode-bench", help="time Flash-Decoding steps (split counts, paged "
                                             "caches) beside PyTorch SDPA; write JSON")
    dc.add_argument("--batch", type=_ints, default=[1, 2, 4, 8])
    dc.add_argument("--seq-k", type=_ints, default=[32768, 65536, 131072])
    dc.add_argument("--heads", type=int, default=32)
    dc.add_argument("--kv-heads", type=int, default=8)
    dc.add_argument("--seq-q", type=int, default=1)
    dc.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    dc.add_argument("--dtype", default="float16", choices=DTYPES)
    dc.add_argument("--sweep-splits", type=_ints, default=[1, 2, 4, 8, 16, 32, 64, 128],
                    help="split counts timed beside the auto rule's (1 = the plain kernel)")
    dc.add_argument("--page-sizes", type=_ints, default=[16, 64],
                    help="paged caches timed at the auto split count")
    dc.add_argument("--no-torch", dest="torch", action="store_false",
                    help="leave out PyTorch's SDPA")
    dc.add_argument("--reps", type=int, default=50)
    dc.add_argument("--warmup", type=int, default=3)
    dc.add_argument("--budget", type=float, default=0.3,
                    help="seconds per line; repetitions are cut to fit, never below 20")
    dc.add_argument("--out", required=True)
    dc.set_defaults(func=cmd_decode_bench)

    f = sub.add_parser("fairness", help="naive baseline vs PyTorch matmul-softmax-matmul")
    f.add_argument("--reps", type=int, default=30)
    f.add_argument("--out", default=None)
    f.set_defaults(func=cmd_fairness)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
