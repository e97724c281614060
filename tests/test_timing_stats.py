"""The statistics of a CPU timing, on made-up calls and a made-up clock (never the real one):
the spread, the warning when it is wide, when the adaptive timing stops, and that several
algorithms are timed interleaved."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.cpu.timing import benchmark_many, time_calls
from engine.model.timing_stats import NOISY_SPREAD, CallBudget, spread_of
import seeds


def test_spread_is_the_interquartile_range_over_the_median():
    s = spread_of([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.median_ms, s.q1_ms, s.q3_ms) == (3.0, 2.0, 4.0)
    assert s.iqr_ms == 2.0 and s.iqr_rel == pytest.approx(2 / 3) and s.noisy
    assert s.p10_ms == pytest.approx(1.4) and s.p90_ms == pytest.approx(4.6)


def test_one_slow_call_does_not_make_a_timing_noisy():
    gen = seeds.rng(31)
    calls = list(1.0 + 0.01 * gen.standard_normal(30)) + [50.0]
    s = spread_of(calls)
    assert not s.noisy and s.iqr_rel < 0.05, f"seed {seeds.SEED}"
    assert s.median_ms == pytest.approx(1.0, abs=0.02), f"seed {seeds.SEED}"


def test_warning_triggers_above_the_limit_only():
    # quartiles 1.0 and 1.0 + w of a median 1.0 + w/2: IQR/median = w / (1 + w/2)
    def calls(w):
        return [1.0, 1.0, 1.0 + w, 1.0 + w]
    just_below = 2 * NOISY_SPREAD / (2 - NOISY_SPREAD) * 0.99
    just_above = 2 * NOISY_SPREAD / (2 - NOISY_SPREAD) * 1.01
    assert spread_of(calls(just_below)).iqr_rel == pytest.approx(NOISY_SPREAD, rel=0.02)
    assert not spread_of(calls(just_below)).noisy
    assert spread_of(calls(just_above)).noisy
    assert not spread_of([2.0]).noisy and spread_of([2.0]).iqr_rel == 0.0
    with pytest.raises(ValueError):
        spread_of([])


def test_budget_needs_enough_calls_and_time_or_stops_slow_calls_early():
    b = CallBudget(min_calls=15, budget_s=0.3, floor_calls=5, max_s=2.0, max_calls=100)
    assert b.done(14, 10.0)                                 # slow: 5 calls and 2 s are in
    assert not b.done(15, 0.29) and b.done(15, 0.3)         # fast calls: the time budget
    assert not b.done(4, 5.0) and b.done(5, 2.0)            # slow calls: a floor of 5
    assert not b.done(10, 1.9) and b.done(100, 0.01)        # never past max_calls


class FakeClock:
    """A clock that advances `step` seconds per reading of a call's end."""

    def __init__(self, step: float):
        self.t, self.step, self.reads = 0.0, step, 0

    def __call__(self) -> float:
        self.reads += 1
        if self.reads % 2 == 0:
            self.t += self.step
        return self.t


def test_adaptive_calls_stop_at_the_budget_and_interleave():
    order = []
    calls = [lambda: order.append("naive"), lambda: order.append("flash")]
    b = CallBudget(min_calls=15, budget_s=0.3, floor_calls=5, max_s=2.0, warmup=2)
    # about 1 ms a call (2**-10 s, exact in binary): 15 rounds are not yet 0.6 s (the budget
    # of two algorithms); 308 rounds are the first that reach it
    times, warm = time_calls(calls, None, None, b, clock=FakeClock(2**-10),
                             wall=FakeClock(2**-10))
    assert warm == 2 and len(times[0]) == len(times[1]) == 308
    assert np.allclose(times[0], 1000 * 2**-10) and np.allclose(times[1], 1000 * 2**-10)
    timed = order[4:]                                   # after two warm-up rounds
    assert timed[:6] == ["naive", "flash", "flash", "naive", "naive", "flash"]
    # 1 s a call: the floor of 5 rounds, once 2 × max_s is spent
    slow, _ = time_calls(calls, None, None, b, clock=FakeClock(1.0), wall=FakeClock(1.0))
    assert len(slow[0]) == 5
    # the budget counts wall-clock time, the samples the clock's: a busy machine (wall time
    # 10× the CPU time) ends the budget sooner, each call still timed by its CPU time
    busy, _ = time_calls(calls, None, None, b, clock=FakeClock(2**-10),
                         wall=FakeClock(10 * 2**-10))
    assert len(busy[0]) == 31 and np.allclose(busy[0], 1000 * 2**-10)
    fixed, warm = time_calls(calls, 7, 0, b, clock=FakeClock(0.5), wall=FakeClock(0.5))
    assert warm == 0 and [len(t) for t in fixed] == [7, 7]


def test_benchmark_keeps_its_fields_and_adds_the_spread():
    cfg = engine.AttentionConfig(seq_q=32, seq_k=32, head_dim=16, block_q=16, block_k=16)
    t = engine.benchmark(cfg, backend="numpy", reps=6, warmup=0)
    assert t.reps == len(t.samples_ms) == 6 and t.backend == "numpy" and t.warmup == 0
    s = spread_of(t.samples_ms)
    assert (t.median_ms, t.p10_ms, t.p90_ms) == (s.median_ms, s.p10_ms, s.p90_ms)
    assert (t.q1_ms, t.q3_ms, t.iqr_rel, t.noisy) == (s.q1_ms, s.q3_ms, s.iqr_rel, s.noisy)
    assert "6 calls" in t.method and "Not a GPU figure" in t.method
    adaptive = engine.benchmark(cfg, backend="numpy")
    assert adaptive.reps >= CallBudget().min_calls and adaptive.warmup == CallBudget().warmup
    naive, flash = benchmark_many(cfg, ["naive", "flash"], reps=4, warmup=1)
    assert (naive.algorithm, flash.algorithm) == ("naive", "flash")
    assert naive.reps == flash.reps == 4 and "interleaved" in naive.method


def test_timing_runs_on_one_blas_thread_and_restores_the_count():
    from engine.cpu import blas_threads
    before = blas_threads.blas_threads()
    if before is None:
        pytest.skip(f"no OpenBLAS found to set: {blas_threads.blas_name()}")
    with blas_threads.one_blas_thread():
        assert blas_threads.blas_threads() == 1
        with blas_threads.one_blas_thread():        # overlapping timings (two sessions)
            assert blas_threads.blas_threads() == 1
        assert blas_threads.blas_threads() == 1     # the outer one still runs
    assert blas_threads.blas_threads() == before
    t = engine.benchmark(engine.AttentionConfig(seq_q=16, seq_k=16, head_dim=16, block_q=16,
                                                block_k=16), backend="numpy", reps=2)
    assert "one OpenBLAS thread" in t.method and "time.thread_time" in t.method
    assert blas_threads.blas_threads() == before
