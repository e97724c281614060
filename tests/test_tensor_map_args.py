"""The wgmma kernels' tensor maps without a GPU: the arguments engine.gpu.launchers.wgmma
hands cuTensorMapEncodeTiled (cuda.bindings' enums, with the numbers of cuda.h the kernels
were written for), what tensor_map makes of the encoded map, and the error that names the
package where cuda-bindings is missing. tests/test_gpu_tensor_map.py checks the bytes on a GPU."""
import sys

import numpy as np
import pytest

from engine.gpu.launchers import wgmma
from engine.gpu.runtime import GpuRunError
from engine.model.config import ConfigError

# cuda.h: CU_TENSOR_MAP_DATA_TYPE_FLOAT16, _BFLOAT16, _UINT8 (the FP8 build's e4m3 bytes);
# INTERLEAVE_NONE; SWIZZLE_128B (SWIZZLE_64B: 2); L2_PROMOTION_L2_128B; FLOAT_OOB_FILL_NONE
# (out-of-bounds elements read as zeros)
CUDA_H = {"float16": 6, "bfloat16": 9, "uint8": 0, "interleave": 0, "swizzle": 3,
          "l2_promotion": 2, "oob_fill": 0}


@pytest.fixture
def driver():
    return pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings has no wheel here")


class FakeArray:
    """What tensor_map reads of a CuPy array: its shape and device pointer."""

    class data:
        ptr = 0x7F00_0000_0000

    def __init__(self, shape):
        self.shape = shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape, box_rows", [((4, 1024, 128), 128), ((3, 200, 64), 64)])
def test_arguments_of_a_map(driver, dtype, shape, box_rows):
    bh, seq, d = shape
    a = wgmma.tiled_map_args(shape, dtype, box_rows)
    assert a.rank == 3
    assert a.dims == (d, seq, bh)                             # innermost first
    assert a.strides == (2 * d, 2 * d * seq)                  # bytes of a row, of a batch·head
    assert a.box == (64, box_rows, 1) and a.element_strides == (1, 1, 1)
    assert isinstance(a.data_type, driver.CUtensorMapDataType)
    assert isinstance(a.interleave, driver.CUtensorMapInterleave)
    assert isinstance(a.swizzle, driver.CUtensorMapSwizzle)
    assert isinstance(a.l2_promotion, driver.CUtensorMapL2promotion)
    assert isinstance(a.oob_fill, driver.CUtensorMapFloatOOBfill)
    assert int(a.data_type) == CUDA_H[dtype]
    assert {k: int(getattr(a, k)) for k in ("interleave", "swizzle", "l2_promotion",
                                            "oob_fill")} == {k: CUDA_H[k] for k in (
        "interleave", "swizzle", "l2_promotion", "oob_fill")}


@pytest.mark.parametrize("d, swizzle, code", [(128, 128, 3), (64, 64, 2)])
def test_arguments_of_an_fp8_map(driver, d, swizzle, code):
    """e4m3 bytes: one byte an element, a box of one swizzle span (d bytes at d = 64)."""
    a = wgmma.tiled_map_args((4, 1000, d), "uint8", 128, box_columns=swizzle, swizzle=swizzle)
    assert a.dims == (d, 1000, 4) and a.strides == (d, d * 1000)
    assert a.box == (swizzle, 128, 1)
    assert int(a.data_type) == CUDA_H["uint8"] and int(a.swizzle) == code


@pytest.mark.parametrize("block_k, keys, code", [(128, 128, 3), (192, 64, 2)])
def test_the_fp8_launchers_maps_of_k8_and_v8t(driver, block_k, keys, code):
    """The FP8 build at head_dim 128: K8 in boxes of block_k rows (up to 256 a box), V8ᵀ
    ((B·H, d, keys rounded up to 16)) in boxes of d rows × `keys` keys in the swizzle of that
    many bytes: one box a tile at block_k 128, three of 64 at 192 (the kernel's VT_BOX), so
    the boxes of a tile bring block_k · d bytes, what its mbarrier expects."""
    from engine.gpu.launchers import wgmma_fp8
    from engine.model.config import AttentionConfig
    cfg = AttentionConfig(seq_q=1000, seq_k=1000, head_dim=128, block_q=128, block_k=block_k,
                          dtype="float8_e4m3")
    assert wgmma_fp8.vt_box(cfg) == keys
    k = wgmma.tiled_map_args((4, 1000, 128), "uint8", block_k, box_columns=128, swizzle=128)
    assert k.box == (128, block_k, 1) and block_k <= 256
    v = wgmma.tiled_map_args((4, 128, 1008), "uint8", 128, box_columns=keys, swizzle=keys)
    assert v.dims == (1008, 128, 4) and v.strides == (1008, 1008 * 128)
    assert v.box == (keys, 128, 1) and int(v.swizzle) == code
    assert block_k % keys == 0                  # whole boxes: block_k · d bytes a tile


def test_other_dtypes_are_refused(driver):
    with pytest.raises(ConfigError, match="float16, bfloat16 or uint8, not float32"):
        wgmma.tiled_map_args((1, 128, 64), "float32", 64)


def test_tensor_map_passes_typed_arguments_and_keeps_the_encoded_bytes(driver, monkeypatch):
    calls = []
    encoded = driver.CUtensorMap()
    encoded.opaque = [driver.cuuint64_t(3 * i + 2**63) for i in range(16)]

    def encode(*args):
        calls.append(args)
        return driver.CUresult.CUDA_SUCCESS, encoded

    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", encode)
    out = wgmma.tensor_map(FakeArray((2, 256, 128)), 128, "bfloat16")
    assert out.dtype.itemsize == 128 and out.shape == (1,)
    assert out["opaque"][0].tolist() == [3 * i + 2**63 for i in range(16)]
    (args,) = calls
    assert args[2] == FakeArray.data.ptr
    assert all(isinstance(v, driver.cuuint64_t) for v in (*args[3], *args[4]))
    assert all(isinstance(v, driver.cuuint32_t) for v in (*args[5], *args[6]))
    assert [int(v) for v in args[3]] == [128, 256, 2] and [int(v) for v in args[5]] == [64, 128, 1]


def test_the_binding_takes_the_arguments(driver):
    """The real binding converts every argument (a wrong type raises TypeError before the
    driver is even looked for); without a driver library here, the call fails later."""
    a = wgmma.tiled_map_args((2, 256, 128), "float16", 128)
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    try:
        driver.cuTensorMapEncodeTiled(a.data_type, a.rank, 0, [u64(v) for v in a.dims],
                                      [u64(v) for v in a.strides], [u32(v) for v in a.box],
                                      [u32(v) for v in a.element_strides], a.interleave,
                                      a.swizzle, a.l2_promotion, a.oob_fill)
    except TypeError as exc:
        pytest.fail(f"cuda.bindings refused the arguments' types: {exc}")
    except Exception:      # no libcuda on this machine: past the conversion of the arguments
        pass
    with pytest.raises(TypeError):   # so a wrong type does show here
        driver.cuTensorMapEncodeTiled(a.data_type, a.rank, 0, a.dims, a.strides, a.box,
                                      a.element_strides, a.interleave, a.swizzle,
                                      a.l2_promotion, a.oob_fill)


def test_a_refused_map_says_why(driver, monkeypatch):
    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled",
                        lambda *args: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    with pytest.raises(ConfigError, match=r"refused .*\(2, 256, 128\) float16.*64×128 "
                                          r"\(CUresult 1, CUDA_ERROR_INVALID_VALUE\)"):
        wgmma.tensor_map(FakeArray((2, 256, 128)), 128, "float16")


def test_missing_cuda_bindings_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)     # import fails as if absent
    monkeypatch.delitem(sys.modules, "cuda.bindings.driver", raising=False)
    with pytest.raises(GpuRunError, match="cuda-bindings.*requirements/gpu.lock"):
        wgmma.tensor_map(FakeArray((1, 128, 64)), 64, "float16")
    with pytest.raises(GpuRunError, match="cuda-bindings"):
        wgmma.tiled_map_args((1, 128, 64), "float16", 64)
