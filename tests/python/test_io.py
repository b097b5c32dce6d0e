"""pandas, polars and Parquet interop."""

from __future__ import annotations

import numpy as np
import pytest

import fallow
import fallow.io


def sample():
    return fallow.synthetic(rate=200, requests=5_000, service="exp:2ms", seed=9, write_fraction=0.3)


def test_to_pandas():
    t = sample()
    df = fallow.io.to_pandas(t)
    assert len(df) == len(t)
    assert df["arrival_ns"].dtype == np.uint64
    np.testing.assert_array_equal(df["completion_ns"].to_numpy(), t.completion_ns)
    no_completion = fallow.Trace.from_columns([0, 5])
    assert "completion_ns" not in fallow.io.to_pandas(no_completion).columns


def test_parquet_round_trip(tmp_path):
    pytest.importorskip("polars")
    t = sample()
    path = tmp_path / "trace.parquet"
    fallow.to_parquet(t, path)
    back = fallow.read_trace(path)
    for name, col in t.columns().items():
        np.testing.assert_array_equal(getattr(back, name), col, err_msg=name)
    np.testing.assert_array_equal(back.idle_intervals_ns(), t.idle_intervals_ns())
    # format="parquet" works whatever the suffix
    other = tmp_path / "trace.pq"
    path.rename(other)
    assert len(fallow.read_trace(other, format="parquet")) == len(t)


def test_parquet_without_completions(tmp_path):
    pytest.importorskip("polars")
    t = fallow.Trace.from_columns([0, 10, 30], size_bytes=[512, 512, 4096], device=[0, 1, 1])
    path = tmp_path / "t.parquet"
    fallow.to_parquet(t, path)
    back = fallow.read_trace(path)
    assert not back.has_completions
    assert back.devices() == t.devices()


def test_parquet_missing_column(tmp_path):
    pl = pytest.importorskip("polars")
    path = tmp_path / "other.parquet"
    pl.DataFrame({"time": [1, 2]}).write_parquet(path)
    with pytest.raises(fallow.TraceFormatError, match="arrival_ns") as info:
        fallow.read_trace(path)
    assert info.value.field == "arrival_ns"


def test_polars_frame():
    pl = pytest.importorskip("polars")
    t = sample()
    df = fallow.io.to_polars(t)
    assert df.schema["arrival_ns"] == pl.UInt64
    assert df.schema["size_bytes"] == pl.UInt32
    assert len(fallow.io.from_polars(df)) == len(t)
