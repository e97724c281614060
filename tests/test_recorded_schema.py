"""The results schema (engine.recorded.SCHEMAS): every file in benchmarks/results/ and every
fixture follows it at the current version, the loaders refuse a broken file with a message
that names the file and the field, and the recording jobs stamp what they write."""
import json
import shutil
from pathlib import Path

import pytest

from engine import recorded

ROOT = Path(__file__).resolve().parent.parent
RESULTS = sorted(recorded.BENCH_DIR.glob("*.json"))
FIXTURES = {"bench_fixture.json": "bench", "tiles_fixture.json": "tiles",
            "schedule_fixture.json": "schedule", "kernel_facts_fixture.json": "kernel_facts"}
LOADERS = {"bench": recorded.load_benchmarks, "tiles": recorded.load_tile_grids,
           "schedule": recorded.load_schedules, "kernel_facts": recorded.load_kernel_facts,
           "decode": recorded.load_decode_benchmarks}


def test_results_hold_every_kind():
    assert {recorded.kind_of(p) for p in RESULTS} == set(recorded.SCHEMAS)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_every_results_file_follows_the_schema(path):
    data = recorded.load_file(path)
    assert data["schema_version"] == recorded.SCHEMA_VERSION
    assert data["kind"] == recorded.kind_of(path)


@pytest.mark.parametrize("name,kind", FIXTURES.items())
def test_every_fixture_follows_the_schema(name, kind):
    recorded.load_file(ROOT / "tests" / "data" / name, kind)


def _broken(tmp_path, source: str, change) -> Path:
    """A copy of a committed results file, changed by change(data), in tmp_path."""
    data = json.loads((recorded.BENCH_DIR / source).read_text())
    change(data)
    path = tmp_path / source
    path.write_text(json.dumps(data))
    return path


CASES = [
    ("bench_h200_backward.json", lambda d: d.pop("schema_version"), "'schema_version' is None"),
    ("bench_h200_backward.json", lambda d: d.update(schema_version=99), "'schema_version' is 99"),
    ("bench_h200_backward.json", lambda d: d.update(kind="tiles"), "field 'kind' is 'tiles'"),
    ("bench_h200_backward.json", lambda d: d.pop("method"), "field 'method' is missing"),
    ("bench_h200_backward.json", lambda d: d["results"][3].update(median_ms="fast"),
     "field 'results[3].median_ms' should be a number, not 'fast'"),
    ("bench_h200_backward.json", lambda d: d["results"][0].update(causal=1),
     "field 'results[0].causal' should be true or false"),
    ("bench_h200_backward.json", lambda d: d.update(direction="sideways"),
     "field 'direction' should be 'forward' or 'backward'"),
    ("bench_h200_backward.json", lambda d: d["device"].pop("name"),
     "field 'device.name' is missing"),
    ("decode_h200_2026-11-28.json", lambda d: d["results"][1].pop("kv_bytes"),
     "field 'results[1].kv_bytes' is missing"),
    ("kernel_facts_h200.json", lambda d: d["facts"][0].update(blocks_per_sm=True),
     "field 'facts[0].blocks_per_sm' should be a whole number"),
    ("schedule_h200_7_causal_mma_bh4_stream_k.json", lambda d: d["j_lo"].pop(),
     "the lists block_bh, block_q_tile, sm_id, start_ns, end_ns, block, j_lo, j_hi, outcome "
     "differ in length"),
    ("schedule_h200_7_causal_mma_bh4_stream_k.json", lambda d: d.pop("outcome"),
     "field 'outcome' is missing"),
]


@pytest.mark.parametrize("source,change,message", CASES)
def test_a_broken_file_fails_with_its_name_and_field(tmp_path, source, change, message):
    path = _broken(tmp_path, source, change)
    kind = recorded.kind_of(path)
    with pytest.raises(recorded.RecordFormatError) as err:
        recorded.load_file(path)
    assert message in str(err.value) and str(path) in str(err.value)
    with pytest.raises(recorded.RecordFormatError, match=path.name):     # what the app calls
        LOADERS[kind](tmp_path)


def test_a_file_that_is_not_json_names_itself(tmp_path):
    path = tmp_path / "tiles_broken.json"
    path.write_text('{"schema_version": 1,')
    with pytest.raises(recorded.RecordFormatError, match="tiles_broken.json: not readable"):
        recorded.load_tile_grids(tmp_path)


def test_a_valid_copy_loads_and_an_empty_directory_is_empty(tmp_path):
    assert recorded.load_benchmarks(tmp_path) == [] and recorded.load_kernel_facts(tmp_path) is None
    shutil.copy(recorded.BENCH_DIR / "bench_h200_backward.json", tmp_path)
    (got,) = recorded.load_benchmarks(tmp_path, direction="backward")
    assert got["file"] == "bench_h200_backward.json" and got["results"]


def test_the_writers_stamp_the_schema():
    from benchmarks.recording import stamped
    data = stamped("decode", device={"name": "x"}, date="2000-01-01")
    assert list(data)[:2] == ["schema_version", "kind"]
    assert data["schema_version"] == recorded.SCHEMA_VERSION and data["kind"] == "decode"
