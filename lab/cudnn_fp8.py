"""Lab: cuDNN's own FP8 attention forward (the cuDNN frontend's sdpa_fp8 graph, Python bindings
from the nvidia-cudnn-frontend wheel, on the cuDNN that PyTorch loads) timed in one rotation
with this project's FP8 and float16 kernels and with cuDNN's float16 (PyTorch's SDPA, cuDNN
backend). Until now the FP8 notes could only set FlashAttention-3's and cuDNN's *published*
FP8 figures (H100) beside ours; this measures a peer's FP8 on the GPU at hand.

cuDNN's FP8 here is per-tensor: q, k and v each carry one scale (amax / 448), P is scaled by
448 into e4m3, and O comes out in e4m3 (Hopper's FP8 forward writes FP8 O; ours writes
bfloat16 with a scale per tile of q, k and v). Before any timing, each line is checked
against a float64 attention of the inputs it actually received (cuDNN FP8: the dequantized
e4m3 tensors): cuDNN FP8's relative RMS error must be under 0.1 (its O is rounded to e4m3,
3 mantissa bits: about 3.6% RMS from that rounding alone), cuDNN float16's under 1e-2; ours
pass lab/kv_stages.py's checks (the emulation and float64). Timing as lab/kv_stages.py
times: alternately, median of 30 with the L2 flushed and the hold kernel, the better of two
rounds; d = 128, non-causal, B·N = 32k tokens x 8 heads.

Needs the frontend's bindings: `pip install --no-deps --target <dir>
nvidia_cudnn_frontend-1.14.1-cp312-...whl` (1.8 MB, no dependencies) and <dir> on
PYTHONPATH (`--frontend <dir>` adds it).
Run on an H200, 2026-11-29 06:44 UTC (lab/NOTES.md, "cuDNN's own FP8 forward on the same GPU"):
every check passed; ours 1.02x cuDNN's FP8 at 8k-16k, 0.98x at 2k. Its graph was then moved
into engine/gpu/cudnn_fp8.py (the FP8 sweep's line), which this script now uses; run again
so at 07:23 UTC: every check passed, ours 1.01-1.02x cuDNN's FP8 at 8k-16k, 0.98x at 2k.
Run on a Hopper GPU: python3 lab/cudnn_fp8.py [--frontend DIR]"""
import math
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402
from fp8_wide_tiles import check, fp8_config  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128


def frontend():
    if "--frontend" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--frontend") + 1])
    import torch
    print("PyTorch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), flush=True)
    import cudnn          # after torch has loaded libcudnn, so the bindings find the same one
    print("cuDNN frontend", getattr(cudnn, "__version__", "?"), "backend",
          cudnn.backend_version(), flush=True)
    return torch, cudnn


def config(n: int):
    """The FP8 config cuDNN's line is built for (d = 128, non-causal; its shape comes from
    the tensors)."""
    from engine.model.config import AttentionConfig
    return AttentionConfig(dtype="float8_e4m3", head_dim=D, seq_q=n, seq_k=n, block_q=128,
                           block_k=192)


def attention64(torch, q, k, v):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v


def rel_rms(torch, got, want) -> float:
    return float(torch.sqrt(((got.double() - want) ** 2).mean() / (want ** 2).mean()))


def sdpa_cudnn_f16(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional

    def run(q, k, v):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v)
    return run


def check_peers(torch, cudnn) -> dict:
    """cuDNN FP8 and cuDNN float16 against float64 of their own inputs, at B 2, H 4, N 1024."""
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn((2, 4, 1024, D), generator=g, device="cuda").half() for _ in range(3))
    from engine.gpu.cudnn_fp8 import CudnnFp8Run, per_tensor_e4m3
    ref16 = attention64(torch, q.double(), k.double(), v.double())
    fp8 = CudnnFp8Run(config(1024), q, k, v, o_amax=float(ref16.abs().max()))
    fp8.run()
    torch.cuda.synchronize()
    inputs64 = [x8.double() * s for x8, s in (per_tensor_e4m3(torch, x) for x in (q, k, v))]
    err8 = rel_rms(torch, fp8.output(), attention64(torch, *inputs64))
    err16 = rel_rms(torch, sdpa_cudnn_f16(torch)(q, k, v), ref16)
    ok = {"cudnn fp8": err8 < 0.1, "cudnn f16": err16 < 1e-2}
    print(f"cuDNN FP8 rel RMS against float64 of its e4m3 inputs {err8:.2e}; "
          f"cuDNN float16 {err16:.2e}; {ok}", flush=True)
    return ok


def main():
    torch, cudnn = frontend()
    kv_stages.BUILDS = {"f16": (False, 128, {}), "fp8 192": (True, 192, {})}
    rng = np.random.default_rng(34)
    ok = check_peers(torch, cudnn)
    for name, (fp8, bk, *_) in kv_stages.BUILDS.items():
        L, undo = kv_stages.use(name)
        try:
            if fp8:
                ok[name] = all(check(bk, nq, nk, c, int(rng.integers(2**31)), inputs)
                               for nq, nk, inputs in kv_stages.SHAPES for c in (False, True))
            else:
                ok[name] = max(check_f16(L, D, c, rng) for c in (False, True)) < 1e-2
        finally:
            undo()
    print("validated:", ok, flush=True)
    f16_cudnn = sdpa_cudnn_f16(torch)
    keep = {}

    def make_runs(kw, x):
        from engine.model.config import AttentionConfig
        bh, n = kw["heads"], kw["seq_q"]
        t = [torch.as_tensor(a, device="cuda").reshape(bh // 8, 8, n, D) for a in x]
        runs = {}
        if ok["f16"]:
            L, undo = kv_stages.use("f16")
            cfg = AttentionConfig(dtype="float16", head_dim=D, block_q=128, block_k=128, **kw)
            runs["ours f16"], _ = L.prepare(cfg, *x, False)
            undo()
        if ok["fp8 192"]:
            L, undo = kv_stages.use("fp8 192")
            cfg = fp8_config(192, **kw)
            runs["ours fp8"], _ = L.prepare(cfg, L.quantize(cfg, *x), False)
            undo()
        if ok["cudnn f16"]:
            runs["cudnn f16"] = lambda: f16_cudnn(*t)
        if ok["cudnn fp8"]:
            from engine.gpu.cudnn_fp8 import CudnnFp8Run
            keep["fp8"] = CudnnFp8Run(config(n), *t)
            runs["cudnn fp8"] = keep["fp8"].run
        return runs

    rows = kv_stages.time_shapes([(n, (32768 // n) * 8) for n in (2048, 8192, 16384)],
                                 make_runs, rng)
    names = ["ours f16", "ours fp8", "cudnn fp8", "cudnn f16"]
    kv_stages.print_ratios(rows, names, f"d = {D}, non-causal, B·H·N = 32k tokens × 8 heads")
    print("\nours FP8 over cuDNN FP8 (time ratio, above 1: ours faster):")
    for n, bh, tf in rows:
        if "cudnn fp8" in tf and "ours fp8" in tf:
            print(f"N = {n:5}: {tf['ours fp8'] / tf['cudnn fp8']:.3f}")


if __name__ == "__main__":
    main()
