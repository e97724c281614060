"""PyTorch reference lines on the same GPU, timed by the same harness (engine.gpu.timing):
scaled_dot_product_attention with each backend (flash, cuDNN, math), and the plain
matmul-softmax-matmul that the naive baseline must keep up with (the fairness check)."""
from __future__ import annotations

import numpy as np

from ..model.config import AttentionConfig
from .lock import GPU_LOCK
from .runtime import gpu_failures
from ..inputs import make_inputs
from ..results import Timing
from .timing import check_ceilings, method_text, summarize, time_stages

SDPA_BACKENDS = {"torch_flash": "FLASH_ATTENTION", "torch_cudnn": "CUDNN_ATTENTION",
                 "torch_math": "MATH"}
FAIRNESS_CONFIG = AttentionConfig(batch=4, heads=16, seq_q=4096, seq_k=4096, head_dim=64,
                                  block_q=64, block_k=64, dtype="float16")
FAIRNESS_LIMIT = 1.5     # naive total time at most this multiple of PyTorch's


class TorchUnavailableError(ValueError):
    """PyTorch with CUDA is not importable here, or cannot run this configuration."""


def torch_module():
    try:
        import torch
    except Exception as exc:
        raise TorchUnavailableError(f"PyTorch is not importable ({exc}).") from exc
    if not torch.cuda.is_available():
        raise TorchUnavailableError("PyTorch sees no CUDA device.")
    return torch


def release_memory() -> None:
    """Hand cached device memory back, from CuPy's pool and from PyTorch's allocator, so the
    next line of a sweep finds the GPU's memory free."""
    from .runtime import free_pool
    free_pool()
    try:
        torch_module().cuda.empty_cache()
    except TorchUnavailableError:
        pass


def torch_version() -> str:
    try:
        return torch_module().__version__
    except TorchUnavailableError:
        return ""


def _inputs(cfg: AttentionConfig, inputs: tuple | None):
    torch = torch_module()
    arrays = inputs if inputs is not None else make_inputs(cfg)
    return [_to_torch(torch, x) for x in arrays]


def _to_torch(torch, x: np.ndarray):
    """A NumPy array on the GPU as a torch tensor; bfloat16 (ml_dtypes, which torch cannot
    read) travels as its 16-bit pattern and is viewed back as torch.bfloat16."""
    x = np.ascontiguousarray(x)
    if x.dtype == np.dtype("bfloat16"):
        return torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(x).cuda()


def _matmul_softmax_matmul(cfg, q, k, v, keep):
    torch = torch_module()
    mask = None
    if cfg.causal:
        mask = torch.ones(cfg.seq_q, cfg.seq_k, dtype=torch.bool, device=q.device).triu(1)

    def scores():
        keep["S"] = torch.matmul(q, k.transpose(-2, -1)) * cfg.softmax_scale
        if mask is not None:
            keep["S"].masked_fill_(mask, float("-inf"))

    def softmax():
        keep["P"] = torch.softmax(keep["S"], dim=-1)

    def output():
        keep["O"] = torch.matmul(keep["P"], v)

    return [("S = QKᵀ · scale", scores), ("softmax", softmax), ("O = PV", output)]


def _sdpa(cfg, name, q, k, v, keep):
    torch = torch_module()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, SDPA_BACKENDS[name])
    fn = torch.nn.functional.scaled_dot_product_attention

    def run():
        with sdpa_kernel([backend]):
            keep["O"] = fn(q, k, v, is_causal=cfg.causal, scale=cfg.softmax_scale)

    try:
        run()
        torch.cuda.synchronize()
    except RuntimeError as exc:
        raise TorchUnavailableError(f"{name} does not run {cfg.dtype}, head_dim "
                                    f"{cfg.head_dim}: {str(exc).splitlines()[0]}") from exc
    return [(name, run)]


def sdpa_output(cfg: AttentionConfig, name: str, q, k, v) -> np.ndarray:
    """One SDPA forward with backend `name` on NumPy q, k, v: its output as float32 NumPy."""
    with GPU_LOCK, gpu_failures(f"PyTorch {name}"):
        tq, tk, tv = (_to_torch(torch_module(), x) for x in (q, k, v))
        keep = {}
        _sdpa(cfg, name, tq, tk, tv, keep)      # runs it once (its check that the backend
        return keep["O"].float().cpu().numpy()  # takes the config) and keeps the output


def sdpa_gradients(cfg: AttentionConfig, name: str, q, k, v, dout) -> dict:
    """One SDPA backward with backend `name` on NumPy q, k, v and dout: the gradients of
    sum(O · dout), {"dq", "dk", "dv"} as float32 NumPy."""
    with GPU_LOCK, gpu_failures(f"PyTorch {name}"):
        torch = torch_module()
        tq, tk, tv, tdo = (_to_torch(torch, x) for x in (q, k, v, dout))
        keep = {}
        [(_, run)] = _sdpa_backward(cfg, name, tq, tk, tv, tdo, keep)
        run()
        return {n: g.float().cpu().numpy() for n, g in zip(("dq", "dk", "dv"), keep["grads"])}


def _sdpa_backward(cfg, name, q, k, v, dout, keep):
    """The backward alone: one forward with autograd first, then each run rebuilds the
    gradients of sum(O · dout) from the saved graph (retain_graph keeps it for the next)."""
    torch = torch_module()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, SDPA_BACKENDS[name])
    for x in (q, k, v):
        x.requires_grad_(True)
    try:
        with sdpa_kernel([backend]):
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=cfg.causal, scale=cfg.softmax_scale)
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        raise TorchUnavailableError(f"{name} backward does not run {cfg.dtype}, head_dim "
                                    f"{cfg.head_dim}: {str(exc).splitlines()[0]}") from exc

    def run():
        keep["grads"] = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    keep["out"] = out
    return [(name, run)]


def benchmark_torch(cfg: AttentionConfig, name: str, reps: int, warmup: int,
                    budget_s: float | None = None, inputs: tuple | None = None,
                    direction: str = "forward") -> Timing:
    """Time a PyTorch line: name is one of SDPA_BACKENDS or "torch_naive" (matmul, softmax,
    matmul, each stage timed); direction "backward" times an SDPA backend's backward alone."""
    torch = torch_module()
    with GPU_LOCK, gpu_failures(f"PyTorch {name}"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        q, k, v = _inputs(cfg, inputs)
        keep: dict = {}
        if direction == "backward":
            from ..inputs import make_dout
            dout = _to_torch(torch, make_dout(cfg))
            stages = _sdpa_backward(cfg, name, q, k, v, dout, keep)
        elif name == "torch_naive":
            stages = _matmul_softmax_matmul(cfg, q, k, v, keep)
        else:
            stages = _sdpa(cfg, name, q, k, v, keep)
        for _, fn in stages:
            fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        totals, per_stage = time_stages(stages, reps, warmup, budget_s)
        del q, k, v, keep
    summary = summarize(totals, cfg, direction)
    check_ceilings(cfg, "naive" if name in ("torch_naive", "torch_math") else "flash", False,
                   summary["median_ms"], f"PyTorch {name}", direction)
    stage_ms = ({n: float(np.median(ms)) for n, ms in per_stage.items()}
                if name == "torch_naive" else {})
    return Timing(**summary, peak_bytes=int(peak),
                  method=method_text(summary["reps"], warmup,
                                     f" PyTorch {torch.__version__}, {name}"
                                     f"{' backward' if direction == 'backward' else ''}."),
                  backend="torch", algorithm="naive" if name == "torch_naive" else "flash",
                  kernel=name, stages=stage_ms, samples_ms=[float(x) for x in totals])


def fairness(cfg: AttentionConfig = FAIRNESS_CONFIG, reps: int = 30, warmup: int = 3) -> dict:
    """Naive baseline vs PyTorch's matmul-softmax-matmul on the same inputs and GPU."""
    from .timing import benchmark_gpu
    inputs = make_inputs(cfg)
    naive = benchmark_gpu(cfg, "naive", "teaching", False, reps, warmup, inputs=inputs)
    release_memory()
    ref = benchmark_torch(cfg, "torch_naive", reps, warmup, inputs=inputs)
    return {"config": cfg.to_dict(), "naive": naive, "torch": ref,
            "ratio": naive.median_ms / ref.median_ms, "limit": FAIRNESS_LIMIT}
