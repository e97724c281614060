"""Timing of the NumPy emulation. These are CPU figures, never GPU figures.

Without a fixed number of calls the timing is adaptive (engine.model.timing_stats.CPU_BUDGET):
warm-up calls first, then calls until a budget of wall-clock time is spent, so a fast config
gets hundreds of calls and a slow one at least a few. Several algorithms of one config are
timed interleaved, call by call (the order alternating from round to round), so whatever else
slows the machine down hits all of them alike.

The calls run on one BLAS thread (engine.cpu.blas_threads: on a busy machine OpenBLAS's
threads make one call take 1 ms and the next 50 ms), and each call is timed by the CPU time
of the thread that runs it (time.thread_time), which a busy machine does not stretch: waiting
for a core is left out. Measured here with two cores and twelve runnable processes, the
medians of one config repeated agreed within 25% this way and disagreed by 4× by the wall
clock. Where the BLAS cannot be held to one thread, its work would run on threads that
thread_time does not count, so the wall clock (time.perf_counter) is used instead.
"""
from __future__ import annotations

import time
from typing import Callable

from . import backward as numpy_backward
from . import forward as numpy_backend
from . import fp8
from .blas_threads import blas_name, one_blas_thread
from ..model.config import AttentionConfig
from ..model.iomodel import peak_memory
from ..model.timing_stats import CPU_BUDGET, CallBudget, spread_of
from ..inputs import make_dout, make_inputs
from ..results import Timing

CPU_METHOD = ("CPU emulation (NumPy, float32 arithmetic){what}: {clock} around each call, "
              "run on {blas}, {warmup} warm-up call(s), {calls}{together}; the median with its "
              "interquartile range (IQR). Not a GPU figure.")
THREAD_CLOCK = ("the CPU time of the timing thread (time.thread_time: time spent waiting for a "
                "core while other work runs is left out)")
WALL_CLOCK = "wall-clock time.perf_counter"
FIXED_CALLS = "{reps} calls{each}"
ADAPTIVE_CALLS = ("then {reps} calls{each} (calls go on until at least {min_calls} calls and "
                  "{budget_s:g} s of wall-clock time, or for slow calls {floor_calls} calls and "
                  "{max_s:g} s)")
TOGETHER = ", {names} timed interleaved call by call so that drift hits each alike"


def _forward_call(cfg: AttentionConfig, algorithm: str, trace: bool):
    q, k, v = make_inputs(cfg)
    if algorithm == "naive":
        return lambda: numpy_backend.naive(cfg, q, k, v)
    if cfg.is_fp8:                       # the FP8 emulation, quantization included
        return lambda: fp8.run(cfg, q, k, v, trace=trace)
    return lambda: numpy_backend.flash(cfg, q, k, v, trace=trace)


def _backward_call(cfg: AttentionConfig, algorithm: str, trace: bool):
    """The backward alone: inputs, dout and the forward's O and lse are made here, untimed."""
    q, k, v = make_inputs(cfg)
    dout = make_dout(cfg)
    O, lse = numpy_backward.forward_state(cfg, q, k, v, algorithm)
    if algorithm == "naive":
        return lambda: numpy_backward.naive(cfg, q, k, v, dout, O, lse)
    return lambda: numpy_backward.flash(cfg, q, k, v, dout, O, lse, trace=trace)


def time_calls(calls: list[Callable[[], object]], reps: int | None, warmup: int | None,
               budget: CallBudget = CPU_BUDGET,
               clock: Callable[[], float] = time.perf_counter,
               wall: Callable[[], float] = time.perf_counter) -> tuple[list[list[float]], int]:
    """Time each of `calls` by `clock` (ms per call), interleaved: round after round, each
    call once, the order reversed every other round. `reps` rounds when given, else until
    `budget` is done (the `wall` time of the calls, summed, against the budget scaled by their
    number). Returns (times per call, warm-up rounds made)."""
    warm = (1 if reps is not None else budget.warmup) if warmup is None else warmup
    for _ in range(warm):
        for call in calls:
            call()
    times: list[list[float]] = [[] for _ in calls]
    spent, rounds = 0.0, 0
    scaled = CallBudget(budget.min_calls, budget.budget_s * len(calls), budget.floor_calls,
                        budget.max_s * len(calls), budget.max_calls, budget.warmup)
    while (rounds < reps) if reps is not None else not scaled.done(rounds, spent):
        order = range(len(calls)) if rounds % 2 == 0 else range(len(calls) - 1, -1, -1)
        for i in order:
            w0, t0 = wall(), clock()
            calls[i]()
            t1, w1 = clock(), wall()
            times[i].append((t1 - t0) * 1e3)
            spent += w1 - w0
        rounds += 1
    return times, warm


def benchmark_many(cfg: AttentionConfig, algorithms: list[str], trace: bool = False,
                   reps: int | None = None, warmup: int | None = None,
                   direction: str = "forward",
                   budget: CallBudget = CPU_BUDGET) -> list[Timing]:
    """One Timing per algorithm of `algorithms`, timed interleaved (time_calls)."""
    backward = direction == "backward"
    make = _backward_call if backward else _forward_call
    calls = [make(cfg, algorithm, trace) for algorithm in algorithms]
    with one_blas_thread() as pinned:
        clock = time.thread_time if pinned else time.perf_counter
        times, warm = time_calls(calls, reps, warmup, budget, clock=clock)
    counted = (FIXED_CALLS.format(reps=len(times[0]), each=" of each" if len(calls) > 1 else "")
               if reps is not None else
               ADAPTIVE_CALLS.format(reps=len(times[0]), each=" of each" if len(calls) > 1
                                     else "", min_calls=budget.min_calls,
                                     budget_s=budget.budget_s, floor_calls=budget.floor_calls,
                                     max_s=budget.max_s))
    together = TOGETHER.format(names=" and ".join(algorithms)) if len(algorithms) > 1 else ""
    method = CPU_METHOD.format(what=", backward pass alone" if backward else "",
                               clock=THREAD_CLOCK if pinned else WALL_CLOCK,
                               blas=blas_name(), warmup=warm,
                               calls=counted, together=together)
    return [_timing(cfg, algorithm, trace, direction, samples, warm, method)
            for algorithm, samples in zip(algorithms, times)]


def _timing(cfg, algorithm, trace, direction, samples, warm, method) -> Timing:
    s = spread_of(samples)
    return Timing(median_ms=s.median_ms, p10_ms=s.p10_ms, p90_ms=s.p90_ms, reps=len(samples),
                  tflops=cfg.flops_of(direction) / (s.median_ms * 1e-3) / 1e12,
                  peak_bytes=peak_memory(cfg, algorithm, trace, direction), method=method,
                  backend="numpy", algorithm=algorithm, kernel=None, samples_ms=samples,
                  q1_ms=s.q1_ms, q3_ms=s.q3_ms, iqr_rel=s.iqr_rel, noisy=s.noisy, warmup=warm)


def benchmark_numpy(cfg: AttentionConfig, algorithm: str, trace: bool, reps: int | None,
                    warmup: int | None, direction: str = "forward") -> Timing:
    """One algorithm: `reps` calls after `warmup` warm-ups, or adaptive when reps is None."""
    return benchmark_many(cfg, [algorithm], trace, reps, warmup, direction)[0]
