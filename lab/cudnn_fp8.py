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
Run on a Hopper GPU: python3 lab/cudnn_fp8.py [--frontend DIR]"""
import math
import sys

import numpy as np

sys.path[:0] = ["lab", "tests", "."]
import kv_stages  # noqa: E402
from fp8_wide_tiles import check, fp8_config  # noqa: E402
from overlap_fence import check_f16  # noqa: E402

D = 128
E4M3_MAX = 448.0


def frontend():
    if "--frontend" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--frontend") + 1])
    import torch
    print("PyTorch", torch.__version__, "cuDNN", torch.backends.cudnn.version(), flush=True)
    import cudnn          # after torch has loaded libcudnn, so the bindings find the same one
    print("cuDNN frontend", getattr(cudnn, "__version__", "?"), "backend",
          cudnn.backend_version(), flush=True)
    return torch, cudnn


def per_tensor_e4m3(torch, x):
    """x (float16, on the GPU) -> (e4m3 tensor, descale): one scale for the whole tensor."""
    amax = float(x.abs().max())
    scale = E4M3_MAX / amax
    return (x.float() * scale).to(torch.float8_e4m3fn), 1.0 / scale


class CudnnFp8:
    """One sdpa_fp8 graph for q, k, v of shape (B, H, N, d), float16 in; run() enqueues it on
    the default stream."""

    def __init__(self, torch, cudnn, q, k, v, scale_o=E4M3_MAX):
        b, h, n, d = q.shape
        self.torch = torch
        f8, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        (self.q, dq), (self.k, dk), (self.v, dv) = (per_tensor_e4m3(torch, t) for t in (q, k, v))
        self.descales = (dq, dk, dv)
        self.scale_o = scale_o
        dev = q.device
        scalar = lambda x: torch.full((1, 1, 1, 1), x, dtype=torch.float32, device=dev)  # noqa
        values = {"descale_q": dq, "descale_k": dk, "descale_v": dv,
                  "descale_s": 1.0 / E4M3_MAX, "scale_s": E4M3_MAX, "scale_o": scale_o}
        self.handle = cudnn.create_handle()
        cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        g = cudnn.pygraph(io_data_type=f8, intermediate_data_type=f32, compute_data_type=f32,
                          handle=self.handle)
        dims, strides = [b, h, n, d], [h * n * d, n * d, d, 1]
        tq, tk, tv = (g.tensor(name=nm, dim=dims, stride=strides, data_type=f8)
                      for nm in ("q", "k", "v"))
        ts = {nm: g.tensor(name=nm, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32)
              for nm in values}
        kwargs = dict(q=tq, k=tk, v=tv, **ts, attn_scale=1.0 / math.sqrt(d),
                      use_causal_mask=False, name="sdpa_fp8")
        try:
            o, _, amax_s, amax_o = g.sdpa_fp8(is_inference=True, **kwargs)
        except TypeError:                   # newer bindings name it generate_stats
            o, _, amax_s, amax_o = g.sdpa_fp8(generate_stats=False, **kwargs)
        o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(f8)
        for a in (amax_s, amax_o):
            a.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(f32)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        self.o = torch.empty(dims, dtype=torch.float8_e4m3fn, device=dev)
        self.amax = [scalar(0.0), scalar(0.0)]
        self.pack = {tq: self.q, tk: self.k, tv: self.v, o: self.o,
                     amax_s: self.amax[0], amax_o: self.amax[1]}
        self.pack.update({ts[nm]: scalar(x) for nm, x in values.items()})
        self.workspace = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8,
                                     device=dev)
        self.graph = g

    def run(self):
        self.graph.execute(self.pack, self.workspace, handle=self.handle)

    def output(self):
        return self.o.float() / self.scale_o

    def inputs64(self):
        return [t.double() * s for t, s in zip((self.q, self.k, self.v), self.descales)]


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
    ref16 = attention64(torch, q.double(), k.double(), v.double())
    scale_o = E4M3_MAX / float(ref16.abs().max())
    fp8 = CudnnFp8(torch, cudnn, q, k, v, scale_o=scale_o)
    fp8.run()
    torch.cuda.synchronize()
    err8 = rel_rms(torch, fp8.output(), attention64(torch, *fp8.inputs64()))
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
            keep["fp8"] = CudnnFp8(torch, cudnn, *t)
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
