"""CPU of each rerun in the talk scenario (tests/server_load.py's talk), one visitor at a time.

Starts one app server of the tree DIR (a checkout of any commit: `git worktree add` or
`git archive | tar -x`) with each script run's thread CPU (time.thread_time) logged, and drives
it with DIR's own tests/server_load.py Visitor: the talk's link (SRAM tiling, seq_q 512,
seed 1), then N times five stops of the loop player (each its one report, a rerun; in trees
from before the player, a move of the step slider, a rerun of its fragment) and a new seed,
and a newcomer's first page (a new session opening the link), after 3 such rounds of
warm-up; "cold" is the server's very first page. Prints, per action, the median script-thread CPU and wall
time of the run it caused, the bytes the server sent for it (median), and the mean CPU of the
whole server process per action (from /proc, 10 ms ticks, so a mean over many).

  python lab/talk_rerun_cpu.py --tree /tmp/before --n 20

Measure two trees alternately (A, B, A, B) on a shared machine. Used for lab/NOTES.md, "Talk
load: CPU per rerun after the player" (2026-11-27).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()


def serve_timed(log: str, argv: list[str]) -> None:
    """Run Streamlit's command line (argv) with every script run's thread CPU and wall time
    in ms appended to `log`, one line a run."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.web import cli

    run_script = script_runner.ScriptRunner._run_script

    def timed(self, rerun_data):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return run_script(self, rerun_data)
        finally:
            with open(log, "a") as f:
                f.write(f"{(time.thread_time() - cpu) * 1e3:.3f} "
                        f"{(time.perf_counter() - wall) * 1e3:.3f}\n")

    script_runner.ScriptRunner._run_script = timed
    sys.argv = ["streamlit", *argv]
    cli.main()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _drive(sl, base: str, pid: int, log: Path, n: int) -> dict:
    def runs() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    v = sl.Visitor(base)
    page, seq_q, seed = sl.TALK_LINK
    sent = [0]
    out: dict[str, list[dict]] = {}

    async def act(kind: str, step) -> None:
        n0, cpu0, b0, t0 = len(runs()), _cpu_s(pid), sent[0], time.perf_counter()
        await step()
        wall = (time.perf_counter() - t0) * 1e3
        await asyncio.sleep(0.05)           # the run's log line, the process's last ticks
        new = [line.split() for line in runs()[n0:]]
        out.setdefault(kind, []).append({
            "script_ms": sum(float(c) for c, _ in new), "runs": len(new), "wall_ms": wall,
            "process_ms": (_cpu_s(pid) - cpu0) * 1e3, "bytes": sent[0] - b0})

    await act("cold", lambda: v.open(page, f"seq_q={seq_q}&seed={seed}"))
    cold = out.pop("cold")
    recv = v.ws.recv

    async def counted():
        message = await recv()
        sent[0] += len(message)
        return message

    v.ws.recv = counted
    slider = getattr(sl, "STEP_LABEL", None)       # before the loop player: a step slider
    for round_ in range(n + 3):
        if round_ == 3:
            out.clear()                             # warm-up done
        for step in range(2, 7):
            await act("step", (lambda s=step: v.set_slider(slider, s, page)) if slider
                      else (lambda s=step: v.report_step(s, page)))
            if v.steps_shown != [step]:
                raise RuntimeError(f"step {step}: the page shows {v.steps_shown}")
        seed = seed % 999 + 1
        await act("seed", lambda s=seed: v.set_number("seed", s, page))
        newcomer = sl.Visitor(base)
        await act("open", lambda: newcomer.open(page, f"seq_q={seq_q}&seed=1"))
        await newcomer.close()
    await v.close()
    out["cold"] = cold
    return out


def measure(tree: Path, n: int) -> dict:
    sys.path[:0] = [str(tree), str(tree / "tests")]
    import server_load as sl
    from app_server import free_port

    log = Path(tempfile.mkdtemp()) / "runs.log"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    with open(log.with_name("server.log"), "w") as server_log:
        proc = subprocess.Popen(
            [sys.executable, str(HERE), "--serve", str(log), "run", "app/main.py",
             "--server.headless", "true", "--server.port", str(port),
             "--browser.gatherUsageStats", "false"],
            cwd=tree, env=env, stdout=server_log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if urllib.request.urlopen(base + "/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"the server did not start: see {log.parent}")
                time.sleep(0.5)
        got = asyncio.run(_drive(sl, base, proc.pid, log, n))
    finally:
        proc.terminate()
        proc.wait(20)
    result = {"tree": str(tree), "rounds": n, "load": os.getloadavg()[0]}
    for kind, rows in got.items():
        result[kind] = {k: round(statistics.median(r[k] for r in rows), 2)
                        for k in ("script_ms", "wall_ms", "bytes", "runs")}
        result[kind]["process_ms_mean"] = round(statistics.fmean(r["process_ms"]
                                                                 for r in rows), 1)
        result[kind]["count"] = len(rows)
    return result


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve_timed(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE.parents[1],
                    help="the checkout to measure (default: this one)")
    ap.add_argument("--n", type=int, default=20, help="rounds after the warm-up")
    a = ap.parse_args()
    print(json.dumps(measure(a.tree.resolve(), a.n)))


if __name__ == "__main__":
    main()
