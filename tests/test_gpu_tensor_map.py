"""On a Hopper GPU, the wgmma kernels' tensor maps (engine.gpu.launchers.wgmma.tensor_map,
through cuda.bindings) hold the very 128 bytes that the driver's cuTensorMapEncodeTiled writes
when called directly through ctypes with cuda.h's numbers, as the launcher did before."""
import ctypes

import numpy as np
import pytest

import engine
from engine.gpu.launchers import wgmma
from engine.gpu.runtime import device_is_hopper

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not engine.probe_gpu()[0], reason=engine.probe_gpu()[1])]

# cuda.h: CU_TENSOR_MAP_DATA_TYPE_FLOAT16 and _BFLOAT16, INTERLEAVE_NONE, SWIZZLE_128B,
# L2_PROMOTION_L2_128B, FLOAT_OOB_FILL_NONE
ELEMENT_TYPE = {"float16": 6, "bfloat16": 9}
INTERLEAVE_NONE, SWIZZLE_128B, L2_128B, OOB_ZERO = 0, 3, 2, 0


def direct_map(ptr: int, shape, box_rows: int, dtype: str) -> bytes:
    """The tensor map from libcuda's cuTensorMapEncodeTiled, called through ctypes."""
    fn = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    bh, seq, d = shape
    dims = (ctypes.c_uint64 * 3)(d, seq, bh)
    strides = (ctypes.c_uint64 * 2)(d * 2, seq * d * 2)
    box = (ctypes.c_uint32 * 3)(64, box_rows, 1)
    step = (ctypes.c_uint32 * 3)(1, 1, 1)
    raw = np.zeros(32, dtype=np.uint64)                     # a 128-byte-aligned window in it
    start = (-raw.ctypes.data % 128) // 8
    rc = fn(raw.ctypes.data + start * 8, ELEMENT_TYPE[dtype], 3, ptr, dims, strides, box, step,
            INTERLEAVE_NONE, SWIZZLE_128B, L2_128B, OOB_ZERO)
    assert rc == 0, f"cuTensorMapEncodeTiled returned CUresult {rc}"
    return raw[start:start + 16].tobytes()


@pytest.fixture
def hopper():
    if not device_is_hopper():
        pytest.skip("tensor maps need a GPU of compute capability 9.x")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape, box_rows", [((2, 256, 128), 128), ((4, 1024, 128), 64),
                                             ((3, 200, 64), 128), ((1, 4096, 64), 64)])
def test_bindings_encode_the_bytes_of_the_direct_call(hopper, dtype, shape, box_rows):
    import cupy
    x = cupy.zeros(shape, dtype=cupy.float16)      # 2-byte elements: bfloat16's size too
    got = wgmma.tensor_map(x, box_rows, dtype)
    assert got.dtype.itemsize == 128 and got.shape == (1,)
    want = direct_map(x.data.ptr, shape, box_rows, dtype)
    assert got.tobytes() == want
    # the bytes tell the maps apart, so the equality above can fail
    other = "bfloat16" if dtype == "float16" else "float16"
    assert direct_map(x.data.ptr, shape, box_rows, other) != want
    assert direct_map(x.data.ptr, shape, 192 - box_rows, dtype) != want     # the other box
