"""Load test: many concurrent headless-Chromium sessions against one app server, mixing page
loads, control changes and animation steps; visitors arrive one every RAMP_S seconds. Each
visitor first loads a page and changes its seed (FIRST_ACTIONS), however long that takes,
then acts at random until the time is up: a slow machine makes the run longer, never
emptier.
Reports requests served, the 95th-percentile time to a drawn chart, exceptions seen, wrong
results seen, and the server's peak memory.

Full size (writes lab/records/load_test.json):  python tests/load_test.py
tests/test_load.py runs the same code at a smaller size in CI.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import random
import re
import time
from pathlib import Path

from app_server import CHROMIUM, CHROMIUM_ARGS, percentile, serve, watch
from app.page_list import ONLINE_SOFTMAX, SRAM_TILING

RECORD = Path(__file__).resolve().parent.parent / "lab" / "records" / "load_test.json"

CHART_PAGES = (SRAM_TILING, ONLINE_SOFTMAX)
RAMP_S = 0.5      # one more visitor every half second until all have arrived
FIRST_ACTIONS = ("load", "control")   # every visitor's first actions, whatever the clock says
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
DRAWN = ("() => { const e = [...document.querySelectorAll('.vega-embed')];"
         " return e.length > 0 && e.every(x => x.querySelector('canvas, svg')); }")


async def _settle(page, charts: bool, timeout_ms: int = 60000):
    await page.wait_for_selector("h1", timeout=timeout_ms)
    await page.wait_for_function(IDLE, timeout=timeout_ms)
    if charts:
        await page.wait_for_function(DRAWN, timeout=timeout_ms)


async def _shown_value(page, label: str, want: str, stats: dict, wait_s: float = 5.0) -> str:
    """The control's value once it shows `want`, or what it still shows after `wait_s`.
    A different value seen first is counted in stats["transient"]: the browser applies a
    session's values just after drawing the widgets, so it may lag the chart by a frame."""
    box = page.get_by_label(label)
    shown = await box.input_value()
    if shown != want:
        stats["transient"] += 1
        deadline = time.perf_counter() + wait_s
        while shown != want and time.perf_counter() < deadline:
            await asyncio.sleep(0.1)
            shown = await box.input_value()
    return shown


async def _session(browser, base: str, seq_q: int, start_in: float, stop_at: float,
                   stats: dict, rng):
    await asyncio.sleep(start_in)          # visitors arrive over a few seconds, as in a room
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await ctx.new_page()
    seed = rng.randrange(1000)
    done = 0
    try:
        while done < len(FIRST_ACTIONS) or time.time() < stop_at:
            action = (FIRST_ACTIONS[done] if done < len(FIRST_ACTIONS)
                      else rng.choice(("load", "load", "control", "step")))
            name = rng.choice(CHART_PAGES)
            t0 = time.perf_counter()
            if action == "load" or page.url in ("about:blank", ""):
                await page.goto(f"{base}/{name}?seq_q={seq_q}&seed={seed}", timeout=120000)
                await _settle(page, charts=True)
            elif action == "control":
                seed = (seed + 1) % 1000
                box = page.get_by_label("seed")
                await box.fill(str(seed))
                await box.press("Enter")
                # the script writes the new seed into the URL when its run has finished
                await page.wait_for_url(re.compile(rf"[?&]seed={seed}(&|$)"), timeout=120000)
                await _settle(page, charts=True)
            else:
                slider = page.locator(".vega-bind input[type=range]").first
                if await slider.count() == 0:
                    continue
                top = int(await slider.get_attribute("max") or 1)
                await slider.fill(str(rng.randint(1, max(top, 1))))
                await page.wait_for_function(DRAWN, timeout=30000)
            stats["latency_ms"].append((time.perf_counter() - t0) * 1e3)
            stats["requests"][action] += 1
            done += 1
            stats["exceptions"] += await page.locator('[data-testid="stException"]').count()
            # Each visitor must see its own config, never another session's.
            if f"seq_q={seq_q}" not in page.url:
                stats["wrong"].append(f"URL lost seq_q={seq_q}: {page.url}")
            shown = await _shown_value(page, "seq_q (queries)", str(seq_q), stats)
            if shown != str(seq_q):
                stats["wrong"].append(f"after {action} on {page.url}: seq_q control shows "
                                      f"{shown} for 5 s, this visitor set {seq_q}")
    except Exception as exc:  # a timeout or crash counts as a failure of the run
        stats["errors"].append(f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await ctx.close()


async def _drive(base: str, sessions: int, seconds: float, seed: int) -> dict:
    from playwright.async_api import async_playwright
    stats = {"requests": {"load": 0, "control": 0, "step": 0}, "latency_ms": [],
             "exceptions": 0, "wrong": [], "transient": 0, "errors": []}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        stop_at = time.time() + seconds
        rng = random.Random(seed)
        await asyncio.gather(*(
            _session(browser, base, (128, 192, 320, 384)[i % 4], i * RAMP_S, stop_at, stats,
                     random.Random(rng.random()))
            for i in range(sessions)))
        await browser.close()
    return stats


def run(sessions: int = 20, seconds: float = 60, seed: int = 0) -> dict:
    with serve() as (base, proc), watch(proc.pid) as usage:
        stats = asyncio.run(_drive(base, sessions, seconds, seed))
    return {"sessions": sessions, "seconds": seconds, "arrival_every_s": RAMP_S,
            "wall_s": usage["wall_s"],
            "requests": stats["requests"], "served": sum(stats["requests"].values()),
            "p95_ms_to_drawn_chart": percentile(stats["latency_ms"], 0.95),
            "median_ms": percentile(stats["latency_ms"], 0.5),
            "exceptions": stats["exceptions"], "wrong": stats["wrong"][:20],
            "transient_mismatches": stats["transient"], "errors": stats["errors"][:20],
            "server_cpu_s": usage["server_cpu_s"], "machine_cores": os.cpu_count(),
            "server_rss_start_mb": usage["server_rss_start_mb"],
            "server_rss_peak_mb": usage["server_rss_peak_mb"]}


if __name__ == "__main__":
    out = run()
    out["date"] = datetime.date.today().isoformat()
    out["machine"] = "2-core developer machine, no GPU (CPU emulation), server and browser together"
    RECORD.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
