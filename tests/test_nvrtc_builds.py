"""The Hopper kernels compiled as the H200 compiles them: CuPy there builds with NVRTC 13.0,
whose ptxas can spill or serialise wgmma where nvcc 13.0 does not (lab/NOTES.md,
"wgmma backward: the next S behind dQ_i"). The same NVRTC comes from the
`nvidia-cuda-nvrtc` wheel (pyproject's [test] extra, requirements/dev.lock); these tests load
it through ctypes, with no GPU, and skip where it is not installed."""
import ctypes
import re
from pathlib import Path

import pytest

from kernels.loader import read_source
from test_kernel_sources import SM90A_SOURCES, examples_of


def _nvrtc():
    try:
        import nvidia.cu13
    except ImportError:
        return None
    lib = Path(next(iter(nvidia.cu13.__path__))) / "lib"
    builtins = sorted(lib.glob("libnvrtc-builtins.so.*"))
    if not (lib / "libnvrtc.so.13").is_file() or not builtins:
        return None
    # loaded first, so that libnvrtc finds its builtins without LD_LIBRARY_PATH
    ctypes.CDLL(str(builtins[0]), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(lib / "libnvrtc.so.13"))


NVRTC = _nvrtc()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(NVRTC is None, reason="the nvidia-cuda-nvrtc wheel is not "
                                 "installed (requirements/dev.lock)")]
# ptxas advisories that a build's wgmma products run one at a time (C7510-C7518: an
# accumulator touched, too few registers, a wait injected); C7519, an injected arrive, is not
SERIALISED = re.compile(r"\(C751[0-8]\)")


def nvrtc_log(source: str, options: list, text: str | None = None) -> tuple:
    """(result code, log) of NVRTC compiling kernels/<source> (or `text` in its place) for
    sm_90a with ptxas -v."""
    program = ctypes.c_void_p()
    assert NVRTC.nvrtcCreateProgram(ctypes.byref(program), (text or read_source(source)).encode(),
                                    source.encode(), 0, None, None) == 0
    opts = [o for o in options if not o.startswith("-arch")] + ["-arch=sm_90a", "-Xptxas=-v"]
    code = NVRTC.nvrtcCompileProgram(program, len(opts),
                                     (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
    size = ctypes.c_size_t()
    NVRTC.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    NVRTC.nvrtcGetProgramLog(program, log)
    NVRTC.nvrtcDestroyProgram(ctypes.byref(program))
    return code, log.value.decode()


def test_the_wheel_is_nvrtc_13_0():
    """The version CuPy uses on the H200 (cupy_backends' nvrtc.getVersion(), 2026-11-24)."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    assert NVRTC.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
    assert (major.value, minor.value) == (13, 0)


@pytest.mark.parametrize("source", SM90A_SOURCES)
def test_hopper_builds_neither_spill_nor_serialise_under_nvrtc(source):
    for options in examples_of(source):
        code, log = nvrtc_log(source, list(options))
        assert code == 0, (options, log[-2000:])
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in log, \
            (options, log)
        assert not SERIALISED.search(log), (options, log)


def test_the_check_sees_a_spill():
    """The NVRTC log reports what the test above looks for: a consumer budget too small for
    head_dim 128's accumulators spills."""
    source = SM90A_SOURCES[1]                       # hopper/flash_backward_wgmma.cu
    squeezed = read_source(source).replace("d == 128 ? 240 : 232", "d == 128 ? 200 : 232")
    assert squeezed != read_source(source)
    code, log = nvrtc_log(source, ["--std=c++17", "-DHEAD_DIM=128", "-DBLOCK_Q=64",
                                   "-DBLOCK_K=128", "-DBF16=0", "-DDQ_WRITER=1"], squeezed)
    spilled = re.search(r"(\d+) bytes spill stores", log)
    assert code == 0 and spilled and int(spilled.group(1)) > 0, log
