"""Tables for the Tile sizes page: the model's figures over every (block_q, block_k), the
measured grid (live sweep or recorded in benchmarks/), cells for the heatmaps, the memory
pyramid, where each algorithm keeps its data, and the exercises' answers."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

import engine
from engine.model import iomodel, registry, tilemodel
from engine.model.devices import PROFILES, datasheet_profile, memory_levels
from engine.model.units import GiB, KiB, MiB, format_bandwidth, format_bytes

CONFIG_KEYS = ("batch", "heads", "seq_q", "seq_k", "head_dim", "dtype", "causal")
FAMILY_NAMES = registry.family_names()     # kernel= value -> "teaching kernel", ...


def model_table(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> pd.DataFrame:
    """engine.model.tilemodel.tile_rows as a table, the current and the paper's cells marked."""
    df = pd.DataFrame(tilemodel.tile_rows(cfg, gpu))
    paper = tilemodel.paper_tiles(cfg, gpu)
    df["current"] = (df.block_q == cfg.block_q) & (df.block_k == cfg.block_k)
    df["paper"] = (df.block_q == paper.block_q) & (df.block_k == paper.block_k)
    return df


def with_measured(model: pd.DataFrame, measured: list[dict]) -> pd.DataFrame:
    """The model table with each measured shape's median time (measured_ms) and, where the
    record has it, CUDA's resident blocks per SM (gpu_blocks_per_sm) and registers."""
    cols = ["kernel", "block_q", "block_k", "median_ms", "blocks_per_sm",
            "registers_per_thread"]
    got = pd.DataFrame([{c: r.get(c, np.nan) for c in cols} for r in measured], columns=cols)
    got = got.rename(columns={"median_ms": "measured_ms", "blocks_per_sm": "gpu_blocks_per_sm"})
    return model.merge(got, on=["kernel", "block_q", "block_k"], how="left")


def fastest(df: pd.DataFrame, kernel: str, column: str) -> pd.Series | None:
    """The row of `kernel` with the smallest `column`, or None when none has a value."""
    rows = df[(df.kernel == kernel) & df[column].notna()] if column in df else df.iloc[:0]
    return None if rows.empty else rows.loc[rows[column].idxmin()]


def _cells(df: pd.DataFrame, kernel: str, value: pd.Series, text: pd.Series,
           fast: pd.Series | None) -> pd.DataFrame:
    """Heatmap cells for `kernel`: every allowed shape, with its value, label and status."""
    grid = pd.MultiIndex.from_product([engine.BLOCK_SIZES, engine.BLOCK_SIZES],
                                      names=["block_q", "block_k"]).to_frame(index=False)
    rows = df[df.kernel == kernel].assign(value=value, text=text)
    out = grid.merge(rows, on=["block_q", "block_k"], how="left")
    status = np.where(out.kernel.isna(), "not taken by this kernel",
                      np.where(out.fits.astype(bool), "fits", "does not fit"))
    out["status"] = status
    out.loc[out.status != "fits", "value"] = np.nan
    out["text"] = np.where(out.status == "fits", out.text,
                           np.where(out.status == "does not fit",
                                    "no fit " + out.smem_bytes.map(_kib_or_blank), "—"))
    paper = set(zip(df.block_q[df.paper], df.block_k[df.paper]))
    current = set(zip(df.block_q[df.current], df.block_k[df.current]))
    best = {(fast.block_q, fast.block_k)} if fast is not None else set()
    shapes = list(zip(out.block_q, out.block_k))
    out["marks"] = [" ".join(m for m, on in (("★", s in best), ("▲", s in paper)) if on)
                    for s in shapes]
    out["current"] = [s in current for s in shapes]
    out["shape"] = out.block_q.astype(str) + " × " + out.block_k.astype(str)
    return out[["block_q", "block_k", "shape", "value", "text", "status", "marks", "current"]]


def _kib_or_blank(n) -> str:
    return "" if n != n else f"{n / 1024:.0f} KiB"


def smem_cells(df, fast=None):
    t = df[df.kernel == "teaching"]
    return _cells(df, "teaching", t.smem_bytes / 1024, (t.smem_bytes / 1024).map("{:.1f}".format),
                  fast)


def blocks_cells(df, kernel="teaching", fast=None):
    """Resident blocks per SM: CUDA's figure where measured, else the model's."""
    t = df[df.kernel == kernel]
    col = ("gpu_blocks_per_sm" if "gpu_blocks_per_sm" in t and t.gpu_blocks_per_sm.notna().any()
           else "blocks_per_sm")
    return _cells(df, kernel, t[col], t[col].map(lambda b: "" if b != b else f"{int(b)}"), fast)


def waves_cells(df, cfg: engine.AttentionConfig, gpu, kernel="teaching", fast=None):
    t = df[df.kernel == kernel]
    col = ("gpu_blocks_per_sm" if "gpu_blocks_per_sm" in t and t.gpu_blocks_per_sm.notna().any()
           else "blocks_per_sm")
    w = [tilemodel.waves(cfg.with_(block_q=int(r.block_q), block_k=int(r.block_k)), gpu,
                         0 if b != b else int(b)) for r, b in zip(t.itertuples(), t[col])]
    w = pd.Series(w, index=t.index, dtype=float)
    return _cells(df, kernel, w, w.map(lambda x: f"{int(x):,}"), fast)


BYTE_UNITS = ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"), (1.0, "B"))   # engine.model.units
TIME_UNITS = ((1.0, "ms"), (1e-3, "µs"))     # of a time in ms


def _one_unit(values: pd.Series, units) -> tuple[float, str]:
    """(size, name) of the largest unit of `units` at or below the grid's largest value: one
    unit for every cell of a heatmap, named in its legend."""
    top = values[np.isfinite(values)].max() if len(values) else np.nan
    for size, name in units:
        if top == top and top >= size:
            return size, name
    return units[-1]


def _in_unit(values: pd.Series, units, missing: str = "") -> tuple[pd.Series, pd.Series, str]:
    size, name = _one_unit(values, units)
    scaled = values / size
    return scaled, scaled.map(lambda v: missing if v != v else f"{v:.3g}"), name


def hbm_cells(df, fast=None):
    """HBM bytes, in one decimal unit for the whole grid (the `unit` column: the legend)."""
    t = df[df.kernel == "teaching"]
    value, text, unit = _in_unit(t.hbm_bytes.astype(float), BYTE_UNITS)
    return _cells(df, "teaching", value, text, fast).assign(unit=unit)


def time_cells(df, kernel: str, column: str, fast=None):
    """Times, in ms or µs for the whole grid (the `unit` column: the legend)."""
    t = df[df.kernel == kernel]
    if column not in t:
        t = t.assign(**{column: np.nan})
    value, text, unit = _in_unit(t[column].astype(float), TIME_UNITS, "not timed")
    return _cells(df, kernel, value, text, fast).assign(unit=unit)


def _ms_text(ms) -> str:
    if ms != ms:
        return "not timed"
    return f"{ms:.3g} ms" if ms >= 0.01 else f"{ms * 1e3:.3g} µs"


# ---- recorded grids -------------------------------------------------------------------
def recorded_rows(files: list[dict]) -> pd.DataFrame:
    """Every recorded tile-grid row, with its file, device and date."""
    rows = []
    for f in files:
        dev = f.get("device", {})
        name = dev.get("name", "?") if isinstance(dev, dict) else str(dev)
        for r in f["results"]:
            if isinstance(r, dict) and all(k in r for k in (*CONFIG_KEYS, "kernel", "block_q",
                                                            "block_k", "median_ms")):
                rows.append({**r, "file": f["file"], "device": name,
                             "date": str(f.get("date", "?")), "method": f.get("method", ""),
                             "derived_from": f.get("derived_from", ""),
                             "note": f.get("note", "")})
    return pd.DataFrame(rows)


def recorded_configs(rows: pd.DataFrame) -> list[tuple]:
    """The distinct (file, device, date, *CONFIG_KEYS) the recorded rows hold."""
    if rows.empty:
        return []
    keys = ["file", "device", "date", *CONFIG_KEYS]
    return [tuple(k) for k in rows[keys].drop_duplicates().itertuples(index=False)]


def closest_config(configs: list[tuple], cfg: engine.AttentionConfig) -> int:
    """Index of the recorded config nearest cfg: same d, dtype and causal first, then N."""
    def distance(c):
        d = dict(zip(("file", "device", "date", *CONFIG_KEYS), c))
        return (d["head_dim"] != cfg.head_dim, d["dtype"] != cfg.dtype,
                d["causal"] != cfg.causal, abs(math.log2(d["seq_q"] / cfg.seq_q)))
    return min(range(len(configs)), key=lambda i: distance(configs[i]))


def recorded_profile(device: str) -> engine.GpuProfile:
    """The profile of the GPU a grid was recorded on (H200 when it is not among them)."""
    return datasheet_profile(device) or PROFILES["H200"]


def recorded_label(choice: tuple) -> str:
    d = dict(zip(("file", "device", "date", *CONFIG_KEYS), choice))
    return f"{d['device']}, {d['date']}: " + config_text(_config_of(d))


def _config_of(d: dict) -> engine.AttentionConfig:
    return engine.AttentionConfig(**{k: (bool(d[k]) if k == "causal" else d[k])
                                    for k in CONFIG_KEYS})


def recorded_view(rows: pd.DataFrame, choice: tuple) -> tuple[engine.AttentionConfig,
                                                             engine.GpuProfile, pd.DataFrame]:
    """(config, GPU profile, model table with the measured times) of one recorded config."""
    d = dict(zip(("file", "device", "date", *CONFIG_KEYS), choice))
    sel = rows
    for k, v in d.items():
        sel = sel[sel[k] == v]
    cfg = _config_of(d)
    gpu = recorded_profile(d["device"])
    table = with_measured(model_table(cfg, gpu), sel.to_dict("records"))
    return cfg, gpu, table


def config_text(cfg: engine.AttentionConfig) -> str:
    return (f"B={cfg.batch}, H={cfg.heads}, N={cfg.seq_q}"
            + (f"/{cfg.seq_k}" if cfg.seq_k != cfg.seq_q else "")
            + f", d={cfg.head_dim}, {cfg.dtype}{', causal' if cfg.causal else ''}")


# ---- the memory pyramid and where the data lives -------------------------------------
def pyramid_table(gpu: engine.GpuProfile) -> pd.DataFrame:
    levels = memory_levels(gpu)
    return pd.DataFrame({
        "level": [lv.name for lv in levels], "rank": range(len(levels)),
        "scope": [lv.scope for lv in levels],
        "capacity": [format_bytes(lv.capacity_bytes) if lv.capacity_bytes else "—"
                     for lv in levels],
        "capacity_bytes": [lv.capacity_bytes for lv in levels],
        "capacity source": [lv.capacity_source for lv in levels],
        "bandwidth": [format_bandwidth(lv.bandwidth_bytes_s) if lv.bandwidth_bytes_s else "—"
                      for lv in levels],
        "bandwidth source": [lv.bandwidth_source for lv in levels]})


def placement_table(cfg: engine.AttentionConfig) -> pd.DataFrame:
    """Where naive attention and FlashAttention keep each array, with its bytes for this
    config (engine.model.iomodel.placement)."""
    df = pd.DataFrame(iomodel.placement(cfg), columns=["algorithm", "what", "where", "bytes"])
    df["size"] = df.bytes.map(format_bytes)
    return df


# ---- exercises -------------------------------------------------------------------------
def kv_reads_answer(cfg: engine.AttentionConfig, df: pd.DataFrame) -> str:
    """Why block_q = 16 reads K and V so often, in this config's numbers."""
    t = df[(df.kernel == "teaching") & (df.block_k == cfg.block_k)].set_index("block_q")
    small, big = t.loc[16], t.loc[128]
    return (f"Each query tile reads all of K and V (FA2 order), so K and V are read Tr = "
            f"⌈N_q / block_q⌉ times. With block_q = 16 that is {int(small.kv_passes)} passes, "
            f"{format_bytes(small.kv_bytes)} of K and V; with block_q = 128 only "
            f"{int(big.kv_passes)} passes, {format_bytes(big.kv_bytes)} — "
            f"{small.kv_bytes / big.kv_bytes:.1f}× less. (block_k does not change it: it only "
            f"cuts the same keys into more or fewer tiles.)")


def _paper_ms(df: pd.DataFrame, kernel: str, paper: tilemodel.PaperChoice,
              column: str) -> float:
    row = df[(df.kernel == kernel) & (df.block_q == paper.block_q)
             & (df.block_k == paper.block_k)]
    return float(row[column].iloc[0]) if not row.empty and column in row else float("nan")


def _why_no_time(df: pd.DataFrame, kernel: str, paper: tilemodel.PaperChoice) -> str:
    row = df[(df.kernel == kernel) & (df.block_q == paper.block_q)
             & (df.block_k == paper.block_k)]
    if row.empty:
        return "this kernel does not take it"
    return ("its tiles do not fit this kernel's shared memory on this GPU"
            if not bool(row.fits.iloc[0]) else "it was not timed")


def _model_ties(df: pd.DataFrame, kernel: str) -> pd.DataFrame:
    """The rows of `kernel` whose model time equals the smallest (to 0.1 %), in grid order."""
    rows = df[(df.kernel == kernel) & df.model_ms.notna()]
    if rows.empty:
        return rows
    best = rows.model_ms.min()
    return rows[rows.model_ms <= best * 1.001]


def _shape(row) -> str:
    return f"{int(row.block_q)} × {int(row.block_k)}"


def fastest_answer(df: pd.DataFrame, paper: tilemodel.PaperChoice, where: str) -> str:
    """Fastest measured shape of each kernel against the paper's choice, or, where nothing
    is measured, the model's fastest (every shape that ties with it) against the model's
    time of the paper's choice. `df` is the table the page's heatmaps draw."""
    lines = []
    for kernel in ("teaching", "tensorcore"):
        name = FAMILY_NAMES[kernel]
        meas = fastest(df, kernel, "measured_ms")
        ties = _model_ties(df, kernel)
        paper_name = f"{paper.block_q} × {paper.block_k}"
        if meas is not None:
            paper_ms = _paper_ms(df, kernel, paper, "measured_ms")
            verdict = (" — the paper's choice." if (meas.block_q, meas.block_k) ==
                       (paper.block_q, paper.block_k) else
                       f"; the paper's choice {paper_name} took "
                       + (_ms_text(paper_ms) + f" ({paper_ms / meas.measured_ms:.2f}× as long)."
                          if paper_ms == paper_ms else
                          f"no measurement ({_why_no_time(df, kernel, paper)})."))
            lines.append(f"**{name}** ({where}): fastest {int(meas.block_q)} × "
                         f"{int(meas.block_k)} at {_ms_text(meas.measured_ms)}{verdict}")
        elif not ties.empty:
            best = ties.model_ms.min()
            shapes = ", ".join(_shape(r) for r in ties.itertuples())
            lead = (f"the model's fastest is {shapes} ({_ms_text(best)}, a model)"
                    if len(ties) == 1 else
                    f"the model's fastest time, {_ms_text(best)}, is shared by {len(ties)} "
                    f"shapes ({shapes}): for this config the model cannot tell them apart")
            paper_ms = _paper_ms(df, kernel, paper, "model_ms")
            in_ties = any((r.block_q, r.block_k) == (paper.block_q, paper.block_k)
                          for r in ties.itertuples())
            verdict = ("; the paper's choice is among them." if in_ties else
                       f"; the paper's choice {paper_name}: {_ms_text(paper_ms)} in the model "
                       f"({paper_ms / best:.2f}× as long)." if paper_ms == paper_ms else
                       f"; the paper's choice {paper_name} has no model time "
                       f"({_why_no_time(df, kernel, paper)}).")
            lines.append(f"**{name}** ({where}): nothing measured; {lead}{verdict}")
    return "\n\n".join(lines) or "Nothing fits: no shape can run for this config."


def paper_fit_note(cfg: engine.AttentionConfig, gpu: engine.GpuProfile) -> str:
    """Why the paper's choice does not fit the teaching kernel on this GPU, or "" when it
    fits. The paper sizes Bc = ⌈M / 4d⌉ so that four d-wide tiles (Q_i, K_j, V_j, O_i) in
    the input dtype fill M; the teaching kernel also keeps S_ij, and keeps O_i in float32."""
    paper = tilemodel.paper_tiles(cfg, gpu)
    c = cfg.with_(block_q=paper.block_q, block_k=paper.block_k)
    parts = iomodel.smem_parts(c, "teaching")
    need = sum(parts.values())
    if need <= gpu.smem_per_block_optin:
        return ""
    Br, Bc, d = paper.block_q, paper.block_k, cfg.head_dim
    counted = (2 * Br + 2 * Bc) * d * cfg.itemsize
    return (f"The paper's choice {Br} × {Bc} does not fit the teaching kernel on the "
            f"{gpu.name}: the paper counts only Q_i, K_j, V_j and O_i in {cfg.dtype} "
            f"((2·{Br} + 2·{Bc})·{d} elements = {counted / 1024:.1f} KiB, against M = "
            f"{paper.M:,} elements = {gpu.smem_per_sm / 1024:.0f} KiB), but the teaching kernel "
            f"also keeps S_ij ({Br} × {Bc}, {parts['S_ij'] / 1024:.1f} KiB) and O_i "
            f"({parts['O_i'] / 1024:.1f} KiB) in float32, plus m_i and l_i: "
            f"{need / 1024:.1f} KiB, more than the {gpu.smem_per_block_optin / 1024:.0f} KiB "
            f"one block may take.")


def residency_answer(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
                     df: pd.DataFrame) -> str:
    """What limits residency for the largest teaching tile that fits, and what it costs."""
    t = df[(df.kernel == "teaching") & df.fits]
    if t.empty:
        return "No tile shape fits this GPU's shared memory for this config."
    big = t.loc[(t.block_q * t.block_k).idxmax()]
    small = t.loc[(t.block_q * t.block_k).idxmin()]
    return (f"The largest fitting tiles, {int(big.block_q)} × {int(big.block_k)}, need "
            f"{big.smem_bytes / 1024:.1f} KiB of shared memory, so {int(big.blocks_per_sm)} "
            f"block(s) share an SM (limited by {big.limited_by}); {int(big.blocks):,} blocks "
            f"take {int(big.waves)} wave(s) over {gpu.sms} SMs. The smallest, "
            f"{int(small.block_q)} × {int(small.block_k)}, need "
            f"{small.smem_bytes / 1024:.1f} KiB: {int(small.blocks_per_sm)} per SM (limited by "
            f"{small.limited_by}), {int(small.blocks):,} blocks in {int(small.waves)} wave(s) — "
            f"but they read K and V {int(small.kv_passes)} times instead of "
            f"{int(big.kv_passes)}. (Model figures: registers are not counted.)")
