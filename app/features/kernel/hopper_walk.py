"""The persistent walk of the wgmma forward kernel (kernels/hopper/flash_wgmma.cu, struct
Walk): which work items (query tile i, batch·head) each of the G blocks of a persistent launch
takes, in order. Two sources: the kernel's own rule, emulated (walk_items), and a schedule the
traced build recorded on a GPU (recorded_walk: per item its SM and start/end time; one block
per SM, so an SM's items in start order are its block's walk). Pure functions."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

PERSISTENT_FLAG = re.compile(r"-DPERSISTENT=1\b")


def next_item(b: int, G: int, Tr: int, bh_count: int, causal: bool, bh_group: int,
              state: dict) -> tuple[int, int] | None:
    """Walk::next_item for block b of G (PERSISTENT, whole items): its next item (i, bh), or
    None when its walk is done. `state` holds the kernel's registers `round` and `first`.
    Not causal: items b, b + G, b + 2G, ... of the line batch·head by batch·head. Causal:
    group by group of bh_group batch·heads, round by round of G items (heaviest query tiles
    first), block b taking item b of even rounds and G - 1 - b of odd ones."""
    if not causal:
        v = state["round"] * G + b
        state["round"] += 1
        if v >= Tr * bh_count:
            return None
        return v % Tr, v // Tr
    while state["first"] < bh_count:
        group = min(bh_group, bh_count - state["first"])
        rnd = state["round"]
        v = rnd * G + (G - 1 - b if rnd & 1 else b)
        if v < Tr * group:
            state["round"] += 1
            return Tr - 1 - v // group, state["first"] + v % group
        state["first"] += bh_group
        state["round"] = 0
    return None


def walk_items(G: int, Tr: int, bh_count: int, causal: bool, bh_group: int = 1
               ) -> pd.DataFrame:
    """Every block's walk: one row per item with block, its position in the block's walk
    (order), q_tile and bh."""
    rows = []
    for b in range(G):
        state = {"round": 0, "first": 0}
        order = 0
        while (item := next_item(b, G, Tr, bh_count, causal, bh_group, state)) is not None:
            rows.append((b, order, item[0], item[1]))
            order += 1
    return pd.DataFrame(rows, columns=["block", "order", "q_tile", "bh"])


def is_persistent(rec: dict) -> bool:
    """Whether a recorded schedule comes from a persistent build of the wgmma kernel (its
    compile options carry -DPERSISTENT=1)."""
    info = rec.get("info") if isinstance(rec.get("info"), dict) else {}
    return bool(PERSISTENT_FLAG.search(str(info.get("compile_options", ""))))


def recorded_walk(rec: dict) -> pd.DataFrame:
    """A recorded schedule of a persistent build as walks: one row per item with sm, its
    position in that SM's walk (order, by start time), q_tile, bh, start_us and end_us from
    the first start. ValueError for lists of unequal length."""
    cols = {k: np.asarray(rec.get(k, []), dtype=np.int64)
            for k in ("sm_id", "block_q_tile", "block_bh", "start_ns", "end_ns")}
    n = len(cols["sm_id"])
    if any(c.ndim != 1 or len(c) != n for c in cols.values()):
        raise ValueError("a schedule needs sm_id, block_q_tile, block_bh, start_ns and end_ns "
                         "of equal length")
    t0 = cols["start_ns"].min() if n else 0
    df = pd.DataFrame({"sm": cols["sm_id"], "q_tile": cols["block_q_tile"],
                       "bh": cols["block_bh"], "start_us": (cols["start_ns"] - t0) / 1e3,
                       "end_us": (cols["end_ns"] - t0) / 1e3})
    df = df.sort_values(["sm", "start_us", "end_us"], kind="stable").reset_index(drop=True)
    return df.assign(order=df.groupby("sm").cumcount())


def walk_sequences(df: pd.DataFrame, by: str) -> dict[int, tuple[tuple[int, int], ...]]:
    """Each walk's items (q_tile, bh) in order, keyed by its `by` column (block or sm)."""
    return {int(k): tuple(zip(g.q_tile.tolist(), g.bh.tolist()))
            for k, g in df.sort_values([by, "order"]).groupby(by)}


def matched_blocks(recorded: pd.DataFrame, model: pd.DataFrame) -> dict[int, int | None]:
    """For each recorded SM, the model's block whose walk is the same items in the same
    order (None where no block's is): the recorded walk read against the kernel's rule."""
    by_walk = {seq: b for b, seq in walk_sequences(model, "block").items()}
    return {sm: by_walk.get(seq) for sm, seq in walk_sequences(recorded, "sm").items()}


def launch_of(rec: dict) -> dict:
    """The persistent launch a recorded schedule ran: G blocks (the grid's x), Tr, B·H,
    causal, and bh_group (the launcher's causal group: enough batch·heads for 4 waves of one
    block per SM, engine.gpu.launchers.core.group_for; 1 when not causal)."""
    c = rec.get("config") or {}
    info = rec.get("info") or {}
    sms = int((rec.get("device") or {}).get("sms", 0))
    m = re.match(r"\s*(\d+)", str(info.get("grid", "")))
    G = int(m.group(1)) if m else sms
    Tr = -(-int(c.get("seq_q", 0)) // max(int(c.get("block_q", 1)), 1))
    causal = bool(c.get("causal"))
    group = max(1, -(-4 * sms // max(Tr, 1))) if causal else 1
    return {"G": G, "Tr": Tr, "bh_count": int(c.get("batch", 0)) * int(c.get("heads", 0)),
            "causal": causal, "bh_group": group}
