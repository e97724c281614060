"""Tile sizes: every (block_q, block_k) at once — shared memory, residency, waves, HBM
bytes, the model's time and the measured one — and the GPU memory pyramid."""
import streamlit as st

from app.features.tile_sizes import cards
from app.features.tile_sizes import data as td
from app.features.tile_sizes.charts import SELECTION, placement_chart, pyramid_chart, tile_heatmap
from app.core.sidebar import choose_tiles
from app.core.recorded_gpu import closest_files
from app.core.results_dir import bench_dir
from app.core.ui import chart, guarded, notes, on_stage, picking_chart, stage, usable_settings
from engine.facade import recorded, sweep_tiles
from engine.model import tilemodel
from engine.model.rates import hbm_floor_bandwidth, peak_rate
from engine.model.units import format_bytes

st.title("Tile sizes")
s = usable_settings()
slot = stage()
cfg, gpu, on_gpu = s.cfg, s.device.gpu, s.on_gpu
paper = tilemodel.paper_tiles(cfg, gpu)


def heatmap(builder_cells, title, legend, key, **kw):
    picking_chart(tile_heatmap, builder_cells, title, legend, key=key, param=SELECTION,
                  pick=choose_tiles, **kw)


st.markdown(
    f"Every tile shape the sidebar offers, for **{td.config_text(cfg)}** on "
    f"**{s.device.name}**. Bigger query tiles read K and V fewer times; bigger tiles also "
    f"take more shared memory, so fewer thread blocks share an SM. Which shape is fastest "
    f"is found by measuring. **Click a cell** to make it the current config.")
st.caption(f"★ fastest measured · ▲ the paper's choice (M = {paper.M:,} elements of "
           f"{cfg.dtype} = shared memory of one SM: {paper.rounding()}) · black outline: the "
           f"current config. Hover a cell for its figures.")
paper_note = td.paper_fit_note(cfg, gpu)
if paper_note:
    st.caption(f"▲ {paper_note}")

sweep_key = (cfg.with_(block_q=64, block_k=64), s.device.name)
stored = st.session_state.get("tile_sweep")
measured = stored[1] if on_gpu and stored and stored[0] == sweep_key else []
table = td.with_measured(td.model_table(cfg, gpu), measured)
cuda_occupancy = any(r["kernel"] == "teaching" for r in measured)
where = "CUDA's occupancy calculator on this GPU" if cuda_occupancy else "the model"

with on_stage(slot):
    if not s.talk:
        st.subheader("Shared memory, residency, waves and HBM traffic")
    above = st.container()
    # no-break spaces keep "(limit 227 KiB)" on one line where the title wraps
    limit = format_bytes(gpu.smem_per_block_optin).replace(" ", "\u00a0")
    cells = [(td.smem_cells(table), f"Shared memory per block (limit\u00a0{limit})", "KiB",
              "tiles_smem", {}),
             (td.blocks_cells(table), "Resident blocks per SM"
              + ("" if cuda_occupancy else " (model)"), "blocks", "tiles_blocks",
              dict(scheme="greens")),
             (td.waves_cells(table, cfg, gpu), f"Waves over {gpu.sms} SMs"
              + ("" if cuda_occupancy else " (model)"), "waves", "tiles_waves",
              dict(scheme="oranges")),
             (td.hbm_cells(table), "HBM bytes moved (K and V once per query tile)", "MiB",
              "tiles_hbm", dict(scheme="purples", log=True))]
    for first in (0, 2):
        for col, (data, title, legend, key, kw) in zip(st.columns(2), cells[first:first + 2]):
            with col:
                heatmap(data, title, legend, key, **kw, **(dict(size=250) if s.talk else {}))
    notes(above).caption(
        f"Teaching kernel (its shared-memory layout: Q_i, K_j, V_j in {cfg.dtype}; S_ij, O_i, "
        f"m_i, l_i in float32). Resident blocks per SM and waves from {where}"
        + ("" if cuda_occupancy else
           (" (no GPU here: CUDA's occupancy calculator needs the compiled kernel)"
            if not on_gpu else " (time the teaching kernel below for CUDA's own figures)")
           + ": the smallest of what shared memory (plus 1 KiB per block for the runtime), "
             "128 threads a block and the block limit allow; registers are not counted")
        + ". Cells whose tiles do not fit the limit are marked with their bytes.")

st.subheader("Time: the model beside the measurement")
st.caption(f"Model: max(HBM bytes ÷ bandwidth, FLOPs ÷ peak) ÷ the average fraction of SMs "
           f"with work over the waves; bandwidth {hbm_floor_bandwidth(gpu).label}; peak for "
           f"{cfg.dtype}: the teaching kernel at "
           f"{peak_rate(gpu, cfg.dtype, 'teaching').label}, the tensor-core kernel at "
           f"{peak_rate(gpu, cfg.dtype, 'tensorcore').label}. An upper bound on speed, not a "
           f"prediction of it.")
if on_gpu:
    kernels = st.multiselect("kernels to time", list(td.FAMILY_NAMES),
                             default=list(td.FAMILY_NAMES), format_func=td.FAMILY_NAMES.get,
                             key="tiles_kernels")
    if st.button("Time every tile shape on this GPU", type="primary", disabled=not kernels,
                 key="tiles_sweep"):
        bar = st.progress(0.0, text="compiling and timing…")
        got = guarded(sweep_tiles, cfg, tuple(kernels),
                      lambda done, total, what: bar.progress(done / total, text=what))
        bar.empty()
        if got is not None:
            st.session_state["tile_sweep"] = (sweep_key, got[0], got[1])
            st.rerun()
    if measured:
        st.caption(f"Measured on {s.device.name}: {measured[0]['method']}")
        for skip in stored[2]:
            st.caption(f"Not timed: {skip['kernel']} {skip['block_q']} × {skip['block_k']}: "
                       f"{skip['reason']}")
    else:
        st.info("Press the button to time every shape each chosen kernel takes, each with the "
                "project's timing method (one GPU job at a time; a progress bar shows each "
                "shape; the server's tile_sweep_points limit bounds the runs). Until then only "
                "the model is shown.")
for kernel in ("teaching", "tensorcore"):
    name = td.FAMILY_NAMES[kernel]
    fast = td.fastest(table, kernel, "measured_ms")
    left, right = st.columns(2)
    with left:
        heatmap(td.time_cells(table, kernel, "model_ms"), f"{name}: model time", "ms",
                f"tiles_model_{kernel}", scheme="greys", log=True)
    with right:
        if measured:
            heatmap(td.time_cells(table, kernel, "measured_ms", fast),
                    f"{name}: measured median", "ms", f"tiles_measured_{kernel}",
                    scheme="greys", log=True)

recorded_answer = None
if not on_gpu:
    st.subheader("Measured on a GPU: recorded grids")
    grids, shown = closest_files(recorded.load_tile_grids(bench_dir()), s.device)
    rows = td.recorded_rows(grids)
    configs = td.recorded_configs(rows)
    if not configs:
        st.info("No recorded tile grid is in benchmarks/results/ (files tiles_*.json), so there "
                "is no measurement to show here: the figures above are the model only. A GPU "
                "records one with `OUT=<folder> bash benchmarks/gpu_run.sh tile-grid`.")
    else:
        st.caption(shown.label)
        labels = [td.recorded_label(c) for c in configs]
        pick = st.selectbox("recorded grid", labels, index=td.closest_config(configs, cfg),
                            key="tiles_recorded")
        choice = configs[labels.index(pick)]
        rec_cfg, rec_gpu, rec = td.recorded_view(rows, choice)
        file_rows = rows[rows.file == choice[0]]
        origin, note = file_rows.derived_from.iloc[0], file_rows.note.iloc[0]
        st.caption(f"Recorded on **{choice[1]}** on **{choice[2]}** ({choice[0]}"
                   + (f", taken from {origin}" if origin else "") + f"). Method: "
                   f"{file_rows.method.iloc[0].rstrip('.')}. The model beside it is for the same shape on "
                   f"the {rec_gpu.name} profile.")
        if note:
            with st.expander("What this recorded grid is"):
                st.caption(note)
        recorded_answer = (rec, tilemodel.paper_tiles(rec_cfg, rec_gpu),
                           f"recorded on {choice[1]}, {td.config_text(rec_cfg)}")
        for kernel in ("teaching", "tensorcore"):
            name = td.FAMILY_NAMES[kernel]
            fast = td.fastest(rec, kernel, "measured_ms")
            if fast is None:
                st.info(f"No {name} times are recorded in this grid: nothing measured to show. "
                        f"A GPU records the full grid with `OUT=<folder> bash "
                        f"benchmarks/gpu_run.sh tile-grid`.")
                continue
            left, right = st.columns(2)
            with left:
                heatmap(td.time_cells(rec, kernel, "model_ms"), f"{name}: model time",
                        "ms", f"rec_model_{kernel}", scheme="greys", log=True)
            with right:
                heatmap(td.time_cells(rec, kernel, "measured_ms", fast),
                        f"{name}: measured on {choice[1]}", "ms", f"rec_measured_{kernel}",
                        scheme="greys", log=True)

st.subheader("The GPU memory pyramid")
levels = td.pyramid_table(gpu)
chart(pyramid_chart, levels)
st.dataframe(levels[["level", "capacity", "capacity source", "bandwidth", "bandwidth source"]],
             hide_index=True)
st.markdown("**Where each array of this config lives.** Naive attention writes the whole "
            "N×N S and P to HBM and reads them back; FlashAttention keeps one tile of each on "
            "chip and never writes them.")
chart(placement_chart, td.placement_table(cfg))

st.subheader("Try this")
with st.expander("1. Find the fastest tiles. Is it the paper's choice?"):
    st.markdown(f"For **{td.config_text(cfg)}** on **{s.device.name}**, the heatmaps above:")
    st.markdown(td.fastest_answer(table, paper, f"measured on {s.device.name}" if measured
                                  else f"model, {s.device.name}"))
    if paper_note:
        st.markdown(paper_note)
    if recorded_answer is not None:
        st.markdown("The recorded grid (\"Measured on a GPU\" above) answers for its own "
                    "config and GPU, not necessarily yours:")
        st.markdown(td.fastest_answer(*recorded_answer))
with st.expander("2. Why does block_q = 16 read K and V so often?"):
    st.markdown(td.kv_reads_answer(cfg, table))
with st.expander("3. What stops the largest tiles from filling the GPU?"):
    st.markdown(td.residency_answer(cfg, gpu, table))

cards.show(cfg, gpu)      # the classroom lab's question cards
