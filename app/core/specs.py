"""Charts in the form Streamlit sends them, built once and shared by every session.

Building an Altair chart and converting it to a Vega-Lite dict costs 50–700 ms of CPU, most of
what a script run used to cost. `sent_chart` returns a chart's spec without its datasets plus
each dataset as the Arrow IPC bytes Streamlit would make of it, so a page hands Streamlit a
spec it only has to JSON-encode (st.vega_lite_chart passes Arrow bytes in `datasets` through).

Two levels of cache, process-wide and bounded:
- by input: the digest of the builder's name and pickled arguments (no Streamlit hashing, no
  copy on a hit) -> the finished SentChart;
- by layout, for a `TemplateChart`: charts whose spec depends on their data only through
  their datasets (and through the scalars their `split` names) are built with Altair once per
  layout; new data fills the template's datasets, and `Hole` values (floats that only appear
  inside expressions) are written into its text. tests/test_chart_specs.py checks that the
  result equals Altair's own spec.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import threading
from dataclasses import dataclass
from typing import Callable

import altair as alt
import numpy as np
import pandas as pd
from cachetools import LRUCache

from app.core.arrow_ipc import arrow_bytes

# Finished charts kept: per-seed charts (a few kB each) must not push out the loop charts
# (up to about 1 MB of Arrow each), which every visitor of a shape and every tick of Play use.
MAX_CHARTS = 2048
MAX_CHART_BYTES = 128 * 2**20
MAX_TEMPLATES = 64       # layouts kept


@dataclass(frozen=True)
class SentChart:
    spec: dict                  # the Vega-Lite spec without "datasets"; never mutate it
    datasets: dict[str, bytes]  # dataset name -> Arrow IPC bytes, in Altair's order

    def spec_with_data(self) -> dict:
        """A spec st.vega_lite_chart accepts (a new top-level dict; nested parts shared)."""
        return {**self.spec, "datasets": dict(self.datasets)}


def dataset_name(values: list) -> str:
    """The name Altair gives an inline dataset: a hash of its values (as altair's
    vegalite api `_dataset_name` computes it)."""
    if values == [{}]:
        return "empty"
    text = json.dumps(values, sort_keys=True, default=str)
    return "data-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _column_values(col: pd.Series) -> list | None:
    """A column's values as Altair's sanitizer leaves them (Python numbers, bools and strings;
    None for NaN, inf and missing), for the dtypes the app's charts use; None for others."""
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return col.to_numpy().tolist()
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = col.to_numpy()
        bad = ~np.isfinite(values)
    elif str(dtype) in ("str", "string"):
        values, bad = col.to_numpy(dtype=object), col.isna().to_numpy()
    else:
        return None
    out = values.tolist()
    for i in np.flatnonzero(bad).tolist():
        out[i] = None
    return out


def records(frame: pd.DataFrame) -> list[dict]:
    """A DataFrame's values as Altair writes them into a spec: what its default data
    transformer gives, without its per-column copies where every dtype is a plain one."""
    names = list(frame.columns)
    if (isinstance(frame.index, pd.MultiIndex) or not names or len(set(names)) < len(names)
            or not all(isinstance(n, str) for n in names)
            or alt.data_transformers.active != "default"
            or len(frame) > (alt.data_transformers.options.get("max_rows") or len(frame))):
        return alt.data_transformers.get()(frame)["values"]
    columns = [_column_values(frame[n]) for n in names]
    if any(c is None for c in columns):
        return alt.data_transformers.get()(frame)["values"]
    return [dict(zip(names, row)) for row in zip(*columns)]


def from_dict(spec: dict) -> SentChart:
    datasets = spec.get("datasets", {})
    return SentChart({k: v for k, v in spec.items() if k != "datasets"},
                     {name: arrow_bytes(values) for name, values in datasets.items()})


class Hole(float):
    """A float of a chart's layout that only appears inside its text (an expression): the
    template is drawn with a marker value in its place and each fill writes the real one."""


class TemplateChart:
    """A chart builder in two parts: split(*args, **kwargs) -> (frames, layout), where frames
    (role -> DataFrame) is everything drawn from the data and layout (a tuple of hashable
    scalars, Holes allowed) everything else the spec depends on; draw(frames, *layout) builds
    the Altair chart. Calling it builds the chart as any builder does; `name` names it."""

    def __init__(self, name: str, split: Callable[..., tuple[dict[str, pd.DataFrame], tuple]],
                 draw: Callable[..., alt.TopLevelMixin]):
        self.__module__, self.__qualname__ = draw.__module__, name
        self.split, self.draw = split, draw

    def __call__(self, *args, **kwargs):
        frames, layout = self.split(*args, **kwargs)
        return self.draw(frames, *layout)


def _marker(i: int) -> float:
    """A float no chart would show, whose repr marks where Hole i goes in the spec's text."""
    return float(f"1.2345678{i:02d}987654e-300")


@dataclass(frozen=True)
class _Template:
    text: str                        # spec JSON (no datasets), roles' names as "@@role@@"
    roles: tuple[str, ...]           # frames in the order their datasets come
    fixed: dict[str, bytes]          # datasets not from a frame (constants drawn by `draw`)
    order: tuple[str, ...]           # every dataset in Altair's order: a role or a fixed name
    holes: tuple[str, ...]           # repr of each Hole's marker, by hole index


def _make_template(tc: TemplateChart, frames: dict[str, pd.DataFrame],
                   layout: tuple) -> _Template | None:
    """Draw the chart once with marker values in its Holes and mark where each frame's dataset
    is named; None when two drawn frames hold the same values (their datasets merge, so a
    template could not tell them apart)."""
    n_holes = 0
    drawn = []
    for value in layout:
        if isinstance(value, Hole):
            drawn.append(_marker(n_holes))
            n_holes += 1
        else:
            drawn.append(value)
    spec = tc.draw(frames, *drawn).to_dict(validate=False)
    datasets = spec.pop("datasets", {})
    role_of = {}
    for role, frame in frames.items():
        name = dataset_name(records(frame))
        if name in datasets:
            if name in role_of:
                return None
            role_of[name] = role
    text = json.dumps(spec)
    for name, role in role_of.items():
        text = text.replace(json.dumps(name), json.dumps(f"@@{role}@@"))
    return _Template(text=text,
                     roles=tuple(role_of[n] for n in datasets if n in role_of),
                     fixed={n: arrow_bytes(v) for n, v in datasets.items() if n not in role_of},
                     order=tuple(role_of.get(n, n) for n in datasets),
                     holes=tuple(repr(_marker(i)) for i in range(n_holes)))


def _fill(t: _Template, frames: dict[str, pd.DataFrame], layout: tuple) -> SentChart:
    text = t.text
    values = [v for v in layout if isinstance(v, Hole)]
    for marker, value in zip(t.holes, values):
        text = text.replace(marker, repr(float(value)))
    data, name_of = {}, {}
    for role in t.roles:
        rows = records(frames[role])
        name_of[role] = dataset_name(rows)
        data.setdefault(name_of[role], rows)
        text = text.replace(json.dumps(f"@@{role}@@"), json.dumps(name_of[role]))
    datasets = {}
    for entry in t.order:
        if entry in name_of:
            name = name_of[entry]
            if name not in datasets:
                datasets[name] = arrow_bytes(data[name])
        else:
            datasets.setdefault(entry, t.fixed[entry])
    return SentChart(json.loads(text), datasets)


class _Lru(LRUCache):
    """cachetools' LRUCache of at most `entries` entries, also bounded by the bytes `size`
    counts (the least recently used leave first, never the last one left), with get, put and
    clear thread-safe (cachetools' caches are not)."""

    def __init__(self, entries: int, max_bytes: float = float("inf"),
                 size: Callable[[object], int] = lambda value: 0):
        super().__init__(maxsize=entries)
        self.max_bytes, self.size = max_bytes, size
        self.bytes, self._sizes, self.lock = 0, {}, threading.Lock()

    def __setitem__(self, key, value) -> None:
        n = self.size(value)
        super().__setitem__(key, value)          # evicts through __delitem__ past `entries`
        self.bytes += n - self._sizes.get(key, 0)
        self._sizes[key] = n
        while len(self) > 1 and self.bytes > self.max_bytes:
            self.popitem()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self.bytes -= self._sizes.pop(key)

    def get(self, key, default=None):
        with self.lock:
            return super().get(key, default)

    def put(self, key, value) -> None:
        with self.lock:
            self[key] = value

    def clear(self) -> None:
        with self.lock:
            super().clear()                      # cachetools' clear skips __delitem__
            self._sizes.clear()
            self.bytes = 0


def _sent_bytes(sent: SentChart) -> int:
    return sum(len(b) for b in sent.datasets.values())


_CHARTS = _Lru(MAX_CHARTS, MAX_CHART_BYTES, _sent_bytes)
_TEMPLATES = _Lru(MAX_TEMPLATES)


def _name(builder: Callable) -> str:
    return f"{builder.__module__}.{builder.__qualname__}"


def input_key(builder: Callable, args: tuple, kwargs: dict) -> bytes | None:
    """A digest of the builder's name and its arguments; None when they do not pickle."""
    try:
        blob = pickle.dumps((_name(builder), args, sorted(kwargs.items())), protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return hashlib.blake2b(blob, digest_size=20).digest()


def build(builder: Callable, *args, **kwargs) -> SentChart:
    """builder(*args, **kwargs) as Streamlit sends it, with no input cache (the template of a
    TemplateChart is still cached by layout)."""
    if not isinstance(builder, TemplateChart):
        return from_dict(builder(*args, **kwargs).to_dict(validate=False))
    frames, layout = builder.split(*args, **kwargs)
    key = (_name(builder), tuple(None if isinstance(v, Hole) else v for v in layout),
           tuple(frames))
    template = _TEMPLATES.get(key)
    if template is None:
        template = _make_template(builder, frames, layout)
        if template is None:
            return from_dict(builder.draw(frames, *layout).to_dict(validate=False))
        _TEMPLATES.put(key, template)
    return _fill(template, frames, layout)


def sent_chart(builder: Callable, *args, **kwargs) -> SentChart:
    """builder(*args, **kwargs) as Streamlit sends it, from the cache when these inputs were
    drawn before (by any session)."""
    key = input_key(builder, args, kwargs)
    if key is not None and (hit := _CHARTS.get(key)) is not None:
        return hit
    sent = build(builder, *args, **kwargs)
    if key is not None:
        _CHARTS.put(key, sent)
    return sent


def clear() -> None:
    """Forget every cached chart and template (tests)."""
    _CHARTS.clear()
    _TEMPLATES.clear()
