"""One GPU job at a time on this machine: every GPU run and benchmark holds GPU_LOCK.

Timings taken while another job shares the GPU would be wrong, and two large naive runs
at once could exhaust its memory. scripts/serve.sh starts several app processes on one GPU,
so GPU_LOCK is two locks taken in turn: a threading.Lock among the sessions (threads) of one
process, then filelock's FileLock (an exclusive flock) on a file every process of the machine
opens (FA_LAB_GPU_LOCK, default /tmp/fa_lab_gpu.lock). The kernel drops a flock when its
process dies, so a crashed app process cannot leave the GPU locked. Both locks wait as long
as it takes (no timeout). The lock is not re-entrant: take it once, at the top. No GPU is
needed to take it.

Inside `GPU_LOCK.notify_waits(callback)`, an acquire that finds the GPU busy calls
callback() once before it waits (the app says "waiting for the GPU" on the page).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

from filelock import FileLock, Timeout

LOCK_FILE_ENV = "FA_LAB_GPU_LOCK"


def lock_file() -> Path:
    return Path(os.environ.get(LOCK_FILE_ENV) or
                Path(tempfile.gettempdir()) / "fa_lab_gpu.lock")


class GpuLock:
    def __init__(self) -> None:
        self._threads = threading.Lock()
        self._file: FileLock | None = None
        self._local = threading.local()

    @contextlib.contextmanager
    def notify_waits(self, callback: Callable[[], None]) -> Iterator[None]:
        """Within the block, this thread's first wait for the GPU calls callback()."""
        before = getattr(self._local, "callback", None)
        self._local.callback = callback
        try:
            yield
        finally:
            self._local.callback = before

    def _waiting(self) -> None:
        callback = getattr(self._local, "callback", None)
        if callback is not None:
            self._local.callback = None
            callback()

    def acquire(self) -> None:
        if not self._threads.acquire(blocking=False):
            self._waiting()
            self._threads.acquire()
        try:
            # read at each acquire (tests point FA_LAB_GPU_LOCK elsewhere); the thread lock
            # above already keeps the threads apart, so filelock's holds are not per thread
            file = FileLock(lock_file(), thread_local=False)
            try:
                file.acquire(blocking=False)
            except Timeout:
                self._waiting()
                file.acquire()
            self._file = file
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        file, self._file = self._file, None
        try:
            file.release()
        finally:
            self._threads.release()

    def locked(self) -> bool:
        """Whether a thread of this process holds the GPU."""
        return self._threads.locked()

    def __enter__(self) -> "GpuLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


GPU_LOCK = GpuLock()
