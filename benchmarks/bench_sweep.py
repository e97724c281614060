"""Time kernels over a grid of configurations and write a bench file (benchmarks/results/
bench_*.json, kind "bench" of engine.recorded's schema).

  python -m benchmarks.bench_sweep --seq 256,512,1024 --head-dim 64,128 \\
      --dtype float16,float32 --causal both --kernels naive,teaching,torch --out bench_x.json
  python -m benchmarks.bench_sweep --direction backward --seq 1024,4096 \\
      --kernels naive,tensorcore,torch --out bench_x_backward.json   (the backward pass alone)

The file is rewritten after every configuration, so an interrupted sweep keeps what it
measured. Sizes whose naive S and P (backward: P, dP and dS) would not fit in free GPU memory
are skipped with a note, never attempted.

Every line is validated before it is timed: the same build on a shorter run of the
configuration (batch 1, 2 heads, N at most VALIDATE_N) against float64 of the same inputs,
its output (forward) or its dQ, dK and dV (backward: validate_backward); a line whose error
passes its dtype's limit (validation_limit, BACKWARD_VALIDATION_LIMITS) is refused and
skipped, never recorded. Each record keeps its validation (error, limit, N). dtype
float8_e4m3 times the FP8 build (--kernels tensorcore) and cuDNN's own FP8 forward
(--kernels cudnn_fp8, engine.gpu.cudnn_fp8) alone: the other lines take 16-bit inputs.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

from engine.inputs import make_dout, make_inputs
from engine.model.config import (BLOCK_SIZES, CONFIG_DTYPES, DIRECTIONS, FP8_DTYPES,
                                 AttentionConfig)
from engine.model.formats import number_format
from engine.model.units import format_bytes
from engine.results import timing_record

from .recording import (Progress, causal_choice, command_line, device_record, ints, job_parser,
                        names, run_job, stamped, today, write_json)

TORCH_LINES = ("torch_flash", "torch_cudnn", "torch_math")
FP8_LINES = ("tensorcore", "cudnn_fp8")      # the lines an FP8 config times
KERNEL_CHOICES = ("naive", "teaching", "tensorcore", "torch", *TORCH_LINES, "cudnn_fp8")


def free_device_bytes() -> int:
    from engine.gpu.runtime import free_device_bytes     # CuPy only where a sweep runs
    from engine.gpu.torch_reference import release_memory
    release_memory()                                # PyTorch's and CuPy's cached blocks
    return free_device_bytes()


def lines(kernels: list[str]) -> list[str]:
    """The timed lines of --kernels: torch stands for PyTorch's three SDPA backends."""
    out = []
    for k in kernels:
        out.extend(TORCH_LINES if k == "torch" else [k])
    return out


def block_k_of(args, d: int, dtype: str) -> int:
    """--block-k, or for an FP8 config the first of --fp8-block-k that the FP8 build takes at
    this head_dim and --block-q (its registry row's shapes)."""
    if args.fp8_block_k and dtype in FP8_DTYPES:
        from engine.model.registry import kernel
        for bk in args.fp8_block_k:
            if (d, args.block_q, bk) in kernel("wgmma fp8").shapes:
                return bk
    return args.block_k


def configs(args) -> list[AttentionConfig]:
    cfgs = []
    for d in args.head_dim:
        for dtype in args.dtype:
            for causal in args.causal:
                for n in args.seq:
                    batch = args.batch or max(1, args.tokens // n)
                    heads = args.heads or max(1, args.model_dim // d)
                    cfgs.append(AttentionConfig(batch=batch, heads=heads, seq_q=n, seq_k=n,
                                                head_dim=d, block_q=args.block_q,
                                                block_k=block_k_of(args, d, dtype),
                                                dtype=dtype, causal=causal))
    return cfgs


def bench_one(cfg, line, args, inputs):
    """inputs: q, k, v (and dout for the backward), made once per configuration."""
    from engine.gpu.timing import benchmark_gpu
    from engine.gpu.torch_reference import benchmark_torch
    if line == "cudnn_fp8":
        from engine.gpu.cudnn_fp8 import benchmark_cudnn_fp8
        return benchmark_cudnn_fp8(cfg, args.reps, args.warmup, args.budget, inputs[:3])
    if line in TORCH_LINES:              # PyTorch draws dout itself, from make_dout(cfg)
        return benchmark_torch(cfg, line, args.reps, args.warmup, args.budget, inputs[:3],
                               direction=args.direction)
    algorithm = "naive" if line == "naive" else "flash"
    return benchmark_gpu(cfg, algorithm, line, False, args.reps, args.warmup, args.budget,
                         inputs, direction=args.direction)


VALIDATE_N = 1024
# Relative error (Frobenius) of a 16-bit line's output against float64: float16 keeps 11
# significant bits and bfloat16 8, and P is rounded to that dtype before P·V; float32 lines
# (tf32 in PyTorch's math line aside) land far below.
VALIDATION_LIMITS = {"float32": 2e-3, "float16": 2e-3, "bfloat16": 8e-3}


def probabilities64(cfg: AttentionConfig, q, k) -> np.ndarray:
    """P = softmax(scale · Q Kᵀ) in float64, (B, H, Nq, Nk), causal top-left as the kernels."""
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64))
    s *= cfg.softmax_scale
    if cfg.causal:
        s[..., np.arange(cfg.seq_k)[None, :] > np.arange(cfg.seq_q)[:, None]] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def attention64(cfg: AttentionConfig, q, k, v) -> np.ndarray:
    """Float64 attention of q, k, v (B, H, N, d), causal top-left as the kernels."""
    return probabilities64(cfg, q, k) @ v.astype(np.float64)


def rel_err(got, want) -> float:
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# cuDNN's FP8 forward writes O in e4m3: its own rounding adds at most e4m3's unit roundoff,
# 2^-4 of each element, to the quantization's error the FP8 limit allows.
E4M3_OUTPUT_ROUNDING = number_format("float8_e4m3").unit_roundoff


def validation_limit(cfg: AttentionConfig, q, k, v, O64, line: str = "") -> float:
    """The error a line may have: VALIDATION_LIMITS by dtype; FP8, its emulation's own error
    against float64 (the quantization's, which any correct FP8 kernel shares) plus a tenth
    and 1e-3, and for cuDNN's FP8 line (e4m3 O) E4M3_OUTPUT_ROUNDING more."""
    if cfg.is_fp8:
        from engine.cpu.fp8 import emulate
        limit = 1.1 * rel_err(emulate(cfg, q, k, v).output, O64) + 1e-3
        return limit + (E4M3_OUTPUT_ROUNDING if line == "cudnn_fp8" else 0.0)
    return VALIDATION_LIMITS[cfg.dtype]


def line_output(cfg: AttentionConfig, line: str, q, k, v) -> np.ndarray:
    """The line's forward output on q, k, v, on the GPU."""
    import engine
    if line == "cudnn_fp8":
        from engine.gpu.cudnn_fp8 import cudnn_fp8_output
        return cudnn_fp8_output(cfg, q, k, v)
    if line in TORCH_LINES:
        from engine.gpu.torch_reference import sdpa_output
        return sdpa_output(cfg, line, q, k, v)
    algorithm = "naive" if line == "naive" else "flash"
    return engine.run(cfg, q, k, v, backend="cupy", algorithm=algorithm,
                      kernel="teaching" if line == "naive" else line).output


def shorter_run(cfg: AttentionConfig) -> AttentionConfig:
    """The configuration a line of cfg is validated on: batch 1, 2 heads, N at most
    VALIDATE_N."""
    return cfg.with_(batch=1, heads=2, seq_q=min(cfg.seq_q, VALIDATE_N),
                     seq_k=min(cfg.seq_k, VALIDATE_N))


@functools.lru_cache(maxsize=1)
def reference(small: AttentionConfig, backward: bool) -> tuple:
    """The inputs of a validation run and their float64 result, made once for all the lines
    of a configuration (the sweep checks them one after another): (q, k, v, O64), or with
    backward (q, k, v, dout, gradients64). Callers must not write into them."""
    q, k, v = make_inputs(small)
    if not backward:
        return q, k, v, attention64(small, q, k, v)
    dout = make_dout(small)
    return q, k, v, dout, gradients64(small, q, k, v, dout)


def validate(cfg: AttentionConfig, line: str) -> dict:
    """The line's build on a shorter run of cfg against float64: {"rel_err", "limit", "seq"};
    ValueError when the error passes the limit (the line is refused)."""
    small = shorter_run(cfg)
    n = small.seq_q
    q, k, v, O64 = reference(small, False)
    err = rel_err(line_output(small, line, q, k, v), O64)
    limit = validation_limit(small, q, k, v, O64, line)
    if not err <= limit:                       # NaN fails too
        raise ValueError(f"refused: on N={n} its output differs from float64 by {err:.2e} "
                         f"(relative), over the limit {limit:.2e}; not timed")
    return {"rel_err": err, "limit": limit, "seq": n}


# Relative error (Frobenius) of a line's dQ, dK or dV against float64: the backward's target
# for 16-bit gradients (float16, 11 significant bits; bfloat16 has 8, and P and dS are rounded
# to the dtype before their products, so twice as much); float32 lines land far below theirs.
BACKWARD_VALIDATION_LIMITS = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 2e-2}


def gradients64(cfg: AttentionConfig, q, k, v, dout) -> dict:
    """dq, dk, dv (B, H, N, d) in float64 from the closed forms: P = softmax(S), O = P V,
    dV = Pᵀ dO, dP = dO Vᵀ, D = rowsum(dO ∘ O), dS = P ∘ (dP − D), dQ = scale · dS K,
    dK = scale · dSᵀ Q (causal top-left as the kernels)."""
    p = probabilities64(cfg, q, k)
    q, k, v, do = (np.asarray(x, dtype=np.float64) for x in (q, k, v, dout))
    o = p @ v
    ds = p * (do @ np.swapaxes(v, -1, -2) - (do * o).sum(-1, keepdims=True))
    return {"dq": cfg.softmax_scale * ds @ k,
            "dk": cfg.softmax_scale * np.swapaxes(ds, -1, -2) @ q,
            "dv": np.swapaxes(p, -1, -2) @ do}


def line_gradients(cfg: AttentionConfig, line: str, q, k, v, dout,
                   backend: str = "cupy") -> dict:
    """The line's dq, dk, dv on q, k, v and dout (on the GPU; backend "numpy" runs our lines'
    NumPy algorithm instead, which CPU tests use)."""
    import engine
    if line in TORCH_LINES:
        from engine.gpu.torch_reference import sdpa_gradients
        return sdpa_gradients(cfg, line, q, k, v, dout)
    g = engine.run_backward(cfg, q, k, v, dout, backend=backend,
                            algorithm="naive" if line == "naive" else "flash",
                            kernel="teaching" if line == "naive" else line)
    return {"dq": g.dq, "dk": g.dk, "dv": g.dv}


def validate_backward(cfg: AttentionConfig, line: str, backend: str = "cupy") -> dict:
    """The line's backward on a shorter run of cfg against float64 gradients: {"rel_err" (the
    largest of dq's, dk's and dv's), "limit", "seq", "rel_errs"}; ValueError naming the
    gradient when one passes the limit (the line is refused)."""
    small = shorter_run(cfg)
    n = small.seq_q
    q, k, v, dout, want = reference(small, True)
    got = line_gradients(small, line, q, k, v, dout, backend)
    errs = {name: rel_err(got[name], want[name]) for name in want}
    limit = BACKWARD_VALIDATION_LIMITS[small.dtype]
    for name, err in errs.items():
        if not err <= limit:                   # NaN fails too
            raise ValueError(f"refused: on N={n} its {name} differs from float64 by {err:.2e} "
                             f"(relative), over the limit {limit:.2e}; not timed")
    return {"rel_err": max(errs.values()), "limit": limit, "seq": n, "rel_errs": errs}


def times(cfg: AttentionConfig, line: str) -> bool:
    """Whether the sweep times `line` at cfg: an FP8 config only our FP8 build (tensorcore)
    and cuDNN's FP8 line, which in turn times FP8 configs only."""
    return line in FP8_LINES if cfg.is_fp8 else line != "cudnn_fp8"


def naive_need(cfg: AttentionConfig, direction: str) -> int:
    from engine.model.iomodel import peak_memory
    return peak_memory(cfg, "naive", direction=direction)


def sweep(args) -> int:
    from engine.gpu.timing import method_text
    timed = lines(args.kernels)
    cfgs = configs(args)
    out = Path(args.out)
    backward = args.direction == "backward"
    data = stamped("bench", device=device_record(), date=today(), direction=args.direction,
                   method=method_text(args.reps, args.warmup,
                                      " Repetitions are cut to fit --budget seconds per line, "
                                      "never below 20." if args.budget else "",
                                      direction=args.direction),
                   command=command_line(), results=[], skipped=[])
    bar = Progress(sum(times(cfg, line) for cfg in cfgs for line in timed))
    for cfg in cfgs:
        inputs = make_inputs(cfg) + ((make_dout(cfg),) if backward else ())
        for line in timed:
            if not times(cfg, line):
                continue
            label = (f"{line} N={cfg.seq_q} d={cfg.head_dim} {cfg.dtype}"
                     f"{' causal' if cfg.causal else ''}{' backward' if backward else ''}")
            bar.step(label)
            reason = None
            free = free_device_bytes()
            if line in ("naive", "torch_math"):
                need = naive_need(cfg, args.direction)
                if need > 0.8 * free:
                    held = "P, dP and dS" if backward else "S and P"
                    reason = (f"naive {held} would need {format_bytes(need)}; "
                              f"{format_bytes(free)} free")
            if reason is None:
                try:
                    checked = (validate_backward(cfg, line) if backward
                               else validate(cfg, line))
                    timing = bench_one(cfg, line, args, inputs)
                    record = timing_record(cfg, line, timing, args.direction)
                    if checked:
                        record["validated"] = checked
                    data["results"].append(record)
                except (ValueError, RuntimeError, MemoryError) as exc:   # out of memory too:
                    reason = f"{type(exc).__name__}: {exc}"               # the sweep goes on
            if reason is not None:
                data["skipped"].append({"kernel": line, "config": cfg.to_dict(),
                                        "reason": reason})
            write_json(out, data)
    bar.close()
    print_table(data)
    return 0


def print_table(data: dict):
    print(f"{data['direction']} pass")
    print(f"{'kernel':<12}{'N':>7}{'d':>5} {'dtype':<8}{'causal':<7}{'median ms':>11}"
          f"{'TFLOP/s':>9}{'peak MiB':>9}")
    for r in data["results"]:
        print(f"{r['kernel']:<12}{r['seq_q']:>7}{r['head_dim']:>5} {r['dtype']:<8}"
              f"{str(r['causal']):<7}{r['median_ms']:>11.4f}{r['tflops']:>9.2f}"
              f"{r['peak_bytes'] / 2**20:>9.1f}")
    for s in data["skipped"]:
        c = s["config"]
        print(f"skipped {s['kernel']} N={c['seq_q']} d={c['head_dim']} {c['dtype']} "
              f"causal={c['causal']}: {s['reason'][:160]}")


def parser():
    b = job_parser(__doc__, "bench_sweep")
    b.add_argument("--seq", type=ints, required=True, help="sequence lengths, e.g. 256,512")
    b.add_argument("--head-dim", type=ints, default=[64])
    b.add_argument("--dtype", type=names(CONFIG_DTYPES), default=["float16"],
                   help="float32, float16, bfloat16 or float8_e4m3 (the FP8 build)")
    b.add_argument("--causal", type=causal_choice, default=[False], help="both, true or false")
    b.add_argument("--kernels", type=names(KERNEL_CHOICES), default=["naive", "teaching"],
                   help="naive, teaching, tensorcore, torch (adds the SDPA backends), or "
                        "one SDPA backend: torch_flash, torch_cudnn, torch_math")
    b.add_argument("--block-q", type=int, default=64, choices=BLOCK_SIZES)
    b.add_argument("--block-k", type=int, default=64, choices=BLOCK_SIZES)
    b.add_argument("--fp8-block-k", type=ints, default=[],
                   help="the FP8 configs' key tile: the first of these the FP8 build has at "
                        "that head_dim (e.g. 192,256: 192 at d = 128, 256 at d = 64), else "
                        "--block-k")
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
    return b


def main(argv: list[str] | None = None) -> int:
    return run_job(parser(), sweep, argv)


if __name__ == "__main__":
    sys.exit(main())
