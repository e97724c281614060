"""Compile the CUDA sources of this folder with cupy.RawModule, once per source and options.

Sources are named by their path under kernels/ ("teaching/flash_teaching.cu"), read from
disk, compiled with NVRTC for the GPU in use, and cached per (source, options): the first call
of a configuration pays the compile, later calls do not. A compile error reaches the caller as
KernelCompileError, with the compiler's log.

NVRTC is given one text: read_source pastes every `#include "..."` in, recursively, as nvcc's
preprocessor would find it with `-I kernels/include`: beside the including file first, then
in kernels/include/. Each header is pasted once, where it is first included (what its include
guard or `#pragma once` would give); a header that includes itself, directly or through
others, is pasted once too. Keep the includes of headers unconditional (outside #if): the
paste does not read the conditions around them.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = KERNEL_DIR / "include"


class KernelCompileError(ValueError):
    """A kernel source failed to compile; the message names the source, options and log."""


def source_names() -> list[str]:
    """Every kernel source, as its path under kernels/ ("hopper/flash_wgmma.cu")."""
    return sorted(p.relative_to(KERNEL_DIR).as_posix() for p in KERNEL_DIR.rglob("*.cu"))


def source_path(name: str) -> Path:
    if name not in source_names():
        raise KernelCompileError(f"No kernel source {name!r}; the sources are "
                                 f"{', '.join(source_names())}.")
    return KERNEL_DIR / name


QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[^\n]*$', re.MULTILINE)
PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)


def _shown(path: Path) -> str:
    """path as kernels/... where it is under kernels/, else as given."""
    try:
        return "kernels/" + path.resolve().relative_to(KERNEL_DIR).as_posix()
    except ValueError:
        return str(path)


def resolve_include(name: str, including: Path, include_dirs=(INCLUDE_DIR,)) -> Path:
    """The file `#include "name"` in `including` means: beside it, else in include_dirs;
    KernelCompileError naming both files when there is none."""
    for folder in (including.parent, *include_dirs):
        candidate = folder / name
        if candidate.is_file():
            return candidate.resolve()
    looked = ", ".join(_shown(f) + "/" for f in (including.parent, *include_dirs))
    raise KernelCompileError(f'{_shown(including)} includes "{name}", which is not in '
                             f"{looked}.")


def expand_includes(path: Path, include_dirs=(INCLUDE_DIR,)) -> str:
    """The text of `path` with its quoted includes pasted in, recursively, each file once."""
    pasted: set[Path] = set()

    def expand(file: Path) -> str:
        pasted.add(file.resolve())

        def paste(match) -> str:
            header = resolve_include(match.group(1), file, include_dirs)
            if header in pasted:           # pasted already (or being pasted: a cycle)
                return f'// #include "{match.group(1)}": pasted above'
            return expand(header)

        return QUOTED_INCLUDE.sub(paste, PRAGMA_ONCE.sub("", file.read_text()))

    return expand(path)


def read_source(name: str) -> str:
    """The source text with its headers pasted in where they are included, so the text NVRTC
    compiles (and CuPy's cache keys on) is complete."""
    return expand_includes(source_path(name))


def _ptx_module(code: str, name: str, options: tuple[str, ...], arch: str):
    """code built by NVRTC as PTX for `arch` (compute_75, compute_80) and loaded through the
    driver, which compiles that PTX for the GPU it runs on: an older GPU's code path (the
    kernels' __CUDA_ARCH__ branches) on a newer GPU."""
    import hashlib
    import os
    import tempfile
    import cupy
    from cupy_backends.cuda.libs import nvrtc
    program = nvrtc.createProgram(code, os.path.basename(name), [], [])
    try:
        try:
            nvrtc.compileProgram(program, [*options, f"-arch={arch}"])
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"{exc}\n{nvrtc.getProgramLog(program)}") from exc
        ptx = nvrtc.getPTX(program)
    finally:
        nvrtc.destroyProgram(program)
    # RawModule reads its file when a kernel is first taken from it: the file stays, named
    # by its content, in one folder per user
    data = ptx if isinstance(ptx, bytes) else ptx.encode()
    folder = Path(tempfile.gettempdir()) / f"fa-lab-ptx-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{hashlib.sha256(data).hexdigest()[:32]}.ptx"
    if not path.is_file():
        path.write_bytes(data)
    return cupy.RawModule(path=str(path))


@functools.lru_cache(maxsize=128)
def load_module(name: str, options: tuple[str, ...] = ()):
    """The compiled cupy.RawModule of kernels/<name> for these compiler options; a build that
    names no -arch of its own is built as PTX for FA_LAB_PTX_ARCH when that is set
    (engine.gpu.runtime.ptx_arch)."""
    import os
    import cupy
    code = read_source(name)
    arch = os.environ.get("FA_LAB_PTX_ARCH", "").strip()
    try:
        if arch and not any(o.startswith("-arch") for o in options):
            return _ptx_module(code, name, tuple(options), arch)
        module = cupy.RawModule(code=code, options=tuple(options))
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
