"""Tables for the Backward-pass page: the FA2 backward loop (key tile j outer, query tiles i
streaming past) with what the trace says about every step, P rebuilt from lse row by row, how
dQ, dK and dV grow, and the IO model's bytes, FLOPs and peak memory of naive against flash
backward."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

import engine
from engine.model import iomodel
from engine.model.rates import hbm_floor_bandwidth, peak_rate
from engine.model.units import format_bytes
from engine.model.tiles import key_rows, processed_tiles, query_rows
from app.features.sram_tiling.data import MAX_CELLS

MAX_ROWS = 64            # query rows drawn as thin lines in the row-sum chart


@dataclass(frozen=True)
class BackwardLoop:
    tiles: pd.DataFrame   # one row per cell: row, col, order (-1: causally skipped), label and
                          # the trace after that step: p_mass, dq_frac, dk_frac, dv_frac
    steps: pd.DataFrame   # the processed cells in loop order (key tile major)
    group: int            # tiles per cell side (1 unless the grid is large)
    rows: int             # cells down (query tiles / group)
    cols: int             # cells across (key tiles / group)


def _group_rows(a: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Sum `a` over consecutive groups of `size` along `axis` (the last group may be short)."""
    return np.add.reduceat(a, np.arange(0, a.shape[axis], size), axis=axis)


def tile_norms(norm: np.ndarray, block: int, group: int) -> np.ndarray:
    """(B, H, seq, T) row norms -> (ceil(seq / (block·group)), T) Frobenius norms of whole
    cells: every batch·head and every row of the cell's tiles."""
    sq = np.square(norm.astype(np.float64)).sum(axis=(0, 1))          # (seq, T)
    return np.sqrt(_group_rows(sq, block * group, axis=0))


def _last_of_group(n_tiles: int, group: int) -> np.ndarray:
    """Index of the last tile in each group of `group` tiles."""
    return np.minimum(np.arange(1, -(-n_tiles // group) + 1) * group, n_tiles) - 1


def _fraction(x: np.ndarray) -> np.ndarray:
    """x over its last entry along axis -1 (0 where that is 0)."""
    last = x[..., -1:]
    return np.divide(x, last, out=np.zeros_like(x), where=last > 0)


def loop_view(cfg: engine.AttentionConfig, trace: engine.BackwardTrace) -> BackwardLoop:
    """The backward loop cell by cell in FA2 order: one thread block per key tile j keeps K_j,
    V_j, dK_j and dV_j on chip and streams the query tiles i past; values from the trace
    (summed over batch·heads): p_mass, the mean row sum of P over the cell; dq_frac, how much
    of dQ_i's final norm is there after this cell's key tiles; dk_frac, dv_frac the same for
    dK_j and dV_j after this cell's query tiles."""
    g = 1 if cfg.Tr * cfg.Tc <= MAX_CELLS else math.ceil(math.sqrt(cfg.Tr * cfg.Tc / MAX_CELLS))
    proc_tiles = processed_tiles(cfg)
    proc = _group_rows(_group_rows(proc_tiles.astype(np.int64), g, 0), g, 1) > 0
    R, C = proc.shape
    col_major = np.cumsum(proc.T.ravel()).reshape(C, R).T - 1
    order = np.where(proc, col_major, -1)

    last_j, last_i = _last_of_group(cfg.Tc, g), _last_of_group(cfg.Tr, g)
    dq = tile_norms(trace.dq_norm, cfg.block_q, g)[:, last_j]                 # (R, C)
    dk = tile_norms(trace.dk_norm, cfg.block_k, g)[:, last_i].T               # (R, C)
    dv = tile_norms(trace.dv_norm, cfg.block_k, g)[:, last_i].T
    mass = trace.p_rowsum.astype(np.float64).sum(axis=(0, 1))                 # (seq_q, Tc)
    rows_per_cell = _group_rows(np.ones(cfg.seq_q), cfg.block_q * g, 0) * cfg.bh
    p_mass = _group_rows(_group_rows(mass, cfg.block_q * g, 0), g, 1) / rows_per_cell[:, None]

    row, col = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    label = np.array([_cell_label(r, c, g, cfg) for r, c in zip(row.ravel(), col.ravel())])
    tiles = pd.DataFrame({
        "row": row.ravel(), "col": col.ravel(), "order": order.ravel(), "label": label,
        "p_mass": p_mass.ravel(), "dq_frac": _fraction(dq).ravel(),
        "dk_frac": _fraction(dk.T).T.ravel(), "dv_frac": _fraction(dv.T).T.ravel()})
    steps = tiles[tiles.order >= 0].sort_values("order").reset_index(drop=True)
    return BackwardLoop(tiles=tiles, steps=steps, group=g, rows=R, cols=C)


def _cell_label(r: int, c: int, g: int, cfg: engine.AttentionConfig) -> str:
    if g == 1:
        (r0, r1), (k0, k1) = query_rows(cfg, r), key_rows(cfg, c)
        return f"block j={c} (keys {k0}–{k1 - 1}), query tile i={r} (queries {r0}–{r1 - 1})"
    return (f"key tiles {c * g}–{min((c + 1) * g, cfg.Tc) - 1}, "
            f"query tiles {r * g}–{min((r + 1) * g, cfg.Tr) - 1}")


def sample_rows(n: int, chosen: int, most: int = MAX_ROWS) -> np.ndarray:
    """At most `most` row indices spread over 0..n-1, always including `chosen`."""
    picked = np.unique(np.linspace(0, n - 1, min(n, most - 1)).round().astype(int))
    return np.union1d(picked, [chosen])


def row_mass(trace: engine.BackwardTrace, cfg: engine.AttentionConfig, b: int, h: int,
             chosen: int) -> pd.DataFrame:
    """Per sampled query row and key tile j: the tile's sum of P rebuilt from lse and the
    running total Σ_{j' ≤ j}, which reaches 1 at the last key tile."""
    rows = sample_rows(cfg.seq_q, chosen)
    p = trace.p_rowsum[b, h, rows].astype(np.float64)                   # (rows, Tc)
    return pd.DataFrame({
        "row": np.repeat(rows, cfg.Tc), "tile": np.tile(np.arange(cfg.Tc), len(rows)),
        "p_tile": p.ravel(), "p_cumulative": np.cumsum(p, axis=1).ravel(),
        "chosen": np.repeat(rows == chosen, cfg.Tc)})


def rowsum_gap(trace: engine.BackwardTrace) -> float:
    """Largest |Σ_j p_rowsum − 1| over every row of every batch·head."""
    return float(np.abs(trace.p_rowsum.astype(np.float64).sum(axis=-1) - 1.0).max())


def dq_growth(trace: engine.BackwardTrace, cfg: engine.AttentionConfig, b: int, h: int,
              r: int) -> pd.DataFrame:
    """‖dQ_r‖ after key tiles 0..j, and whether tile (i, j) of row r ran."""
    return pd.DataFrame({"tile": np.arange(cfg.Tc),
                         "norm": trace.dq_norm[b, h, r].astype(np.float64),
                         "processed": trace.processed[r // cfg.block_q],
                         "what": "‖dQ_r‖"})


def dkv_growth(trace: engine.BackwardTrace, cfg: engine.AttentionConfig, b: int, h: int,
               c: int) -> pd.DataFrame:
    """‖dK_c‖ and ‖dV_c‖ after query tiles 0..i, and whether tile (i, j) of key c ran."""
    ran = trace.processed[:, c // cfg.block_k]
    return pd.DataFrame({
        "tile": np.tile(np.arange(cfg.Tr), 2),
        "norm": np.concatenate([trace.dk_norm[b, h, c], trace.dv_norm[b, h, c]]).astype(
            np.float64),
        "processed": np.tile(ran, 2),
        "what": ["‖dK_c‖"] * cfg.Tr + ["‖dV_c‖"] * cfg.Tr})


ALGORITHMS = {"naive": "naive backward", "flash": "flash backward"}


def hbm_parts(cfg: engine.AttentionConfig) -> pd.DataFrame:
    """Every part of the HBM traffic of naive and flash backward (iomodel), one row each:
    algorithm, part, read or write, bytes."""
    rows = []
    for algo, traffic in (("naive", iomodel.naive_backward_hbm(cfg)),
                          ("flash", iomodel.flash_backward_hbm(cfg))):
        for part, n in traffic.parts.items():
            rows.append({"algorithm": ALGORITHMS[algo], "part": part,
                         "way": "write" if part.startswith("write") else "read",
                         "bytes": int(n), "MiB": n / 2**20})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Price:
    recompute_flops: float   # the extra QKᵀ product flash backward does to rebuild P
    bytes_saved: int         # naive backward's HBM bytes minus flash backward's
    table: pd.DataFrame      # algorithm, resource (compute or HBM), amount, ms at the GPU's rate
    rates: dict              # {algorithm: engine.model.rates.Rate} its products run at
    bandwidth: str           # the HBM bandwidth with its source, '4.8 TB/s (datasheet)'

    def least_ms(self, algorithm: str) -> float:
        """The least time of one backward: its slower resource (the roofline)."""
        return float(self.table[self.table.algorithm == ALGORITHMS[algorithm]].ms.max())

    def bound(self, algorithm: str) -> str:
        """'matrix products' or 'HBM traffic': which one sets that least time."""
        rows = self.table[self.table.algorithm == ALGORITHMS[algorithm]]
        return str(rows.loc[rows.ms.idxmax(), "resource"])


def price(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
          kernel: str = "teaching") -> Price:
    """What recomputing P costs against what it saves. Flash backward does five matrix
    products (cfg.flops_of("backward")); naive keeps P from the forward and does four, so the
    extra is one QKᵀ: 2·B·H·Nq·Nk·d, halved when causal. Times are the least the GPU's
    datasheet rates allow: each algorithm's products at the rate of the config's dtype on
    the units it computes on (engine.model.rates.peak_rate: naive through cuBLAS, flash on
    `kernel`'s backward, the teaching kernel in float32 on the CUDA cores), and the HBM
    bandwidth."""
    flash_flops = cfg.flops_of("backward")
    extra = cfg.flops / 2
    naive_bytes = iomodel.naive_backward_hbm(cfg).total
    flash_bytes = iomodel.flash_backward_hbm(cfg).total
    rates = {"naive": peak_rate(gpu, cfg.dtype, "naive"),
             "flash": peak_rate(gpu, cfg.dtype, kernel)}
    bw = hbm_floor_bandwidth(gpu)
    rows = []
    for algo, flops, nbytes in (("naive", flash_flops - extra, naive_bytes),
                                ("flash", flash_flops, flash_bytes)):
        rows.append({"algorithm": ALGORITHMS[algo], "resource": "matrix products",
                     "amount": f"{flops / 1e9:.4g} GFLOP at {rates[algo].label}",
                     "ms": flops / (rates[algo].tflops * 1e12) * 1e3})
        rows.append({"algorithm": ALGORITHMS[algo], "resource": "HBM traffic",
                     "amount": f"{format_bytes(nbytes)} at {bw.label}",
                     "ms": nbytes / bw.bytes_per_s * 1e3})
    return Price(recompute_flops=extra, bytes_saved=naive_bytes - flash_bytes,
                 table=pd.DataFrame(rows), rates=rates, bandwidth=bw.label)


def price_verdict(cost: Price) -> str:
    """The price's conclusion in this config's numbers: which resource bounds each backward,
    and which one the rates favour."""
    naive, flash = cost.least_ms("naive"), cost.least_ms("flash")
    if not (naive == naive and flash == flash):
        return "No datasheet rate is known for these units, so no least time is drawn."
    faster = "flash" if flash < naive else "naive"
    ratio = max(naive, flash) / min(naive, flash)
    return (f"At these rates naive backward is bound by its {cost.bound('naive')} "
            f"({naive * 1e3:,.4g} µs) and flash backward by its {cost.bound('flash')} "
            f"({flash * 1e3:,.4g} µs): **{faster} is {ratio:.2g}× faster at best**"
            + (", the recomputation paying for itself" if faster == "flash" else
               ", the extra product costing more time than the saved traffic") + ".")


def peak_table(cfg: engine.AttentionConfig) -> pd.DataFrame:
    """Device bytes the backward holds at its peak, naive against flash (iomodel)."""
    return pd.DataFrame([{"algorithm": ALGORITHMS[a],
                          "bytes": iomodel.backward_peak_memory(cfg, a)} for a in ALGORITHMS])
