"""Server load without browsers: many sessions speak Streamlit's websocket protocol to the app,
as remote browsers would, so the figure is the server's own (no browser shares its CPU). A
session opens a page from a link (a new session: its first script run), changes the seed (a
rerun with the new widget value) or stops the in-browser loop player on a step (its one report
of the step, a rerun; playing sends nothing), and waits for the run to finish. Behind nginx (scripts/serve.sh) a session first
fetches the page, as a browser does, and sends the sticky cookie nginx set with its websocket.

Scenarios:
- mixed: `sessions` visitors arriving every 0.2 s, each loading a page (40 %) or changing the
  seed every 0.5–2 s (the load of lab/NOTES.md's before/after CPU figures);
- class: `sessions` students (100 at full size) arriving over 10 s, each acting every 3–10 s;
- talk: `sessions` visitors (200) opening the same link within `arrive_s` (30 s), each then
  stopping the SRAM-tiling player on 5 steps (1 s apart) and changing one control (the seed).

Checked on every run: no exception element, the seq_q control carries this visitor's value,
the URL written back holds its seq_q and seed, and after a stop the player opens at this
visitor's step and the URL holds it. Reported: runs per second, p50/p95/p99 time from request to finished run (the
first page and later actions apart too), errors, wrong results, the CPU seconds and peak
memory of every server process (psutil: the app processes and nginx), CPU per run, and the
GPU's busy fraction where nvidia-smi answers (n/a on CPU).

  python tests/server_load.py --scenario class --replicas 8          # serve.sh, 8 processes
  python tests/server_load.py --scenario talk --url http://host:8501  # a running server
  python tests/server_load.py                                         # mixed, 30 × 60 s

Records go to lab/records/server_load*.json. tests/test_server_load.py runs small
versions in CI.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from app_server import ROOT, percentile, serve, stop
from app.page_list import ONLINE_SOFTMAX, OVERVIEW, SRAM_TILING
from app.core.st_internals import proto

RECORDS = ROOT / "lab" / "records"

PAGES = (SRAM_TILING, ONLINE_SOFTMAX, OVERVIEW)
SEQS = (128, 192, 256, 320, 384, 512)
ARRIVAL_S = 0.2          # a new visitor every 0.2 s until all have arrived
FINISHED = ("FINISHED_SUCCESSFULLY", "FINISHED_FRAGMENT_RUN_SUCCESSFULLY")
TALK_LINK = (SRAM_TILING, 512, 1)       # the link a talk shows: page, seq_q, seed
TALK_STEPS = 5


class Visitor:
    """One browser tab's worth of protocol: a websocket, its widgets, what the server said."""

    def __init__(self, base: str):
        self.base = base
        self.url = base.replace("http", "ws", 1) + "/_stcore/stream"
        self.ws = None
        self.cookie = ""
        self.widgets: dict[str, tuple[str, bool, float]] = {}  # label -> (id, is_int, value)
        self.steps_shown: list[int] = []     # the step the loop player opens at, as last sent
        self.player: tuple[str, dict] | None = None   # the loop player's id and arguments
        self.player_fragment = ""      # the fragment the player was drawn in ("": none)
        self.exceptions = 0
        self.query = ""

    def _fetch_page(self) -> None:
        """GET the app's page as a browser does first; keep the cookie a proxy sets."""
        with urllib.request.urlopen(self.base + "/", timeout=120) as reply:
            cookies = [c.split(";", 1)[0] for c in reply.headers.get_all("Set-Cookie") or []]
            reply.read()
        if cookies:
            self.cookie = "; ".join(cookies)

    async def open(self, page: str, query: str) -> None:
        import websockets
        await self.close()
        self.widgets = {}
        if not self.cookie:
            await asyncio.to_thread(self._fetch_page)
        headers = {"Cookie": self.cookie} if self.cookie else None
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None,
                                         open_timeout=120, additional_headers=headers)
        await self._run(query_string=query, page_name=page)

    def _states(self, number: tuple[str, int] | None = None,
                player_step: int | None = None):
        """Every widget's value, as a browser sends it, with one changed (player_step: the
        loop player's report of the step it stopped on)."""
        WidgetStates = proto("WidgetStates")
        states = WidgetStates()
        if player_step is not None and self.player is not None:
            state = states.widgets.add()
            state.id = self.player[0]
            state.json_value = json.dumps({"step": player_step, "sig": self.player[1]["sig"]})
        for name, (wid, is_int, shown) in self.widgets.items():
            state = states.widgets.add()
            state.id = wid
            new = number[1] if number and name == number[0] else shown
            if is_int:
                state.int_value = int(new)
            else:
                state.double_value = float(new)
        return states

    async def report_step(self, step: int, page: str) -> None:
        """What the browser's loop player sends when Play stops on a step (0-based): its one
        report, a rerun (of the player's fragment where the page draws it in one, as a
        browser asks); playing itself sends nothing."""
        self.steps_shown = []
        await self._run(query_string=self.query, page_name=page,
                        widget_states=self._states(player_step=step),
                        fragment_id=self.player_fragment)

    async def set_number(self, label: str, value: int, page: str) -> None:
        """Change one number input (a rerun of the whole page)."""
        await self._run(query_string=self.query, page_name=page,
                        widget_states=self._states(number=(label, value)))

    async def _run(self, query_string: str, page_name: str, widget_states=None,
                   fragment_id: str = "") -> None:
        """Ask for a script run, as a browser does, and read the server's messages until the
        run has finished."""
        BackMsg, ForwardMsg = proto("BackMsg"), proto("ForwardMsg")
        msg = BackMsg()
        msg.rerun_script.query_string = query_string
        msg.rerun_script.page_name = page_name
        if fragment_id:
            msg.rerun_script.fragment_id = fragment_id
        if widget_states is not None:
            msg.rerun_script.widget_states.CopyFrom(widget_states)
        await self.ws.send(msg.SerializeToString())
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await self.ws.recv())
            kind = fwd.WhichOneof("type")
            if kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._element(fwd.delta.new_element, fwd.delta.fragment_id)
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(fwd.script_finished)
                if status in FINISHED:
                    return
                if status != "FINISHED_EARLY_FOR_RERUN":
                    raise RuntimeError(f"the script run ended with {status}")

    def _element(self, element, fragment_id: str) -> None:
        kind = element.WhichOneof("type")
        if kind == "exception":
            self.exceptions += 1
        elif kind == "number_input":
            w = element.number_input
            # What a browser shows: the value the server sets, else the one it already has,
            # else the widget's default.
            known = self.widgets.get(w.label)
            shown = w.value if w.set_value else known[2] if known else w.default
            self.widgets[w.label] = (w.id, w.data_type == w.INT, shown)
        elif kind == "component_instance" and \
                element.component_instance.component_name.endswith("loop_player"):
            c = element.component_instance
            self.player = (c.id, json.loads(c.json_args))
            self.player_fragment = fragment_id
            self.steps_shown.append(int(self.player[1]["start"]))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None


def _check(v: Visitor, seq_q: int, seed: int, what: str, stats: dict) -> None:
    stats["exceptions"] += v.exceptions
    v.exceptions = 0
    shown = v.widgets.get("seq_q (queries)", (None, None, None))[2]
    params = dict(p.split("=", 1) for p in v.query.split("&") if "=" in p)
    if shown != seq_q or params.get("seq_q", "256") != str(seq_q) or \
            params.get("seed", "0") != str(seed):
        stats["wrong"].append(f"after {what}: seq_q control {shown}, URL {v.query!r}; this "
                              f"visitor has seq_q={seq_q}, seed={seed}")


def _timed(stats: dict, action: str, t0: float, first: bool = False) -> None:
    ms = (time.perf_counter() - t0) * 1e3
    stats["latency_ms"].append(ms)
    stats["first_ms" if first else "later_ms"].append(ms)
    stats["requests"][action] = stats["requests"].get(action, 0) + 1


async def _mixed_session(base: str, i: int, stop_at: float, stats: dict, rng):
    """The before/after load: arrive at i · 0.2 s, then load a page (40 %) or change the seed,
    reading 0.5–2 s between actions."""
    await _acting(base, SEQS[i % len(SEQS)], i * ARRIVAL_S, stop_at, stats, rng, (0.5, 2.0))


async def _class_session(base: str, i: int, stop_at: float, stats: dict, rng):
    """A student: arrives within the first 10 s, then acts every 3–10 s."""
    await _acting(base, SEQS[i % len(SEQS)], rng.uniform(0, 10), stop_at, stats, rng,
                  (3.0, 10.0))


async def _acting(base, seq_q, start_in, stop_at, stats, rng, think):
    await asyncio.sleep(start_in)
    v, seed = Visitor(base), rng.randrange(1, 1000)
    page = rng.choice(PAGES)
    changed = False          # a visitor changes its seed at least once, even past stop_at
    try:
        while time.time() < stop_at or not changed:
            late = time.time() >= stop_at
            action = "load" if not v.widgets or (not late and rng.random() < 0.4) else "control"
            changed |= action == "control"
            first = not v.widgets
            t0 = time.perf_counter()
            if action == "load":
                page = rng.choice(PAGES)
                await v.open(page, f"seq_q={seq_q}&seed={seed}")
            else:
                seed = seed % 999 + 1
                await v.set_number("seed", seed, page)
            _timed(stats, action, t0, first)
            _check(v, seq_q, seed, f"{action} on {page}", stats)
            if changed and time.time() >= stop_at:
                break
            await asyncio.sleep(rng.uniform(*think))      # a visitor reads before acting
    except Exception as exc:      # a dropped connection or a failed run fails the test
        stats["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await v.close()


async def _talk_session(base: str, i: int, arrive_s: float, stats: dict, rng):
    """A talk's listener: opens the link shown on the slide, plays the loop animation in the
    browser and stops it TALK_STEPS times a second apart (each stop: the player's one report
    of its step, a rerun), then changes the seed."""
    page, seq_q, seed = TALK_LINK
    await asyncio.sleep(rng.uniform(0, arrive_s))
    v = Visitor(base)
    try:
        t0 = time.perf_counter()
        await v.open(page, f"seq_q={seq_q}&seed={seed}")
        _timed(stats, "load", t0, first=True)
        _check(v, seq_q, seed, "opening the link", stats)
        for step in range(2, TALK_STEPS + 2):
            await asyncio.sleep(1.0)
            t0 = time.perf_counter()
            await v.report_step(step, page)
            _timed(stats, "step", t0)
            stats["exceptions"] += v.exceptions
            v.exceptions = 0
            linked = dict(p.split("=", 1) for p in v.query.split("&") if "=" in p)
            if v.steps_shown != [step] or linked.get("sram_step") != str(step + 1):
                stats["wrong"].append(f"stop at step {step}: the player opens at "
                                      f"{v.steps_shown}, the URL has {v.query!r}")
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        seed = rng.randrange(2, 1000)
        t0 = time.perf_counter()
        await v.set_number("seed", seed, page)
        _timed(stats, "control", t0)
        _check(v, seq_q, seed, "changing the seed", stats)
    except Exception as exc:
        stats["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await v.close()


async def _drive(base: str, sessions: int, seconds: float, seed: int,
                 scenario: str = "mixed", arrive_s: float = 30.0) -> dict:
    stats = {"requests": {}, "latency_ms": [], "first_ms": [], "later_ms": [],
             "exceptions": 0, "wrong": [], "errors": []}
    rng = random.Random(seed)
    stop_at = time.time() + seconds
    if scenario == "talk":
        jobs = (_talk_session(base, i, arrive_s, stats, random.Random(rng.random()))
                for i in range(sessions))
    else:
        session = {"mixed": _mixed_session, "class": _class_session}[scenario]
        jobs = (session(base, i, stop_at, stats, random.Random(rng.random()))
                for i in range(sessions))
    await asyncio.gather(*jobs)
    return stats


def server_processes(root_pid: int | None):
    """The processes serving: root_pid and its descendants (serve.sh: the app processes and
    nginx), or without a root every Streamlit app and nginx process of this machine."""
    import psutil
    if root_pid is not None:
        root = psutil.Process(root_pid)
        return [root] + root.children(recursive=True)
    found = []
    for p in psutil.process_iter(["cmdline", "name"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if ("streamlit" in cmd and "app/main.py" in cmd) or p.info["name"] == "nginx":
            found.append(p)
    return found


@contextlib.contextmanager
def watch_servers(root_pid: int | None, every_s: float = 0.5):
    """While the block runs, sample every serving process: yields a dict that on exit holds
    the wall time, their CPU seconds (summed over processes, ones started meanwhile
    included), their summed and largest peak memory, and the process count."""
    import psutil
    usage: dict = {}
    cpu0, cpu_last, rss_sum, rss_max, seen = {}, {}, [0], [0], set()
    done = threading.Event()

    def sample(first: bool = False):
        total = 0
        for p in server_processes(root_pid):
            try:
                t = p.cpu_times()
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            cpu = t.user + t.system
            if first:
                cpu0[p.pid] = cpu
            cpu0.setdefault(p.pid, 0.0)
            cpu_last[p.pid] = cpu
            seen.add(p.pid)
            total += rss
            rss_max[0] = max(rss_max[0], rss)
        rss_sum[0] = max(rss_sum[0], total)

    def loop():
        while not done.wait(every_s):
            sample()

    sample(first=True)
    start_rss = rss_sum[0]
    sampler = threading.Thread(target=loop, daemon=True)
    sampler.start()
    t0 = time.time()
    try:
        yield usage
    finally:
        sample()
        done.set()
        sampler.join()
        usage.update(wall_s=round(time.time() - t0, 1),
                     server_cpu_s=round(sum(cpu_last[p] - cpu0[p] for p in cpu_last), 1),
                     server_processes=len(seen),
                     server_rss_start_mb=round(start_rss / 2**20),
                     server_rss_peak_mb=round(rss_sum[0] / 2**20),
                     largest_process_rss_mb=round(rss_max[0] / 2**20))


@contextlib.contextmanager
def gpu_busy():
    """Sample the GPU's utilisation (nvidia-smi, every 200 ms) while the block runs: yields a
    dict whose "gpu_busy_fraction" is the mean over the samples, or "n/a" without a GPU."""
    out: dict = {"gpu_busy_fraction": "n/a"}
    smi = shutil.which("nvidia-smi")
    proc = None
    if smi:
        proc = subprocess.Popen([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,"
                                 "nounits", "-lms", "200"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    try:
        yield out
    finally:
        if proc is not None:
            proc.terminate()
            text, _ = proc.communicate(timeout=10)
            samples = [float(x) for x in text.split() if x.replace(".", "", 1).isdigit()]
            if samples:
                out["gpu_busy_fraction"] = round(sum(samples) / len(samples) / 100, 3)
                out["gpu_samples"] = len(samples)


def free_port_block(replicas: int) -> int:
    """A port P for serve.sh such that P and its replicas' ports (P+101..P+100+replicas) are
    all free: taken below the kernel's range of ephemeral ports, where the load's own client
    connections (hundreds of them, and their TIME_WAIT) could hold a replica's port."""
    import socket
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        wanted = [port] + [port + 100 + i for i in range(1, replicas + 1)]
        try:
            for p in wanted:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free block of ports for serve.sh between 20000 and 32000")


@contextlib.contextmanager
def servers(replicas: int, url: str | None = None):
    """Yield (base URL, root pid of the serving processes or None): a running server at `url`,
    one app process (tests/app_server.py), or scripts/serve.sh with `replicas` processes
    behind nginx."""
    if url:
        yield url.rstrip("/"), None
        return
    if replicas == 1:
        with serve(env={"OPENBLAS_NUM_THREADS": "1"}) as (base, proc):
            yield base, proc.pid
        return
    port = free_port_block(replicas)
    run_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"fa-lab-load-{port}"
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "serve.log", "ab") as log:
        proc = subprocess.Popen(["bash", "scripts/serve.sh", "--replicas", str(replicas),
                                 "--port", str(port), "--python", sys.executable,
                                 "--run-dir", str(run_dir)],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                tail = (run_dir / "serve.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"serve.sh did not start; see {run_dir}:\n{tail}")
            time.sleep(0.5)
        yield base, proc.pid
    finally:
        stop(proc, timeout=20)       # serve.sh stops its app processes and nginx


def run(sessions: int = 30, seconds: float = 60, seed: int = 0, scenario: str = "mixed",
        replicas: int = 1, url: str | None = None, arrive_s: float = 30.0) -> dict:
    with servers(replicas, url) as (base, root), watch_servers(root) as usage, \
            gpu_busy() as gpu:
        stats = asyncio.run(_drive(base, sessions, seconds, seed, scenario, arrive_s))
    served = sum(stats["requests"].values())
    pct = {f"p{int(q * 100)}": q for q in (0.5, 0.95, 0.99)}
    return {"scenario": scenario, "sessions": sessions,
            "seconds": seconds if scenario != "talk" else None,
            "arrive_within_s": arrive_s if scenario == "talk" else None,
            "replicas": replicas if not url else "running server", "wall_s": usage["wall_s"],
            "requests": stats["requests"], "served": served,
            "runs_per_s": round(served / usage["wall_s"], 2),
            **{f"{k}_ms_to_finished_run": percentile(stats["latency_ms"], q)
               for k, q in pct.items()},
            "median_ms_to_finished_run": percentile(stats["latency_ms"], 0.5),
            "first_page_ms": {**{k: percentile(stats["first_ms"], q) for k, q in pct.items()},
                              "max": round(max(stats["first_ms"], default=float("nan")), 1)},
            "later_actions_ms": {k: percentile(stats["later_ms"], q) for k, q in pct.items()},
            "exceptions": stats["exceptions"], "wrong": stats["wrong"][:20],
            "wrong_count": len(stats["wrong"]), "errors": stats["errors"][:20],
            "error_count": len(stats["errors"]),
            "server_cpu_s": usage["server_cpu_s"],
            "cpu_ms_per_run": round(1000 * usage["server_cpu_s"] / served, 1) if served else None,
            "server_processes": usage["server_processes"],
            "server_rss_start_mb": usage["server_rss_start_mb"],
            "server_rss_peak_mb": usage["server_rss_peak_mb"],
            "largest_process_rss_mb": usage["largest_process_rss_mb"],
            **gpu, "machine_cores": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=("mixed", "class", "talk"), default="mixed")
    ap.add_argument("--sessions", type=int, help="default: mixed 30, class 100, talk 200")
    ap.add_argument("--seconds", type=float, help="default: mixed 60, class 120")
    ap.add_argument("--arrive-s", type=float, default=30.0, help="talk: arrivals within")
    ap.add_argument("--replicas", type=int, default=1, help=">1: scripts/serve.sh and nginx")
    ap.add_argument("--url", help="drive a running server instead of starting one")
    ap.add_argument("--machine", default="2-core developer machine, no GPU (CPU emulation); "
                    "the protocol clients share it with the server")
    ap.add_argument("--note", default="")
    ap.add_argument("--out", help="record file (default lab/records/server_load_"
                    "<scenario>_<replicas>.json)")
    a = ap.parse_args()
    sessions = a.sessions or {"mixed": 30, "class": 100, "talk": 200}[a.scenario]
    seconds = a.seconds or {"mixed": 60, "class": 120, "talk": 0}[a.scenario]
    out = run(sessions, seconds, 0, a.scenario, a.replicas, a.url, a.arrive_s)
    out.update(date=datetime.date.today().isoformat(), machine=a.machine, note=a.note)
    path = Path(a.out) if a.out else RECORDS / f"server_load_{a.scenario}_{a.replicas}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
