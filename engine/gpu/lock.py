"""One GPU job at a time on this machine: every GPU run and benchmark holds GPU_LOCK.

Timings taken while another job shares the GPU would be wrong, and two large naive runs
at once could exhaust its memory. scripts/serve.sh starts several app processes on one GPU,
so GPU_LOCK is two locks taken in turn: a threading.Lock among the sessions (threads) of one
process, then an exclusive flock on a file every process of the machine opens
(FA_LAB_GPU_LOCK, default /tmp/fa_lab_gpu.lock). The kernel drops a flock when its process
dies, so a crashed app process cannot leave the GPU locked. The lock is not re-entrant:
take it once, at the top.

Inside `GPU_LOCK.notify_waits(callback)`, an acquire that finds the GPU busy calls
callback() once before it waits (the app says "waiting for the GPU" on the page).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator

LOCK_FILE_ENV = "FA_LAB_GPU_LOCK"


def lock_file() -> Path:
    return Path(os.environ.get(LOCK_FILE_ENV) or
                Path(tempfile.gettempdir()) / "fa_lab_gpu.lock")


def _open(path: Path) -> int:
    """A descriptor to flock (read access is enough); created when missing. Opened without
    O_CREAT first: /tmp refuses O_CREAT on another user's file (fs.protected_regular)."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)


class GpuLock:
    def __init__(self) -> None:
        self._threads = threading.Lock()
        self._fd: int | None = None
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
            fd = _open(lock_file())
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._waiting()
                    fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        except BaseException:
            self._threads.release()
            raise

    def release(self) -> None:
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
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
