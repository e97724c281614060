"""The Tile sizes page (app/features/tile_sizes/): through AppTest, the current, paper and
unfit cells, the model and the recorded grid without a GPU, the URL's tiles, the live sweep
on a GPU; without a server, every cell of the heatmaps has a status, the marks sit on the
right cells, the charts carry the click selection and validate against the Vega-Lite
schema, and the byte figures agree with the IO model's other counts."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import engine
from app.core import legible
from app.core import style
from app.features.tile_sizes import charts as charts_tiles, data as td
from app.core.results_dir import BENCH_DIR_ENV
from engine import recorded
from engine.model import catalog, iomodel, tilemodel
from engine.model.devices import PROFILES
from seeds import SEED, rng
from apptest_helpers import FIXTURES, ON_GPU, assert_clean, open_page, texts


def title_text(spec: dict) -> str:
    """A chart's title in one line (a long one is a list of lines: app.core.style.wrap_title)."""
    title = spec.get("title", "")
    return " ".join(title) if isinstance(title, list) else title if isinstance(title, str) else ""


def chart_data(at: AppTest, title_start: str):
    """The data of the chart whose title starts with title_start (one dataset each)."""
    from app.core.st_internals import arrow_bytes_to_frame as convert_arrow_bytes_to_pandas_df
    for c in at.get("vega_lite_chart"):
        title = title_text(json.loads(c.proto.spec))
        if title.startswith(title_start):
            return convert_arrow_bytes_to_pandas_df(c.proto.datasets[0].data.data)
    raise AssertionError(f"no chart titled {title_start!r}")


def chart_titles(at: AppTest) -> list[str]:
    return [title_text(json.loads(c.proto.spec)) for c in at.get("vega_lite_chart")]


def test_tile_page_marks_current_paper_and_unfit_cells():
    at = open_page("tile_sizes", backend="numpy", head_dim=128, dtype="float32", block_q=16,
                   block_k=128)
    assert_clean(at)
    smem = chart_data(at, "Shared memory per block").set_index(["block_q", "block_k"])
    assert len(smem) == len(engine.BLOCK_SIZES) ** 2
    # 128 × 128 float32 tiles at d = 128: five 64 KiB tiles, more than the block may take
    big = smem.loc[(128, 128)]
    assert big.status == "does not fit" and big.text == "no fit 321 KiB"
    assert smem.loc[(16, 16)].status == "fits"
    current = smem[smem.current.astype(bool)].index.tolist()
    assert current == [(16, 128)]
    # the paper's choice for float32, d = 128 on the H200 profile: 64 × 64 (worked in
    # tests/test_tilemodel.py)
    assert smem.loc[(64, 64)].marks == "▲"
    spec = next(json.loads(c.proto.spec) for c in at.get("vega_lite_chart"))
    cell = next(p for p in spec["params"] if p["name"] == "cell")
    assert cell["select"]["fields"] == ["block_q", "block_k"]


def test_tile_page_without_gpu_labels_model_and_recorded_grid():
    if ON_GPU:
        pytest.skip("a GPU times the shapes live instead")
    at = open_page("tile_sizes", backend="numpy", dtype="float16")
    assert_clean(at)
    text = texts(at)
    titles = chart_titles(at)
    assert "Resident blocks per SM (model)" in titles
    assert any(t.startswith("Waves over") and t.endswith("(model)") for t in titles)
    assert "no GPU here" in text
    # the recorded grid (tests/data/tiles_fixture.json) with its device, date and note
    assert "Recorded on **Test fixture GPU (not a measurement)** on **2000-01-01**" in text
    assert "A test fixture: five made-up shapes." in text
    measured = chart_data(at, "teaching kernel: measured on").set_index(["block_q", "block_k"])
    assert measured.loc[(64, 64)].marks == "★"          # 0.050 ms, the fastest of three
    assert measured.loc[(64, 64)].text == "50"              # the grid in µs, as its legend says
    assert set(measured.unit) == {"µs"}
    assert measured.loc[(32, 32)].text == "not timed"
    tc = chart_data(at, "tensor-core kernel: measured on").set_index(["block_q", "block_k"])
    assert tc.loc[(128, 64)].marks == "★"
    assert "fastest 128 × 64 at 0.01 ms" in text
    assert len(chart_data(at, "The memory pyramid")) == 5


def test_tile_page_without_recorded_grid_says_how_to_record_one(monkeypatch, tmp_path):
    if ON_GPU:
        pytest.skip("a GPU times the shapes live instead")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("tile_sizes", backend="numpy")
    assert_clean(at)
    assert "bash benchmarks/gpu_run.sh tile-grid" in texts(at)
    assert not any("measured" in t for t in chart_titles(at))


def test_tile_page_follows_the_url_tiles():
    at = open_page("tile_sizes", backend="numpy", block_q=32, block_k=8)
    assert_clean(at)
    hbm = chart_data(at, "HBM bytes moved").set_index(["block_q", "block_k"])
    assert hbm[hbm.current.astype(bool)].index.tolist() == [(32, 8)]
    at.selectbox(key="block_q").set_value(128).run()
    hbm = chart_data(at, "HBM bytes moved").set_index(["block_q", "block_k"])
    assert hbm[hbm.current.astype(bool)].index.tolist() == [(128, 8)]
    assert at.query_params["block_q"] in ("128", ["128"])


@pytest.mark.skipif(not ON_GPU, reason="needs a usable GPU")
def test_tile_page_live_sweep_on_gpu():
    at = open_page("tile_sizes", dtype="float16", head_dim=64, seq_q=512, seq_k=512)
    assert_clean(at)
    assert "Resident blocks per SM (model)" in chart_titles(at)
    at.multiselect(key="tiles_kernels").set_value(["tensorcore"]).run()
    at.button(key="tiles_sweep").click().run(timeout=240)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    text = texts(at)
    assert "Measured on" in text
    measured = chart_data(at, "tensor-core kernel: measured median")
    timed = measured[measured.status == "fits"]
    assert len(timed) >= 5 and (timed.value > 0).all()
    assert (measured.marks == "★").sum() + (measured.marks == "★ ▲").sum() == 1


@pytest.mark.skipif(not ON_GPU, reason="needs a usable GPU")
def test_tile_page_sweep_over_the_limit_is_a_message(monkeypatch):
    monkeypatch.setenv("FA_LAB_MAX_TILE_SWEEP_POINTS", "2")
    at = open_page("tile_sizes", dtype="float16", head_dim=64)
    at.button(key="tiles_sweep").click().run()
    assert_clean(at)
    errors = " ".join(e.value for e in at.error)
    assert "tile_sweep_points" in errors and "FA_LAB_MAX_TILE_SWEEP_POINTS" in errors
    assert not any("measured median" in t for t in chart_titles(at))


# ---- its tables and charts, without a server ------------------------------------------
H200 = PROFILES["H200"]


CFG = engine.AttentionConfig(batch=1, heads=4, seq_q=1024, seq_k=1024, head_dim=128,
                             dtype="float16", block_q=32, block_k=64)


def by_shape(cells: pd.DataFrame) -> pd.DataFrame:
    return cells.set_index(["block_q", "block_k"])


def test_cells_cover_every_shape_with_a_status():
    table = td.model_table(CFG, H200)
    smem = by_shape(td.smem_cells(table))
    assert len(smem) == len(engine.BLOCK_SIZES) ** 2
    assert set(smem.status) <= {"fits", "does not fit"}
    assert (smem[smem.status == "does not fit"].value.isna()).all()
    assert smem.loc[(32, 64)].current and smem.current.sum() == 1
    # the tensor-core kernel takes only its catalogued shapes; every other cell says so
    tc = by_shape(td.time_cells(table, "tensorcore", "model_ms"))
    taken = {(bq, bk) for build in catalog.TENSORCORE_BUILDS for d, bq, bk in build.shapes
             if d == 128}                                  # the H200 takes the wgmma shapes too
    assert {s for s, st in tc.status.items() if st != "not taken by this kernel"} == taken
    assert (tc.loc[list(taken)].text != "—").all()


def test_unfit_cells_name_their_bytes():
    cfg = CFG.with_(dtype="float32")
    smem = by_shape(td.smem_cells(td.model_table(cfg, H200)))
    for shape, cell in smem[smem.status == "does not fit"].iterrows():
        need = iomodel.smem_bytes(cfg.with_(block_q=shape[0], block_k=shape[1]))
        assert need > H200.smem_per_block_optin
        assert cell.text == f"no fit {need / 1024:.0f} KiB"


def test_fastest_measured_and_paper_marks():
    g = rng(1200)
    table = td.model_table(CFG, H200)
    teaching = table[table.kernel == "teaching"]
    times = g.uniform(0.1, 2.0, len(teaching))
    measured = [{"kernel": "teaching", "block_q": int(q), "block_k": int(k), "median_ms": float(t)}
                for q, k, t in zip(teaching.block_q, teaching.block_k, times)]
    merged = td.with_measured(table, measured)
    fast = td.fastest(merged, "teaching", "measured_ms")
    best = int(np.argmin(times))
    assert (fast.block_q, fast.block_k) == (teaching.block_q.iloc[best],
                                            teaching.block_k.iloc[best]), SEED
    cells = by_shape(td.time_cells(merged, "teaching", "measured_ms", fast))
    starred = [s for s, m in cells.marks.items() if "★" in m]
    paper = tilemodel.paper_tiles(CFG, H200)
    triangles = [s for s, m in cells.marks.items() if "▲" in m]
    assert starred == [(fast.block_q, fast.block_k)]
    assert triangles == [(paper.block_q, paper.block_k)]
    assert td.fastest(merged, "tensorcore", "measured_ms") is None


def test_heatmap_validates_and_carries_the_click_selection():
    cells = td.waves_cells(td.model_table(CFG, H200), CFG, H200)
    spec = charts_tiles.tile_heatmap(cells, "waves", "waves").to_dict()      # validates
    cell = next(p for p in spec["params"] if p["name"] == charts_tiles.SELECTION)
    assert cell["select"] == {"type": "point", "clear": False,
                              "fields": ["block_q", "block_k"], "on": "click"}
    assert spec["resolve"] == {"scale": {"color": "independent"}}
    # a heatmap with nothing measured still draws its grid and its words
    empty = td.time_cells(td.model_table(CFG, H200), "teaching", "measured_ms")
    assert set(empty.text) == {"not timed"}
    charts_tiles.tile_heatmap(empty, "t", "ms", log=True).to_dict()


def test_pyramid_has_every_level_with_sources():
    levels = td.pyramid_table(H200)
    assert list(levels.level[:4]) == ["registers", "shared memory / L1", "L2 cache",
                                      "device memory (HBM or GDDR)"]
    assert levels.level.iloc[4].startswith("host memory (PCIe")
    known = levels.capacity_bytes.iloc[:4].astype(float)
    # each level at least as large as the one above (registers and L1 are both 256 KiB an SM)
    assert (np.diff(known) >= 0).all() and known.iloc[3] > 1000 * known.iloc[2]
    assert all(levels["capacity source"]) and all(levels["bandwidth source"])
    spec = charts_tiles.pyramid_chart(levels).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert [d["level"] for d in data] == list(levels.level)
    assert "4.8 TB/s" in json.dumps(data)                       # the H200's HBM3e


def test_placement_agrees_with_the_io_models_other_counts():
    places = td.placement_table(CFG)
    naive = places[places.algorithm == "naive"].set_index("what").bytes
    assert naive["S = QKᵀ (all of it)"] == iomodel.naive_hbm(CFG).parts["write S"]
    teach = places[places.algorithm == "flash, teaching kernel"]
    assert teach[teach["where"] == "shared memory"].bytes.sum() == iomodel.smem_bytes(CFG)
    tc = places[places.algorithm == "flash, tensor core (mma.sync)"]
    assert tc[tc["where"] == "shared memory"].bytes.sum() == iomodel.smem_bytes(CFG, "mma.sync")
    assert set(tc["where"]) == {"shared memory", "registers"}
    charts_tiles.placement_chart(places).to_dict()


@pytest.mark.parametrize("cfg", [CFG, engine.AttentionConfig(seq_q=1, seq_k=1),
                                 engine.AttentionConfig(batch=8, heads=16, seq_q=16384,
                                                        seq_k=16384)])
def test_placement_bars_start_inside_their_log_axis(cfg):
    """The log axis has no zero: its domain is set, starts above 0 and below every array, and
    every bar runs from that start (not from Vega-Lite's 0, which draws no bar at all), not
    stacked; its tick labels are powers of two in the project's binary byte units."""
    places = td.placement_table(cfg)
    spec = charts_tiles.placement_chart(places).to_dict()
    x = spec["encoding"]["x"]
    low, high = x["scale"]["domain"]
    assert x["scale"]["type"] == "log" and x["stack"] is None
    assert 0 < low < places.bytes.min() and places.bytes.max() <= high
    assert spec["encoding"]["x2"] == {"datum": low}
    data = next(iter(spec["datasets"].values()))
    assert len(data) == len(places) and all(row["bytes"] > low for row in data)
    ticks = x["axis"]["values"]
    assert low <= ticks[0] and ticks[-1] <= high and 2 <= len(ticks) <= 6
    assert all(np.log2(t) == round(np.log2(t)) for t in ticks)
    assert "' KiB'" in x["axis"]["labelExpr"] and "' GiB'" in x["axis"]["labelExpr"]


def test_byte_axis_domain_is_never_zero_and_never_touches_an_array():
    sizes = pd.Series([100.0, 256.0, 1e9])
    assert charts_tiles.byte_axis_domain(sizes) == [64.0, 2.0 ** 30]
    assert charts_tiles.byte_axis_domain(pd.Series([8.0])) == [4.0, 8.0]
    assert charts_tiles.byte_axis_domain(pd.Series([], dtype=float)) == [1.0, 2.0]
    # binary round sizes: 1 KiB, 32 KiB, 1 MiB, 32 MiB, 1 GiB; over a wider range one per 2^10
    assert charts_tiles.byte_ticks([64.0, 2.0 ** 30]) == [2.0 ** e for e in (10, 15, 20, 25, 30)]
    assert charts_tiles.byte_ticks([4.0, 8.0]) == [4.0, 8.0]
    assert charts_tiles.byte_ticks([1.0, 2.0 ** 40]) == [2.0 ** e for e in (0, 10, 20, 30, 40)]


def test_recorded_grid_rows_keep_device_date_and_pick_the_closest_config():
    rows = td.recorded_rows(recorded.load_tile_grids(FIXTURES))
    assert set(rows.device) == {"Test fixture GPU (not a measurement)"}
    assert set(rows.date) == {"2000-01-01"}
    configs = td.recorded_configs(rows)
    assert len(configs) == 1
    cfg, gpu, table = td.recorded_view(rows, configs[0])
    assert (cfg.seq_q, cfg.head_dim, cfg.dtype) == (256, 64, "float16")
    assert gpu is H200                      # a device not among the profiles: the H200's
    fast = td.fastest(table, "tensorcore", "measured_ms")
    assert (fast.block_q, fast.block_k, fast.measured_ms) == (128, 64, 0.010)


def test_the_repositorys_recorded_grid_is_labelled():
    files = recorded.load_tile_grids()
    assert files, "benchmarks/results/ holds no tiles_*.json"
    for f in files:
        assert f["date"] and f["device"]["name"] and f["method"]
        assert {r["kernel"] for r in f["results"]} <= {"teaching", "tensorcore"}
        if f.get("derived_from"):
            assert (Path(recorded.BENCH_DIR).parent.parent / f["derived_from"]).exists()
            assert f.get("note")


def test_long_titles_wrap_to_their_plot_width_in_dejavu():
    """A title longer than its plot is cut into lines that fit it at DejaVu Sans's widths
    (0.6 em a character), so it cannot widen the chart past its column; a short one stays
    one string."""
    size = style.FONT["chart_title"]
    assert style.wrap_title("waves", 290) == "waves"
    g = rng(1300)
    words = ["HBM", "bytes", "moved", "(K", "and", "V", "once", "per", "query", "tile)"]
    for width in (120, 290, 600):
        text = " ".join(g.choice(words, size=12))
        lines = style.wrap_title(text, width)
        lines = [lines] if isinstance(lines, str) else lines
        assert " ".join(lines) == text
        assert max(len(line) for line in lines) * 0.6 * size <= max(width, 12 * 0.6 * size)
    cells = td.waves_cells(td.model_table(CFG, H200), CFG, H200)
    heat = charts_tiles.tile_heatmap(cells, "HBM bytes moved (K and V once per query tile)", "MB")
    title = heat.to_dict()["title"]
    assert isinstance(title, list) and len(title) == 2
    assert all(len(line) * 0.6 * size <= style.HALF_COLUMN for line in title)
    short = charts_tiles.tile_heatmap(cells, "Resident blocks per SM (model)", "blocks")
    assert short.to_dict()["title"] == "Resident blocks per SM (model)"
    pyramid = charts_tiles.pyramid_chart(td.pyramid_table(H200)).to_dict()["title"]
    assert all(len(line) * 0.6 * size <= charts_tiles.PYRAMID_WIDTH for line in pyramid)


# ---- the exercises answer for the student's own config and profile --------------------
def test_try_this_answers_for_the_students_config_not_the_recorded_grid():
    """Without a GPU the recorded grid (tests/data/tiles_fixture.json: N = 256, d = 64,
    float16) is another config; "Try this 1" answers first from the model table the heatmaps
    draw for the sidebar's config and profile, and labels the recorded grid's answer as its
    own."""
    if ON_GPU:
        pytest.skip("a GPU times the shapes live instead")
    cfg = engine.AttentionConfig(seq_q=1024, seq_k=1024, head_dim=128, dtype="float32")
    at = open_page("tile_sizes", backend="numpy", profile="T4", seq_q=1024, seq_k=1024,
                   head_dim=128, dtype="float32")
    assert_clean(at)
    expected = td.fastest_answer(td.model_table(cfg, PROFILES["T4"]),
                                 tilemodel.paper_tiles(cfg, PROFILES["T4"]),
                                 "model, CPU emulation of Tesla T4")
    answers = [m.value for e in at.expander for m in e.markdown]
    assert expected in answers
    assert answers.index(expected) < next(i for i, a in enumerate(answers)
                                          if "recorded on" in a)
    model = chart_data(at, "teaching kernel: model time")
    fits = model[model.status == "fits"]
    best = fits.value.min()
    assert f"fastest time, {td._ms_text(best)}" in expected
    assert "32 × 32 has no model time (its tiles do not fit" in expected


def test_fastest_answer_names_every_tie_and_the_papers_model_time():
    cfg = engine.AttentionConfig(seq_q=16, seq_k=16, head_dim=64, dtype="float16")
    table = td.model_table(cfg, H200)
    paper = tilemodel.paper_tiles(cfg, H200)
    text = td.fastest_answer(table, paper, "model, H200")
    teaching = table[(table.kernel == "teaching") & table.model_ms.notna()]
    ties = teaching[teaching.model_ms <= teaching.model_ms.min() * 1.001]
    assert len(ties) > 1                      # one query tile for every block_q ≥ 16
    assert f"shared by {len(ties)} shapes" in text
    for r in ties.itertuples():
        assert f"{r.block_q} × {r.block_k}" in text


def test_papers_choice_not_fitting_is_explained():
    cfg = engine.AttentionConfig(head_dim=64, dtype="float16")
    t4 = PROFILES["T4"]
    paper = tilemodel.paper_tiles(cfg, t4)
    assert (paper.block_q, paper.block_k) == (64, 128)
    note = td.paper_fit_note(cfg, t4)
    need = iomodel.smem_bytes(cfg.with_(block_q=64, block_k=128))
    assert need > t4.smem_per_block_optin
    assert f"{need / 1024:.1f} KiB" in note and "float32" in note and "S_ij" in note
    assert td.paper_fit_note(cfg, H200) == ""          # 64 × 128 fits the H200's 227 KiB
    at = open_page("tile_sizes", backend="numpy", profile="T4", head_dim=64, dtype="float16")
    assert_clean(at)
    assert f"▲ {note}" in texts(at)


@pytest.mark.parametrize("size", [charts_tiles.HEATMAP_SIZE, 250])
def test_marks_sit_inside_their_cell(size):
    """★ and ▲ are part of their cell's one centred label (never a second text that could
    leave the cell or overlap the first), which fits the cell; where the figure does not fit
    beside them, the marks stay and the figure gives way."""
    cells = charts_tiles.cell_colors(td.smem_cells(td.model_table(CFG, H200)), size=size)
    width = size / cells.block_k.nunique()
    for r in cells.itertuples():
        if r.marks:
            assert r.label.endswith(r.marks), r
        assert legible.text_width(r.label, charts_tiles.LABEL_PX) <= width - 4 or \
            r.label == r.marks, r
    layers = charts_tiles.tile_heatmap(td.smem_cells(td.model_table(CFG, H200)), "t", "KiB",
                                       size=size).to_dict()["layer"]
    assert not any(layer.get("encoding", {}).get("text", {}).get("field") == "marks"
                   for layer in layers)
    assert charts_tiles.with_marks(["128.5", "128"], "▲") == ["128.5 ▲", "128 ▲", "▲"]


# ---- readable: the heatmaps' text, units and legends ------------------------------------
@pytest.mark.parametrize("profile", ["H200", "H100 SXM", "A100 40GB", "T4"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_heatmap_text_reads_on_every_cell(profile, dtype):
    """Every label and mark of every heatmap of the page reaches 4.5:1 against the colour its
    cell is drawn in (computed as Vega computes it), and fits its cell."""
    gpu = engine.PROFILES[profile]
    cfg = CFG.with_(dtype=dtype)
    table = td.model_table(cfg, gpu)
    grids = [(td.smem_cells(table), "blues", False), (td.blocks_cells(table), "greens", False),
             (td.waves_cells(table, cfg, gpu), "oranges", False),
             (td.hbm_cells(table), "purples", True),
             (td.time_cells(table, "teaching", "model_ms"), "greys", True),
             (td.time_cells(table, "tensorcore", "model_ms"), "greys", True)]
    for cells, scheme, log in grids:
        for size in (charts_tiles.HEATMAP_SIZE, 250):               # talk mode draws 250 px
            drawn = charts_tiles.cell_colors(cells, scheme, log, size)
            worst = min(legible.contrast(i, f) for i, f in zip(drawn.ink, drawn.fill))
            assert worst >= legible.MIN_CONTRAST, (profile, dtype, scheme, worst)
            wide = [t for t in drawn.label if legible.text_width(t, charts_tiles.LABEL_PX)
                    > size / 5 - 4]
            assert not wide, (scheme, size, wide)


def test_dark_cells_get_white_text_and_light_cells_black():
    table = td.model_table(CFG, H200)
    drawn = charts_tiles.cell_colors(td.time_cells(table, "teaching", "model_ms"), "greys",
                                     log=True)
    fits = drawn[drawn.status == "fits"]
    slowest, fastest = fits.loc[fits.value.idxmax()], fits.loc[fits.value.idxmin()]
    assert slowest.fill == "#1e1e1e" and slowest.ink == legible.LIGHT_INK
    assert fastest.fill == "#e2e2e2" and fastest.ink == legible.DARK_INK


def test_unfit_labels_shorten_to_their_cell_and_keep_the_bytes_in_the_tooltip():
    cfg = CFG.with_(dtype="float32")
    cells = td.smem_cells(td.model_table(cfg, engine.PROFILES["T4"]))
    drawn = charts_tiles.cell_colors(cells, "blues")
    unfit = drawn[drawn.status == "does not fit"]
    assert len(unfit) and set(unfit[unfit.marks == ""].label) == {"no fit"}
    # a marked cell keeps its mark, the words giving way where both do not fit
    assert set(unfit[unfit.marks != ""].label) <= {"no fit ▲", "▲", "no fit ★", "★"}
    assert all(t.startswith("no fit ") and t.endswith(" KiB") for t in unfit.text)
    spec = charts_tiles.tile_heatmap(cells, "smem", "KiB").to_dict()
    tips = [t for layer in spec["layer"] for t in layer.get("encoding", {}).get("tooltip", [])]
    assert {"field": "text", "type": "nominal", "title": "KiB"} in tips


@pytest.mark.parametrize("profile", ["H200", "T4"])
def test_one_unit_per_time_grid_and_round_legend_labels(profile):
    """A time grid is in ms or in µs throughout, named once in its legend; the legend's
    labels are round numbers, never a ten-digit float."""
    gpu = engine.PROFILES[profile]
    for cfg in (CFG, CFG.with_(seq_q=8192, seq_k=8192, batch=4)):
        cells = td.time_cells(td.model_table(cfg, gpu), "teaching", "model_ms")
        unit = set(cells.unit)
        assert unit in ({"ms"}, {"µs"})
        values = cells.value.dropna()
        assert values.max() >= 1 or unit == {"µs"}
        assert all(" " not in t for t in cells.text[cells.status == "fits"])   # no unit per cell
        spec = charts_tiles.tile_heatmap(cells, "t", "ms", log=True).to_dict()
        legend = next(layer["encoding"]["color"] for layer in spec["layer"]
                      if layer["encoding"].get("color", {}).get("field") == "value")
        assert legend["title"] == unit.pop()
        assert legend["legend"]["format"] == ",.3~r"
        for v in legend["legend"].get("values", []):
            assert len(f"{v:g}") <= 6, v


def test_hbm_grid_is_in_one_byte_unit():
    cells = td.hbm_cells(td.model_table(CFG.with_(seq_q=1, seq_k=1), H200))
    assert len(set(cells.unit)) == 1
    big = td.hbm_cells(td.model_table(CFG.with_(seq_q=65536, seq_k=65536), H200))
    assert set(big.unit) == {"GiB"}
