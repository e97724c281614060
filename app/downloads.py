"""Bytes for the Downloads page: timing results as JSON (the recorded-results layout) and CSV."""
from __future__ import annotations

import datetime
import json

import numpy as np
import pandas as pd

import engine


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not np.isfinite(value) else float(value)
    return value


def results_json(results: pd.DataFrame, device: engine.DeviceInfo,
                 cfg: engine.AttentionConfig) -> bytes:
    """Timings with the device, date and config they belong to."""
    records = [{k: _plain(v) for k, v in row.items()} for row in results.to_dict("records")]
    doc = {"device": {"name": device.name, "kind": device.kind, "sms": device.gpu.sms,
                      "driver": device.driver, "cuda_runtime": device.cuda_runtime,
                      "cupy_version": device.cupy_version},
           "date": datetime.date.today().isoformat(), "config": cfg.to_dict(),
           "results": records}
    return (json.dumps(doc, indent=1) + "\n").encode()


def results_csv(results: pd.DataFrame) -> bytes:
    return results.to_csv(index=False).encode()
