"""A chart dataset's records as the Arrow IPC bytes Streamlit makes of them, without pandas on
every call.

Streamlit turns a list of records into a DataFrame and that into an Arrow table
(`dataframe_util.convert_anything_to_arrow_bytes`): 1–3 ms a dataset, most of it pandas'
per-call overhead, and the online-softmax charts send eight new datasets on every seed.
Here the columns of records whose values are plain (ints, floats with None for missing, bools,
strings with None) go straight into Arrow arrays built the way pyarrow builds them from those
pandas columns, under the schema (pandas metadata included) that Streamlit's own conversion
gave for the first dataset of the same column kinds; the range index's length is the only
part of that schema that depends on the data. Other records take Streamlit's path.
tests/test_chart_specs.py checks that both give the same bytes.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pyarrow as pa
from app.core.st_internals import dataframe_util

_SCHEMAS: dict[tuple, tuple[pa.Schema, dict]] = {}   # column kinds -> schema, pandas metadata
_LOCK = threading.Lock()


def _kind(column: list) -> tuple[str, bool] | None:
    """(kind, has missing values) of a column of plain values: "int", "float", "bool" or
    "str"; None for anything else (mixed types, all missing, ints out of int64's range)."""
    types = {type(x) for x in column}
    missing = type(None) in types
    types.discard(type(None))
    if types == {int}:
        if missing or not -2**63 <= min(column) <= max(column) < 2**63:
            return None
        return "int", False
    if types == {float} or types == {float, int}:
        return "float", missing
    if types == {bool} and not missing:
        return "bool", False
    if types == {str}:
        return "str", missing
    return None


def _array(column: list, kind: str, missing: bool) -> pa.Array:
    """The Arrow array pyarrow makes of the pandas column Streamlit would build."""
    if kind == "int":
        return pa.array(np.array(column, dtype=np.int64))
    if kind == "float":      # None becomes NaN in pandas, and NaN a null in Arrow
        return pa.array(np.array(column, dtype=np.float64), from_pandas=True)
    if kind == "bool":
        return pa.array(np.array(column, dtype=bool))
    return pa.array(column, type=pa.large_string(), from_pandas=True)


def arrow_bytes(values: list) -> bytes:
    """The Arrow IPC bytes Streamlit makes of a dataset's records."""
    if not values or not isinstance(values, list) or not isinstance(values[0], dict):
        return dataframe_util.convert_anything_to_arrow_bytes(values)
    names = tuple(values[0])
    if not names or not all(isinstance(n, str) for n in names) or \
            any(tuple(row) != names for row in values):
        return dataframe_util.convert_anything_to_arrow_bytes(values)
    columns = [[row[n] for row in values] for n in names]
    kinds = [_kind(c) for c in columns]
    if any(k is None for k in kinds):
        return dataframe_util.convert_anything_to_arrow_bytes(values)
    signature = tuple(zip(names, kinds))
    with _LOCK:
        known = _SCHEMAS.get(signature)
    if known is None:
        table = dataframe_util.convert_pandas_df_to_arrow_table(
            dataframe_util.convert_anything_to_pandas_df(values))
        pandas_meta = json.loads((table.schema.metadata or {}).get(b"pandas", b"null"))
        if isinstance(pandas_meta, dict) and \
                [i.get("kind") for i in pandas_meta.get("index_columns", [])] == ["range"]:
            with _LOCK:
                _SCHEMAS[signature] = (table.schema, pandas_meta)
        return dataframe_util.convert_arrow_table_to_arrow_bytes(table)
    schema, pandas_meta = known
    meta = {**pandas_meta,
            "index_columns": [{**pandas_meta["index_columns"][0], "stop": len(values)}]}
    try:
        table = pa.Table.from_arrays([_array(c, *k) for c, k in zip(columns, kinds)],
                                     schema=schema.with_metadata(
                                         {b"pandas": json.dumps(meta).encode()}))
    except (pa.ArrowException, TypeError, ValueError):
        return dataframe_util.convert_anything_to_arrow_bytes(values)
    return dataframe_util.convert_arrow_table_to_arrow_bytes(table)
