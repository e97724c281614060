"""Every kernel build compiled as users' machines compile it: with the NVRTC that
requirements/gpu.lock ships (CuPy's CUDA 12 build: the `nvidia-cuda-nvrtc-cu12` wheel) for
every GPU generation the build claims (engine.model.arch: sm_75, sm_80, sm_86, sm_89, sm_90;
the Hopper builds sm_90a), and with the CUDA 13 NVRTC of the project's recorded GPU runs
(`nvidia-cuda-nvrtc`) for the oldest and the newest. A build fails on a compile error, on a
spill, and (wgmma builds) on products ptxas serialises: NVRTC's ptxas can spill or serialise
where nvcc does not. Both wheels come with requirements/dev.lock; these tests load them
through ctypes, with no GPU, and skip where they are not installed."""
import ctypes
import functools
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import compile_pool
from engine.model import arch as gpu_arch
from engine.model.config import FP8_DTYPES, AttentionConfig
from engine.model.registry import KERNELS
from kernels.loader import read_source
from test_kernel_sources import examples_of


def _load(package: str, soname: str):
    """libnvrtc of a wheel (its builtins loaded first, so no LD_LIBRARY_PATH is needed)."""
    try:
        module = __import__(package, fromlist=["_"])
    except ImportError:
        return None
    lib = Path(next(iter(module.__path__))) / "lib"
    builtins = sorted(p for p in lib.glob("libnvrtc-builtins.so.*") if ".alt." not in p.name)
    if not (lib / soname).is_file() or not builtins:
        return None
    ctypes.CDLL(str(builtins[0]), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(lib / soname))


NVRTCS = {"12": _load("nvidia.cuda_nvrtc", "libnvrtc.so.12"),     # shipped (gpu.lock)
          "13": _load("nvidia.cu13", "libnvrtc.so.13")}           # the recorded runs'
pytestmark = pytest.mark.slow
# ptxas advisories that a build's wgmma products run one at a time (C7510-C7518: an
# accumulator touched, too few registers, a wait injected); C7519, an injected arrive, is not
SERIALISED = re.compile(r"\(C751[0-8]\)")
BF16_OPTIONS = ("-DBF16=1", "-DELEM_T=bf16_bits")


def nvrtc(version: str):
    lib = NVRTCS[version]
    if lib is None:
        pytest.skip(f"the NVRTC {version} wheel is not installed (requirements/dev.lock)")
    return lib


def nvrtc_log(source: str, options: list, target: str = "sm_90a", version: str = "13",
              text: str | None = None) -> tuple:
    """(result code, log) of NVRTC `version` compiling kernels/<source> (or `text` in its
    place) for `target` with ptxas -v."""
    lib = nvrtc(version)
    program = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(program), (text or read_source(source)).encode(),
                                  source.encode(), 0, None, None) == 0
    opts = [o for o in options if not o.startswith("-arch")] + [f"-arch={target}", "-Xptxas=-v"]
    code = lib.nvrtcCompileProgram(program, len(opts),
                                   (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(program, log)
    lib.nvrtcDestroyProgram(ctypes.byref(program))
    return code, log.value.decode()


def targets(kernel) -> list[str]:
    """The architectures a registry build claims: every generation from its min_cc whose
    shared memory holds one of its shapes (the Hopper builds: sm_90a, the target wgmma
    needs)."""
    if kernel.hopper_only:
        return ["sm_90a"]
    return [g.arch for g in gpu_arch.GENERATIONS
            if float(g.cc) >= kernel.min_cc and gpu_arch.shapes_on(kernel, g) != ()]


def define(options, name: str) -> int | None:
    return next((int(o.split("=")[1]) for o in options if o.startswith(f"-D{name}=")), None)


def query_stages_on(shape, options, gen) -> int:
    """The tensor-core backward's query buffers on a block of the generation's size."""
    from engine.gpu.launchers import backward_mma
    d, bq, bk = shape
    dtype = "bfloat16" if "-DBF16=1" in options else "float16"
    c = AttentionConfig(seq_q=bq, seq_k=bk, head_dim=d, block_q=bq, block_k=bk, dtype=dtype)
    return backward_mma.query_stages(c, gen.smem_optin)


def builds_for(kernel, target: str) -> list[tuple]:
    """The build's checked compile options on `target`: every example, less bfloat16 where the
    generation has none, less the catalogued tiles its shared memory cannot hold, less the
    decode kernel's copy-engine builds below sm_90 (the launcher never makes them there), and
    (the tensor-core backward) with the query buffers the launcher picks there."""
    gen = gpu_arch.generation(int(target[3:5]) / 10)
    out = []
    for o in examples_of(kernel.source):
        if float(gen.cc) < gpu_arch.BF16_MIN_CC and any(b in o for b in BF16_OPTIONS):
            continue
        if ("-DFP8=1" in o) != any(dt in FP8_DTYPES for dt in kernel.dtypes):
            continue                       # one source, two rows: each row its own builds
        if define(o, "TMA_COPIES") == 1 and float(gen.cc) < 9.0:
            continue
        shape = (define(o, "HEAD_DIM"), define(o, "BLOCK_Q"), define(o, "BLOCK_K"))
        if kernel.shapes and not gpu_arch.shape_fits(kernel, shape, gen.smem_optin):
            continue
        stages = define(o, "QUERY_STAGES")
        if stages is not None and stages != query_stages_on(shape, o, gen):
            continue
        out.append(o)
    return out


# Spills the tests accept, each with its bound (bytes of spill stores, any NVRTC, any target
# listed): the Flash-Decoding builds with the most query rows per block at head_dim 256, float32
# or bfloat16 (32 rows × 256 float32 accumulators over 128 threads: more than registers hold, on
# every GPU; a class runs it to see the limit, not for speed), its paged head_dim 128 builds
# (pages of 16 and of 64, cp.async) with NVRTC 12 on sm_86/89, and on Turing the traced
# mma.sync build of head_dim 128 at 128×32 (the trace's extra stores; the timed, untraced
# build does not spill), and the
# head_dim 128 tensor-core backward with one query buffer (the 99 KiB blocks of sm_86/89),
# which NVRTC 12 builds with a few spilled bytes where nvcc 13 spills none; and the traced
# FP8 build at head_dim 128 on 128×256 tiles (S 128 and O 64 accumulators a thread, with P
# through shared memory, and the trace's values and addresses on top: 96-100 bytes; the timed,
# untraced build spills none and keeps every wgmma pipelined, tests/test_kernel_sources.py).
KNOWN_SPILLS = {
    ("decode", "-DHEAD_DIM=256", "-DQUERY_ROWS=32"): 12560,
    ("decode", "-DHEAD_DIM=128", "-DQUERY_ROWS=4", "-DPAGE_SIZE=16"): 4,
    ("decode", "-DHEAD_DIM=128", "-DQUERY_ROWS=4", "-DPAGE_SIZE=64"): 4,
    ("mma.sync", "-DHEAD_DIM=128", "-DBLOCK_Q=128", "-DBLOCK_K=32", "-DTRACE=1"): 12,
    ("backward mma.sync", "-DHEAD_DIM=128", "-DQUERY_STAGES=1"): 16,
    ("wgmma fp8", "-DHEAD_DIM=128", "-DBLOCK_K=256", "-DTRACE=1"): 100,
}


def spill_bound(kernel, options) -> int:
    for (key, *parts), bound in KNOWN_SPILLS.items():
        if key == kernel.key and all(p in options for p in parts):
            return bound
    return 0


CASES = [(v, k, t) for v in ("12", "13") for k in KERNELS for t in targets(k)
         if v == "12" or t in ("sm_75", "sm_90", "sm_90a")]


def exhaustive_only(version: str, kernel, target: str) -> bool:
    """The cases the exhaustive run adds to CI's (FA_LAB_EXHAUSTIVE=1, tests/conftest.py):
    sm_89, whose blocks (99 KiB) and SM 8.x instruction set are sm_86's, so it gets the same
    builds; and NVRTC 13 below Hopper (users of older GPUs get NVRTC 12 from gpu.lock; the
    recorded runs' NVRTC 13 compiles the Hopper builds, which stay in CI)."""
    return target == "sm_89" or (version == "13" and not kernel.hopper_only)


def _build(version: str, kernel, options, target: str):
    """(the pool's key, the build) of one NVRTC compile of the matrix."""
    options = tuple(options)
    return (("nvrtc", version, kernel.source, options, target),
            functools.partial(nvrtc_log, kernel.source, list(options), target, version))


def background_compiles(item) -> None:
    """Queue the NVRTC builds of a selected case of the matrix (tests/conftest.py calls this
    when the session begins; tests/compile_pool.py runs them at the lowest priority)."""
    if item.originalname != "test_every_build_compiles_without_spills":
        return
    version, kernel, target = (item.callspec.params[k] for k in ("version", "kernel", "target"))
    if NVRTCS[version] is None:
        return
    for options in builds_for(kernel, target):
        compile_pool.submit(*_build(version, kernel, options, target))


@pytest.mark.parametrize("version,kernel,target", [
    pytest.param(v, k, t, marks=[pytest.mark.exhaustive] if exhaustive_only(v, k, t) else [],
                 id=f"nvrtc{v}-{k.key}-{t}") for v, k, t in CASES])
def test_every_build_compiles_without_spills(version, kernel, target):
    nvrtc(version)
    options = builds_for(kernel, target)
    assert options, (kernel.key, target)
    # started in the background when the session began (background_compiles above); a build
    # not started yet runs here, two at a time
    with ThreadPoolExecutor(max_workers=2) as pool:
        logs = list(pool.map(lambda o: compile_pool.result(*_build(version, kernel, o, target)),
                             options))
    for o, (code, log) in zip(options, logs):
        assert code == 0, (target, o, log[-2000:])
        spilled = max(int(b) for b in re.findall(r"(\d+) bytes spill stores", log))
        assert spilled <= spill_bound(kernel, o), (target, o, log)
        if kernel.hopper_only:
            assert "0 bytes stack frame" in log or spill_bound(kernel, o), (target, o, log)
            assert not SERIALISED.search(log), (target, o, log)


def test_a_bfloat16_build_fails_on_turing():
    """What the bfloat16 gate (engine.model.arch) stands on: sm_75 has no bfloat16."""
    teaching = next(k for k in KERNELS if k.key == "teaching")
    bf16 = next(o for o in examples_of(teaching.source) if "-DELEM_T=bf16_bits" in o)
    code, log = nvrtc_log(teaching.source, list(bf16), "sm_75", "12")
    assert code != 0 and "sm_80" in log, log[-1000:]


def test_the_wheels_are_the_locked_versions():
    """12.9 as requirements/gpu.lock installs it with CuPy, 13.0 as on the recorded GPUs."""
    for version, expected in (("12", (12, 9)), ("13", (13, 0))):
        lib = nvrtc(version)
        major, minor = ctypes.c_int(), ctypes.c_int()
        assert lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
        assert (major.value, minor.value) == expected


def test_the_check_sees_a_spill():
    """The NVRTC log reports what the tests above look for: a consumer budget too small for
    head_dim 128's accumulators spills."""
    source = next(k.source for k in KERNELS if k.key == "backward wgmma")
    squeezed = read_source(source).replace("d == 128 ? 240 : 232", "d == 128 ? 200 : 232")
    assert squeezed != read_source(source)
    code, log = nvrtc_log(source, ["--std=c++17", "-DHEAD_DIM=128", "-DBLOCK_Q=64",
                                   "-DBLOCK_K=128", "-DBF16=0", "-DDQ_WRITER=1"], text=squeezed)
    spilled = re.search(r"(\d+) bytes spill stores", log)
    assert code == 0 and spilled and int(spilled.group(1)) > 0, log
