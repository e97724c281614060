"""The kernel compile tests' compiles, started in the background when the session begins.

nvcc and NVRTC compile one build per core, and most of the suite (AppTest, the browser tests'
waits for a page to settle) leaves one of the two cores of the development machine idle. So
tests/conftest.py hands every compile the selected compile tests will ask for to this pool
as soon as collection is over (each module's `background_compiles(item)` names them), and the
pool's two threads run them at the lowest CPU priority (nice 19): they take only what the
tests in front leave idle. A compile test then asks for its results with `result()`, which
waits for a build already under way, or runs one not yet started at once.

Each build is run once per session, keyed by everything that decides its outcome (the
compiler, the source, the options, the target), and its result is exactly what running it in
the test would give: the same compiler on the same input, only earlier. Nothing is kept
between sessions."""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Hashable

WORKERS = 2
_lock = threading.Lock()
_futures: dict[Hashable, Future] = {}
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


def submit(key: Hashable, build: Callable[[], object]) -> None:
    """Queue `build` (a compile, returning its result) under `key`, unless queued already."""
    with _lock:
        if key not in _futures:
            _futures[key] = _executor().submit(build)


def result(key: Hashable, build: Callable[[], object]):
    """The result of `build` under `key`: from the background run when one was queued (waited
    for), else run here, now, and kept for the session's other tests."""
    with _lock:
        future = _futures.get(key)
        # not queued, or still waiting in the queue (taken out of it): run it here
        mine = future is None or future.cancel()
        if mine:
            future = _futures[key] = Future()
    if mine:
        try:
            future.set_result(build())
        except BaseException as exc:          # kept, so a second asker sees the same failure
            future.set_exception(exc)
    return future.result()


def shutdown() -> None:
    """Drop the builds not started (the session is over); let the running ones end."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
