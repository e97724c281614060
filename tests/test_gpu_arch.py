"""Older GPUs' code paths on this GPU: the Turing product (two mma.sync m16n8k8 for one
m16n8k16, include/common.cuh) built as PTX for compute_75 and compiled by the driver, against
float64; and the compute-capability gate the engine applies before any compile, for a GPU of
compute capability 7.5 (FA_LAB_PTX_ARCH=compute_75), on any machine."""
import numpy as np
import pytest

import engine
from engine.model.config import ConfigError

PRODUCT = r'''
#include "common.cuh"
// One warp: C (16x8, float32) = A (16x16, float16, row-major) · B (16x8, float16, row-major),
// each lane loading its fragments as the m16n8k16 layout places them.
extern "C" __global__ void product(const unsigned short* A, const unsigned short* B, float* C) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    auto pair = [](unsigned short lo, unsigned short hi) { return lo | (unsigned)hi << 16; };
    unsigned a[4] = {pair(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                     pair(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                     pair(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                     pair(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    unsigned b0 = pair(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    unsigned b1 = pair(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    mma16816<false>(c, a, b0, b1);
    C[g * 8 + 2 * t] = c[0];
    C[g * 8 + 2 * t + 1] = c[1];
    C[(g + 8) * 8 + 2 * t] = c[2];
    C[(g + 8) * 8 + 2 * t + 1] = c[3];
}
'''


@pytest.mark.gpu
@pytest.mark.parametrize("arch", ["compute_75", "compute_80"])
def test_the_product_of_each_code_path_runs_here(arch, tmp_path):
    import cupy
    from kernels import loader
    source = tmp_path / "product.cu"
    source.write_text(PRODUCT)
    code = loader.expand_includes(source)
    module = loader._ptx_module(code, "product.cu", ("--std=c++17",), arch)
    rng = np.random.default_rng(75)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    A, B = (cupy.asarray(x).view(cupy.uint16) for x in (a, b))
    C = cupy.full((16, 8), np.nan, dtype=cupy.float32)
    module.get_function("product")((1,), (32,), (A, B, C))
    want = a.astype(np.float64) @ b.astype(np.float64)
    # float16 inputs are exact in float32; 16 products summed in float32
    bound = (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))).max()
    np.testing.assert_allclose(cupy.asnumpy(C), want, rtol=0, atol=16 * 2**-23 * bound)


@pytest.mark.gpu
def test_turing_is_refused_bfloat16_before_any_compile(monkeypatch):
    monkeypatch.setenv("FA_LAB_PTX_ARCH", "compute_75")
    cfg = engine.AttentionConfig(batch=1, heads=1, seq_q=64, seq_k=64, head_dim=64,
                                 block_q=64, block_k=64, dtype="bfloat16")
    with pytest.raises(ConfigError, match=r"compute capability 7\.5.*bfloat16.*float16"):
        engine.run(cfg, kernel="tensorcore", backend="cupy")
