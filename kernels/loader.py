"""Compile the CUDA sources of this folder with cupy.RawModule, once per source and options.

Sources are read from disk by name, compiled with NVRTC for the GPU in use, and cached per
(source, options): the first call of a configuration pays the compile, later calls do not.
A compile error reaches the caller as KernelCompileError, with the compiler's log.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent


class KernelCompileError(ValueError):
    """A kernel source failed to compile; the message names the source, options and log."""


def source_names() -> list[str]:
    return sorted(p.name for p in KERNEL_DIR.glob("*.cu"))


def source_path(name: str) -> Path:
    if name not in source_names():
        raise KernelCompileError(f"No kernel source {name!r}; the sources are "
                                 f"{', '.join(source_names())}.")
    return KERNEL_DIR / name


LOCAL_INCLUDE = re.compile(r'^#include "(\w+\.cuh)"$', re.MULTILINE)


def read_source(name: str) -> str:
    """The source text with this folder's headers pasted in where they are included, so the
    text NVRTC compiles (and CuPy's cache keys on) is complete."""
    def paste(match):
        header = KERNEL_DIR / match.group(1)
        if not header.is_file():
            raise KernelCompileError(f"kernels/{name} includes {match.group(1)}, which is not in "
                                     f"kernels/.")
        return header.read_text()
    return LOCAL_INCLUDE.sub(paste, source_path(name).read_text())


@functools.lru_cache(maxsize=128)
def load_module(name: str, options: tuple[str, ...] = ()):
    """The compiled cupy.RawModule of kernels/<name> for these compiler options."""
    import cupy
    code = read_source(name)
    module = cupy.RawModule(code=code, options=tuple(options))
    try:
        module.compile()
    except Exception as exc:  # cupy's CompileException, or NVRTC missing or failing
        log = str(exc).strip()
        raise KernelCompileError(
            f"kernels/{name} failed to compile with options {' '.join(options) or '(none)'}: "
            f"{type(exc).__name__}: {log[:4000]}") from exc
    return module


def get_function(name: str, function: str, options: tuple[str, ...] = ()):
    """The cupy.RawKernel `function` of kernels/<name>, compiled with `options`."""
    module = load_module(name, tuple(options))
    try:
        return module.get_function(function)
    except Exception as exc:
        raise KernelCompileError(f"kernels/{name} compiled but has no kernel {function!r}: "
                                 f"{exc}") from exc
