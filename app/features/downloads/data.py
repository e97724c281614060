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


def trace_summary(res: engine.Result) -> pd.DataFrame:
    """Per key tile j, over every query row of a traced run: how often the running max rose
    (rescale < 1, j > 0), the mean rescale factor where it did, and the mean running sum."""
    t = res.trace
    Tc = t.rescale.shape[-1]
    resc = t.rescale.reshape(-1, Tc)
    rose = (resc < 1) & (np.arange(Tc) > 0)
    count = rose.sum(axis=0)
    mean_factor = np.where(rose, resc, 0).sum(axis=0) / np.maximum(count, 1)
    mean_factor[count == 0] = np.nan
    return pd.DataFrame({"key tile j": np.arange(Tc),
                         "rows whose max rose (%)": 100 * rose.mean(axis=0),
                         "mean rescale where it rose": mean_factor,
                         "mean running sum": t.running_sum.reshape(-1, Tc).mean(axis=0)})
