"""An uploaded trace file, kept for this session, and its replay in the pages it fits.

The Downloads page checks and keeps an uploaded trace (engine.facade.trace_io); while "Replay
the uploaded trace" is on, SRAM tiling and Online softmax draw it, with its own config, in
place of the sidebar's config, and say so ("uploaded trace: <config>"). The choice is one per
session, shown on each of those pages and on Downloads.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

import engine

SESSION_KEY = "_uploaded_trace"
CHOICE_KEY = "_replay_uploaded"
REPLAY_LABEL = "Replay the uploaded trace"
PAGES = "SRAM tiling and Online softmax"


@dataclass(frozen=True)
class Uploaded:
    name: str                        # the file's name
    cfg: engine.AttentionConfig      # the config stored in it
    res: engine.Result               # its output, lse and trace

    @property
    def label(self) -> str:
        return f"uploaded trace: {config_text(self.cfg)} ({self.name}, {self.res.backend})"


def config_text(cfg: engine.AttentionConfig) -> str:
    """B=1, H=2, N_q=96, N_k=130, d=32, tiles 32×32, float32, causal."""
    return (f"B={cfg.batch}, H={cfg.heads}, N_q={cfg.seq_q}, N_k={cfg.seq_k}, d={cfg.head_dim}, "
            f"tiles {cfg.block_q}×{cfg.block_k}, {cfg.dtype}" + (", causal" if cfg.causal else ""))


def keep(name: str, cfg: engine.AttentionConfig, res: engine.Result) -> None:
    """Keep a checked upload for this session (one at a time: a new upload replaces it)."""
    st.session_state[SESSION_KEY] = Uploaded(name, cfg, res)


def uploaded() -> Uploaded | None:
    return st.session_state.get(SESSION_KEY)


def replay_choice(page: str) -> Uploaded | None:
    """On a page that can replay: when this session holds an uploaded trace, the toggle
    (one choice for every such page) and the trace when it is on; else None, drawing
    nothing."""
    up = uploaded()
    if up is None:
        return None
    ss = st.session_state
    key = f"replay_{page}"
    if key not in ss:             # first run of this page's toggle: the session's choice
        ss[key] = bool(ss.get(CHOICE_KEY, False))
    on = st.toggle(REPLAY_LABEL, key=key, help=f"{up.label}. Animates it on {PAGES} in place "
                   f"of the sidebar's config.")
    ss[CHOICE_KEY] = on
    return up if on else None


def rose_by_tile(cfg: engine.AttentionConfig, trace: engine.Trace) -> np.ndarray:
    """(Tr, Tc): the share of query rows (over every batch·head) of query tile i whose running
    max rose at key tile j (rescale < 1; never at j = 0, where there is no earlier max)."""
    rose = ((trace.rescale < 1) & (np.arange(cfg.Tc) > 0)).reshape(-1, cfg.seq_q, cfg.Tc)
    rose = rose.mean(axis=0)                                                    # (N_q, Tc)
    starts = np.arange(0, cfg.seq_q, cfg.block_q)
    sizes = np.diff(np.append(starts, cfg.seq_q))
    return np.add.reduceat(rose, starts, axis=0) / sizes[:, None]


def with_trace_labels(tiles: pd.DataFrame, steps: pd.DataFrame, group: int,
                      cfg: engine.AttentionConfig, trace: engine.Trace
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The SRAM-tiling loop's cells and steps (sram_tiling.data.loop_view) with what the
    uploaded trace says of each cell added to its label: the share of its rows whose running
    max rose there (over the g×g tiles of a grouped cell)."""
    share = rose_by_tile(cfg, trace)
    R, C = -(-cfg.Tr // group), -(-cfg.Tc // group)
    padded = np.full((R * group, C * group), np.nan)
    padded[:cfg.Tr, :cfg.Tc] = share
    cells = np.nanmean(padded.reshape(R, group, C, group), axis=(1, 3))
    note = {(r, c): f" — uploaded trace: the running max rose in {100 * cells[r, c]:.0f}% "
                    f"of the rows" for r in range(R) for c in range(C)}
    if group == 1:
        note |= {(r, 0): " — uploaded trace: the first key tile sets the running max"
                 for r in range(R)}

    def labelled(df):
        return df.assign(label=[f"{lab}{note[(r, c)] if o >= 0 else ''}"
                                for lab, r, c, o in zip(df.label, df.row, df.col, df.order)])
    return labelled(tiles), labelled(steps)


def row_fits_inputs(up: Uploaded, b: int, h: int, r: int, output_error: float) -> str:
    """'' when the trace's output row agrees with the inputs its config generates (seed and
    input preset), else a message: the file holds no Q, K, V, so the page recomputes them
    from the config, and a trace of other inputs only fits the panels drawn from the trace."""
    tol = 1e-4 if up.cfg.dtype == "float32" else 2e-2
    if np.isfinite(output_error) and output_error <= tol:
        return ""
    return (f"The trace's output row {r} (batch {b}, head {h}) does not match the inputs its "
            f"config generates (relative error {output_error:.1e}): the file holds no Q, K "
            f"and V, so the page recomputes them from the config's seed and input preset, and "
            f"this trace was made from other inputs. The running max, rescale and running sum "
            f"come from the trace; the error panel, the scores and the overflow figures below "
            f"describe the generated inputs, not this trace's.")
