"""The Kernel page's Hopper section (app/features/kernel/hopper*.py, warp_split.py): the model
of the wgmma kernel's pipeline (ring stages, phases, releases, turns, how far the producer runs
ahead), the persistent walk read from recorded schedules against the kernel's rule, who writes
O under split-Q and split-K, and through AppTest the section on a Hopper and a non-Hopper
profile."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import engine

from app.core.results_dir import BENCH_DIR_ENV
from app.features.kernel import hopper_charts, hopper_pipeline as hp, hopper_walk as hw
from app.features.kernel import warp_split
from apptest_helpers import ON_GPU, assert_clean, open_page, player, specs, texts, url

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
WGMMA_RECORDS = ("schedule_h200_4_wgmma.json", "schedule_h200_3_causal_wgmma.json")
RUNS = [4, 1, 5, 3]         # a run of one key tile releases Q_i after its only S


def test_kernel_shape_is_read_from_the_source():
    shape = hp.kernel_shape()
    assert (shape.stages, shape.q_stages, shape.consumers) == (2, 2, 2)
    text = hp.KERNEL.read_text().replace("#define KV_STAGES 2", "#define KV_STAGES 3")
    assert hp.kernel_shape(text).stages == 3
    # a build's own buffers: the launcher's (engine.model.iomodel.wgmma_ring)
    wide = engine.AttentionConfig(head_dim=128, block_q=128, block_k=128, dtype="float16")
    assert hp.build_shape(wide) == hp.KernelShape(stages=3, q_stages=1, consumers=2)
    assert hp.build_shape(wide.with_(head_dim=64)) == hp.KernelShape(2, 2, 2)
    with pytest.raises(ValueError):
        hp.kernel_shape("no constants here")


@pytest.mark.parametrize("stages, q_stages", [(2, 2), (3, 2), (3, 1)])
@pytest.mark.parametrize("turns", [True, False])
def test_ring_stages_wrap_and_phases_flip(stages, q_stages, turns):
    shape = hp.KernelShape(stages=stages, q_stages=q_stages, consumers=2)
    p = hp.simulate(RUNS, turns, shape)
    loads = sorted((s for s in p.spans if s.kind == "K"), key=lambda s: s.use)
    assert [s.use for s in loads] == list(range(sum(RUNS)))
    for s in loads:
        assert (s.stage, s.phase) == (s.use % stages, (s.use // stages) & 1)
    # the phase of a stage flips at every wrap of the ring
    for st in range(stages):
        phases = [s.phase for s in loads if s.stage == st]
        assert phases == [k & 1 for k in range(len(phases))]
    # each wait on a "full" barrier passes after that phase completed and before the next
    # one did: waiting on the parity alone would pass at the same moment
    for agent, bar, stage, phase_no, parity, since, passed in p.waits:
        assert parity == phase_no & 1
        assert p.completed[(bar, stage, phase_no)] <= passed + 1e-9
        later = p.completed.get((bar, stage, phase_no + 1))
        assert later is None or later > passed


@pytest.mark.parametrize("turns", [True, False])
def test_no_stage_is_overwritten_before_every_consumer_released_it(turns):
    shape = hp.kernel_shape()
    p = hp.simulate(RUNS, turns, shape)
    for kind, bar in (("K", "k_empty"), ("V", "v_empty")):
        copies = {s.use: s for s in p.spans if s.kind == kind}
        reads = {}          # use -> end of the last product that read it
        for s in p.spans:
            if s.row == "tensor cores" and s.kind == ("S" if kind == "K" else "PV"):
                reads[s.use] = max(reads.get(s.use, 0.0), s.end)
        for u, copy in copies.items():
            if u < shape.stages:
                continue
            before = u - shape.stages
            released = p.completed[(bar, copy.stage, before // shape.stages)]
            assert released >= reads[before] - 1e-9, "released before its reader was done"
            assert copy.start >= released - 1e-9, f"{kind} use {u} overwrote use {before}"


def test_the_producer_is_never_more_than_stages_ahead():
    shape = hp.kernel_shape()
    p = hp.simulate(RUNS, True, shape)
    k_done = sorted(s.end for s in p.spans if s.kind == "S" and s.row == "tensor cores"
                    and s.lane == "consumer 0")
    for s in p.spans:
        if s.kind == "K" and s.use >= shape.stages:
            # consumer 0 finished S of use u - STAGES before the copy of use u starts
            assert s.start >= k_done[s.use - shape.stages] - 1e-9
    held = [s for s in p.spans if s.kind == "held" and s.lane.endswith(" K")]
    for t in sorted({s.start for s in held}):
        at_once = sum(1 for s in held if s.start <= t < s.end)
        assert at_once <= shape.stages


def test_the_two_consumers_take_turns_on_the_tensor_cores():
    p = hp.simulate(RUNS, True)
    products = sorted((s for s in p.spans if s.row == "tensor cores"), key=lambda s: s.start)
    owners = [s.lane for s in products]
    # the block's first S of each consumer, then pairs (S_ij, P V) alternating
    assert owners[:2] == ["consumer 0", "consumer 1"]
    pairs = owners[2:]
    assert all(pairs[k] == pairs[k + 1] for k in range(0, len(pairs) - 1, 2))
    assert all(pairs[k] != pairs[k + 2] for k in range(0, len(pairs) - 2, 2))
    # and one consumer's softmax overlaps the other's products
    soft = [s for s in p.spans if s.kind == "softmax" and s.lane == "consumer 0"]
    other = [s for s in products if s.lane == "consumer 1"]
    assert any(a.start < b.end and b.start < a.end for a in soft for b in other)


@pytest.mark.parametrize("name", WGMMA_RECORDS)
def test_recorded_walk_is_the_kernels_rule(name):
    rec = json.loads((RESULTS / name).read_text())
    assert hw.is_persistent(rec)
    got = hw.recorded_walk(rec)
    assert len(got) == len(rec["sm_id"])
    # each SM's items in start order, none overlapping the next
    for _, g in got.groupby("sm"):
        assert (g.start_us.diff().dropna() >= 0).all()
        assert (g.start_us.iloc[1:].to_numpy() >= g.end_us.iloc[:-1].to_numpy() - 1e-3).all()
    launch = hw.launch_of(rec)
    model = hw.walk_items(**launch)
    matched = hw.matched_blocks(got, model)
    assert len(matched) == launch["G"]
    assert None not in matched.values()
    assert sorted(matched.values()) == list(range(launch["G"]))


def test_recorded_walk_against_the_fixture_and_a_changed_record():
    fixture = json.loads((Path(__file__).resolve().parents[1] / "data"
                          / "schedule_fixture.json").read_text())
    assert not hw.is_persistent(fixture)          # the teaching kernel: one block per item
    got = hw.recorded_walk(fixture)
    assert got.groupby("sm").size().max() == 1
    rec = json.loads((RESULTS / WGMMA_RECORDS[0]).read_text())
    swapped = dict(rec, block_q_tile=list(rec["block_q_tile"]))
    swapped["block_q_tile"][0], swapped["block_q_tile"][1] = (rec["block_q_tile"][1],
                                                              rec["block_q_tile"][0])
    matched = hw.matched_blocks(hw.recorded_walk(swapped), hw.walk_items(**hw.launch_of(rec)))
    assert sum(v is None for v in matched.values()) == 2
    with pytest.raises(ValueError):
        hw.recorded_walk(dict(rec, sm_id=rec["sm_id"][:-1]))


def test_walk_rule_deals_every_item_once():
    for causal, group in ((False, 1), (True, 3)):
        items = hw.walk_items(G=7, Tr=5, bh_count=4, causal=causal, bh_group=group)
        pairs = set(zip(items.q_tile, items.bh))
        assert len(pairs) == len(items) == 5 * 4
    # causal: heaviest query tiles first, rounds dealt in alternate directions
    causal = hw.walk_items(G=4, Tr=8, bh_count=1, causal=True, bh_group=1)
    by_round = causal.pivot(index="block", columns="order", values="q_tile")
    assert by_round[0].tolist() == [7, 6, 5, 4]
    assert by_round[1].tolist() == [0, 1, 2, 3]
    assert (by_round.sum(axis=1) == 7).all()


def test_split_q_writes_each_row_once_split_k_sums():
    own = warp_split.ownership(64, 64, 64, 4)
    o_q = own[(own.scheme == "FA2: split-Q") & (own.matrix == "O_i")]
    assert o_q.groupby("row").owner.nunique().eq(1).all()
    assert o_q.owner.nunique() == 4
    o_k = own[(own.scheme == "FA1: split-K") & (own.matrix == "O_i")]
    assert set(o_k.owner) == {"warps 0–3, summed"}
    s_k = own[(own.scheme == "FA1: split-K") & (own.matrix != "O_i")]
    assert s_k.groupby("col").owner.nunique().eq(1).all()
    assert warp_split.exchange(64, 64, 4) == {"split-Q": 0,
                                              "split-K": 2 * 4 * (64 * 64 + 128) * 4}


def test_split_q_citations_are_found_in_the_sources(tmp_path):
    found = warp_split.citations()
    assert len(found) == len(warp_split.MARKERS)
    for c in found:
        assert c.says in c.text and c.line > 0
    (tmp_path / "teaching").mkdir()
    (tmp_path / "teaching" / "flash_teaching.cu").write_text("// nothing\n")
    assert warp_split.citations(tmp_path) == []


def test_pipeline_table_fills_the_lanes_and_paints():
    p = hp.simulate([4, 4, 3])
    shape = p.shape
    table = hopper_charts.pipeline_table(p.spans, shape)
    lanes = set(table.lane)
    assert lanes <= set(hopper_charts.lane_order(shape))
    assert {"stage 0 K", "stage 1 V", "Q buffer 1", "consumer 1 · tensor cores"} <= lanes
    assert set(table.paint) <= set(hopper_charts.PAINT)
    assert set(hopper_charts.HELD) <= set(table.paint)         # both phases of the ring


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its own device")
def test_kernel_page_shows_the_hopper_section_on_h200(monkeypatch, tmp_path):
    for name in WGMMA_RECORDS:
        shutil.copy(RESULTS / name, tmp_path / name)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    at = open_page("kernel", profile="H200")
    assert_clean(at)
    assert "Hopper: the wgmma kernel's pipeline" in [h.value for h in at.subheader]
    body = texts(at)
    assert "runs only on Hopper" not in body
    assert "ring of 2 stages" in body
    titles = [json.dumps(s.get("title")) for s in specs(at)]
    assert sum("Recorded on NVIDIA H200, 2026-11-23" in t for t in titles) >= 2
    assert "gives 132 of the 132 SMs' walks exactly" in body
    pipeline = player(at)                           # played in the browser: Play, a cursor
    assert pipeline["spec"]["kind"] == "lanes" and "(model)" in pipeline["spec"]["title"]
    wrap = pipeline["spec"]["frames"][pipeline["start"]]
    assert "K_2 (run 0) → stage 0" in wrap["label"]             # opens where the ring wraps
    assert "hopper_step" not in url(at)


@pytest.mark.skipif(ON_GPU, reason="a GPU shows its own device")
def test_kernel_page_says_plainly_the_build_needs_hopper():
    at = open_page("kernel", profile="T4")
    assert_clean(at)
    assert "Hopper: the wgmma kernel's pipeline" in [h.value for h in at.subheader]
    body = texts(at)
    assert "This build runs only on Hopper" in body
    assert "Tesla T4 lacks warpgroup MMA" in body
    assert "ring of 2 stages" in body                       # still explained
    assert "No schedule of a persistent wgmma build is recorded" in body   # the fixtures
