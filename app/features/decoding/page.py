"""Decoding: Flash-Decoding's splits of the KV cache and their log-sum-exp merge, a paged
cache with its block table, grouped-query heads, bytes per token against the HBM floor, and
time against the number of splits."""
import streamlit as st

from app.features.decoding import cards
from app.core import runner
from app.features.decoding.charts import (bytes_chart, cache_chart, floor_chart, pool_chart,
                                          splits_chart)
from app.core.controls import MAX_DECODE_SEQ_UI, PAGE_CHOICES, SPLIT_CHOICES
from app.features.decoding.data import (POOL_CAP, POOL_COLUMNS, auto_against_model,
                                        bytes_table, closest_shape, decode_config,
                                        decode_shape_text, default_kv_heads, floor_sweep,
                                        measured_table, merge_gap, paged_against_contiguous,
                                        pool_cells, recorded_table, split_counts,
                                        split_states, split_strip, splits_model,
                                        spread_unsplit)
from app.core.style import wrap_title
from app.core.player.component import play_merge
from app.core.ui import (chart, guarded, linked_choice, linked_number, notes, on_stage, stage,
                         usable_settings)
from engine.facade import recorded
from app.features.decoding.floor import (floor_fraction, floor_ms, fraction_text,
                                         recorded_floor_note)
from engine.model import iomodel
from engine.model.rates import hbm_floor_bandwidth
from engine.model.decode_config import AUTO_BLOCKS_PER_SM, MAX_DECODE_QUERIES, MIN_SPLIT_KEYS
from app.core.recorded_gpu import closest_files
from app.core.results_dir import bench_dir
from app.core.deck_view import takeaway
from app.core.takeaways import decoding



def recorded_title_lines(text: str) -> list[str]:
    lines = wrap_title(text, 290)
    return [lines] if isinstance(lines, str) else lines


st.title("Decoding")
s = usable_settings()
slot = stage()
cfg, gpu = s.cfg, s.device.gpu

st.markdown(
    "Generating text runs attention for **one new query token** against every cached key "
    "and value. That reads the whole KV cache for a few FLOPs, so a decode step is bound by "
    "HBM bandwidth, and one thread block per (sequence, head) walking the whole cache leaves "
    "most SMs idle. **Flash-Decoding** cuts the cache into splits, one thread block each, "
    "runs FlashAttention's online softmax inside every split and writes its partial max "
    "m_s, sum l_s and output O_s; in the same kernel launch, the last block of each KV head "
    "to finish **merges** the splits with the same rescale the online softmax uses: "
    "m = max_s m_s, l = Σ_s exp(m_s − m)·l_s, O = Σ_s exp(m_s − m)·l_s·O_s / l. "
    "Grouped-query attention shares each K/V head among several query heads, and a **paged** "
    "cache (vLLM's PagedAttention) keeps keys in fixed-size pages found through a block table.")

st.caption(f"Batch {cfg.batch}, {cfg.heads} query heads, head_dim {cfg.head_dim}, {cfg.dtype} "
           f"and the seed come from the sidebar; the cache and the splits from here.")
c1, c2, c3, c4, c5 = st.columns(5)
seq_k = linked_number(c1, "cached keys seq_k", "dec_seq_k", 1, MAX_DECODE_SEQ_UI, 4096)
seq_q = linked_number(c2, "new query tokens", "dec_seq_q", 1, MAX_DECODE_QUERIES, 1)
kv_heads = linked_number(c3, "KV heads", "dec_kv_heads", 1, cfg.heads,
                         default_kv_heads(cfg.heads, seq_q))
splits = linked_choice(c4, "num_splits", "dec_splits", list(SPLIT_CHOICES), "auto")
page = linked_choice(c5, "page size (keys)", "dec_page", list(PAGE_CHOICES), 16)

dcfg = guarded(decode_config, cfg, seq_k, seq_q, kv_heads, splits, page)
if dcfg is None:
    st.stop()
res = guarded(runner.decode, dcfg, s.backend, s.profile)
if res is None:
    st.stop()

st.subheader("The cache cut into splits")
copies = res.info.get("copies")
where = (f"Measured on the GPU: {s.device.name}, the Flash-Decoding kernel (CuPy)"
         + (f", K and V brought to shared memory by {copies}." if copies else ".")
         if res.backend == "cupy" else
         f"Computed by the CPU emulation (NumPy) of the Flash-Decoding kernel, emulating "
         f"{gpu.name}.")
st.info(where)
blocks = dcfg.batch * dcfg.kv_heads * res.num_splits
m1, m2, m3, m4 = st.columns(4)
m1.metric("num_splits", res.num_splits,
          help=("auto" if splits == "auto" else "chosen") + f": auto is the largest power of "
               f"two at most ⌊{AUTO_BLOCKS_PER_SM} · SMs / (batch · kv_heads)⌋ splits, at most "
               f"{AUTO_BLOCKS_PER_SM} thread blocks on every SM (never a partial second wave), "
               f"but no split under {MIN_SPLIT_KEYS} keys and at most 128.")
m2.metric("keys per split", f"{int(res.bounds[1] - res.bounds[0]):,}",
          help=f"the last split holds {int(res.bounds[-1] - res.bounds[-2]):,}")
m3.metric("thread blocks", f"{blocks:,}",
          help=f"batch × kv_heads × num_splits: one block per (sequence, KV head, split), on "
               f"the {gpu.sms} SMs of {gpu.name}")
m4.metric("query rows per block", dcfg.rows,
          help=f"{dcfg.group} query heads × {dcfg.seq_q} token{'s' if dcfg.seq_q > 1 else ''}: "
               f"the query heads sharing one KV head read its K_j, V_j once")
st.caption(f"num_splits {res.num_splits} ({'auto' if splits == 'auto' else 'chosen'}), "
           f"{blocks:,} thread blocks on the {gpu.sms} SMs of {gpu.name}; the last split holds "
           f"{int(res.bounds[-1] - res.bounds[-2]):,} keys; {dcfg.group} query heads × "
           f"{dcfg.seq_q} token{'s' if dcfg.seq_q > 1 else ''} per block.")
chart(cache_chart, split_strip(res), dcfg.seq_k, dcfg.page_size)

with on_stage(slot):
    if not s.talk:
        st.subheader("Each split's softmax state, merged")
    h = linked_number(st.columns([1, 4])[0], "query head", "dec_head", 0, dcfg.heads - 1, 0)
    t = dcfg.seq_q - 1
    states = split_states(res, 0, h, t)
    takeaway(decoding(res.num_splits, blocks, gpu.sms, merge_gap(res.trace)))
    above = st.container()
    play_merge("dec", states, "dec_step", compact=s.talk)
    notes(above).caption(
        f"Sequence 0, query head {h} (KV head {h // dcfg.group}), the last new token. Play "
        "or step through the merge (it runs in your browser): each step merges one more "
        "split. When a split's max is above the running max, the sums merged so far shrink "
        "by exp(m_old − m_new), exactly as a new key tile rescales the online softmax. (The "
        "kernel's last block merges all splits at once: one max over them, then one weighted "
        "sum; the same result.)")
gap = merge_gap(res.trace)
st.caption(f"From the trace: Σ_s l_s·exp(m_s − m_final) equals l_final to {gap:.1e} "
           f"(relative) over every row; output = Σ_s rescale_s·l_s·O_s / l_final.")

st.subheader("The paged cache and its block table")
if dcfg.paged:
    cells = pool_cells(dcfg, res.block_table, res.bounds)
    st.caption(f"{dcfg.num_pages:,} pages of {dcfg.page_size} keys: {dcfg.pages_per_seq:,} per "
               f"sequence, the last {'ragged' if dcfg.seq_k % dcfg.page_size else 'full'}. "
               f"The block table maps each sequence's logical page to a physical page of the "
               f"pool; it was shuffled, so neighbouring keys sit in scattered pages and a "
               f"split reads them through the table. Each page holds the rows of all "
               f"{dcfg.kv_heads} KV heads for its keys."
               + (f" The first {POOL_CAP:,} pages are drawn." if dcfg.num_pages > POOL_CAP
                  else ""))
    chart(pool_chart, cells, POOL_COLUMNS)
    with st.expander("block table (first sequences and logical pages)"):
        st.dataframe(res.block_table[:8, :32], width="content")
else:
    st.caption("The cache is contiguous: choose a page size above to store it in pages.")

st.subheader("Bytes per token and the HBM floor")
kv = iomodel.decode_kv_bytes(dcfg)
step_floor_ms = floor_ms(dcfg, gpu)
floor_bw = hbm_floor_bandwidth(gpu)
m1, m2, m3 = st.columns(3)
m1.metric("K and V read per step", iomodel.format_bytes(kv),
          help="2 · batch · kv_heads · seq_k · head_dim · bytes (engine.model.iomodel)")
m2.metric("per generated token", iomodel.format_bytes(iomodel.decode_bytes_per_token(dcfg)))
m3.metric("HBM floor of a step", f"{1e3 * step_floor_ms:.1f} µs",
          help=f"K and V bytes at {floor_bw.label}: the one floor of this page (no stream "
               f"reads faster); every fraction of the floor below is against it")
m3.caption(f"at {floor_bw.label}")
left, right = st.columns(2)
with left:
    chart(bytes_chart, bytes_table(dcfg, gpu))
with right:
    chart(floor_chart, floor_sweep(dcfg, gpu))
st.caption(f"The model (engine.model.iomodel.decode_model_ms, not a measurement): the step's "
           f"HBM bytes at {floor_bw.label}, each SM drawing at most its share of it, so "
           "fewer thread blocks than SMs leave bandwidth unused. Splitting fills the SMs; "
           "grouped-query heads cut the bytes.")

st.subheader("Time against the number of splits")
counts = split_counts(dcfg, gpu.sms)
auto = dcfg.splits_on(gpu.sms)
model = splits_model(dcfg, gpu)
if s.on_gpu:
    records = guarded(runner.decode_timings, dcfg, tuple(counts), auto)
    if records:
        measured = measured_table(records, counts)
        left, right = st.columns(2)
        with left:
            chart(splits_chart, measured, ["Measured on", s.device.name], auto)
        with right:
            chart(splits_chart, model, ["Model", "(not measured)"], auto)
        best = min((r for r in records if r["kernel"] == "flash_decode"),
                   key=lambda r: r["median_ms"])
        frac = floor_fraction(best["kv_bytes"], best["median_ms"], gpu)
        st.caption(f"Fastest: {best['num_splits']} splits, {best['median_ms']:.4f} ms, "
                   f"{fraction_text(frac, best['kv_bytes'], gpu)} "
                   f"({1e3 * step_floor_ms:.1f} µs at {floor_bw.label}). CUDA events around "
                   f"the Flash-Decoding kernel (splits and merge in one launch), L2 flushed between repetitions, "
                   f"median of at least 20.")
else:
    files, shown = closest_files(recorded.load_decode_benchmarks(bench_dir()), s.device)
    table = recorded_table(files, gpu)
    if table.empty:
        st.info("No recorded H200 decode results exist yet: benchmarks/results/ holds no "
                "decode_*.json (`python -m benchmarks.decode_sweep`, or `benchmarks/gpu_run.sh "
                "decode-sweep` on a GPU, records them). The chart shows the model only.")
        chart(splits_chart, model, f"Model of {gpu.name} (not measured)", auto)
    else:
        st.caption(shown.label)
        names = sorted(table.file.unique())
        pick = st.selectbox("recorded decode file", names, key="dec_rec_file")
        rows = table[table.file == pick]
        shapes = sorted(rows["shape"].unique())
        shape = st.selectbox("shape", shapes, key="dec_rec_shape",
                             index=shapes.index(closest_shape(rows, dcfg)))
        info = next(f for f in files if f["file"] == pick)
        mine = decode_shape_text(dcfg)
        same = shape == mine
        if not same:
            st.caption(f"The recorded panel shows **another shape** ({shape}), not this "
                       f"page's ({mine})"
                       + ("" if mine in shapes else
                          "; none recorded is this page's, so the closest is shown")
                       + ". Compare the form of its curve, not its times.")
        left, right = st.columns(2)
        with left:
            chart(splits_chart, spread_unsplit(rows[rows["shape"] == shape]),
                  [f"Recorded on {info.get('device', {}).get('name', '?')}, "
                   f"{info.get('date', '?')}:",
                   *recorded_title_lines("this page's shape" if same else
                                         f"another shape: {shape}")])
        with right:
            chart(splits_chart, model, ["Model of this page's config", "(not measured)"],
                  auto)
        st.caption(f"Method: {info.get('method', 'not stated')}")
        st.caption(recorded_floor_note(info, rows[rows["shape"] == shape], gpu))
        paged_note = paged_against_contiguous(rows[rows["shape"] == shape])
        if paged_note:
            st.caption(paged_note)
why_auto = auto_against_model(dcfg, gpu)
if why_auto:
    st.markdown(why_auto)

cards.show(dcfg, gpu, res.num_splits)      # the classroom lab's question cards
