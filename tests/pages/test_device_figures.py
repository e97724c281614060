"""Each page prints a device figure with one value: the one formatter of engine.model.units
(sizes in KiB/MiB/GiB, rates in GB/s and TB/s). A figure written another way (the H200's L2
as 62.9 MB or 60 MB, its memory as 141 GiB or 151 GB, its bandwidth as 4,800 GB/s) shows as a
second value of the same figure. The Decoding page draws one HBM floor and never shows a
fraction of it above 100% without saying why."""
from __future__ import annotations

import json
import re

import pytest

from engine.model import units
from engine.model.devices import PROFILES
from app.features.decoding import floor as decode_floor
from app.features.decoding.data import recorded_table
from engine.facade import recorded
from apptest_helpers import ON_GPU, PAGES, assert_clean, open_page, specs, texts

NUMBER = r"(\d[\d,]*(?:\.\d+)?)[\s\u00a0]?"
SIZE = re.compile(NUMBER + r"(B|KiB|MiB|GiB|TiB|kB|KB|MB|GB|TB)\b(?!/s)")
RATE = re.compile(NUMBER + r"(GB/s|TB/s)")
SCALE = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "kB": 1e3, "KB": 1e3,
         "MB": 1e6, "GB": 1e9, "TB": 1e12, "GB/s": 1e9, "TB/s": 1e12}


def shown(at) -> str:
    """Every text of the page: markdown, captions, alerts, metrics with their help, tables and
    the charts' specs."""
    parts = [texts(at)]
    parts += [m.proto.help for m in at.metric]
    parts += [df.value.to_string() for df in at.dataframe]
    parts += [json.dumps(spec, ensure_ascii=False) for spec in specs(at)]
    return "\n".join(parts)


def renderings(text: str, pattern: re.Pattern, value: float, tolerance: float) -> set[str]:
    """The ways `text` writes a quantity within `tolerance` (relative) of `value`."""
    out = set()
    for m in pattern.finditer(text):
        q = float(m[1].replace(",", "")) * SCALE[m[2]]
        if abs(q - value) <= tolerance * value:
            out.add(f"{m[1]} {m[2]}")
    return out


def assert_one_value_per_figure(text: str, gpu):
    for name, value in (("L2", gpu.l2_bytes), ("memory", gpu.memory_bytes)):
        # 60 MB lies 4.6% from 60 MiB, 141 GiB 0.9% from the H200's 139.8 GiB
        seen = renderings(text, SIZE, value, 0.05)
        assert seen <= {units.format_bytes(value)}, (name, seen)
    seen = renderings(text, RATE, gpu.hbm_gbps * 1e9, 0.01)
    assert seen <= {units.format_gbps(gpu.hbm_gbps)}, ("bandwidth", seen)


def test_the_checker_catches_the_old_figures():
    h200 = PROFILES["H200"]
    for wrong in ("L2 (62.9 MB)", "L2 cache (NVIDIA H200: 60 MB)", "NVIDIA H200: 141 GiB",
                  "151 GB of memory", "at 4,800 GB/s (datasheet)"):
        with pytest.raises(AssertionError):
            assert_one_value_per_figure(wrong, h200)
    assert_one_value_per_figure("60 MiB L2, 139.8 GiB, 4.8 TB/s (datasheet), 4.3 TB/s copy",
                                h200)


@pytest.mark.skipif(ON_GPU, reason="the live GPU's figures, not the H200 profile's")
@pytest.mark.parametrize("page", PAGES)
def test_every_page_prints_each_h200_figure_one_way(page):
    at = open_page(page, profile="H200")
    assert_clean(at)
    assert_one_value_per_figure(shown(at), PROFILES["H200"])


@pytest.mark.skipif(ON_GPU, reason="the live GPU's figures, not the profile's")
@pytest.mark.parametrize("page", ["overview", "timings", "decoding"])
def test_t4_figures_one_way(page):
    at = open_page(page, profile="T4", dtype="float16")
    assert_clean(at)
    assert_one_value_per_figure(shown(at), PROFILES["T4"])


def test_overview_lists_every_figure_with_its_kind():
    at = open_page("overview", profile="H200")
    table = next(df.value for df in at.dataframe if "kind" in df.value.columns)
    rows = table.set_index("figure")
    if not ON_GPU:
        assert rows.loc["L2 cache", "value"] == "60 MiB"
        assert rows.loc["L2 cache", "kind"] == "CUDA attribute"
        assert rows.loc["memory bandwidth", "kind"] == "datasheet"
        assert rows.loc["copy bandwidth (read + written)", "kind"] == "measured"
    assert set(table.kind) <= {"datasheet", "CUDA attribute", "CUDA guide", "measured"}


# ---- the Decoding page's one floor ---------------------------------------------------------
H200 = PROFILES["H200"]


def test_fraction_above_one_is_capped_and_explained():
    assert decode_floor.fraction_text(0.873, 2**30, H200) == "87% of the HBM floor"
    past = decode_floor.fraction_text(1.077, 4 * 2**30, H200)
    assert "faster than the HBM floor" in past and "shown as 100%" in past
    assert "larger than the 60 MiB L2" in past
    small = decode_floor.fraction_text(1.2, 8 * 2**20, H200)
    assert "8 MiB" in small and "fit in the 60 MiB L2" in small


def test_recorded_fractions_use_the_one_floor():
    """An older H200 sweep (kept in lab/records) took its floor at the copy bandwidth it
    measured, 4.3 TB/s, against which PyTorch passed 1; the page recomputes every fraction
    against the datasheet's 4.8 TB/s and says so. The recorded sweep uses that floor itself."""
    older = recorded.BENCH_DIR.parents[1] / "lab" / "records" / "decode_h200_2026-11-23.json"
    files = [{**recorded.load_file(older), "file": older.name}]
    table = recorded_table(files, H200)
    assert max(r["floor_fraction"] for f in files for r in f["results"]) > 1      # 1.077
    assert table.floor_fraction.max() < 1
    rows = table[table["shape"] == table["shape"].iloc[0]]
    note = decode_floor.recorded_floor_note(files[0], rows, H200)
    assert "4.8 TB/s (datasheet)" in note and "4.3 TB/s" in note and "recomputed" in note
    current = [f for f in recorded.load_decode_benchmarks(recorded.BENCH_DIR)
               if f["device"]["name"] == H200.name]
    assert current and all("recomputed" not in decode_floor.recorded_floor_note(f, rows, H200)
                           for f in current)
    assert recorded_table(current, H200).floor_fraction.max() < 1


def test_decoding_page_shows_one_floor():
    at = open_page("decoding", profile="H200")
    assert_clean(at)
    text = shown(at)
    fractions = [int(p) for p in re.findall(r"(\d+)% of the HBM floor", text)]
    assert all(p <= 100 for p in fractions) or "faster than the HBM floor" in text
    if not ON_GPU:
        assert "at 4.8 TB/s (datasheet)" in text and "4,800 GB/s" not in text
