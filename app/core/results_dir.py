"""Where the pages read the results recorded on GPUs (benchmarks/results/ unless
FA_LAB_BENCH_DIR names another folder: the tests point it at their fixtures)."""
from __future__ import annotations

import os
from pathlib import Path

from engine.facade import recorded

BENCH_DIR_ENV = "FA_LAB_BENCH_DIR"


def bench_dir() -> Path:
    return Path(os.environ.get(BENCH_DIR_ENV) or recorded.BENCH_DIR)
