"""The kernel registry: one row per CUDA kernel build of the project, the one table that the
catalog (which build takes which config), dispatch and its error messages, the shared-memory
layouts of engine.model.iomodel, the compile facts, the app's names and the tests read.

Pure Python (no CuPy, no backend import): a row names its launcher module as a string.

Keys, one spelling each: "teaching", "mma.sync", "wgmma", "wgmma fp8", "naive_softmax" (forward);
"backward teaching", "backward mma.sync", "backward wgmma", "naive_backward" (backward);
"decode" (one Flash-Decoding step). The recorded compile facts name kernels by these keys.

The public `kernel=` values of engine.run ("teaching", "tensorcore") are families
(FAMILIES): each names the builds dispatch chooses among, forward and backward.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import FP8_DTYPES

DIRECTIONS = ("forward", "backward", "decode")
TC_DTYPES = ("float16", "bfloat16")
ALL_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Kernel:
    """One kernel build. min_cc: the lowest compute capability on which the build runs (7.5,
    Turing, for every build but the Hopper ones: wgmma and TMA need 9.0a); bfloat16 needs 8.0
    on top (engine.model.arch, which holds the whole gate)."""

    key: str
    direction: str                    # "forward", "backward" or "decode"
    source: str                       # its path under kernels/: <role>/<name>.cu
    functions: tuple[str, ...]        # its __global__ functions, the main one first
    launcher: str                     # the module that launches it (engine.gpu...)
    label: str                        # the Kernel page's name of it
    dtypes: tuple[str, ...]
    min_cc: float
    hopper_only: bool = False
    traceable: bool = False           # writes the trace (trace=True)
    family: str | None = None         # the engine.run kernel= value that reaches it
    smem_layout: str | None = None    # its layout in engine.model.iomodel.smem_parts
    smem_fallback: str | None = None  # a leaner layout it compiles to where a block cannot
    #                                   hold smem_layout (fewer buffers, less overlap)
    chart_name: str | None = None     # its own series name in the charts, if it has one
    shapes: tuple[tuple[int, int, int], ...] | None = None   # (head_dim, block_q, block_k);
    #                                   None: any that fits shared memory
    head_dims: tuple[int, ...] | None = None   # None: any allowed (or those of shapes)

    @property
    def name(self) -> str:
        return self.key

    @property
    def function(self) -> str:
        return self.functions[0]

    @property
    def usual_dtype(self) -> str:
        """The dtype its shapes are sized and its compile facts recorded in: float16, or its
        first dtype where it takes no float16 (the FP8 build, whose 192-key tiles no other
        dtype takes)."""
        return "float16" if "float16" in self.dtypes else self.dtypes[0]

    def takes(self, cfg) -> bool:
        """cfg's dtype and (head_dim, block_q, block_k) are this build's."""
        return (cfg.dtype in self.dtypes
                and (self.shapes is None
                     or (cfg.head_dim, cfg.block_q, cfg.block_k) in self.shapes))

    def shapes_text(self) -> str:
        by_d = {}
        for d, bq, bk in self.shapes or ():
            by_d.setdefault(d, []).append(f"{bq}×{bk}")
        return "; ".join(f"head_dim {d} with block_q×block_k {', '.join(p)}"
                         for d, p in sorted(by_d.items()))

    def text(self) -> str:
        return f"dtype {' or '.join(self.dtypes)}: {self.shapes_text()}"


@dataclass(frozen=True)
class Family:
    """A public kernel= value: its name on screen and the builds dispatch chooses among, in
    dispatch order (the first that takes the config and the GPU runs)."""

    key: str
    name: str                         # "teaching kernel": the sidebar, captions, Tile sizes
    chart_name: str                   # its series name in the charts
    forward: tuple[str, ...]
    backward: tuple[str, ...]


KERNELS = (
    Kernel("teaching", "forward", "teaching/flash_teaching.cu", ("flash_teaching",),
           "engine.gpu.launchers.teaching",
           "Teaching kernel (forward, CUDA cores)", ALL_DTYPES, 7.5,
           traceable=True, family="teaching", smem_layout="teaching"),
    # Four warps per block, each owning block_q / 4 query rows; every build keeps its values
    # in registers (no spills), traced or not (lab/NOTES.md has the ptxas figures).
    Kernel("mma.sync", "forward", "ampere/flash_tensorcore.cu", ("flash_tensorcore",),
           "engine.gpu.launchers.mma",
           "Tensor-core kernel, mma.sync (forward)", TC_DTYPES, 7.5,
           traceable=True, family="tensorcore", smem_layout="mma.sync",
           chart_name="flash, tensor core (mma.sync)",
           shapes=((64, 64, 32), (64, 64, 64), (64, 64, 128), (64, 128, 32), (64, 128, 64),
                   (128, 64, 32), (128, 64, 64), (128, 128, 32))),
    # block_q / 64 consumer warpgroups of 64 query rows each and one producer warpgroup;
    # block_k is the N of the S = Q Kᵀ wgmma.
    Kernel("wgmma", "forward", "hopper/flash_wgmma.cu", ("flash_wgmma",),
           "engine.gpu.launchers.wgmma",
           "Tensor-core kernel, Hopper wgmma (forward)", TC_DTYPES, 9.0,
           hopper_only=True, traceable=True, family="tensorcore", smem_layout="wgmma",
           chart_name="flash, tensor core (wgmma)",
           shapes=((64, 128, 128), (128, 128, 64), (128, 128, 128))),
    # The same source built with -DFP8=1: its quantize kernel first (a scale per tile or per
    # tensor, e4m3 bytes, V written transposed, its keys permuted within groups of 16 to the
    # order of P's register fragment), then the forward on FP8 wgmma (docs/DESIGN.md, "The FP8
    # forward contract"); the NumPy emulation is engine.cpu.fp8. At head_dim 128 it takes key
    # tiles of 192 too (S_ij one m64n192 wgmma, V_jᵀ in three 64-key boxes), and of 256 with
    # P_ij through shared memory (iomodel.p_through_smem), to share the softmax's fixed costs
    # per tile among more keys; at head_dim 64, 256 with P in registers.
    Kernel("wgmma fp8", "forward", "hopper/flash_wgmma.cu", ("flash_wgmma", "quantize_fp8"),
           "engine.gpu.launchers.wgmma_fp8",
           "Tensor-core kernel, Hopper wgmma FP8 (forward)", FP8_DTYPES, 9.0,
           hopper_only=True, traceable=True, family="tensorcore", smem_layout="wgmma fp8",
           chart_name="flash, tensor core (wgmma FP8)",
           shapes=((64, 128, 128), (128, 128, 128), (128, 128, 192), (64, 128, 256),
                   (128, 128, 256))),
    Kernel("naive_softmax", "forward", "baselines/naive_softmax.cu", ("row_softmax",),
           "engine.gpu.naive", "Naive attention: row softmax (forward)", ALL_DTYPES, 7.5),
    Kernel("backward teaching", "backward", "teaching/flash_backward_teaching.cu",
           ("flash_backward_teaching", "backward_delta", "cast_rows"),
           "engine.gpu.launchers.backward_teaching",
           "Teaching kernel (backward)", ALL_DTYPES, 7.5,
           traceable=True, family="teaching", smem_layout="backward teaching"),
    # One block per key tile of block_k rows, block_k / 16 warps of 16 keys each, query tiles
    # of block_q rows; the shapes whose dK_j, dV_j, S_ijᵀ and dP_ijᵀ fit in registers without
    # spills. Its delta and dQ-cast kernels serve both tensor-core backward builds. Where a
    # block's shared memory cannot hold two buffers each of Q_i, dO_i, lse_i and D_i (99 KiB
    # at head_dim 128 on sm_86 / sm_89, 64 KiB on Turing) it is built with one of each
    # (-DQUERY_STAGES=1); 128×64×64 is the head_dim 128 shape that then fits 99 KiB.
    Kernel("backward mma.sync", "backward", "ampere/flash_backward_mma.cu",
           ("flash_backward_mma", "backward_delta", "backward_dq_cast"),
           "engine.gpu.launchers.backward_mma",
           "Tensor-core kernel, mma.sync (backward)", TC_DTYPES, 7.5,
           family="tensorcore", smem_layout="backward mma.sync",
           smem_fallback="backward mma.sync, one query buffer",
           shapes=((64, 64, 64), (64, 64, 128), (64, 128, 128), (128, 64, 128),
                   (128, 64, 64))),
    # One producer warpgroup (bulk tensor copies of Q_i, dO_i) and block_k / 64 consumer
    # warpgroups of 64 keys each, the products on warpgroup MMA; the shapes whose dK_j, dV_j,
    # S_ijᵀ and dP_ijᵀ fit a consumer's registers.
    Kernel("backward wgmma", "backward", "hopper/flash_backward_wgmma.cu",
           ("flash_backward_wgmma",),
           "engine.gpu.launchers.backward_wgmma",
           "Tensor-core kernel, Hopper wgmma (backward)", TC_DTYPES, 9.0,
           hopper_only=True, family="tensorcore", smem_layout="backward wgmma",
           shapes=((64, 128, 128), (128, 64, 128))),
    Kernel("naive_backward", "backward", "baselines/naive_backward.cu", ("softmax_backward",),
           "engine.gpu.naive", "Naive attention: softmax backward", ALL_DTYPES, 7.5),
    # One block per (split, KV head, sequence), the last of each (KV head, sequence) to
    # finish merging the splits, in one launch; compiled per head_dim, dtype, query rows per
    # block, query tokens and page size.
    Kernel("decode", "decode", "decode/flash_decode.cu", ("flash_decode_split",),
           "engine.gpu.launchers.decode",
           "Flash-Decoding (one decode step)", ALL_DTYPES, 7.5,
           traceable=True, head_dims=(16, 32, 64, 128, 256)),
)
BY_KEY = {k.key: k for k in KERNELS}

FAMILIES = {
    "teaching": Family("teaching", "teaching kernel", "flash, teaching kernel",
                       ("teaching",), ("backward teaching",)),
    "tensorcore": Family("tensorcore", "tensor-core kernel",
                         "flash, tensor core (mma.sync/wgmma)",
                         ("wgmma", "mma.sync", "wgmma fp8"),
                         ("backward wgmma", "backward mma.sync")),
}

SMEM_LAYOUTS = (tuple(k.smem_layout for k in KERNELS if k.smem_layout)
                + tuple(k.smem_fallback for k in KERNELS if k.smem_fallback))


def kernel(key: str) -> Kernel:
    """The row of `key`; ValueError naming every key otherwise."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise ValueError(f"kernel must be one of {', '.join(BY_KEY)}; got {key!r}.") from None


def builds(family: str, direction: str = "forward") -> tuple[Kernel, ...]:
    """The builds of a kernel= family in one direction, in dispatch order."""
    fam = FAMILIES[family]
    return tuple(BY_KEY[k] for k in (fam.forward if direction == "forward" else fam.backward))


def fp8_builds() -> tuple[Kernel, ...]:
    """The builds that take an FP8 dtype (engine.model.config.FP8_DTYPES): the forward ones
    engine.run reaches with an FP8 config, whatever its kernel= value."""
    return tuple(k for k in KERNELS if set(k.dtypes) & set(FP8_DTYPES))


def family_names() -> dict[str, str]:
    """{kernel= value: its name on screen}: "teaching kernel", "tensor-core kernel"."""
    return {k: f.name for k, f in FAMILIES.items()}


def chart_names() -> dict[str, str]:
    """{key: series name} of every family and of every build with a series of its own."""
    names = {k: f.chart_name for k, f in FAMILIES.items()}
    names.update({k.key: k.chart_name for k in KERNELS if k.chart_name})
    return names

