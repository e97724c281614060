"""The Tile sizes page's tables and charts (app/features/tile_sizes/: data.py, charts.py): every
cell of the heatmaps has a status, the marks sit on the right cells, the charts carry the click
selection and validate against the Vega-Lite schema, and the byte figures agree with the IO
model's other counts."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

import engine
from app.core import style
from app.features.tile_sizes import charts as charts_tiles, data as td
from engine.model import iomodel, tilemodel
from engine import recorded
from engine.model.devices import PROFILES
from engine.model import catalog
from seeds import SEED, rng

H200 = PROFILES["H200"]
FIXTURES = Path(__file__).resolve().parent / "data"
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
