"""GPU_LOCK holds across processes and threads (no GPU needed: the lock is a thread lock and a
file lock): a second process or thread waits until the holder lets go, says once that it
waits, and a holder that dies releases the GPU."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.gpu.lock import GPU_LOCK, LOCK_FILE_ENV

ROOT = Path(__file__).resolve().parent.parent
HOLD_S = 1.0
HOLDER = f"""
import sys, time
from engine.gpu.lock import GPU_LOCK
with GPU_LOCK:
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


@pytest.fixture(autouse=True)
def lock_file(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_FILE_ENV, str(tmp_path / "gpu.lock"))


def holder(seconds: float) -> subprocess.Popen:
    """Another process holding GPU_LOCK for `seconds` once it has printed "held"."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(seconds)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_another_process_waits_and_is_told():
    proc = holder(HOLD_S)
    told = []
    t0 = time.perf_counter()
    with GPU_LOCK.notify_waits(lambda: told.append(time.perf_counter() - t0)):
        with GPU_LOCK:
            waited = time.perf_counter() - t0
    proc.wait(timeout=10)
    assert len(told) == 1 and told[0] < 0.5 * HOLD_S, told
    assert waited > 0.5 * HOLD_S, f"took the GPU after {waited:.2f} s while another held it"


def test_free_gpu_is_taken_without_a_notice():
    told = []
    with GPU_LOCK.notify_waits(lambda: told.append(1)):
        with GPU_LOCK:
            assert GPU_LOCK.locked()
    assert told == [] and not GPU_LOCK.locked()


def test_threads_of_one_process_take_turns():
    inside, overlaps, told = [], [], []

    def job(i):
        with GPU_LOCK.notify_waits(lambda: told.append(i)):
            with GPU_LOCK:
                if inside:
                    overlaps.append(i)
                inside.append(i)
                time.sleep(0.05)
                inside.remove(i)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert overlaps == [], f"threads {overlaps} ran while another held the GPU"
    assert 1 <= len(told) <= 5 and len(set(told)) == len(told), told


def test_a_dead_holder_releases_the_gpu():
    proc = holder(60)
    proc.kill()
    proc.wait(timeout=10)
    t0 = time.perf_counter()
    with GPU_LOCK:
        pass
    assert time.perf_counter() - t0 < 1.0
