"""Lab: what cuDNN's FP8 and float16 attention forwards launch on this GPU, beside ours: each
kernel's name, grid, block, registers a thread and shared memory, from PyTorch's profiler
(CUPTI's kernel records, which CuPy's launches in the same process show too). cuDNN's FP8
forward runs 1.2x ours at d = 64 and up to 1.1x at d = 128, N = 1k (the 06:49 UTC sweep),
so its launch shape says where ours could differ. d = 64 and 128, N = 2k and 8k, 8 heads,
non-causal, one launch of each after a warm-up.
Needs the cuDNN frontend's bindings (lab/cudnn_fp8.py says how).
Run on a Hopper GPU: python3 lab/cudnn_fp8_kernels.py [--frontend DIR]"""
import json
import sys
import tempfile

import numpy as np

sys.path[:0] = ["lab", "tests", "."]


def main():
    if "--frontend" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--frontend") + 1])
    import cupy
    import torch
    from torch.profiler import ProfilerActivity, profile

    from engine.gpu.cudnn_fp8 import CudnnFp8Run
    from engine.gpu.launchers import wgmma, wgmma_fp8
    from engine.model.config import AttentionConfig
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rng = np.random.default_rng(3)
    for d in (64, 128):
        for n in (2048, 8192):
            bh = (32768 // n) * 8
            x = [cupy.asarray(rng.standard_normal((bh, n, d), dtype=np.float32))
                 .astype(cupy.float16) for _ in range(3)]
            t = [torch.as_tensor(a, device="cuda").reshape(bh // 8, 8, n, d) for a in x]
            kw = dict(batch=1, heads=bh, seq_q=n, seq_k=n, head_dim=d, block_q=128,
                      causal=False)
            f16 = AttentionConfig(dtype="float16", block_k=128, **kw)
            fp8 = AttentionConfig(dtype="float8_e4m3", block_k=192 if d == 128 else 128, **kw)
            runs = {"ours f16": wgmma.prepare(f16, *x, False)[0],
                    "ours fp8": wgmma_fp8.prepare(fp8, wgmma_fp8.quantize(fp8, *x), False)[0],
                    "cudnn fp8": CudnnFp8Run(fp8, *t).run}

            def cudnn_f16():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(*t)
            runs["cudnn f16"] = cudnn_f16
            for run in runs.values():
                run()
            torch.cuda.synchronize()
            for name, run in runs.items():
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    run()
                    torch.cuda.synchronize()
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    prof.export_chrome_trace(f.name)
                    events = json.load(open(f.name))["traceEvents"]
                for e in events:
                    if e.get("cat") != "kernel":
                        continue
                    a = e.get("args", {})
                    print(f"d={d} N={n} {name:9}: {e['dur']:8.1f} us  grid {a.get('grid')} "
                          f"block {a.get('block')} regs {a.get('registers per thread')} "
                          f"smem {a.get('shared memory')} blocks/SM "
                          f"{a.get('blocks per SM')} occupancy "
                          f"{a.get('est. achieved occupancy %')} | {e['name'][:150]}",
                          flush=True)


if __name__ == "__main__":
    main()
