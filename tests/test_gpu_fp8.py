"""The Hopper FP8 forward (registry row "wgmma fp8") on a GPU of compute capability 9.x: its
quantized bytes against the emulation's (engine.cpu.fp8) bit for bit, its output, lse and
trace against the emulation and against float64, its accuracy on the outliers preset, and
engine.run's FP8 path end to end.

Tolerances, kernel against emulation (both run the same algorithm on the same e4m3 bytes):
- the output is bfloat16 (8 significant bits: a relative rounding of up to 2^-9 per element,
  about 1.1e-3 relative in the Frobenius norm); P is rounded to e4m3, whose steps are 2^-4
  relative, and the kernel's P comes from ex2.approx (2 ulp) where the emulation's is exact, so
  a few P near a rounding boundary land on the other side, each moving its product by a
  sixteenth; the tensor cores sum the FP8 products in their own order and precision. The
  "rising" preset makes many P large, so each flip weighs more: on an H100 (2026-11-27) seq_q
  300, seq_k 1000 gave 9.0e-3 to 1.08e-2 over random seeds. Together: OUT_TOL = 2e-2
  relative (a key permutation or scale error gives errors near 1);
- lse and the trace's running and tile max: 2e-3 + 1e-3 relative (the tensor cores sum the
  128-term FP8 products with fewer mantissa bits than float32: on an H100 the scores differed
  from the emulation's correctly rounded sums by up to 8e-4 relative);
- running sums: relative 5e-3 (sums of P from ex2.approx, 2 ulp, over many keys; the scores'
  errors cancel in part against the running max's);
- rescale factors α = exp2(m_old − m_new): relative 2e-2 (two running maxima, each within the
  score tolerance, in the exponent: ln 2 · 2 · (2e-3 + 1e-3 · |m| · log2 e) for |m| up to 8;
  one such run on an H100 differed by 1.4e-3 relative)."""
import ml_dtypes
import numpy as np
import pytest

import engine
from engine.cpu import fp8 as emulation
from engine.gpu.runtime import device_is_hopper
from engine.model.config import ConfigError
from engine.model.registry import kernel as registry_kernel
from reference import attention64, per_tensor_e4m3_64
import seeds

RNG = seeds.rng(8008)
OUT_TOL = 2e-2
SCORE_ATOL, SCORE_RTOL = 2e-3, 1e-3
SUM_RTOL, RESCALE_RTOL = 5e-3, 2e-2
# The build's (head_dim, block_q, block_k) shapes, from its registry row: every one is run.
SHAPES = registry_kernel("wgmma fp8").shapes


def block_ks(d: int) -> list[int]:
    """The key-tile sizes the build takes at head_dim d (128 and 192 at d = 128)."""
    return [bk for dd, _, bk in SHAPES if dd == d]


def sum_tolerance(running_max):
    """The running sums' relative tolerance, element by element, from the scores' (below):
    every term exp(x - m) of a sum moves by at most a factor exp(2ε) when x and the running max
    m each move by ε = SCORE_ATOL + SCORE_RTOL·|m| (m as the trace holds it, in natural-log
    units), so the sum by expm1(2ε); never under SUM_RTOL. Rows of large scores (the rising
    preset at d = 128) need the wider bound."""
    m = np.where(np.isfinite(running_max), np.abs(running_max), 0.0)
    return np.maximum(SUM_RTOL, np.expm1(2 * (SCORE_ATOL + SCORE_RTOL * m)))


def assert_scores_close(got, want, what):
    """Score-valued arrays (lse, running and tile max): SCORE_ATOL + SCORE_RTOL·|want|, with
    the infinities (hidden tiles) in the same places."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    fin = np.isfinite(want)
    assert np.array_equal(fin, np.isfinite(got)), (what, "hidden tiles differ")
    err = np.abs(got[fin] - want[fin]) - SCORE_RTOL * np.abs(want[fin])
    assert err.max(initial=0) <= SCORE_ATOL, (what, float(err.max()))


def hopper() -> bool:
    from engine.devices import probe_gpu
    usable, _ = probe_gpu()
    return usable and device_is_hopper()


needs_hopper = pytest.mark.skipif("not hopper()", reason="needs a GPU of compute capability 9.x")


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=256, seq_k=256, head_dim=128, block_q=128,
                block_k=128, dtype="float8_e4m3", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


def launch(cfg, q, k, v, trace):
    """The launcher on (B·H, N, d) copies of q, k, v: NumPy outputs and the quantized operands."""
    import cupy
    from engine.gpu.launchers import wgmma_fp8
    dev = [cupy.asarray(np.ascontiguousarray(x.reshape(cfg.bh, x.shape[2], cfg.head_dim)))
           for x in (q, k, v)]
    out = wgmma_fp8.launch(cfg, *dev, trace, poison=True)
    qz = out.pop("quantized")
    out.pop("info")
    return {name: a.get() for name, a in out.items()}, qz


def unpermuted_v8(cfg, vt8):
    """The launcher's V8ᵀ (B·H, d, keys rounded up to 16, keys permuted within each 16) back
    in the natural (B·H, seq_k, d) layout, and the padding keys."""
    s = np.arange(vt8.shape[2])
    g = s & 15
    key = (s & ~15) + 2 * (g >> 2) + (g & 1) + 8 * ((g >> 1) & 1)
    v8 = np.empty((vt8.shape[0], vt8.shape[2], vt8.shape[1]), dtype=np.uint8)
    v8[:, key, :] = np.transpose(vt8, (0, 2, 1))
    return v8[:, :cfg.seq_k], v8[:, cfg.seq_k:]


def rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


BASE_CASES = [  # head_dim, seq_q, seq_k, causal, inputs
    (128, 256, 256, False, "normal"),
    (128, 300, 1000, False, "rising"),
    (128, 1000, 777, True, "normal"),
    (128, 1, 1, False, "normal"),
    (128, 640, 640, True, "rising"),
    (64, 640, 640, True, "outliers"),
    (64, 129, 300, False, "outliers"),
]
# ... each at every block_k the build takes at its head_dim
CASES = [(*case, bk) for case in BASE_CASES for bk in block_ks(case[0])]


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("scaling", ["tile", "tensor", "none"])
@pytest.mark.parametrize("rotation", [False, True])
@pytest.mark.parametrize("d,bk", [(d, bk) for d, _, bk in SHAPES])
def test_quantized_bytes_and_scales_are_the_emulations(scaling, rotation, d, bk):
    cfg = config(head_dim=d, block_k=bk, seq_q=300, seq_k=1000, fp8_scaling=scaling,
                 fp8_rotation=rotation, inputs="outliers",
                 logit_scale=3.0 if scaling == "none" else 1.0)
    q, k, v = engine.make_inputs(cfg)
    _, qz = launch(cfg, q, k, v, trace=False)
    want = emulation.quantize_inputs(cfg, q, k, v)
    bh = cfg.bh
    assert np.array_equal(qz.q8.get(), want.q8.reshape(bh, cfg.seq_q, d).view(np.uint8))
    assert np.array_equal(qz.k8.get(), want.k8.reshape(bh, cfg.seq_k, d).view(np.uint8))
    v8, padding = unpermuted_v8(cfg, qz.vt8.get())
    assert np.array_equal(v8, want.v8.reshape(bh, cfg.seq_k, d).view(np.uint8))
    assert not padding.any(), "V8ᵀ's padding keys must be zeros"
    for name in ("q_scale", "k_scale", "v_scale"):
        assert np.array_equal(getattr(qz, name).get(), getattr(want, name).reshape(bh, -1)), name
    assert qz.saturated.get().tolist() == [want.saturated[n] for n in "qkv"]


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("d,nq,nk,causal,inputs,bk", CASES)
def test_output_lse_and_trace_match_the_emulation(d, nq, nk, causal, inputs, bk):
    cfg = config(head_dim=d, seq_q=nq, seq_k=nk, causal=causal, inputs=inputs, heads=3,
                 block_k=bk)
    q, k, v = engine.make_inputs(cfg)
    got, _ = launch(cfg, q, k, v, trace=True)
    plain, _ = launch(cfg, q, k, v, trace=False)
    want = emulation.emulate(cfg, q, k, v, trace=True)
    O = got["O"].view(ml_dtypes.bfloat16).reshape(want.output.shape)
    assert np.isfinite(O.astype(np.float32)).all(), "unwritten or non-finite output"
    assert np.array_equal(got["O"], plain["O"]), "tracing changed the output"
    assert rel(O, want.output) <= OUT_TOL, cfg
    assert_scores_close(got["lse"].reshape(want.lse.shape), want.lse, "lse")
    for name in ("running_max", "tile_max"):
        w = getattr(want.trace, name)
        assert_scores_close(got[name].reshape(w.shape), w, name)
    for name, rtol in (("running_sum", sum_tolerance(want.trace.running_max)),
                       ("rescale", RESCALE_RTOL)):
        g = got[name].reshape(getattr(want.trace, name).shape).astype(np.float64)
        w = getattr(want.trace, name).astype(np.float64)
        over = np.abs(g - w) / np.maximum(np.abs(w), 1e-3) - rtol
        assert over.max() <= 0, (name, float(over.max()))


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bk", block_ks(128))
def test_kernel_is_as_accurate_as_its_emulation_against_float64(causal, bk):
    """Against float64 attention of the original (unquantized) inputs, the kernel's RMSE is
    the emulation's within a tenth (the roundings they share dominate)."""
    cfg = config(seq_q=1024, seq_k=1024, causal=causal, inputs="outliers", heads=4, block_k=bk)
    q, k, v = engine.make_inputs(cfg)
    got, _ = launch(cfg, q, k, v, trace=False)
    O64, _ = attention64(q, k, v, cfg.softmax_scale, causal)
    rmse = lambda x: float(np.sqrt(np.mean((np.asarray(x, np.float64).reshape(O64.shape) - O64) ** 2)))
    kernel = rmse(got["O"].view(ml_dtypes.bfloat16))
    emulated = rmse(emulation.emulate(cfg, q, k, v).output)
    assert kernel <= 1.1 * emulated, (kernel, emulated)


@pytest.mark.gpu
@needs_hopper
def test_rmse_on_outliers_per_tile_with_rotation_beats_per_tensor():
    """The accuracy target on the GPU: FP8 per-tile scales with the rotation at most 1e-2 RMSE
    against float64 on the outliers preset, and below per-tensor FP8."""
    base = config(seq_q=2048, seq_k=2048, inputs="outliers", heads=2, seed=0)
    q, k, v = engine.make_inputs(base)
    O64, _ = attention64(q, k, v, base.softmax_scale, False)

    def rmse(cfg):
        res = engine.run(cfg, q, k, v, backend="cupy", kernel="tensorcore")
        return float(np.sqrt(np.mean((res.output.astype(np.float64) - O64) ** 2)))

    tile_rot = rmse(base.with_(fp8_scaling="tile", fp8_rotation=True))
    tensor = rmse(base.with_(fp8_scaling="tensor", fp8_rotation=False))
    assert tile_rot <= 1e-2 and tile_rot < tensor, (tile_rot, tensor)


@pytest.mark.gpu
@needs_hopper
def test_engine_run_returns_bfloat16_with_fp8_info_and_trace():
    cfg = config(seq_q=500, seq_k=700, causal=True)
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q.astype(np.float32), k, v.astype(np.float16), backend="cupy",
                     kernel="tensorcore", trace=True)
    assert res.backend == "cupy" and res.output.dtype == ml_dtypes.bfloat16
    assert res.output.shape == (1, 2, 500, 128) and res.trace.running_max.shape == (1, 2, 500, 6)
    assert res.fp8.q_scale.shape == (1, 2, 4) and res.fp8.k_scale.shape == (1, 2, 6)
    assert res.fp8.saturated == {"q": 0, "k": 0, "v": 0, "p": 0}
    assert res.info["fp8_scaling"] == "tile"
    want = emulation.emulate(cfg, q.astype(np.float32), k, v.astype(np.float16))
    assert rel(res.output, want.output) <= OUT_TOL


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("bk", block_ks(128))
def test_repeated_launches_are_identical(bk):
    cfg = config(seq_q=1500, seq_k=1500, causal=True, heads=4, block_k=bk)
    q, k, v = engine.make_inputs(cfg)
    first, _ = launch(cfg, q, k, v, trace=False)
    for _ in range(3):
        again, _ = launch(cfg, q, k, v, trace=False)
        assert np.array_equal(first["O"], again["O"]), "a race: output changed between runs"


@pytest.mark.gpu
@needs_hopper
def test_shapes_outside_the_build_are_refused():
    from engine.gpu.launchers import wgmma_fp8
    for cfg in (config(block_k=64), config(head_dim=64, block_k=192)):
        with pytest.raises(ConfigError, match="The FP8 kernel does not take .* It supports"):
            wgmma_fp8.check_takes(cfg)


def cudnn_fp8_line():
    """engine.gpu.cudnn_fp8, or a skip where the cuDNN frontend's bindings are missing."""
    from engine.gpu import cudnn_fp8
    try:
        cudnn_fp8.frontend()
    except cudnn_fp8.CudnnFp8Unavailable as exc:
        pytest.skip(str(exc))
    return cudnn_fp8


@pytest.mark.gpu
@needs_hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_cudnns_fp8_line_passes_the_sweeps_check_and_is_per_tensor_fp8(causal, d):
    """cuDNN's FP8 forward, the FP8 sweep's peer line: within the sweep's limit of float64
    (bench_sweep.validate), and within e4m3 O's rounding of a float64 attention of the very
    inputs it got (each of q, k, v rounded to e4m3 at one scale): relative RMS under 2^-4."""
    from benchmarks import bench_sweep
    line = cudnn_fp8_line()
    cfg = config(seq_q=512, seq_k=512, head_dim=d, causal=causal, block_k=128)
    bench_sweep.reference.cache_clear()
    checked = bench_sweep.validate(cfg, "cudnn_fp8")
    assert checked["rel_err"] <= checked["limit"]
    q, k, v = engine.make_inputs(cfg)
    got = line.cudnn_fp8_output(cfg, q, k, v)
    want, _ = attention64(*map(per_tensor_e4m3_64, (q, k, v)), cfg.softmax_scale, cfg.causal)
    assert np.sqrt(((got - want) ** 2).mean() / (want ** 2).mean()) < 2.0 ** -4
