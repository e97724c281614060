"""GPU generations and what each can run: the compute-capability gate that dispatch, the
engine's errors, the sidebar and README's table read. Pure Python.

A build runs on a GPU when the GPU's compute capability reaches the build's `min_cc` (the
registry row) and, in bfloat16, also BF16_MIN_CC: Turing (7.5) has float16 tensor cores
(mma.sync m16n8k8) and ldmatrix, but no bfloat16 conversions or products and no cp.async
(the mma.sync builds copy tiles through registers there, kernels/include/common.cuh);
warpgroup MMA and the tensor memory accelerator are Hopper's (9.0a).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .config import FP8_DTYPES
from .registry import FAMILIES, KERNELS, Kernel, builds, fp8_builds

BF16_MIN_CC = 8.0       # cvt.rn.bf16 and the bfloat16 mma.sync shapes need sm_80
FP8_MIN_CC = 8.9        # e4m3 tensor-core products (mma.sync on Ada; wgmma on Hopper)


@dataclass(frozen=True)
class Generation:
    cc: str              # "7.5"
    name: str            # "Turing"
    examples: str        # GPUs of it a class or a speaker may have
    smem_optin: int      # bytes of shared memory one block may use (CUDA C++ Programming
    #                      Guide, "Technical Specifications per Compute Capability")

    @property
    def arch(self) -> str:
        return "sm_" + self.cc.replace(".", "")


GENERATIONS = (
    Generation("7.5", "Turing", "T4, RTX 20xx", 64 * 1024),
    Generation("8.0", "Ampere", "A100", 163 * 1024),
    Generation("8.6", "Ampere", "A10G, RTX 30xx", 99 * 1024),
    Generation("8.9", "Ada Lovelace", "L4, RTX 40xx", 99 * 1024),
    Generation("9.0", "Hopper", "H100, H200", 227 * 1024),
)
OLDEST_CC = float(GENERATIONS[0].cc)


def cc_number(cc) -> float:
    """7.5 from "7.5", "75", 7.5 or (7, 5)."""
    if isinstance(cc, tuple):
        return cc[0] + cc[1] / 10
    text = str(cc)
    if "." not in text and text.isdigit():
        return int(text[:-1]) + int(text[-1]) / 10
    return float(text)


def ptx_override_cc() -> float | None:
    """The compute capability FA_LAB_PTX_ARCH names (compute_75 -> 7.5): the generation whose
    code path the kernels are built for on a newer GPU (kernels/loader.py); None when unset
    or not a generation's (engine.gpu.runtime.ptx_arch refuses that with a message)."""
    value = os.environ.get("FA_LAB_PTX_ARCH", "").strip()
    for g in GENERATIONS:
        if value == "compute_" + g.cc.replace(".", ""):
            return float(g.cc)
    return None


def generation(cc) -> Generation:
    """The newest generation at or below compute capability cc (the oldest for older ones)."""
    number = cc_number(cc)
    return next((g for g in reversed(GENERATIONS) if float(g.cc) <= number), GENERATIONS[0])


def min_cc(kernel: Kernel, dtype: str) -> float:
    """The lowest compute capability on which `kernel` runs in `dtype`."""
    return max(kernel.min_cc, BF16_MIN_CC if dtype == "bfloat16" else 0.0)


def runs_on(kernel: Kernel, dtype: str, cc) -> bool:
    return dtype in kernel.dtypes and cc_number(cc) >= min_cc(kernel, dtype)


def lacks(kernel: Kernel, dtype: str, cc) -> str | None:
    """What a GPU of compute capability cc lacks to run `kernel` in `dtype`, in words (a
    newer generation, bfloat16, or the shared memory for any catalogued shape); None when it
    runs it. Whether the build takes dtype at all is the catalog's question."""
    number = cc_number(cc)
    if number < kernel.min_cc:
        if dtype in FP8_DTYPES:
            hopper = (f"the warpgroup MMA (wgmma) and tensor memory accelerator this kernel "
                      f"runs its FP8 products with (compute capability {kernel.min_cc:.1f}, "
                      f"Hopper)")
            if number < FP8_MIN_CC:
                return (f"FP8 tensor cores (compute capability {FP8_MIN_CC:.1f} and later) "
                        f"and {hopper}")
            return (f"{hopper}; its FP8 tensor cores take mma.sync, which no FP8 build of this "
                    f"project uses")
        if kernel.hopper_only:
            return ("warpgroup MMA and the tensor memory accelerator (compute capability "
                    f"{kernel.min_cc:.1f}, Hopper)")
        return f"what the build needs (compute capability {kernel.min_cc:.1f})"
    if number < min_cc(kernel, dtype):
        return f"bfloat16 arithmetic (compute capability {BF16_MIN_CC:.1f}, Ampere, or later)"
    gen = generation(number)
    if shapes_on(kernel, gen) == ():
        return (f"the shared memory its tiles need (a block may use "
                f"{gen.smem_optin // 1024} KiB on compute capability {gen.cc})")
    return None


def _family_builds(family: str | None, direction: str,
                   dtype: str | None = None) -> tuple[Kernel, ...]:
    """The builds a request reaches: a kernel= family's in dispatch order, or a naive one;
    an FP8 dtype's forward build whatever the family (it has one)."""
    if dtype in FP8_DTYPES and direction == "forward":
        return fp8_builds()
    if family is None:
        key = "naive_softmax" if direction == "forward" else "naive_backward"
        return tuple(k for k in KERNELS if k.key == key)
    if direction == "decode":
        return tuple(k for k in KERNELS if k.direction == "decode")
    return builds(family, direction)


def what_runs(cc, direction: str = "forward") -> list[str]:
    """Every kernel a GPU of compute capability cc runs in `direction`, with its dtypes, in
    words ("the teaching kernel in float32 or float16")."""
    if direction == "decode":
        groups = [("Flash-Decoding kernel", _family_builds("decode", "decode"))]
    else:
        groups = [(f.name, builds(key, direction)) for key, f in FAMILIES.items()]
        groups.append(("naive attention", _family_builds(None, direction)))
    out = []
    for name, ks in groups:
        dtypes = [d for d in ("float32", "float16", "bfloat16")
                  if any(d in k.dtypes and lacks(k, d, cc) is None for k in ks)]
        if dtypes:
            article = "" if name == "naive attention" else "the "
            out.append(f"{article}{name} in {' or '.join(dtypes)}")
    return out


@functools.lru_cache(maxsize=256)
def refusal(gpu_name: str, cc, dtype: str, family: str | None,
            direction: str = "forward") -> str | None:
    """None when some build of the request runs on this GPU in dtype; else the message that
    names the GPU, what it lacks and what runs on it instead. family: a kernel= value, or None
    for naive attention."""
    ks = _family_builds(family, direction, dtype)
    number = cc_number(cc)
    takes = [k for k in ks if dtype in k.dtypes]
    if not takes:
        return None                     # a dtype refusal, which the catalog words itself
    if any(lacks(k, dtype, number) is None for k in takes):
        return None
    missing = lacks(takes[-1], dtype, number)   # the most widely runnable build's
    what = ("the Flash-Decoding kernel" if direction == "decode" else
            "the FP8 forward kernel" if dtype in FP8_DTYPES else
            f"the {FAMILIES[family].name}" if family else "naive attention")
    if direction == "backward" and family:
        what += "'s backward pass"
    instead = "; ".join(what_runs(number, direction))
    if dtype in FP8_DTYPES:
        instead = ("backend='numpy', the FP8 emulation (the kernel's roundings on the CPU); "
                   + instead)
    return (f"The {gpu_name} (compute capability {number:.1f}) cannot run {what} in "
            f"{dtype}: it lacks {missing}. On this GPU run instead: "
            f"{instead or 'nothing of this project'}.")


def shape_fits(kernel: Kernel, shape: tuple[int, int, int], smem_optin: int,
               dtype: str | None = None) -> bool:
    """Whether the build's tiles (head_dim, block_q, block_k) fit a block's shared memory
    (in its own layout, or in its leaner fallback where it has one), in dtype (None: the
    build's usual_dtype)."""
    if not kernel.smem_layout:
        return True
    from .config import AttentionConfig
    from .iomodel import fitting_layout, smem_bytes
    if dtype is None:
        dtype = kernel.usual_dtype
    d, bq, bk = shape
    cfg = AttentionConfig(batch=1, heads=1, seq_q=bq, seq_k=bk, head_dim=d, block_q=bq,
                          block_k=bk, dtype=dtype)
    return smem_bytes(cfg, fitting_layout(cfg, kernel.smem_layout, smem_optin)) <= smem_optin


def shapes_on(kernel: Kernel, generation: Generation) -> tuple | None:
    """The catalogued shapes of a build that fit the generation's shared memory (None: the
    build takes any shape that fits, as the teaching kernel)."""
    if kernel.shapes is None:
        return None
    return tuple(s for s in kernel.shapes if shape_fits(kernel, s, generation.smem_optin))


def generation_table() -> list[dict]:
    """One row per GPU generation: which builds run there, in which dtypes and (tensor-core
    builds) how many of their catalogued shapes fit its shared memory (README's table)."""
    rows = []
    for g in GENERATIONS:
        runs = {}
        for k in KERNELS:
            dts = [d for d in k.dtypes if runs_on(k, d, g.cc)]
            shapes = shapes_on(k, g)
            if dts and shapes != ():
                runs[k.key] = {"dtypes": dts, "shapes": shapes}
        rows.append({"generation": g, "runs": runs})
    return rows
