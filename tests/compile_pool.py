"""The kernel compile tests' compiles, started in the background when the session begins.

nvcc and NVRTC compile one build per core, and most of the suite (AppTest, the browser tests'
waits for a page to settle) leaves a core of the development machine idle some of the time.
So tests/conftest.py hands every compile the selected compile tests will ask for to this pool
as soon as collection is over (each module's `background_compiles(item)` names them), and the
pool's threads run them at the lowest CPU priority (nice 19): they take only what the tests
in front leave idle. A compile test then asks for its results with `result()`, which waits
for a build already under way, or runs one not yet started at once.

Each build is run once per session, keyed by everything that decides its outcome (the
compiler, the source, the options, the target), and its result is exactly what running it in
the test would give: the same compiler on the same input, only earlier. The session's
processes share the builds: with pytest-xdist's workers (scripts/test.sh), every worker queues
the same builds, and a build's file lock in the session's folder ($FA_LAB_COMPILE_DIR, made
and removed by tests/conftest.py) lets one process run it while the others skip it in the
background, or wait for it in a test, and then read its outcome from the folder. Nothing is
kept between sessions."""
from __future__ import annotations

import hashlib
import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Hashable

from filelock import FileLock, Timeout

DIR_ENV = "FA_LAB_COMPILE_DIR"
# two compile threads for the machine's two cores, shared among the session's workers
WORKERS = max(1, 2 // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
_lock = threading.Lock()
_queued: set = set()
_pool: ThreadPoolExecutor | None = None


def _lowest_priority() -> None:
    """Nice 19 for this worker thread, and so for the nvcc processes it starts (Linux keeps a
    nice value per thread; elsewhere the thread keeps the process's priority)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="compile",
                                   initializer=_lowest_priority)
    return _pool


def _folder() -> Path:
    """The session's folder of outcomes, $FA_LAB_COMPILE_DIR (tests/conftest.py sets it in
    every session's first process; pytest-xdist's workers inherit it)."""
    return Path(os.environ[DIR_ENV])


def _files(key: Hashable) -> tuple[Path, Path]:
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:40]
    folder = _folder()
    return folder / f"{name}.pickle", folder / f"{name}.lock"


def _kept(out: Path):
    """The kept outcome, ("ok", result) or ("error", exception), or None if there is none."""
    try:
        return pickle.loads(out.read_bytes())
    except FileNotFoundError:
        return None


def _build_and_keep(out: Path, build: Callable[[], object]):
    """Run `build` (its file lock held) and keep its outcome, a failure too, so a second
    asker sees the same; the outcome."""
    try:
        outcome = ("ok", build())
    except Exception as exc:
        outcome = ("error", exc)
    try:
        data = pickle.dumps(outcome)
    except Exception:                 # an outcome that cannot be kept: the next asker reruns
        return outcome
    part = out.with_suffix(f".{os.getpid()}.{threading.get_native_id()}.part")
    part.write_bytes(data)
    part.replace(out)
    return outcome


def _background(key: Hashable, build: Callable[[], object]) -> None:
    """Run a queued build unless it is done or another process or thread is running it."""
    out, lock_file = _files(key)
    if out.exists():
        return
    lock = FileLock(lock_file)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return                        # under way elsewhere: its asker reads the outcome
    try:
        if not out.exists():
            _build_and_keep(out, build)
    finally:
        lock.release()


def submit(key: Hashable, build: Callable[[], object]) -> None:
    """Queue `build` (a compile, returning its result) under `key`, unless queued already."""
    with _lock:
        if key in _queued:
            return
        _queued.add(key)
        _executor().submit(_background, key, build)


def result(key: Hashable, build: Callable[[], object]):
    """The result of `build` under `key`: kept from the run of this or another process (a run
    under way waited for), else run here, now, and kept for the session's other tests."""
    out, lock_file = _files(key)
    outcome = _kept(out)
    if outcome is None:
        with FileLock(lock_file):
            outcome = _kept(out) or _build_and_keep(out, build)
    kind, value = outcome
    if kind == "error":
        raise value
    return value


def shutdown() -> None:
    """Drop the builds not started (the session is over); let the running ones end."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
