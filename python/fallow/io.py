"""Interop: traces to and from pandas, polars and Parquet.

Parquet goes through polars, an optional dependency (``pip install
'fallow[parquet]'``), imported only when needed. The Parquet file holds the
trace's columns: ``arrival_ns`` (uint64), ``completion_ns`` (uint64, absent
when the trace has no completions), ``offset_bytes`` (uint64),
``size_bytes`` (uint32), ``is_write`` (bool), ``device`` (uint32).
``fallow.read_trace("x.parquet")`` reads such a file back.

>>> import fallow, fallow.io, numpy as np
>>> t = fallow.Trace.from_columns([0, 1_000, 5_000], completion_ns=[500, 1_200, 9_000])
>>> fallow.io.to_pandas(t)[["arrival_ns", "completion_ns"]]
   arrival_ns  completion_ns
0           0            500
1        1000           1200
2        5000           9000
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from fallow._fallow import Trace, TraceFormatError
from fallow.errors import require

if TYPE_CHECKING:
    import pandas
    import polars

__all__ = ["to_pandas", "to_polars", "from_polars", "to_parquet", "read_parquet"]

_COLUMNS = ("arrival_ns", "completion_ns", "offset_bytes", "size_bytes", "is_write", "device")


def _present_columns(trace: Trace) -> dict[str, np.ndarray]:
    return {k: v for k, v in trace.columns().items() if v is not None}


def to_pandas(trace: Trace) -> pandas.DataFrame:
    """The trace's columns as a pandas DataFrame (no ``completion_ns`` without completions)."""
    import pandas as pd

    return pd.DataFrame(_present_columns(trace))


def to_polars(trace: Trace) -> polars.DataFrame:
    """The trace's columns as a polars DataFrame (needs the ``polars`` extra)."""
    pl = require("polars", "polars", "Trace to polars")
    return pl.DataFrame(_present_columns(trace))


def from_polars(df: polars.DataFrame, *, path: str | os.PathLike | None = None) -> Trace:
    """A trace from a polars DataFrame with the columns :func:`to_polars` writes.

    Only ``arrival_ns`` is required; missing columns default to zeros
    (reads on device 0) and a missing ``completion_ns`` to none.
    """
    where = os.fspath(path) if path is not None else "<polars DataFrame>"
    if "arrival_ns" not in df.columns:
        err = TraceFormatError(
            f"{where}: no `arrival_ns` column (columns: {', '.join(df.columns)}; "
            f"fallow reads {', '.join(_COLUMNS)})"
        )
        err.path, err.line, err.offset, err.record, err.field = (
            where,
            None,
            None,
            None,
            "arrival_ns",
        )
        raise err
    cols = {c: df[c].to_numpy() for c in _COLUMNS if c in df.columns}
    return Trace.from_columns(**cols)


def to_parquet(trace: Trace, path: str | os.PathLike) -> None:
    """Write the trace's columns to a Parquet file (needs the ``parquet`` extra)."""
    require("polars", "parquet", "Parquet output")
    to_polars(trace).write_parquet(os.fspath(path))


def read_parquet(path: str | os.PathLike) -> Trace:
    """Read a trace written by :func:`to_parquet` (or any Parquet file with those columns)."""
    pl = require("polars", "parquet", "Parquet input")
    return from_polars(pl.read_parquet(os.fspath(path)), path=path)
