"""cuDNN's own FP8 attention forward as a reference line beside the project's FP8 kernel
(line "cudnn_fp8" of the FP8 sweeps): the cuDNN frontend's sdpa_fp8 graph on the cuDNN that
PyTorch loads, timed by the same harness (engine.gpu.timing).

It is per-tensor FP8, as cuDNN's Hopper forward is: q, k and v each carry one scale
(amax / 448), P is scaled by 448 into e4m3, and O comes out in e4m3. The project's FP8 kernel
scales each tile of q, k and v and writes bfloat16 O. Like that kernel's, its timed region
is the attention alone: the inputs are quantized before timing.

Needs the frontend's Python bindings (the nvidia-cudnn-frontend wheel, no dependencies
of its own); without them, or on a GPU cuDNN's FP8 forward does not run on, the line raises
CudnnFp8Unavailable, which a sweep records as a skipped line."""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig
from ..model.formats import E4M3_MAX
from ..results import Timing
from .lock import GPU_LOCK
from .runtime import gpu_failures
from .timing import check_ceilings, method_text, summarize, time_stages
from .torch_reference import TorchUnavailableError, _to_torch, torch_module


class CudnnFp8Unavailable(ValueError):
    """The cuDNN frontend is not importable, or cuDNN's FP8 forward cannot run this config."""


def frontend():
    """The cudnn module (imported after torch, whose libcudnn it then finds), or
    CudnnFp8Unavailable saying what is missing."""
    try:
        torch_module().backends.cudnn.version()      # loads PyTorch's libcudnn first
        import cudnn
    except (ImportError, OSError, TorchUnavailableError) as exc:
        raise CudnnFp8Unavailable(
            f"cuDNN's FP8 line needs the cuDNN frontend's Python bindings (pip install "
            f"nvidia-cudnn-frontend) beside PyTorch: {exc}") from exc
    return cudnn


def per_tensor_e4m3(torch, x):
    """x (a torch tensor on the GPU) -> (e4m3 tensor, descale): one scale for the tensor,
    its largest magnitude to 448."""
    amax = float(x.abs().max())
    scale = E4M3_MAX / amax if amax > 0 else 1.0
    return (x.float() * scale).to(torch.float8_e4m3fn), 1.0 / scale


class CudnnFp8Run:
    """One sdpa_fp8 graph for cfg on q, k, v (torch, (B, H, N, d), any float dtype): run()
    enqueues it on the default stream; output() is O in true units (float32); close() hands
    its cuDNN handle back."""

    def __init__(self, cfg: AttentionConfig, q, k, v, o_amax: float = 1.0):
        torch, cudnn = torch_module(), frontend()
        b, h, n, d = q.shape
        f8, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        quantized = [per_tensor_e4m3(torch, x) for x in (q, k, v)]
        self.scale_o = E4M3_MAX / o_amax
        factors = {"descale_q": quantized[0][1], "descale_k": quantized[1][1],
                   "descale_v": quantized[2][1], "descale_s": 1.0 / E4M3_MAX,
                   "scale_s": E4M3_MAX, "scale_o": self.scale_o}
        self.cudnn = cudnn
        self.handle = cudnn.create_handle()
        cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        g = cudnn.pygraph(io_data_type=f8, intermediate_data_type=f32, compute_data_type=f32,
                          handle=self.handle)
        dims, strides = [b, h, n, d], [h * n * d, n * d, d, 1]
        kdims, kstrides = [b, h, k.shape[2], d], [h * k.shape[2] * d, k.shape[2] * d, d, 1]
        tq = g.tensor(name="q", dim=dims, stride=strides, data_type=f8)
        tk, tv = (g.tensor(name=x, dim=kdims, stride=kstrides, data_type=f8) for x in "kv")
        one = dict(dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=f32)
        ts = {name: g.tensor(name=name, **one) for name in factors}
        try:
            o, _, amax_s, amax_o = g.sdpa_fp8(
                q=tq, k=tk, v=tv, **ts, is_inference=True, attn_scale=cfg.softmax_scale,
                use_causal_mask=cfg.causal, name="sdpa_fp8")
            o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(f8)
            for t in (amax_s, amax_o):
                t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1])
                t.set_data_type(f32)
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            g.check_support()
            g.build_plans()
        except Exception as exc:                 # cudnnGraphNotSupportedError and kin
            self.close()
            raise CudnnFp8Unavailable(f"cuDNN's FP8 forward does not run this configuration "
                                      f"here: {str(exc).splitlines()[0]}") from exc
        dev = q.device
        self.o = torch.empty(dims, dtype=torch.float8_e4m3fn, device=dev)
        scalar = lambda x: torch.full((1, 1, 1, 1), x, dtype=torch.float32, device=dev)  # noqa
        self.pack = {tq: quantized[0][0], tk: quantized[1][0], tv: quantized[2][0], o: self.o,
                     amax_s: scalar(0.0), amax_o: scalar(0.0),
                     **{ts[name]: scalar(x) for name, x in factors.items()}}
        self.workspace = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8,
                                     device=dev)
        self.graph = g

    def run(self):
        self.graph.execute(self.pack, self.workspace, handle=self.handle)

    def output(self):
        return self.o.float() / self.scale_o

    def close(self):
        if self.handle is not None:
            self.cudnn.destroy_handle(self.handle)
            self.handle = None


def cudnn_fp8_output(cfg: AttentionConfig, q, k, v) -> np.ndarray:
    """One cuDNN FP8 forward on NumPy q, k, v (B, H, N, d): O as float32 NumPy. O's e4m3
    scale comes from a float32 attention of the same inputs (its largest magnitude to 448),
    so that the check sees the kernel's rounding, not a badly chosen output scale."""
    with GPU_LOCK, gpu_failures("cuDNN FP8"):
        torch = torch_module()
        tq, tk, tv = (_to_torch(torch, x).float() for x in (q, k, v))
        o32 = torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=cfg.causal, scale=cfg.softmax_scale)
        o_amax = float(o32.abs().max())
        line = CudnnFp8Run(cfg, tq, tk, tv, o_amax=o_amax)
        try:
            line.run()
            return line.output().cpu().numpy()
        finally:
            line.close()


def benchmark_cudnn_fp8(cfg: AttentionConfig, reps: int, warmup: int,
                        budget_s: float | None = None, inputs: tuple | None = None) -> Timing:
    """Time cuDNN's FP8 forward on cfg's inputs (quantized before timing), as PyTorch's lines
    are timed."""
    from ..inputs import make_inputs
    torch = torch_module()
    with GPU_LOCK, gpu_failures("cuDNN FP8"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        arrays = inputs if inputs is not None else make_inputs(cfg)
        line = CudnnFp8Run(cfg, *(_to_torch(torch, x) for x in arrays[:3]))
        try:
            line.run()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            totals, _ = time_stages([("cudnn_fp8", line.run)], reps, warmup, budget_s)
        finally:
            line.close()
    summary = summarize(totals, cfg, "forward")
    check_ceilings(cfg, "flash", False, summary["median_ms"], "cuDNN FP8")
    cudnn = line.cudnn
    return Timing(**summary, peak_bytes=int(peak),
                  method=method_text(summary["reps"], warmup,
                                     f" cuDNN {cudnn.backend_version()} FP8 forward (per-tensor "
                                     f"scales, e4m3 O) through the cuDNN frontend "
                                     f"{getattr(cudnn, '__version__', '')}, PyTorch "
                                     f"{torch.__version__}."),
                  backend="torch", algorithm="flash", kernel="cudnn_fp8", stages={},
                  samples_ms=[float(x) for x in totals])
