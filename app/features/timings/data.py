"""Tables for the Timings page: measured timings, sweeps over sequence length, the memory model
with naive attention's wall, and GPU results recorded in benchmarks/."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd

import engine
from engine.model.units import format_bytes
from app.core.recorded_gpu import folder_text, recorded_target
from app.core.style import kernel_name
from engine.facade import recorded
from engine.model import catalog, iomodel
from engine.model.config import AttentionConfig, MAX_SEQ
from engine.model.devices import datasheet_profile
from engine.model.units import GiB, format_gbps, format_tflops
from engine.model.timing_stats import NOISY_SPREAD, spread_of

TIMING_COLUMNS = ["kernel", "median_ms", "p10_ms", "p90_ms", "reps", "tflops", "peak_MiB",
                  "backend", "method", "name", "q1_ms", "q3_ms", "lo_ms", "hi_ms", "outliers_ms",
                  "spread", "iqr_rel", "noisy"]
TUKEY = 1.5          # whiskers reach the furthest call within 1.5 interquartile ranges


def spread(t: engine.Timing) -> dict:
    """The box of a box plot, which one slow call cannot stretch: the interquartile range of
    the calls, whiskers to the furthest call within 1.5 IQR of it (Tukey), the calls beyond as
    outliers. A timing without its calls (fewer than 4) keeps its p10–p90."""
    calls = np.asarray(t.samples_ms, dtype=float)
    if calls.size < 4:
        return {"q1_ms": t.p10_ms, "q3_ms": t.p90_ms, "lo_ms": t.p10_ms, "hi_ms": t.p90_ms,
                "outliers_ms": (), "spread": "p10–p90"}
    q1, q3 = np.percentile(calls, [25, 75])
    reach = TUKEY * (q3 - q1)
    inside = (calls >= q1 - reach) & (calls <= q3 + reach)
    return {"q1_ms": float(q1), "q3_ms": float(q3), "lo_ms": float(calls[inside].min()),
            "hi_ms": float(calls[inside].max()),
            "outliers_ms": tuple(float(c) for c in calls[~inside]), "spread": "IQR"}


def timing_row(label: str, t: engine.Timing) -> dict:
    return {"kernel": label, "median_ms": t.median_ms, "p10_ms": t.p10_ms, "p90_ms": t.p90_ms,
            "reps": t.reps, "tflops": t.tflops, "peak_MiB": t.peak_bytes / 2**20,
            "backend": t.backend, "method": t.method, "name": kernel_name(label, t.backend),
            **spread(t), "iqr_rel": _iqr_rel(t), "noisy": bool(t.noisy)}


def _iqr_rel(t: engine.Timing) -> float:
    """IQR / median of t's calls (engine.model.timing_stats), NaN without its calls."""
    if t.samples_ms:
        return spread_of(t.samples_ms).iqr_rel
    return float(t.iqr_rel)


def spread_lines(table: pd.DataFrame) -> list[str]:
    """Each timing's median with its spread in words: '**naive (NumPy)**: 1.02 ms, IQR
    0.98–1.10 ms (IQR/median 8%), 280 calls'."""
    lines = []
    for r in table.itertuples():
        what = "IQR" if r.spread == "IQR" else "p10–p90"
        rel = (f" ({what}/median {100 * (r.q3_ms - r.q1_ms) / r.median_ms:.0f}%)"
               if r.median_ms > 0 else "")
        lines.append(f"**{r.name}**: {fmt_ms(r.median_ms)}, {what} {fmt_ms(r.q1_ms, False)}"
                     f"–{fmt_ms(r.q3_ms)}{rel}, {int(r.reps):,} calls")
    return lines


def noisy_warning(table: pd.DataFrame) -> str:
    """A warning naming the timings whose calls spread more than NOISY_SPREAD of their median
    (engine.model.timing_stats), with their N in a sweep, or '' when none does."""
    if "noisy" not in table:
        return ""
    bad = table[table.noisy.fillna(False).astype(bool)]
    if bad.empty:
        return ""
    at = (lambda r: f" at N = {int(r.seq):,}") if "seq" in bad else (lambda r: "")
    named = "; ".join(f"{r.name}{at(r)}: IQR {100 * r.iqr_rel:.0f}% of the median"
                      for r in bad.itertuples())
    return (f"These calls spread widely ({named}; above {100 * NOISY_SPREAD:.0f}% the median "
            f"is not to be trusted): something else is using this machine's CPU. Time again, "
            f"or read the recorded GPU results.")


def fmt_ms(v: float, unit: bool = True) -> str:
    """Milliseconds with 3 significant-ish digits: 0.473, 1.02, 43.7, 512."""
    digits = 3 if v < 1 else 2 if v < 10 else 1 if v < 100 else 0
    return f"{v:.{digits}f}" + (" ms" if unit else "")


def timing_table(entries: list[tuple[str, engine.Timing]]) -> pd.DataFrame:
    return pd.DataFrame([timing_row(label, t) for label, t in entries], columns=TIMING_COLUMNS)


def stage_table(t: engine.Timing) -> pd.DataFrame:
    """Naive attention's stages (e.g. QKᵀ, softmax, PV) with their median times."""
    return pd.DataFrame({"stage": list(t.stages), "ms": [float(v) for v in t.stages.values()]})


def sweep_lengths(smallest: int, largest: int) -> list[int]:
    """Powers of two from smallest to largest."""
    n, out = smallest, []
    while n <= largest:
        out.append(n)
        n *= 2
    return out


def memory_wall(cfg: engine.AttentionConfig, gpu: engine.GpuProfile,
                direction: str = "forward") -> int | None:
    """Smallest seq_q = seq_k at which naive attention's peak memory (of the forward or the
    backward) exceeds the GPU's memory (predicted by iomodel.peak_memory; never attempted), or
    None below the structural bound."""
    def too_big(n: int) -> bool:
        return iomodel.peak_memory(cfg.with_(seq_q=n, seq_k=n), "naive",
                                   direction=direction) > gpu.memory_bytes
    if not too_big(MAX_SEQ):
        return None
    lo, hi = 1, MAX_SEQ
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if too_big(mid) else (mid + 1, hi)
    return lo


def naive_row_limit(cfg: AttentionConfig, gpu: engine.GpuProfile) -> int:
    """Smallest seq_k whose softmax row (float32, iomodel.naive_row_smem_bytes) does not fit
    in one block's shared memory: the naive GPU kernel refuses it."""
    per_key = iomodel.naive_row_smem_bytes(cfg.with_(seq_k=1))
    return gpu.smem_per_block_optin // per_key + 1


def naive_limit(cfg: AttentionConfig, gpu: engine.GpuProfile) -> tuple[int | None, str]:
    """(N, what stops naive there) for N_q = N_k = N: whichever comes first of the memory wall
    (S and P no longer fit in device memory) and the softmax row outgrowing shared memory."""
    wall, row = memory_wall(cfg, gpu), naive_row_limit(cfg, gpu)
    if wall is not None and wall <= row:
        return wall, f"naive's memory wall (N = {wall:,})"
    return row, f"naive's row limit (N_k > {row - 1:,})"


def naive_walls(cfg: AttentionConfig, gpu: engine.GpuProfile) -> dict:
    """What stops naive attention as N_q = N_k = N grows, each on its own: "memory", the N at
    which its peak (S and P, N² each) no longer fits the GPU's memory (gpu.memory_bytes; None
    below MAX_SEQ), with its label; "row", the N_k at which the naive softmax GPU kernel's
    float32 row of S outgrows one block's shared memory, with its label, or None when the
    memory wall comes first; and "note", a sentence saying which comes first."""
    wall, row = memory_wall(cfg, gpu), naive_row_limit(cfg, gpu)
    row_first = wall is None or row < wall
    mem = format_bytes(gpu.memory_bytes)
    note = (f"Naive's memory wall (red): at N = {wall:,} its peak memory, S and P at N² each, "
            f"passes {gpu.name}'s {mem}." if wall is not None else
            f"Naive's peak memory stays within {gpu.name}'s {mem} up to N = {MAX_SEQ:,}, the "
            f"largest length the app takes: no memory wall.")
    if row_first:
        note += (f" The naive softmax GPU kernel's row limit comes first (grey): for N_k > "
                 f"{row - 1:,} one float32 row of S ({4 * row:,} B at N_k = {row:,}) no longer "
                 f"fits the "
                 f"{gpu.smem_per_block_optin / 1024:.0f} KiB of shared memory one block may "
                 f"take, so that kernel refuses there; the CPU emulation has no such limit.")
    return {"memory": wall,
            "memory_text": f"memory wall (N = {wall:,})" if wall is not None else "",
            "row": row if row_first else None,
            "row_text": f"softmax row limit (N = {row:,})" if row_first else "",
            "note": note}


HBM_MODELS = {("forward", "naive"): iomodel.naive_hbm, ("forward", "flash"): iomodel.flash_hbm,
              ("backward", "naive"): iomodel.naive_backward_hbm,
              ("backward", "flash"): iomodel.flash_backward_hbm}


def memory_table(cfg: engine.AttentionConfig, ns: list[int],
                 direction: str = "forward") -> pd.DataFrame:
    """Peak memory (GiB, as device memory is given: engine.model.units) and HBM bytes of naive
    and flash (forward or backward) at N_q = N_k = n."""
    rows = []
    for n in ns:
        c = cfg.with_(seq_q=n, seq_k=n)
        for algo, label in (("naive", "naive"), ("flash", "FlashAttention")):
            rows.append({"seq": n, "algorithm": label,
                         "peak_GiB": iomodel.peak_memory(c, algo, direction=direction) / GiB,
                         "hbm_GiB": HBM_MODELS[direction, algo](c).total / GiB})
    return pd.DataFrame(rows)


def add_speedup(sweep: pd.DataFrame) -> pd.DataFrame:
    """Speedup of each kernel over naive at the same sequence length (NaN without naive)."""
    naive = sweep[sweep.kernel == "naive"].groupby("seq").median_ms.min()
    return sweep.assign(speedup=sweep.seq.map(naive) / sweep.median_ms)


RECORDED_FIELDS = ("kernel", "batch", "heads", "seq_q", "seq_k", "head_dim", "dtype", "causal",
                   "median_ms")


def recorded_table(files: list[dict]) -> pd.DataFrame:
    """Every recorded result as one row, with the device, date and file it came from; results
    lacking a field the charts need are left out. `shape` groups a sweep's lines: heads,
    head_dim, dtype and causal (batch may shrink as N grows, holding B·N constant)."""
    rows = []
    for f in files:
        dev = f.get("device") if isinstance(f.get("device"), dict) else {}
        for r in f.get("results", []):
            if isinstance(r, dict) and all(k in r for k in RECORDED_FIELDS):
                rows.append({**r, "device": dev.get("name", "unknown GPU"),
                             "date": f.get("date", "unknown date"), "file": f["file"],
                             "method": f.get("method", "")})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["seq"] = df.seq_q
    df["tokens"] = df.batch * df.seq_q
    df["peak_MiB"] = df.peak_bytes / 2**20 if "peak_bytes" in df else np.nan
    df["shape"] = [f"H={h}, d={d}, {t}" + (", causal" if c else "")
                   for h, d, t, c in zip(df.heads, df.head_dim, df.dtype, df.causal)]
    return df


def recorded_speedup(df: pd.DataFrame) -> pd.DataFrame:
    parts = [add_speedup(g) for _, g in df.groupby(["file", "shape"])]
    return pd.concat(parts) if parts else df.assign(speedup=np.nan)


HEADLINE_KERNELS = ("naive", "teaching", "mma.sync", "wgmma", "tensorcore", "torch_flash",
                    "torch_cudnn")      # in legend order; torch_math is PyTorch's naive


def in_kernel_order(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted as legends list kernels: naive, the project's builds, PyTorch's; then N."""
    order = {k: i for i, k in enumerate((*HEADLINE_KERNELS, "torch_math"))}
    key = rows.build if "build" in rows else rows.kernel
    return (rows.assign(_order=key.map(order).fillna(len(order)))
            .sort_values(["_order", "seq"], kind="stable").drop(columns="_order"))


def tensorcore_build(row, hopper: bool, direction: str = "forward") -> str:
    """"wgmma" or "mma.sync": the build of kernel="tensorcore" that ran a recorded row of a
    forward or backward file."""
    cfg = AttentionConfig(head_dim=int(row.head_dim), block_q=int(row.block_q),
                          block_k=int(row.block_k), dtype=row.dtype)
    pick = catalog.backward_build if direction == "backward" else catalog.tensorcore_build
    try:
        return pick(cfg, hopper).name.removeprefix("backward ")
    except engine.ConfigError:
        return "tensorcore"


def with_builds(df: pd.DataFrame, files: list[dict]) -> pd.DataFrame:
    """Recorded rows with `build` (the tensor-core kernel's wgmma or mma.sync build, forward
    or backward as its file says, else the kernel) and `name` (it in words)."""
    hopper = {f["file"]: str(f.get("device", {}).get("compute_capability", "")).startswith("9")
              for f in files if isinstance(f.get("device"), dict)}
    direction = {f["file"]: recorded.file_direction(f) for f in files}
    builds = [tensorcore_build(r, hopper.get(r.file, False), direction.get(r.file, "forward"))
              if r.kernel == "tensorcore" else r.kernel for r in df.itertuples()]
    return df.assign(build=builds, name=[kernel_name(b) for b in builds])


def with_companions(table: pd.DataFrame, chosen: str) -> pd.DataFrame:
    """The rows of file `chosen`, joined by the rows of other files of the same device and
    date and shape whose kernel build and N it lacks (e.g. PyTorch's lines beside the wgmma
    kernel's)."""
    mine = table[table.file == chosen]
    if mine.empty:
        return mine
    same = table[(table.file != chosen) & (table.device == mine.device.iloc[0])
                 & (table.date == mine.date.iloc[0]) & table["shape"].isin(set(mine["shape"]))
                 & table.tokens.isin(set(mine.tokens))]
    have = set(zip(mine["shape"], mine.build, mine.seq))
    extra = same[[k not in have for k in zip(same["shape"], same.build, same.seq)]]
    extra = extra.drop_duplicates(subset=["shape", "build", "seq"])
    return pd.concat([mine, extra], ignore_index=True)


def fastest(table: pd.DataFrame) -> pd.Series | None:
    """The recorded row of the project's fastest flash kernel (highest TFLOP/s of teaching or
    tensorcore): its file and shape are the comparison worth showing first."""
    own = table[table.kernel.isin(["teaching", "tensorcore"])]
    if own.empty or "tflops" not in own or own.tflops.isna().all():
        return None
    return own.loc[own.tflops.idxmax()]


def headline(files: list[dict]) -> tuple[pd.DataFrame, str]:
    """(rows, subtitle) of the Overview's headline chart: the non-causal forward results of
    the file with the project's fastest kernel and its companions (same device, date,
    shape; rows.file names each row's file): naive, the project's flash builds and
    PyTorch's flash and cuDNN, against N."""
    table = recorded_table(files)
    if table.empty or "tflops" not in table:
        return pd.DataFrame(), ""
    table = with_builds(table[~table.causal.astype(bool)], files)
    best = fastest(table)
    if best is None:
        return pd.DataFrame(), ""
    shape = best["shape"]
    rows = with_companions(table[table["shape"] == shape], best.file)
    rows = in_kernel_order(rows[rows.build.isin(HEADLINE_KERNELS)])
    tokens = sorted(rows.tokens.unique())
    batch = (f", B·N = {tokens[0]:,} tokens" if len(tokens) == 1 and rows.batch.nunique() > 1
             else "")
    subtitle = f"{rows.device.iloc[0]}, recorded {rows.date.iloc[0]}: {shape}{batch}"
    return rows.drop(columns=["stages", "method"], errors="ignore"), subtitle


def file_stamps(directory: Path, pattern: str) -> tuple:
    """(name, size, mtime) of each file matching `pattern`: changes when any of them does."""
    return tuple((p.name, st.st_size, st.st_mtime_ns)
                 for p in sorted(Path(directory).glob(pattern)) for st in [p.stat()])


@functools.lru_cache(maxsize=16)
def _headline_of(directory: str, stamps: tuple, target: recorded.Target
                 ) -> tuple[pd.DataFrame, str, recorded.RecordedDevice | None]:
    files, shown = recorded.closest_recorded(recorded.load_benchmarks(Path(directory)), target,
                                             folder_text(Path(directory)))
    return (*headline(files), shown)


def recorded_headline(directory: Path, device: engine.DeviceInfo
                      ) -> tuple[pd.DataFrame, str, recorded.RecordedDevice | None]:
    """headline() of the forward results recorded in `directory` on the GPU closest to
    `device` (engine.recorded.closest_recorded), with that GPU; read and tabulated once per
    state of its files and GPU, shared by every session (about 60 ms a run otherwise); the
    rows are shared, so callers only read them."""
    return _headline_of(str(directory), file_stamps(directory, "bench_*.json"),
                        recorded_target(device))


CEILINGS = re.compile(r"ceilings \(([\d.]+) TFLOP/s, ([\d.]+) TB/s\)")


def ceilings_note(f: dict, gpu: engine.GpuProfile) -> str:
    """Which figures are measured and which are the datasheet's, when a recorded method names
    the timing harness's ceilings beside a profile's datasheet rates."""
    found = CEILINGS.search(str(f.get("method", "")))
    if not found:
        return ""
    name = f.get("device", {}).get("name", "") if isinstance(f.get("device"), dict) else ""
    sheet = datasheet_profile(name) or gpu
    measured = (f"; measured there: a copy at {format_gbps(sheet.measured_copy_gbps)} (bytes "
                f"read + written) and a 16-bit matrix product at "
                f"{format_tflops(sheet.measured_matmul_tflops)} ({sheet.measured_source})"
                if sheet.measured_source else "")
    return (f"The ceilings there ({found[1]} TFLOP/s, {found[2]} TB/s) only reject "
            f"impossible timings (engine/gpu/timing.py says where each comes from: the "
            f"fastest large matrix product seen on this kind of GPU, rounded up, and a copy "
            f"measured there or, in newer files, the datasheet's HBM rate); they are not the "
            f"GPU's rates. {sheet.name}'s datasheet gives {format_tflops(sheet.fp32_tflops)} "
            f"FP32, {format_tflops(sheet.fp16_tflops)} dense 16-bit and "
            f"{format_gbps(sheet.hbm_gbps)}: the models use these, the rate of each config's "
            f"dtype and kernel{measured}.")
