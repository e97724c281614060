"""One BLAS thread while the CPU timing runs.

NumPy's matrix products run on OpenBLAS, which starts one thread per core. On a machine whose
cores are busy with other work (other visitors' sessions, other processes), those threads wait
for each other and a 1 ms product can take 50 ms or more, differently from one call to the
next; with one thread the same product takes about as long whatever else runs. The CPU timing
(engine.cpu.timing) therefore runs inside one_blas_thread().

The thread count is process-wide, so the context is counted: the first of several overlapping
timings (e.g. two sessions of one server) sets one thread, the last one to leave restores the
count it found. Where NumPy's BLAS is not an OpenBLAS this module can find (another BLAS, or a
platform without /proc/self/maps), nothing is changed and blas_name() says so.
"""
from __future__ import annotations

import contextlib
import ctypes
import re
import threading

# (setter, getter) symbol names: NumPy's wheels' scipy-openblas (64-bit ints), plain OpenBLAS
SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
           ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
           ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
           ("openblas_set_num_threads", "openblas_get_num_threads"))

_lock = threading.Lock()
_users = 0
_restore: int | None = None
_found: tuple | None = None


def _openblas():
    """(set, get, library path) of the OpenBLAS NumPy loaded, or None."""
    global _found
    if _found is not None:
        return _found or None
    import numpy  # noqa: F401  (loads the library)
    _found = ()
    try:
        with open("/proc/self/maps") as f:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", f.read())))
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in SYMBOLS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                _found = (setter, getter, path)
                return _found
    return None


def blas_threads() -> int | None:
    """OpenBLAS's thread count now, or None where it cannot be read."""
    found = _openblas()
    return int(found[1]()) if found else None


def blas_name() -> str:
    """How the timing runs the BLAS, in words for a method text."""
    return ("one OpenBLAS thread" if _openblas() else
            "NumPy's BLAS with its own thread count (not an OpenBLAS this app can set)")


@contextlib.contextmanager
def one_blas_thread():
    """Run the body with OpenBLAS on one thread (see the module's text), yielding True; a
    no-op elsewhere, yielding False."""
    global _users, _restore
    found = _openblas()
    if not found:
        yield False
        return
    setter, getter, _ = found
    with _lock:
        if _users == 0:
            _restore = int(getter())
            setter(1)
        _users += 1
    try:
        yield True
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _restore is not None:
                setter(_restore)
                _restore = None
