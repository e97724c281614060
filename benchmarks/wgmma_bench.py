"""Benchmark the Hopper wgmma kernel beside the mma.sync tensor-core kernel, the project's naive
baseline and PyTorch's SDPA flash and cuDNN backends, all through the app's harness
(engine.gpu.timing: CUDA events, warm-up, L2 flushed before each repetition, median of 30).

float16, B = 2, H = 16 (B·H = 32), N = 4096 and 8192, d = 64 and 128, causal and not. The
mma.sync and naive lines go through engine.benchmark; the wgmma kernel through
engine.gpu.launchers.wgmma.prepare, timed by the same engine.gpu.timing.time_stages, so that both issue-order
builds and every wgmma shape (also those engine.gpu.launchers.mma does not dispatch) are timed; at
N = 4096 also its traced build.

Usage: python benchmarks/wgmma_bench.py OUT_DIR  -> OUT_DIR/wgmma_bench.json and a table.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cupy  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import engine  # noqa: E402
from engine.gpu import timing
from engine.gpu.launchers import wgmma
from engine.gpu.backend import to_device  # noqa: E402

BATCH, HEADS = 2, 16
SEQS = (4096, 8192)
REPS, WARMUP = 30, 3
TRACE_SEQ = 4096            # the traced build is timed here too (issue 5: tracing overhead)
MMA_SYNC_SHAPES = {64: ((128, 64),), 128: ((128, 32), (64, 64))}   # fastest in run 3
WGMMA_SHAPES = {d: tuple((bq, bk) for dd, bq, bk in wgmma.SHAPES if dd == d) for d in (64, 128)}
# Builds of the consumers' issue order to time; WGMMA_BUILDS=0 times the free-order one only.
PINGPONG_BUILDS = tuple(int(x) for x in os.environ.get("WGMMA_BUILDS", "0,1").split(","))


def timed(cfg, stages) -> dict:
    totals, _ = timing.time_stages(stages, REPS, WARMUP)
    out = timing.summarize(totals, cfg)
    timing.check_ceilings(cfg, "flash", False, out["median_ms"], "benchmark")
    return out


def line(kernel, cfg, t: dict, **extra) -> dict:
    return {"kernel": kernel, "batch": cfg.batch, "heads": cfg.heads, "seq_q": cfg.seq_q,
            "seq_k": cfg.seq_k, "head_dim": cfg.head_dim, "dtype": cfg.dtype,
            "causal": cfg.causal, "block_q": cfg.block_q, "block_k": cfg.block_k,
            "median_ms": t["median_ms"], "p10_ms": t["p10_ms"], "p90_ms": t["p90_ms"],
            "reps": t["reps"], "tflops": t["tflops"], **extra}


def from_engine(label, cfg, **kw) -> dict:
    t = engine.benchmark(cfg, backend="cupy", reps=REPS, warmup=WARMUP, **kw)
    return line(label, cfg, {"median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
                              "reps": t.reps, "tflops": t.tflops})


def bench(n: int, d: int, causal: bool) -> list[dict]:
    base = engine.AttentionConfig(batch=BATCH, heads=HEADS, seq_q=n, seq_k=n, head_dim=d,
                                  dtype="float16", causal=causal, block_q=128, block_k=128)
    q, k, v = engine.make_inputs(base)
    Q, K, V = (to_device(base, x) for x in (q, k, v))
    rows = []
    for pingpong in PINGPONG_BUILDS:
        wgmma.PINGPONG = pingpong
        for bq, bk in WGMMA_SHAPES[d]:
            cfg = base.with_(block_q=bq, block_k=bk)
            try:
                run, _ = wgmma.prepare(cfg, Q, K, V, False)
                rows.append(line("wgmma", cfg, timed(cfg, [("kernel", run)]),
                                 pingpong=pingpong))
                if n == TRACE_SEQ:
                    run, _ = wgmma.prepare(cfg, Q, K, V, True)
                    rows.append(line("wgmma", cfg, timed(cfg, [("kernel", run)]),
                                     pingpong=pingpong, trace=True))
            except Exception as exc:  # report the failing build and time the others
                print(f"wgmma pingpong={pingpong} {cfg}: {type(exc).__name__}: {exc}")
    for bq, bk in MMA_SYNC_SHAPES[d]:
        rows.append(from_engine("tensorcore", base.with_(block_q=bq, block_k=bk),
                                algorithm="flash", kernel="tensorcore"))
    rows.append(from_engine("naive", base, algorithm="naive"))
    tq, tk, tv = (torch.as_tensor(x, device="cuda").reshape(BATCH, HEADS, n, d) for x in (Q, K, V))
    for name, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION),
                          ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)):
        def call(backend=backend):
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal,
                                               scale=base.softmax_scale)
        try:
            rows.append(line(name, base, timed(base, [("kernel", call)])))
        except Exception as exc:  # a backend PyTorch does not offer here: note and go on
            print(f"{name} n={n} d={d} causal={causal}: {type(exc).__name__}: {exc}")
    del Q, K, V
    cupy.get_default_memory_pool().free_all_blocks()
    return rows


def table(rows: list[dict]) -> str:
    out = ["N     d   causal  kernel        tiles     ms       TFLOP/s  × naive"]
    for n in SEQS:
        for d in (128, 64):
            for causal in (False, True):
                sel = [r for r in rows if (r["seq_q"], r["head_dim"], r["causal"]) ==
                       (n, d, causal)]
                naive = next((r["median_ms"] for r in sel if r["kernel"] == "naive"), None)
                for r in sel:
                    x = f"{naive / r['median_ms']:.2f}" if naive else "-"
                    name = (r["kernel"] + ("/pp" if r.get("pingpong") else "")
                            + ("/tr" if r.get("trace") else ""))
                    out.append(f"{n:<5} {d:<3} {str(causal):<7} {name:<13} "
                               f"{r['block_q']}x{r['block_k']:<5} {r['median_ms']:8.3f} "
                               f"{r['tflops']:8.1f}  {x}")
    return "\n".join(out)


def main(out_dir: str) -> None:
    """Every configuration in turn; the JSON is rewritten after each, so a cut-off run keeps
    what it measured."""
    props = cupy.cuda.runtime.getDeviceProperties(0)
    doc = {"device": props["name"].decode(), "date": datetime.date.today().isoformat(),
           "cupy": cupy.__version__, "torch": torch.__version__,
           "method": timing.method_text(REPS, WARMUP), "results": []}
    for n in SEQS:
        for d in (128, 64):
            for causal in (False, True):
                doc["results"] += bench(n, d, causal)
                Path(out_dir, "wgmma_bench.json").write_text(json.dumps(doc, indent=1))
                print(f"done: N={n} d={d} causal={causal}", flush=True)
    print(table(doc["results"]))


if __name__ == "__main__":
    main(sys.argv[1])
