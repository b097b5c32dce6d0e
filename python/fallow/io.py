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
from typing import TYPE_CHECKING, Any

import numpy as np

from fallow._fallow import Trace, TraceFormatError
from fallow.errors import require

if TYPE_CHECKING:
    import pandas
    import polars

__all__ = ["to_pandas", "to_polars", "from_pandas", "from_polars", "to_parquet", "read_parquet"]

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


def _frame_to_trace(
    columns_of: dict[str, Any],
    where: str,
    columns: dict[str, str] | None,
    time_unit: str | None,
    offset_unit_bytes: int,
    size_unit_bytes: int,
) -> Trace:
    """Pick fallow's columns out of a frame's (renamed by ``columns``) and
    hand them to :meth:`Trace.from_columns`, which checks them."""
    mapping = dict(columns or {})
    unknown = sorted(set(mapping) - set(_COLUMNS))
    if unknown:
        raise ValueError(
            f"columns: {', '.join(unknown)} is not a fallow column "
            f"(fallow reads {', '.join(_COLUMNS)})"
        )
    source = {c: mapping.get(c, c) for c in _COLUMNS}
    absent = [c for c in mapping if source[c] not in columns_of]
    if source["arrival_ns"] not in columns_of and "arrival_ns" not in absent:
        absent.insert(0, "arrival_ns")
    if absent:
        field = absent[0]
        err = TraceFormatError(
            f"{where}: no column `{source[field]}` for {field} "
            f"(columns: {', '.join(map(str, columns_of))}; map yours with "
            f"columns={{'arrival_ns': 'your_name', ...}})"
        )
        err.path, err.line, err.offset, err.record, err.field = (where, None, None, None, field)
        raise err
    cols = {c: columns_of[source[c]] for c in _COLUMNS if source[c] in columns_of}
    return Trace.from_columns(
        **cols,
        time_unit=time_unit,
        offset_unit_bytes=offset_unit_bytes,
        size_unit_bytes=size_unit_bytes,
    )


def from_pandas(
    df: pandas.DataFrame,
    *,
    columns: dict[str, str] | None = None,
    time_unit: str | None = None,
    offset_unit_bytes: int = 1,
    size_unit_bytes: int = 1,
) -> Trace:
    """A trace from a pandas DataFrame (also ``fallow.Trace.from_pandas``).

    ``columns`` maps fallow's column names to the frame's
    (``{"arrival_ns": "ts"}``); unmapped ones are looked up by fallow's
    names. Only ``arrival_ns`` is required. Times are integer ns unless
    ``time_unit`` (``"s"``, ``"ms"``, ``"us"``) says otherwise; float times
    that are not whole ns are an error, never truncated; datetime64 and
    timedelta64 columns are taken as they are. ``offset_unit_bytes`` and
    ``size_unit_bytes`` scale offsets and sizes (512 for sectors).

    >>> import pandas as pd, fallow
    >>> df = pd.DataFrame({"t": [0.0, 0.25], "done": [0.1, 0.3], "lba": [8, 16]})
    >>> t = fallow.Trace.from_pandas(df, columns={"arrival_ns": "t",
    ...     "completion_ns": "done", "offset_bytes": "lba"}, time_unit="s", offset_unit_bytes=512)
    >>> t.arrival_ns.tolist(), t.completion_ns.tolist(), t.offset_bytes.tolist()
    ([0, 250000000], [100000000, 300000000], [4096, 8192])
    """
    cols = {c: df[c].to_numpy() for c in df.columns}
    return _frame_to_trace(
        cols, "<pandas DataFrame>", columns, time_unit, offset_unit_bytes, size_unit_bytes
    )


def from_polars(
    df: Any,
    *,
    path: str | os.PathLike | None = None,
    columns: dict[str, str] | None = None,
    time_unit: str | None = None,
    offset_unit_bytes: int = 1,
    size_unit_bytes: int = 1,
) -> Trace:
    """A trace from a polars DataFrame or LazyFrame, or a pyarrow Table
    (also ``fallow.Trace.from_polars``); the options are
    :func:`from_pandas`'s. A LazyFrame is collected (only the columns
    used); a pyarrow Table is read column by column.

    Only ``arrival_ns`` is required; missing columns default to zeros
    (reads on device 0) and a missing ``completion_ns`` to none.
    """
    where = os.fspath(path) if path is not None else f"<{type(df).__name__}>"
    if hasattr(df, "collect") and hasattr(df, "collect_schema"):  # polars LazyFrame
        names = df.collect_schema().names()
        wanted = {(columns or {}).get(c, c) for c in _COLUMNS}
        df = df.select([n for n in names if n in wanted]).collect()
    if hasattr(df, "column_names") and hasattr(df, "to_pydict"):  # pyarrow Table
        cols = {n: df.column(n).to_numpy() for n in df.column_names}
    else:
        cols = {c: df[c].to_numpy() for c in df.columns}
    return _frame_to_trace(cols, where, columns, time_unit, offset_unit_bytes, size_unit_bytes)


def to_parquet(trace: Trace, path: str | os.PathLike) -> None:
    """Write the trace's columns to a Parquet file (needs the ``parquet`` extra)."""
    require("polars", "parquet", "Parquet output")
    to_polars(trace).write_parquet(os.fspath(path))


def read_parquet(path: str | os.PathLike) -> Trace:
    """Read a trace written by :func:`to_parquet` (or any Parquet file with those columns)."""
    pl = require("polars", "parquet", "Parquet input")
    return from_polars(pl.read_parquet(os.fspath(path)), path=path)
