"""Start the app as a real Streamlit server on a free local port (for browser and load tests)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Debian's chromium; FA_LAB_CHROMIUM names another build (the GPU machine's browser run carries
# chromium-headless-shell: benchmarks/browser_bundle.sh)
CHROMIUM = Path(os.environ.get("FA_LAB_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(timeout: float = 60, env: dict | None = None):
    """Yield (base_url, process) of a headless server; stop it on exit. The server's output
    goes to a temporary file (a pipe nobody reads could fill and stall the server)."""
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                log.seek(0)
                out = log.read().decode(errors="replace")
                raise RuntimeError(f"the Streamlit server did not start: {out[-2000:]}")
            time.sleep(0.5)
        yield base, proc
    finally:
        stop(proc, timeout=10)
        log.close()


def stop(proc: subprocess.Popen, timeout: float) -> None:
    """Terminate a server process; kill it if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc (0 where unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used, from /proc (0 where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


@contextlib.contextmanager
def watch(pid: int, every_s: float = 0.5):
    """Measure a server process while the block runs: yields a dict that, on exit, holds the
    wall time, the CPU seconds it used, and its memory at the start and at its peak (sampled
    every `every_s` seconds)."""
    usage: dict = {}
    peak = [rss_bytes(pid)]
    done = threading.Event()

    def sample():
        while not done.wait(every_s):
            peak.append(rss_bytes(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0, cpu0 = time.time(), cpu_seconds(pid)
    try:
        yield usage
    finally:
        usage.update(wall_s=round(time.time() - t0, 1),
                     server_cpu_s=round(cpu_seconds(pid) - cpu0, 1),
                     server_rss_start_mb=round(peak[0] / 2**20))
        done.set()
        sampler.join()
        usage["server_rss_peak_mb"] = round(max(peak) / 2**20)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values by rank, rounded to 0.1; nan when there are none."""
    ranked = sorted(values)
    return round(ranked[min(len(ranked) - 1, int(q * len(ranked)))], 1) if ranked else \
        float("nan")
