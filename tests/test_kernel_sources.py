"""Every CUDA source in kernels/ compiles with nvcc for sm_90, for the option combinations
the launchers use (skipped where nvcc is missing), and the teaching kernel's shared-memory
layout and its overflow message agree with the IO model — all without a GPU."""
import functools
import os
import shutil
import subprocess

import pytest

import compile_pool
import engine
from engine.model import catalog, registry
from engine.gpu import naive as gpu_naive
from engine.gpu.launchers import backward_teaching, core, teaching
from engine.model.iomodel import smem_budget
from engine.model.launch import naive_row_threads
from kernels.loader import INCLUDE_DIR, KERNEL_DIR, read_source, source_names

NVCC = shutil.which("nvcc")
# CI sets FA_LAB_REQUIRE_NVCC=1: there a missing nvcc fails these tests instead of skipping them.
if NVCC is None and os.environ.get("FA_LAB_REQUIRE_NVCC") == "1":
    raise RuntimeError("FA_LAB_REQUIRE_NVCC=1 but nvcc is not on PATH: the kernel compile "
                       "tests cannot run.")
H200 = engine.PROFILES["H200"]
SRC = {k.key: k.source for k in registry.KERNELS}   # registry key -> path under kernels/
BENCH_HOLD = "baselines/bench_hold.cu"


def cfg(**kw):
    return engine.AttentionConfig(**kw)


# Every (dtype, causal, trace) combination, spread over head dims and tile sizes.
TEACHING = [
    (cfg(head_dim=64, block_q=64, block_k=64, dtype="float16", causal=True), True),
    (cfg(head_dim=64, block_q=64, block_k=64, dtype="float16", causal=False), False),
    (cfg(head_dim=16, block_q=8, block_k=128, dtype="float32", causal=True), False),
    (cfg(head_dim=32, block_q=128, block_k=8, dtype="float32", causal=False), True),
    (cfg(head_dim=128, block_q=128, block_k=64, dtype="float32", causal=True), True),
    (cfg(head_dim=256, block_q=32, block_k=16, dtype="float16", causal=False), True),
    (cfg(head_dim=128, block_q=16, block_k=32, dtype="float16", causal=True), False),
    (cfg(head_dim=256, block_q=8, block_k=8, dtype="float32", causal=False), False),
    (cfg(head_dim=64, block_q=64, block_k=32, dtype="bfloat16", causal=True), True),
    (cfg(head_dim=128, block_q=32, block_k=64, dtype="bfloat16", causal=False), False),
]
EXAMPLES = {
    SRC["teaching"]: [teaching.compile_options(c, t) for c, t in TEACHING],
    SRC["naive_softmax"]: [gpu_naive.compile_options(cfg(dtype=d, seq_k=n))
                           for d, n in (("float32", 100), ("float16", 4096),
                                        ("bfloat16", 1000))],
    BENCH_HOLD: [()],
    # The teaching backward takes the forward's options; every (dtype, causal, trace) again.
    SRC["backward teaching"]: [backward_teaching.compile_options(c, t) for c, t in TEACHING
                               if smem_budget(c, H200, backward_teaching.SMEM_LAYOUT).fits],
    # 16-byte loads where seq_k allows them (VEC > 1) and single elements where not.
    SRC["naive_backward"]: [gpu_naive.backward_compile_options(cfg(dtype=d, seq_k=n))
                            for d, n in (("float32", 100), ("float16", 4096), ("bfloat16", 1000),
                                         ("float16", 257))],
}


def tensorcore_examples():
    """The mma.sync kernel's first and last catalogued shapes in every dtype it takes,
    traced and not, then their STREAM_K builds (float16)."""
    from engine.gpu.launchers import mma
    shapes = catalog.MMA_SYNC.shapes
    return [mma.compile_options(cfg(head_dim=d, block_q=bq, block_k=bk, dtype=dt), t)
            for d, bq, bk in (shapes[0], shapes[-1]) for t in (False, True)
            for dt in catalog.MMA_SYNC.dtypes] + stream_k_examples()


def stream_k_examples():
    """The mma.sync kernel's STREAM_K builds (with the run log, as the launcher builds them) of
    its first and last catalogued shapes (the last, head_dim 128 at 128×32, holds the most
    registers), then the last shape's whole-item build with the run log."""
    from engine.gpu.launchers import mma
    shapes = catalog.MMA_SYNC.shapes
    last = cfg(head_dim=shapes[-1][0], block_q=shapes[-1][1], block_k=shapes[-1][2])
    return ([mma.compile_options(cfg(head_dim=d, block_q=bq, block_k=bk), False, split=True)
             for d, bq, bk in (shapes[0], shapes[-1])]
            + [mma.compile_options(last, False, runs=True)])


def wgmma_examples():
    """The Hopper kernel's first and last shapes, traced and not: float16 with and without
    ping-pong, bfloat16 with the launcher's ping-pong as a persistent kernel; the launcher's
    own -arch option is replaced by the sm_90a target below."""
    from engine.gpu.launchers import wgmma
    out = []
    for d, bq, bk in (catalog.WGMMA.shapes[0], catalog.WGMMA.shapes[-1]):
        for t in (0, 1):
            opts = wgmma.compile_options(cfg(head_dim=d, block_q=bq, block_k=bk,
                                             dtype="float16"), bool(t))
            out += [tuple(o for o in opts if not o.startswith(("-arch", "-DPINGPONG")))
                    + (f"-DPINGPONG={p}",) for p in (0, 1)]
            bf16 = wgmma.compile_options(cfg(head_dim=d, block_q=bq, block_k=bk,
                                             dtype="bfloat16"), bool(t))
            out.append(tuple(o for o in bf16 if not o.startswith(("-arch", "-DPERSISTENT")))
                       + ("-DPERSISTENT=1",))
    return out + fp8_examples()


def fp8_examples():
    """The same source's FP8 build (-DFP8=1) at each of its shapes, traced and not, as its
    launcher compiles it."""
    from engine.gpu.launchers import wgmma_fp8
    return [tuple(o for o in wgmma_fp8.compile_options(
                cfg(head_dim=d, block_q=bq, block_k=bk, dtype="float8_e4m3"), bool(t))
                  if not o.startswith("-arch"))
            for d, bq, bk in catalog.FP8_BUILDS[0].shapes for t in (0, 1)]


def backward_mma_examples():
    """Every catalogued build of the tensor-core backward, in both dtypes, with two query
    buffers, and with one where some generation's block holds only that (the build that
    runs there)."""
    from engine.gpu.launchers import backward_mma
    from engine.model import arch
    out = []
    for d, bq, bk in catalog.BACKWARD_MMA.shapes:
        for dt in catalog.BACKWARD_MMA.dtypes:
            c = cfg(head_dim=d, block_q=bq, block_k=bk, dtype=dt)
            stages = {backward_mma.query_stages(c, g.smem_optin) for g in arch.GENERATIONS
                      if arch.runs_on(catalog.BACKWARD_MMA, dt, g.cc)
                      and arch.shape_fits(catalog.BACKWARD_MMA, (d, bq, bk), g.smem_optin)}
            out += [backward_mma.kernel_options(c, s) for s in sorted(stages | {2}, reverse=True)]
    return out


def backward_wgmma_examples():
    """Every catalogued build of the Hopper backward, in both dtypes, with either dQ writer;
    the launcher's own -arch option is replaced by the sm_90a target below."""
    from engine.gpu.launchers import backward_wgmma
    out = []
    for d, bq, bk in catalog.BACKWARD_WGMMA.shapes:
        for dt in catalog.BACKWARD_WGMMA.dtypes:
            opts = backward_wgmma.compile_options(cfg(head_dim=d, block_q=bq, block_k=bk,
                                                      dtype=dt))
            kept = tuple(o for o in opts if not o.startswith(("-arch", "-DDQ_WRITER")))
            out += [kept + (f"-DDQ_WRITER={w}",) for w in (0, 1)]
    return out


def decode_examples():
    """The Flash-Decoding kernel in float16 and bfloat16 at head_dim 64 and 128 (one query
    row per block, contiguous; four rows of a GQA group, paged), each also as its copy-engine
    build (TMA_COPIES, which sm_90 takes for these), and the extremes: float32 and bfloat16
    (the largest 16-bit block) at head_dim 256 with 32 rows, float16 at head_dim 16 with four
    query tokens."""
    from engine.model.decode_config import DecodeConfig, decode_tma
    from engine.gpu.launchers import decode
    shapes = [dict(head_dim=d, dtype=dt, **layout) for d in (64, 128)
              for dt in ("float16", "bfloat16")
              for layout in (dict(heads=8, kv_heads=8), dict(heads=32, kv_heads=8,
                                                             page_size=16))]
    shapes += [dict(head_dim=128, dtype="float16", heads=32, kv_heads=8, page_size=64)]
    shapes += [dict(head_dim=256, dtype="float32", heads=32, kv_heads=1, page_size=256),
               dict(head_dim=256, dtype="bfloat16", heads=32, kv_heads=1),
               dict(head_dim=16, dtype="float16", heads=4, kv_heads=2, seq_q=4, seq_k=64)]
    configs = [DecodeConfig(**kw) for kw in shapes]
    return [decode.compile_options(cfg, tma) for cfg in configs
            for tma in ((False, True) if decode_tma(cfg, "9.0") else (False,))]


SM90A_SOURCES = (catalog.WGMMA.source, catalog.BACKWARD_WGMMA.source)


def nvcc(source, options):
    # wgmma needs the architecture-specific sm_90a target; everything else builds for sm_90.
    # Headers are found as kernels/loader.py finds them: beside the source, then in
    # kernels/include/. Device code only (-cubin, the same front end and ptxas): the app loads
    # its kernels through NVRTC, so the host stubs that -c also compiles are never used, and
    # skipping them takes a third off each compile.
    arch = "-gencode=arch=compute_90a,code=sm_90a" if source in SM90A_SOURCES else "-arch=sm_90"
    cmd = [NVCC, arch, "-cubin", str(KERNEL_DIR / source), "-o", "/dev/null", f"-I{INCLUDE_DIR}",
           *options]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def nvcc_verbose(source, options: tuple):
    """nvcc with ptxas's resource report (-Xptxas -v), once per build in a session: the
    compile test of every source and the register test of the backward builds share it, and
    it is started in the background when the session begins (background_compiles below)."""
    return compile_pool.result(*_verbose_build(source, tuple(options)))


def _verbose_build(source, options: tuple):
    """(the pool's key, the build) of nvcc_verbose(source, options)."""
    return ("nvcc", source, options), functools.partial(nvcc, source,
                                                        (*options, "-Xptxas", "-v"))


def background_compiles(item) -> None:
    """Queue the nvcc builds of a selected compile test (tests/conftest.py calls this when
    the session begins; tests/compile_pool.py runs them at the lowest priority)."""
    if NVCC is None:
        return
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    if item.originalname == "test_every_kernel_source_compiles_for_sm90":
        builds = [(params["source"], tuple(o)) for o in examples_of(params["source"])]
    elif item.originalname == "test_backward_builds_keep_everything_in_registers":
        builds = [(params["source"], tuple(params["options"]))]
    else:
        return
    for source, options in builds:
        compile_pool.submit(*_verbose_build(source, options))


def examples_of(source: str) -> list:
    """The compile options a source is checked with: the catalogued builds for the tensor-core
    kernels, EXAMPLES for the others."""
    built = {SRC["mma.sync"]: tensorcore_examples, SRC["wgmma"]: wgmma_examples,
             SRC["backward mma.sync"]: backward_mma_examples,
             SRC["backward wgmma"]: backward_wgmma_examples, SRC["decode"]: decode_examples}
    return built[source]() if source in built else EXAMPLES[source]


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source", source_names())
def test_every_kernel_source_compiles_for_sm90(source):
    # nvcc runs one compile per core at a time: the examples are independent processes.
    from concurrent.futures import ThreadPoolExecutor
    examples = examples_of(source)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        builds = list(pool.map(lambda options: nvcc_verbose(source, tuple(options)), examples))
    for options, done in zip(examples, builds):
        assert done.returncode == 0, f"{source} {' '.join(options)}:\n{done.stderr}"


# (source, kernel function, options) of every backward build whose registers are checked, and
# of the forward's STREAM_K builds (the walk and the merge beside the main loop's registers)
# (the one-query-buffer builds run on 64 KiB and 99 KiB blocks only: test_nvrtc_builds checks
# them on those targets)
BACKWARD_BUILDS = ([(SRC["backward mma.sync"], "flash_backward_mma", o)
                    for o in backward_mma_examples() if "-DQUERY_STAGES=1" not in o]
                   + [(SRC["backward wgmma"], "flash_backward_wgmma", o)
                      for o in backward_wgmma_examples()]
                   + [(SRC["mma.sync"], "flash_tensorcore", o)
                      for o in stream_k_examples()])


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("source,function,options", BACKWARD_BUILDS,
                         ids=[f"{s} {' '.join(o)}" for s, _, o in BACKWARD_BUILDS])
def test_backward_builds_keep_everything_in_registers(source, function, options):
    done = nvcc_verbose(source, tuple(options))
    assert done.returncode == 0, done.stderr
    report = done.stderr.split(f"Function properties for {function}")[1].split("ptxas")[:2]
    assert "0 bytes spill stores, 0 bytes spill loads" in report[0], (options, report)


# The FP8 forward's untraced builds, as its launcher compiles them (the compile test above
# builds them too, with the same options: the pool shares the result).
FP8_UNTRACED = [o for o in fp8_examples() if "-DTRACE=0" in o]


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("options", FP8_UNTRACED, ids=[" ".join(o) for o in FP8_UNTRACED])
def test_fp8_builds_keep_their_products_pipelined(options):
    """No spills, and ptxas keeps the wgmma pipelined: where S, O and P pass the consumers'
    registers (128 × 256 at d = 128 with P in registers) it spills and serialises every wgmma,
    a build that runs correctly at a fraction of its speed; P_SMEM is what keeps that tile
    inside them."""
    done = nvcc_verbose(SRC["wgmma"], tuple(options))
    assert done.returncode == 0, done.stderr
    report = done.stderr.split("Function properties for flash_wgmma")[1].split("ptxas")[0]
    assert "0 bytes spill stores, 0 bytes spill loads" in report, (options, report)
    assert "serialized" not in done.stderr, (options, done.stderr)
    want_p_smem = "-DHEAD_DIM=128" in options and "-DBLOCK_K=256" in options
    assert ("-DP_SMEM=1" in options) == want_p_smem and ("-DP_SMEM=0" in options) != want_p_smem


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
def test_missing_defines_fail_with_a_message():
    done = nvcc(SRC["teaching"], ("-DBLOCK_Q=64",))
    assert done.returncode != 0 and "compile with -DBLOCK_Q=" in done.stderr


def required_defines(source):
    """The macros a source stops on when they are missing (#error under #if !defined / #ifndef),
    its headers included."""
    import re
    text = read_source(source)
    names = set(re.findall(r"#ifndef (\w+)\n#error", text))
    for cond in re.findall(r"#if (!defined\(\w+\)(?:\s*\|\|\s*\\?\s*!defined\(\w+\))*)", text):
        names.update(re.findall(r"!defined\((\w+)\)", cond))
    return names


@pytest.mark.parametrize("source", [k.source for k in registry.KERNELS])
def test_launcher_options_define_every_macro_the_source_requires(source):
    options = examples_of(source)
    need = required_defines(source)
    assert need, f"{source} declares no required macro"
    for opts in options:
        given = {o[2:].split("=")[0] for o in opts if o.startswith("-D")}
        assert need <= given, (source, opts, need - given)


def test_naive_softmax_threads_fit_the_row():
    assert [naive_row_threads(cfg(seq_k=n)) for n in (1, 256, 257, 1024, 4096, 16384)] == \
        [32, 32, 64, 128, 256, 256]


def test_overflow_message_gives_bytes_and_the_largest_fitting_tiles():
    c = cfg(head_dim=256, block_q=64, block_k=64, dtype="float32")
    with pytest.raises(core.SharedMemoryError) as err:
        teaching.check_fits(c, H200)
    msg = str(err.value)
    assert "279,040 bytes" in msg and f"{H200.smem_per_block_optin:,} bytes" in msg
    assert "block_q=64, block_k=32" in msg and "block_q=32, block_k=64" in msg
    assert teaching.check_fits(c.with_(block_k=32), H200) == 205_312


def test_backward_overflow_message_gives_bytes_and_the_largest_fitting_tiles():
    # K_j, V_j: 2·64·(128·4 + 4); Q_i, dO_i: 2·128·516; dK_j, dV_j: 2·64·128·4;
    # P_ij, dS_ij: 2·128·64·4; L_i, D_i: 2·128·4.
    c = cfg(head_dim=128, block_q=128, block_k=64, dtype="float32")
    with pytest.raises(core.SharedMemoryError) as err:
        backward_teaching.check_fits(c, H200)
    msg = str(err.value)
    assert "teaching backward" in msg and "330,240 bytes" in msg
    assert "block_q=128, block_k=32" in msg and "block_q=64, block_k=64" in msg
    assert backward_teaching.check_fits(c.with_(block_k=32), H200) == 231_680


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
def test_decode_split_kernel_fits_blocks_per_sm_on_the_issue_shape():
    """heads 32, kv_heads 8, d = 128, float16 (the decode targets on the H200): shared memory and
    registers leave room for BLOCKS_PER_SM blocks on an SM (the auto rule uses at most
    AUTO_BLOCKS_PER_SM of them), in the build the H200 runs (the copy engine's) and the
    cp.async one."""
    from engine.model.decode_config import BLOCKS_PER_SM, DecodeConfig
    from engine.gpu.launchers import decode
    cfg = DecodeConfig(heads=32, kv_heads=8, seq_k=32768, head_dim=128, dtype="float16")
    assert decode.uses_tma(cfg, H200, cfg.splits_on(H200.sms))     # 32 splits, 256 blocks
    for tma in (True, False):
        smem = decode.check_fits(cfg, H200, tma)
        assert BLOCKS_PER_SM * (smem + 1024) <= H200.smem_per_sm
        done = nvcc(SRC["decode"], (*decode.compile_options(cfg, tma), "-Xptxas", "-v"))
        assert done.returncode == 0, done.stderr
        report = done.stderr.split("Function properties for flash_decode_split")[1]
        regs = int(report.split("Used ")[1].split(" registers")[0])
        assert BLOCKS_PER_SM * regs * decode.NUM_THREADS <= H200.regs_per_sm, (tma, regs)
        assert "0 bytes spill stores" in report.split("ptxas")[0], (tma, report)
