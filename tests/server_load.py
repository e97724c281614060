"""Server load without browsers: many sessions speak Streamlit's websocket protocol to one app
server, as remote browsers would, so the figure is the server's own (no browser shares its
CPU). Each session opens a page from a link (a new session: its first script run) or changes
the seed (a rerun of its session with the new widget value) and waits for the run to finish.

Checked on every run: no exception element, the seq_q control carries this visitor's value,
and the URL the server writes back holds this visitor's seq_q and seed. Reported: runs served,
median and 95th-percentile time from request to finished run, the server's CPU seconds and
peak memory.

Full size (writes benchmarks/records/server_load.json):  python tests/server_load.py
tests/test_server_load.py runs the same code at a smaller size in CI.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import random
import time
from pathlib import Path

from app_server import percentile, serve, watch

RECORD = Path(__file__).resolve().parent.parent / "benchmarks" / "records" / "server_load.json"

PAGES = ("sram-tiling", "online-softmax", "overview")
SEQS = (128, 192, 256, 320, 384, 512)
ARRIVAL_S = 0.2          # a new visitor every 0.2 s until all have arrived
FINISHED = "FINISHED_SUCCESSFULLY"


class Visitor:
    """One browser tab's worth of protocol: a websocket, its widgets, what the server said."""

    def __init__(self, base: str):
        self.url = base.replace("http", "ws", 1) + "/_stcore/stream"
        self.ws = None
        self.widgets: dict[str, tuple[str, bool, float]] = {}  # label -> (id, is_int, value)
        self.exceptions = 0
        self.query = ""

    async def open(self, page: str, query: str) -> None:
        import websockets
        await self.close()
        self.widgets = {}
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=None,
                                         open_timeout=120)
        await self._run(query_string=query, page_name=page)

    async def set_number(self, label: str, value: int, page: str) -> None:
        """Change one number input; like a browser, send the value of every number input."""
        from streamlit.proto.WidgetStates_pb2 import WidgetStates
        states = WidgetStates()
        for name, (wid, is_int, shown) in self.widgets.items():
            state = states.widgets.add()
            state.id = wid
            new = value if name == label else shown
            if is_int:
                state.int_value = int(new)
            else:
                state.double_value = float(new)
        await self._run(query_string=self.query, page_name=page, widget_states=states)

    async def _run(self, query_string: str, page_name: str, widget_states=None) -> None:
        """Ask for a script run, as a browser does, and read the server's messages until the
        run has finished."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        msg = BackMsg()
        msg.rerun_script.query_string = query_string
        msg.rerun_script.page_name = page_name
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
                self._element(fwd.delta.new_element)
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(fwd.script_finished)
                if status == FINISHED:
                    return
                if status != "FINISHED_EARLY_FOR_RERUN":
                    raise RuntimeError(f"the script run ended with {status}")

    def _element(self, element) -> None:
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


async def _session(base: str, seq_q: int, start_in: float, stop_at: float, stats: dict, rng):
    await asyncio.sleep(start_in)
    v, seed = Visitor(base), rng.randrange(1, 1000)
    page = rng.choice(PAGES)
    try:
        while time.time() < stop_at:
            action = "load" if not v.widgets or rng.random() < 0.4 else "control"
            t0 = time.perf_counter()
            if action == "load":
                page = rng.choice(PAGES)
                await v.open(page, f"seq_q={seq_q}&seed={seed}")
            else:
                seed = seed % 999 + 1
                await v.set_number("seed", seed, page)
            stats["latency_ms"].append((time.perf_counter() - t0) * 1e3)
            stats["requests"][action] += 1
            _check(v, seq_q, seed, f"{action} on {page}", stats)
            await asyncio.sleep(rng.uniform(0.5, 2.0))      # a visitor reads before acting
    except Exception as exc:      # a dropped connection or a failed run fails the test
        stats["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await v.close()


async def _drive(base: str, sessions: int, seconds: float, seed: int) -> dict:
    stats = {"requests": {"load": 0, "control": 0}, "latency_ms": [], "exceptions": 0,
             "wrong": [], "errors": []}
    rng = random.Random(seed)
    stop_at = time.time() + seconds
    await asyncio.gather(*(
        _session(base, SEQS[i % len(SEQS)], i * ARRIVAL_S, stop_at, stats,
                 random.Random(rng.random()))
        for i in range(sessions)))
    return stats


def run(sessions: int = 30, seconds: float = 60, seed: int = 0) -> dict:
    with serve() as (base, proc), watch(proc.pid) as usage:
        stats = asyncio.run(_drive(base, sessions, seconds, seed))
    served = sum(stats["requests"].values())
    return {"sessions": sessions, "seconds": seconds, "arrival_every_s": ARRIVAL_S,
            "wall_s": usage["wall_s"], "requests": stats["requests"], "served": served,
            "runs_per_s": round(served / usage["wall_s"], 2),
            "median_ms_to_finished_run": percentile(stats["latency_ms"], 0.5),
            "p95_ms_to_finished_run": percentile(stats["latency_ms"], 0.95),
            "exceptions": stats["exceptions"], "wrong": stats["wrong"][:20],
            "errors": stats["errors"][:20], "server_cpu_s": usage["server_cpu_s"],
            "machine_cores": os.cpu_count(),
            "server_rss_start_mb": usage["server_rss_start_mb"],
            "server_rss_peak_mb": usage["server_rss_peak_mb"]}


if __name__ == "__main__":
    out = run()
    out["date"] = datetime.date.today().isoformat()
    out["machine"] = ("2-core developer machine, no GPU (CPU emulation); the protocol clients "
                      "share it with the server")
    RECORD.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
