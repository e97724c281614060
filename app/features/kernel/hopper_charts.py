"""Charts of the Kernel page's Hopper section: the wgmma kernel's pipeline as a table of spans in
lanes (played in the browser by the loop player, app/core/player/: Play, a time cursor, no
server rerun per frame), the persistent walk of a recorded launch, and who writes O under
split-Q and split-K. Pure functions: DataFrames in, Altair charts out."""
from __future__ import annotations

import re

import altair as alt
import pandas as pd

from app.core.legible import ink_on, scale_position, scheme_color
from app.core.style import ALARM, DONE, INK, PENDING, TILE_COLORS, finish

# what a bar is, and its colour: the tiles keep their colours of every page
PAINT = {
    "Q_i copy": TILE_COLORS["Q_i"], "K_j copy": TILE_COLORS["K_j"],
    "V_j copy": TILE_COLORS["V_j"], "S = Q Kᵀ": TILE_COLORS["S_ij"],
    "O += P V": TILE_COLORS["O_i"], "S not used": DONE, "softmax": ALARM,
    "rescale O, P": "#F0B67F", "write O_i": INK, "waits": PENDING,
    "held, phase 0": "#C8B6E2", "held, phase 1": "#9FD8F0",
}
HELD = ("held, phase 0", "held, phase 1")     # a ring stage's contents: named at the cursor
KIND_PAINT = {"Q": "Q_i copy", "K": "K_j copy", "V": "V_j copy", "S": "S = Q Kᵀ",
              "PV": "O += P V", "S unused": "S not used", "softmax": "softmax",
              "finish": "rescale O, P", "epilogue": "write O_i", "wait": "waits"}


def lane_name(lane: str, row: str) -> str:
    return lane if row == "ring" else f"{lane} · {row}"


def _held_name(label: str) -> str:
    """What a ring stage holds, without the run it belongs to ("Q_i of run 0" -> "Q_i"): the
    label drawn at the cursor, which must fit its bar (the full label is in the tooltip)."""
    return re.split(r" \(| of ", label)[0]


def pipeline_table(spans, shape) -> pd.DataFrame:
    """The model's spans (hopper_pipeline.Span) as rows: lane (its name on the y axis), paint,
    label, start, end, stage, phase."""
    rows = [{"lane": lane_name(s.lane, s.row),
             "paint": f"held, phase {s.phase}" if s.kind == "held" else KIND_PAINT[s.kind],
             "label": s.label, "short": f"{_held_name(s.label)}, phase {s.phase}",
             "start": round(s.start, 3), "end": round(s.end, 3),
             "stage": s.stage, "phase": s.phase} for s in spans]
    return pd.DataFrame(rows, columns=["lane", "paint", "label", "short", "start", "end",
                                       "stage", "phase"])


def lane_order(shape) -> list[str]:
    """The rows top to bottom: the producer, each consumer, then Q_i's buffers and the
    ring's stages (K and V halves)."""
    out = ["producer · copies", "producer · threads"]
    for w in range(shape.consumers):
        out += [f"consumer {w} · tensor cores", f"consumer {w} · threads"]
    out += [f"Q buffer {q}" for q in range(shape.q_stages)]
    out += [f"stage {s} {h}" for s in range(shape.stages) for h in ("K", "V")]
    return out


WALK_BLOCKS = 12      # blocks drawn of a recorded walk


def walk_chart(walk: pd.DataFrame, title: str | list[str], width: int = 540) -> alt.Chart:
    """A recorded persistent walk: one row per block (its SM, and the block of the kernel's
    rule whose walk it is), one cell per item in walk order, coloured by query tile i and
    labelled i / batch·head."""
    domain = (0, int(walk.q_tile.max()) if len(walk) else 1)
    data = walk.assign(who=walk.block.astype(str).radd("block ")
                       + walk.sm.astype(str).radd(" on SM "),
                       text=(walk.q_tile.astype(str) + "/" + walk.bh.astype(str))
                       if width / max(int(walk["order"].max()) + 1 if len(walk) else 1, 1) >= 26
                       else "",   # i / batch·head where a cell holds it (the tooltip always)
                       ink=[ink_on(scheme_color("blues", scale_position(q, domain)))
                            for q in walk.q_tile])
    order = (data.drop_duplicates("who").sort_values("block").who.tolist())
    base = alt.Chart(data).encode(
        x=alt.X("order:O", title="item in the block's walk (first to last)",
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("who:N", sort=order, title=None))
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("q_tile:Q", title="query tile i",
                        scale=alt.Scale(scheme="blues", domain=list(domain)),
                        legend=alt.Legend(orient="bottom", gradientLength=200, format="d")),
        tooltip=[alt.Tooltip("who:N", title="block"), alt.Tooltip("order:O", title="item"),
                 alt.Tooltip("q_tile:Q", title="query tile i"),
                 alt.Tooltip("bh:Q", title="batch·head"),
                 alt.Tooltip("start_us:Q", title="start (µs)", format=".1f"),
                 alt.Tooltip("end_us:Q", title="end (µs)", format=".1f")])
    labels = base.mark_text(fontSize=11).encode(
        text="text:N",
                                                color=alt.Color("ink:N", scale=None))
    chart = alt.layer(cells, labels).properties(height=24 * len(order), title=title)
    return finish(chart, width=width)


def split_chart(owners: pd.DataFrame, width: int = 220) -> alt.Chart:
    """Who computes each 16 × 16 cell of S_ij and of O_i, and who writes O_i, in FA2's
    split-Q (top) and FA1's split-K (bottom)."""
    names = sorted(owners.owner.unique(), key=lambda n: (n.startswith("warps"), n))
    colors = [TILE_COLORS[k] for k in ("Q_i", "K_j", "V_j", "S_ij", "O_i", "m_i")]
    scale = alt.Scale(domain=names, range=[colors[k % len(colors)] if not n.startswith("warps")
                                           else ALARM for k, n in enumerate(names)])
    chart = alt.Chart(owners).mark_rect(stroke="white").encode(
        x=alt.X("col:O", title="column (keys of K_j, or d)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("row:O", title="query row of Q_i"),
        color=alt.Color("owner:N", title="computed by", scale=scale,
                        legend=alt.Legend(orient="bottom", columns=3, labelLimit=220)),
        tooltip=["scheme:N", "matrix:N", "row:O", "col:O", alt.Tooltip("owner:N", title="by")],
    ).properties(width=width, height=160).facet(
        row=alt.Row("scheme:N", title=None, sort=["FA2: split-Q", "FA1: split-K"]),
        column=alt.Column("matrix:N", title=None, sort=["S_ij = Q_i K_jᵀ", "O_i"]),
    ).resolve_scale(x="independent")
    return finish(chart)
