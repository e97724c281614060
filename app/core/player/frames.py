"""The frames of an animation as plain data, built once on the server and played in the
browser (app/core/player/component.py): one frame per step, each naming what the step shows
and, for a kernel's loop, the phases of the kernel it runs (kernel_lines.PHASES_OF). The kinds:
"loop" (the forward's tile loop), "row" (one row's online softmax), "backward" (the backward's
tile loop, key tiles outer), "merge" (decoding's log-sum-exp merge, split by split) and "lanes"
(spans in lanes over time: the Hopper pipeline's model). Pure functions: tables in, dicts
out, JSON-ready (NaN and ±inf become None)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from app.core.player.kernel_lines import BACKWARD_PHASES, PHASES, KernelLines

INNER = ("load_kv", "scores", "softmax", "pv")     # what every step of the loop runs
# what every step of the backward loop runs (after load_kv, which opens a key tile's column)
BACKWARD_INNER = ("load_q", "rebuild_p", "dkv", "dq")
assert set(BACKWARD_INNER) | {"load_kv", "write_dkv"} == set(BACKWARD_PHASES)


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _column(table: pd.DataFrame, name: str, kind=float) -> list:
    """A column's values as Python values (kind: int, str, bool, or float with NaN and ±inf
    as None), read once: a frame per row built from lists, not from a pandas lookup a cell."""
    values = table[name].tolist()
    return [_num(x) for x in values] if kind is float else [kind(x) for x in values]


def loop_phases(rows: list[int], cols: list[int], order: str = "fa2") -> list[list[str]]:
    """The phases of each step of the tile loop, in the order they run. FA2 (query tiles
    outer): a row's first step loads Q_i, its last writes O_i. FA1 (key tiles outer): a
    column's first step loads K_j, V_j; every step brings Q_i with O_i, m_i, l_i in from HBM
    and writes them back."""
    out = []
    n = len(rows)
    for s in range(n):
        if order == "fa1":
            first = s == 0 or cols[s - 1] != cols[s]
            out.append((["load_kv"] if first else []) + ["load_q", "scores", "softmax", "pv",
                                                         "write_o"])
        else:
            first = s == 0 or rows[s - 1] != rows[s]
            last = s == n - 1 or rows[s + 1] != rows[s]
            out.append((["load_q"] if first else []) + list(INNER) + (["write_o"] if last
                                                                       else []))
    return out


def loop_frames(tiles: pd.DataFrame, steps: pd.DataFrame, rows: int, cols: int,
                order: str = "fa2") -> dict:
    """The tile loop (a LoopView's tables: tiles with row, col, order; steps in loop order with
    row, col, label and the HBM bytes read and written so far): the grid's cells with the step
    that runs each (-1: skipped by the causal mask) and one frame per step."""
    grid = np.full((rows, cols), -1, dtype=np.int64)
    grid[tiles.row.to_numpy(), tiles.col.to_numpy()] = tiles.order.to_numpy()
    r, c = steps.row.astype(int).tolist(), steps.col.astype(int).tolist()
    phases = loop_phases(r, c, order)
    label, read, written = (_column(steps, name, f) for name, f in
                            (("label", str), ("flash_read", int), ("flash_written", int)))
    frames = [{"row": r[s], "col": c[s], "label": label[s], "read": read[s],
               "written": written[s], "phases": phases[s]} for s in range(len(steps))]
    naive = (int(steps.naive_read.iat[0] + steps.naive_written.iat[0]) if len(steps) else 0)
    return {"kind": "loop", "rows": int(rows), "cols": int(cols), "order": order,
            "cells": grid.ravel().tolist(), "naive": naive, "frames": frames}


def row_frames(rows: pd.DataFrame) -> dict:
    """One query row's online softmax (app.features.online_softmax.data.row_trace: one row per
    key tile j with the trace's tile max, running max m_i, rescale α and running sum l_i): one
    frame per key tile. A tile the causal mask skips runs no phase."""
    ran = rows.processed.to_numpy(dtype=bool)
    last = int(np.flatnonzero(ran)[-1]) if ran.any() else -1
    frames = []
    for j in range(len(rows)):
        phases = []
        if ran[j]:
            phases = (["load_q"] if j == 0 else []) + list(INNER) + (["write_o"] if j == last
                                                                     else [])
        frames.append({
            "tile": int(rows.tile.iat[j]), "k0": int(rows.k0.iat[j]),
            "k1": int(rows.k1.iat[j]), "processed": bool(ran[j]),
            "tile_max": _num(rows.tile_max.iat[j]), "running_max": _num(rows.running_max.iat[j]),
            "rescale": _num(rows.rescale.iat[j]), "running_sum": _num(rows.running_sum.iat[j]),
            "phases": phases})
    return {"kind": "row", "frames": frames}


def backward_phases(cols: list[int]) -> list[list[str]]:
    """The phases of each step of the backward loop (steps in key-tile-major order, `cols`
    their key tiles): a column's first step loads K_j, V_j, its last writes dK_j, dV_j; every
    step loads Q_i, dO_i, rebuilds P_ij and dS_ij, adds to dK_j, dV_j and to dQ_i."""
    out = []
    n = len(cols)
    for s in range(n):
        first = s == 0 or cols[s - 1] != cols[s]
        last = s == n - 1 or cols[s + 1] != cols[s]
        out.append((["load_kv"] if first else []) + list(BACKWARD_INNER)
                   + (["write_dkv"] if last else []))
    return out


def backward_frames(tiles: pd.DataFrame, steps: pd.DataFrame, rows: int, cols: int) -> dict:
    """The backward loop (app.features.backward.data.BackwardLoop's tables: tiles with row,
    col, order; steps in loop order with row, col, label and the trace's p_mass, dq_frac,
    dk_frac, dv_frac after the step): the grid's cells with the step that runs each (-1:
    skipped by the causal mask) and one frame per step."""
    grid = np.full((rows, cols), -1, dtype=np.int64)
    grid[tiles.row.to_numpy(), tiles.col.to_numpy()] = tiles.order.to_numpy()
    c = steps.col.astype(int).tolist()
    phases = backward_phases(c)
    row, label = _column(steps, "row", int), _column(steps, "label", str)
    p_mass, dq, dk, dv = (_column(steps, n) for n in ("p_mass", "dq_frac", "dk_frac", "dv_frac"))
    frames = [{"row": row[s], "col": c[s], "label": label[s], "p_mass": p_mass[s], "dq": dq[s],
               "dk": dk[s], "dv": dv[s], "phases": phases[s]} for s in range(len(steps))]
    return {"kind": "backward", "rows": int(rows), "cols": int(cols),
            "cells": grid.ravel().tolist(), "frames": frames}


def merge_frames(states: pd.DataFrame) -> dict:
    """Decoding's merge (app.features.decoding.data.split_states: one row per split with its
    keys, m_s, l_s, whether the row sees it, its rescale): frame s has splits 0..s merged, with
    the running max m and sum l = Σ exp(m_s − m)·l_s over the merged splits the row sees (m
    None, l 0 while it has seen none); at the last frame they are the trace's m_final and
    l_final."""
    frames = []
    m_run, l_run = -math.inf, 0.0
    for s in range(len(states)):
        seen = bool(states.seen.iat[s])
        m_s, l_s = float(states.m_s.iat[s]), float(states.l_s.iat[s])
        if seen:
            m_new = max(m_run, m_s)
            l_run = l_run * math.exp(m_run - m_new) + l_s * math.exp(m_s - m_new)
            m_run = m_new
        frames.append({"split": int(states.split.iat[s]), "k0": int(states.k0.iat[s]),
                       "k1": int(states.k1.iat[s]), "seen": seen, "m_s": _num(m_s),
                       "l_s": _num(l_s), "rescale": _num(states.rescale.iat[s]),
                       "m_run": _num(m_run), "l_run": _num(l_run),
                       "label": (f"split {s} (keys {int(states.k0.iat[s])}–"
                                 f"{int(states.k1.iat[s]) - 1}) merged"
                                 + ("" if seen else ": the row sees none of its keys"))})
    return {"kind": "merge", "frames": frames}


MAX_EVENT_NAMES = 3      # what starts at a moment, named on its frame (the rest counted)


def lane_frames(table: pd.DataFrame, lanes: list[str], end: float, paints: dict[str, str],
                tagged: tuple[str, ...] = (), title: str = "") -> dict:
    """Spans in lanes over time (a table with lane, paint, label, short, start, end): every
    span with its lane's index and whether it is `tagged` (its short label is written at the
    cursor while it lasts: what a ring stage holds), the paints' colours in legend order, and
    one frame per moment something starts (the tagged spans start with what fills them), the
    last at `end`, each naming what starts then."""
    index = {lane: k for k, lane in enumerate(lanes)}
    spans = [{"lane": index[r.lane], "paint": r.paint, "label": str(r.label),
              "short": str(r.short), "start": float(r.start), "end": float(r.end),
              "tag": r.paint in tagged} for r in table.itertuples() if r.lane in index]
    events = sorted({sp["start"] for sp in spans if not sp["tag"]} | {float(end)})
    frames = []
    for t in events:
        starting = [sp for sp in spans if sp["start"] == t and not sp["tag"]]
        named = [f"{lanes[sp['lane']]}: {sp['label']}" for sp in starting[:MAX_EVENT_NAMES]]
        more = len(starting) - len(named)
        text = "; ".join(named) + (f"; and {more} more" if more else "")
        frames.append({"t": t, "label": f"t = {t:.1f}: " + (text or "the block's last span "
                                                            "ends")})
    used = {sp["paint"] for sp in spans}
    return {"kind": "lanes", "lanes": list(lanes), "end": float(end), "spans": spans,
            "paints": {p: c for p, c in paints.items() if p in used}, "title": title,
            "frames": frames}


def home_step(frames: dict, t: float) -> int:
    """The frame of a lanes animation at model time `t` (the first at or after it)."""
    times = [f["t"] for f in frames["frames"]]
    return next((k for k, x in enumerate(times) if x >= t - 1e-9), len(times) - 1)


def code_panel(src: KernelLines, labels: dict[str, str] = PHASES) -> dict:
    """The kernel source the player shows beside the board: the lines from the first phase
    to the last (numbered as in the file), each phase's lines and its name on screen
    (`labels`: kernel_lines.PHASES_OF of the kernel)."""
    first = min(a for a, _ in src.phases.values())
    last = max(b for _, b in src.phases.values())
    return {"path": src.path, "first": first, "lines": list(src.lines[first - 1:last]),
            "phases": {k: list(v) for k, v in src.phases.items()},
            "labels": dict(labels)}
