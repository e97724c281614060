"""Tensor-core kernel: the support check (any machine) and, on a GPU, output, lse, trace and
block schedule against float64 and NumPy references, every output poisoned before launch."""
import pytest

import engine
from engine.model import stream_k as stream_k_plan
from engine.cpu import stream_k as stream_k_emulation
from engine.recorded import schedule_of_runs
from engine.model import catalog
from engine.gpu.launchers import mma as tensorcore
from kernel_checks import (TRACE_NAMES, check_float64, check_output, check_stream_k,
                           check_trace, to_gpu)
from reference import rel_err
import seeds

RNG = seeds.rng(6267)


def config(**changes):
    base = dict(batch=1, heads=2, seq_q=128, seq_k=128, head_dim=64, block_q=64, block_k=64,
                dtype="float16", seed=int(RNG.integers(0, 2**31)))
    return engine.AttentionConfig(**{**base, **changes})


# ---- on the GPU -----------------------------------------------------------------------------
# (head_dim, block_q, block_k, seq_q, seq_k, causal, inputs): exact and ragged tiles,
# seq_q < seq_k and seq_q > seq_k under causal, one tile and many.
CASES = [
    (64, 64, 64, 256, 256, False, "normal"),
    (64, 64, 32, 300, 257, False, "rising"),
    (64, 64, 32, 300, 257, True, "rising"),
    (64, 128, 32, 200, 450, True, "normal"),
    (64, 128, 64, 1000, 1100, False, "rising"),
    (64, 128, 64, 333, 100, True, "rising"),
    (64, 64, 128, 70, 513, False, "normal"),
    (128, 64, 64, 190, 190, True, "normal"),
    (128, 128, 32, 129, 65, False, "rising"),
    (128, 128, 32, 1024, 1024, True, "normal"),
    (128, 64, 32, 1, 1, False, "normal"),
    (128, 64, 64, 500, 700, False, "rising"),
]


def run_kernel(cfg, q, k, v, trace):
    out = tensorcore.launch(cfg, to_gpu(cfg, q), to_gpu(cfg, k), to_gpu(cfg, v), trace,
                            poison=True)
    assert out["info"]["threads_per_block"] == 128
    return {name: arr.get() for name, arr in out.items() if name != "info"}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
def test_output_and_lse_match_float64(d, bq, bk, nq, nk, causal, inputs, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, batch=2, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_output(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
@pytest.mark.parametrize("d,bq,bk,nq,nk,causal,inputs", CASES)
def test_trace_matches_numpy_backend_and_float64(d, bq, bk, nq, nk, causal, inputs, dtype):
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=nq, seq_k=nk, causal=causal,
                 inputs=inputs, heads=3, dtype=dtype)
    q, k, v = engine.make_inputs(cfg)
    check_trace(cfg, q, k, v, run_kernel(cfg, q, k, v, trace=True),
                run_kernel(cfg, q, k, v, trace=False))


@pytest.mark.gpu
def test_custom_scale_and_large_logits():
    cfg = config(head_dim=64, block_q=64, block_k=32, seq_q=250, seq_k=300, scale=0.3,
                 logit_scale=20.0, causal=True)
    q, k, v = engine.make_inputs(cfg)
    got = run_kernel(cfg, q, k, v, trace=False)
    check_float64(cfg, q, k, v, got)


@pytest.mark.gpu
def test_engine_run_and_benchmark_reach_the_kernel():
    cfg = config(head_dim=64, block_q=128, block_k=64, seq_q=400, seq_k=300, causal=True,
                 inputs="rising")
    q, k, v = engine.make_inputs(cfg)
    res = engine.run(cfg, q, k, v, backend="cupy", kernel="tensorcore", trace=True)
    ref = engine.run(cfg, q, k, v, backend="numpy", trace=True)
    assert res.kernel == "tensorcore" and res.schedule is not None
    assert rel_err(res.output, ref.output) <= 2e-3
    for name in TRACE_NAMES:
        assert rel_err(getattr(res.trace, name), getattr(ref.trace, name)) <= 1e-3, name
    big = config(head_dim=128, block_q=128, block_k=32, seq_q=2048, seq_k=2048, heads=8)
    t = engine.benchmark(big, backend="cupy", kernel="tensorcore", reps=20, warmup=1)
    assert t.reps == 20 and 0 < t.median_ms and 10 < t.tflops < 1000


# ---- stream-K (the STREAM_K build) ------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("d,bq,bk,n,heads,causal", [
    (128, 128, 32, 4096, 4, True),    # the forward-parity shape: rows of 4 to 128 tiles, shares of 32
    (128, 64, 64, 1000, 2, True),     # ragged last tiles, block_q 64
    (64, 128, 64, 1100, 3, True),     # odd Tr (9): the middle level ends the line
    (64, 64, 32, 3000, 1, False),     # few items: every item cut into parts
    (128, 128, 32, 777, 3, False),
])
@pytest.mark.parametrize("dtype", catalog.MMA_SYNC.dtypes)
def test_stream_k_matches_float64_its_emulation_and_whole_items(d, bq, bk, n, heads, causal,
                                                                dtype, monkeypatch):
    """The STREAM_K build forced on (whatever the cost model says): O and lse against float64
    and the NumPy emulation of the same schedule; relaunched bit for bit (the ticket counters
    are back at 0, the merge order is fixed); against one block per item within rounding; no
    local memory."""
    monkeypatch.setattr(tensorcore, "use_stream_k", lambda *_: True)   # whatever the model says
    cfg = config(head_dim=d, block_q=bq, block_k=bk, seq_q=n, seq_k=n, heads=heads,
                 causal=causal, dtype=dtype)
    if tensorcore.chosen(cfg) is not catalog.MMA_SYNC:
        pytest.skip("another build runs this shape here")
    facts = tensorcore.kernel_facts(cfg, trace=False)
    G = int(facts["grid"].split(" × ")[0])
    assert facts["stream_k"] and "-DSTREAM_K=1" in facts["compile_options"]
    assert facts["local_bytes_per_thread"] == 0
    q, k, v = engine.make_inputs(cfg)
    check_stream_k(cfg, q, k, v, lambda: run_kernel(cfg, q, k, v, trace=False),
                   stream_k_emulation.flash(cfg, q, k, v, G, stream_k_plan.MMA_SYNC_HEAD),
                   tensorcore, monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("heads,n,causal", [(4, 4096, True), (3, 1100, False)])
def test_the_run_log_holds_every_planned_run_once(heads, n, causal):
    """The RUNS build (`python -m benchmarks.run_log_schedule`), d = 128 at 128×32: stream-K logs exactly the
    runs engine.model.stream_k.runs plans for its blocks, each cut item merged once by the block of
    its last part, on times that nest in one launch; whole items log every item once; both
    outputs within tolerance of float64."""
    cfg = config(head_dim=128, block_q=128, block_k=32, seq_q=n, seq_k=n, heads=heads,
                 causal=causal)
    q, k, v = engine.make_inputs(cfg)
    tiles = stream_k_plan.key_tiles(cfg)
    for stream_k in (True, False):
        out, log = tensorcore.record_runs(cfg, *(to_gpu(cfg, x) for x in (q, k, v)),
                                          stream_k=stream_k, warmup=1)
        check_float64(cfg, q, k, v, {"O": out["O"].get(), "lse": out["lse"].get()})
        assert out["info"]["stream_k"] is stream_k and "-DRUNS=1" in out["info"]["compile_options"]
        sched = schedule_of_runs(log)
        got = sorted(zip(sched["block"], sched["block_bh"], sched["block_q_tile"], sched["j_lo"],
                         sched["j_hi"]))
        assert all(s <= e for s, e in zip(sched["start_ns"], sched["end_ns"]))
        assert max(sched["end_ns"]) - min(sched["start_ns"]) < 10**9   # one launch, not two
        if not stream_k:
            assert sorted((bh, i, lo, hi) for _, bh, i, lo, hi in got) == sorted(
                (bh, i, 0, tiles[i]) for bh in range(cfg.bh) for i in range(cfg.Tr))
            assert set(sched["outcome"]) == {"whole"}
            continue
        G = int(out["info"]["grid"].split(" × ")[0])
        plan = stream_k_plan.runs(cfg, cfg.bh, G, stream_k_plan.MMA_SYNC_HEAD)
        assert got == sorted((b, r.bh, r.i, r.j_lo, r.j_hi) for b, runs in enumerate(plan)
                             for r in runs)
        for b, bh, i, lo, hi, outcome in zip(sched["block"], sched["block_bh"],
                                             sched["block_q_tile"], sched["j_lo"], sched["j_hi"],
                                             sched["outcome"]):
            whole = lo == 0 and hi == tiles[i]
            assert (outcome == "whole") == whole
        cut = [(bh, i) for bh, i, o in zip(sched["block_bh"], sched["block_q_tile"],
                                           sched["outcome"]) if o == "merged"]
        assert len(cut) == len(set(cut)) > 0        # each cut item merged exactly once
        for bh, i in cut:                           # and only after all its parts were posted
            parts = [(s, e, o) for s, e, b2, i2, o in zip(
                sched["start_ns"], sched["end_ns"], sched["block_bh"], sched["block_q_tile"],
                sched["outcome"]) if (b2, i2) == (bh, i)]
            merged_end = next(e for _, e, o in parts if o == "merged")
            assert all(e <= merged_end + 1000 for _, e, o in parts if o == "posted")  # 1 µs: the
            # timer's resolution


@pytest.mark.gpu
def test_the_launcher_picks_stream_k_for_a_causal_one_wave_launch():
    """B·H = 4, N = 4096, d = 128, 128×32, causal: the cost model picks the STREAM_K build,
    as many blocks as fit on the GPU at once; traced, the same config takes whole items."""
    cfg = config(head_dim=128, block_q=128, block_k=32, seq_q=4096, seq_k=4096, heads=4,
                 causal=True)
    facts = tensorcore.kernel_facts(cfg, trace=False)
    assert facts["stream_k"] and facts["local_bytes_per_thread"] == 0
    assert int(facts["grid"].split(" × ")[0]) >= tensorcore.live_gpu().sms
    assert not tensorcore.kernel_facts(cfg, trace=True)["stream_k"]


@pytest.mark.gpu
def test_the_runs_command_writes_a_schedule_the_kernel_page_reads(tmp_path):
    """`python -m benchmarks.run_log_schedule` at B·H = 2, N = 1024, causal, stream-K: a schedule file of
    "unit": "run" that engine.recorded loads and the Kernel page's table draws."""
    pytest.importorskip("pandas")       # the Kernel page's tables
    from app.features.kernel import data as kernel_data
    from engine import recorded
    from benchmarks.run_log_schedule import main
    out = tmp_path / "schedule_test_runs.json"
    assert main(["--heads", "2", "--seq-q", "1024", "--seq-k", "1024", "--causal",
                 "--order", "stream-k", "--label", "test", "--out", str(out)]) == 0
    rec = recorded.load_schedules(tmp_path)[0]
    assert rec["unit"] == "run" and rec["info"]["stream_k"] and rec["label"] == "test"
    df = kernel_data.schedule_table(rec)
    summary = kernel_data.schedule_summary(df)
    assert summary["runs"] == len(rec["block"]) >= summary["blocks"] >= tensorcore.live_gpu().sms
