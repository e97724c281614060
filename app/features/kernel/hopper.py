"""The Kernel page's Hopper section: what the wgmma forward kernel (kernels/hopper/) does that
the other kernels do not — a producer warpgroup's bulk tensor copies into a ring of stages,
mbarrier waits, two consumer warpgroups taking turns on the tensor cores, a persistent walk —
played from a model of the kernel's own schedule, the walk read from a recorded launch, and
FlashAttention-2's split-Q against FlashAttention-1's split-K as who writes O."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app.core.results_dir import bench_dir
from app.core.player.component import play_lanes
from app.core.sidebar import Settings
from app.core.ui import chart
from app.features.kernel import hopper_charts as charts
from app.features.kernel import hopper_pipeline as pipeline
from app.features.kernel import hopper_walk as walk
from app.features.kernel import warp_split
from engine.facade import recorded
from engine.model import arch, registry

RUNS = (4, 4, 3)            # the modelled block's runs: key tiles of each item it takes
LOOP_OPENS = "for (int x = 1; x < n_run; ++x) {"
LOOP_ENDS = "prev = cur;"


def hopper_refusal(s: Settings) -> str | None:
    """Why the selected GPU (the emulated profile, or the live GPU) cannot run the wgmma
    build, in engine.model.arch's words; None on Hopper."""
    lacks = arch.lacks(registry.kernel("wgmma"), "float16", s.device.gpu.compute_capability)
    return (f"This build runs only on Hopper (compute capability 9.0: H100, H200): the "
            f"{s.device.gpu.name} lacks {lacks}. The section still explains it, from the "
            f"kernel's source and a launch recorded on an H200.") if lacks else None


def consumer_loop() -> tuple[int, str] | None:
    """The consumer warpgroups' loop over a run's key tiles as flash_wgmma.cu has it now:
    (first line number, text), found by its first and last lines; None if they moved."""
    lines = pipeline.KERNEL.read_text().splitlines()
    first = next((n for n, line in enumerate(lines) if LOOP_OPENS in line), None)
    if first is None:
        return None
    last = next((n for n in range(first, len(lines)) if LOOP_ENDS in lines[n]), None)
    if last is None:
        return None
    text = "\n".join(lines[first:last + 2])
    indent = len(lines[first]) - len(lines[first].lstrip())
    return first + 1, "\n".join(line[indent:] for line in text.splitlines())


def busy_share(p: pipeline.Pipeline) -> float:
    """Share of the modelled span the tensor cores are busy (products of either consumer)."""
    busy = sum(s.end - s.start for s in p.spans if s.row == "tensor cores")
    return busy / p.end if p.end else 0.0


def persistent_records() -> list[dict]:
    """The recorded schedules of a persistent wgmma build (benchmarks/results/)."""
    return [r for r in recorded.load_schedules(bench_dir()) if walk.is_persistent(r)]


def walk_of(rec: dict) -> tuple[pd.DataFrame, int]:
    """A recorded walk with each SM's block of the kernel's rule (-1 where none matches),
    and how many SMs' walks the rule gives exactly."""
    got = walk.recorded_walk(rec)
    matched = walk.matched_blocks(got, walk.walk_items(**walk.launch_of(rec)))
    got["block"] = got.sm.map(lambda sm: -1 if matched.get(sm) is None else matched[sm])
    return got, sum(b is not None for b in matched.values())


def show_walk(rec: dict) -> None:
    dev = (rec.get("device") or {}).get("name", "unknown GPU")
    got, exact = walk_of(rec)
    launch = walk.launch_of(rec)
    sms = got.sm.nunique()
    shown = got[got.block.between(0, charts.WALK_BLOCKS - 1)] if exact else \
        got[got.sm < charts.WALK_BLOCKS].assign(block=got.sm)
    chart(charts.walk_chart, shown,
          [f"Recorded on {dev}, {rec.get('date', '?')}:", rec.get("label") or rec.get("file")],
          width=520)
    c = rec.get("config") or {}
    st.caption(
        f"{rec.get('file')}: B·H = {launch['bh_count']}, N = {c.get('seq_q')}, "
        f"d = {c.get('head_dim')}{', causal' if launch['causal'] else ''}; a grid of "
        f"{launch['G']} blocks, one per SM, {len(got):,} items. Each row is one block's walk, "
        f"its items (query tile i / batch·head) in the order it ran them (the traced build "
        f"records each item's SM and start and end times; one block per SM, so an SM's items "
        f"by start time are its block's walk). The kernel's rule (struct Walk, emulated in "
        f"Python) gives {exact} of the {sms} SMs' walks exactly, so each row names the block "
        f"whose walk it is; the first {charts.WALK_BLOCKS} blocks are drawn."
        + (f" Causal: heaviest query tiles first, groups of {launch['bh_group']} batch·heads, "
           f"rounds of {launch['G']} items dealt in alternate directions, so a block with a "
           f"heavy item of one round gets a light one in the next." if launch["causal"] else
           f" Not causal: block b takes items b, b + {launch['G']}, b + 2·{launch['G']}, … of "
           f"the line, batch·head by batch·head."))


def section(s: Settings) -> None:
    st.subheader("Hopper: the wgmma kernel's pipeline")
    refusal = hopper_refusal(s)
    if refusal:
        st.info(refusal)
    shape = pipeline.build_shape(s.cfg) if s.cfg else pipeline.kernel_shape()
    q_where = (f"one of {shape.q_stages} buffers (the next item's Q_i loads a run ahead)"
               if shape.q_stages > 1 else "one buffer (the next item's Q_i loads once the "
               "current one's last S_ij is done)")
    st.markdown(
        f"The wgmma build (kernels/hopper/flash_wgmma.cu) keeps FlashAttention-2's loop but "
        f"splits its block by job. Warpgroup 0, **the producer**, gives up its registers and "
        f"one of its threads drives the copy engine: bulk tensor copies (TMA) of Q_i into "
        f"{q_where} and of K_j, V_j into a **ring of {shape.stages} stages** in shared "
        f"memory (this config's build). Each copy completes on the stage's *full* mbarrier; "
        f"before it refills a stage the producer waits on the stage's *empty* mbarrier, which "
        f"completes once every consumer thread has arrived on it (K_j after its S_ij, V_j after "
        f"its P_ij V_j). **The {shape.consumers} consumer warpgroups** own 64 query rows of Q_i "
        f"each. Per key tile a consumer issues S_ij = Q_i K_jᵀ and then P_i,j−1 V_j−1 as "
        f"warpgroup MMAs (wgmma) and, while the second product is still on the tensor cores, "
        f"runs the softmax of S_ij. With PINGPONG the consumers take **turns** (named barrier "
        f"BAR_TURN + wg): one issues its two products, then hands the turn over, so one "
        f"consumer's softmax runs while the other's products occupy the tensor cores.")
    st.markdown(
        f"**Phases.** The u-th K_j, V_j a block loads goes to stage u mod {shape.stages} in "
        f"phase (u / {shape.stages}) mod 2 (RingPos in kernels/hopper/pipeline.cuh). A wait "
        f"names the parity of the phase it waits for, so each time the ring wraps the parity "
        f"flips, and a consumer cannot take the previous lap's copy for this one's; the "
        f"producer, never more than {shape.stages} loads ahead, skips the *empty* wait on the "
        f"first lap.")
    p = pipeline.simulate(list(RUNS), turns=True, shape=shape)
    table = charts.pipeline_table(p.spans, shape)
    wrap = min((sp.start for sp in p.spans if sp.kind == "K" and sp.use == shape.stages),
               default=0.0)
    play_lanes("hopper", table, charts.lane_order(shape), p.end, charts.PAINT, "hopper_step",
               tagged=charts.HELD, home_t=wrap,
               title=f"One block of the wgmma kernel: {len(RUNS)} items of "
                     f"{', '.join(map(str, RUNS))} key tiles (model)")
    st.caption(
        f"Play, step from one moment to the next with ◀ ▶ (or the arrow keys) or drag the "
        f"slider: it runs in your browser, and opens where the ring first wraps. Bars that "
        f"have started turn solid and the ring's rows name what each stage holds at that "
        f"moment and its phase (lavender: phase 0, cyan: phase 1). The order of every copy, product, wait and arrival is the "
        f"kernel's (a Python emulation of its producer and consumer loops, PERSISTENT, "
        f"PINGPONG); the durations are the model's, not measured: one product of 64 × Bc × d "
        f"takes 1 unit, the softmax {pipeline.DURATIONS['softmax']}, a copy "
        f"{pipeline.DURATIONS['K']}; one tensor-core queue for the block. Modelled, the "
        f"tensor cores are busy {busy_share(p):.0%} of the span. The last S of the block's "
        f"last item is issued and not used: the kernel keeps one code path for every run.")
    loop = consumer_loop()
    if loop is not None:
        with st.expander("The consumers' loop over a run's key tiles (flash_wgmma.cu)"):
            st.caption(f"From line {loop[0]} of kernels/hopper/flash_wgmma.cu: the waits and "
                       f"arrivals the model follows, in this order.")
            st.markdown(f"```cpp\n{loop[1]}\n```")   # the page's st.code is the source

    st.markdown("**The persistent walk.** A persistent launch has one block per SM, and "
                "each block walks work items (query tile i, batch·head) in the order struct "
                "Walk deals them; the next item's Q_i and first K_j load while the current "
                "one's last products and epilogue run.")
    records = persistent_records()
    if not records:
        st.caption("No schedule of a persistent wgmma build is recorded in the results "
                   "folder (benchmarks/results/), so no walk is drawn.")
    elif len(records) == 1:
        show_walk(records[0])
    else:
        for tab, rec in zip(st.tabs([r.get("label") or r.get("file") for r in records]),
                            records):
            with tab:
                show_walk(rec)

    st.markdown("**Who writes O: split-Q against split-K.** FlashAttention-1 split a key "
                "tile across the warps of a block (split-K): each warp multiplies all of "
                "Q_i by its slice of K_j and V_j, so it holds a partial O_i for *every* row, "
                "and after each key tile the warps write those partials, their row maxima "
                "and row sums to shared memory, synchronise, and add them up. "
                "FlashAttention-2 splits the query tile instead (split-Q): a warp owns rows "
                "of Q_i and therefore the same rows of S_ij, P_ij and O_i, its softmax needs "
                "only shuffles within the warp, and it writes its rows of O alone.")
    cfg = s.cfg
    warps = 4
    chart(charts.split_chart, warp_split.ownership(cfg.block_q, cfg.block_k, cfg.head_dim,
                                                   warps))
    moved = warp_split.exchange(cfg.block_q, cfg.head_dim, warps)
    st.caption(
        f"This config's tile (Br = {cfg.block_q}, Bc = {cfg.block_k}, d = {cfg.head_dim}) on "
        f"{warps} warps, in cells of {warp_split.GROUP} × {warp_split.GROUP}. Per key tile, "
        f"split-K moves {moved['split-K']:,} bytes through shared memory to add up O_i "
        f"(each warp's partial O_i, row max and row sum, written and read back), split-Q "
        f"{moved['split-Q']}. Every forward kernel here is split-Q:")
    cites = warp_split.citations()
    st.dataframe(pd.DataFrame([{"file": f"kernels/{c.path}", "line": c.line, "says": c.text,
                                "shows": c.shows} for c in cites]), hide_index=True)
