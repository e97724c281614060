"""The frames of a loop animation as plain data, built once on the server and played in the
browser (app/core/player/component.py): one frame per step, each naming what the step shows and
the phases of the kernel it runs (kernel_lines.PHASES). Pure functions: tables in, dicts out,
JSON-ready (NaN and ±inf become None)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from app.core.player.kernel_lines import PHASES, KernelLines

INNER = ("load_kv", "scores", "softmax", "pv")     # what every step of the loop runs


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


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
    frames = [{"row": r[s], "col": c[s], "label": str(steps.label.iat[s]),
               "read": int(steps.flash_read.iat[s]), "written": int(steps.flash_written.iat[s]),
               "phases": phases[s]} for s in range(len(steps))]
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


def code_panel(src: KernelLines) -> dict:
    """The kernel source the player shows beside the board: the lines from the first phase
    to the last (numbered as in the file), and each phase's lines."""
    first = min(a for a, _ in src.phases.values())
    last = max(b for _, b in src.phases.values())
    return {"path": src.path, "first": first, "lines": list(src.lines[first - 1:last]),
            "phases": {k: list(v) for k, v in src.phases.items()},
            "labels": dict(PHASES)}
