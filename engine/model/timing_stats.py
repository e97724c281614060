"""How many calls a CPU timing makes, and what it reports of them: the median with the
interquartile range, and whether that range is too wide to trust the median.

A wall-clock time on a shared CPU moves with whatever else runs: a single call, or a median
of a handful, can be off by many times. The CPU timing (engine.cpu.timing) therefore calls
until a budget is spent (at least MIN_CALLS calls and BUDGET_S seconds, stopping early on
slow calls only after FLOOR_CALLS and MAX_S seconds), and reports the spread beside the
median. Pure arithmetic on lists of milliseconds; nothing here measures time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NOISY_SPREAD = 0.25      # IQR / median above this: the median is not to be trusted


@dataclass(frozen=True)
class CallBudget:
    """When an adaptive timing stops calling: once it has at least `min_calls` calls and has
    spent `budget_s` seconds; or, for slow calls, once it has `floor_calls` and `max_s`
    seconds; and never past `max_calls`. `warmup` calls run first, untimed."""

    min_calls: int = 15
    budget_s: float = 0.3
    floor_calls: int = 5
    max_s: float = 1.0
    max_calls: int = 2000
    warmup: int = 2

    def done(self, calls: int, elapsed_s: float) -> bool:
        """Whether `calls` calls that took `elapsed_s` seconds in all are enough."""
        return ((calls >= self.min_calls and elapsed_s >= self.budget_s)
                or (calls >= self.floor_calls and elapsed_s >= self.max_s)
                or calls >= self.max_calls)


CPU_BUDGET = CallBudget()


@dataclass(frozen=True)
class Spread:
    """The middle of repeated calls: median, quartiles, 10th and 90th percentiles (ms), the
    interquartile range relative to the median, and whether that exceeds NOISY_SPREAD."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    p10_ms: float
    p90_ms: float
    iqr_rel: float
    noisy: bool

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


def spread_of(samples_ms, limit: float = NOISY_SPREAD) -> Spread:
    """The Spread of calls' times in ms (at least one call; quartiles interpolated as
    numpy.percentile does), noisy when the interquartile range exceeds `limit` × median."""
    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size == 0:
        raise ValueError("spread_of needs at least one call's time.")
    med = float(np.median(x))
    q1, q3, p10, p90 = (float(v) for v in np.percentile(x, [25, 75, 10, 90]))
    rel = (q3 - q1) / med if med > 0 else float("inf") if q3 > q1 else 0.0
    return Spread(median_ms=med, q1_ms=q1, q3_ms=q3, p10_ms=p10, p90_ms=p90, iqr_rel=rel,
                  noisy=bool(rel > limit))
