"""Traces from data frames (pandas, polars DataFrame and
LazyFrame, pyarrow Table) with column and unit mapping; float times that
are not whole ns are an error, not a silent truncation; a multi-device
trace's periods need ``device=``. Expected values are worked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fallow

# Two devices: device 0 busy [0, 0.1] s and [0.25, 0.3] s; device 1 [0.05, 0.2] s.
SECONDS = {
    "t": [0.0, 0.25, 0.05],
    "done": [0.1, 0.3, 0.2],
    "lba": [8, 16, 24],
    "sectors": [8, 8, 16],
    "w": [False, True, False],
    "disk": [0, 0, 1],
}
MAPPING = {
    "arrival_ns": "t",
    "completion_ns": "done",
    "offset_bytes": "lba",
    "size_bytes": "sectors",
    "is_write": "w",
    "device": "disk",
}


def check(t: fallow.Trace) -> None:
    assert t.arrival_ns.tolist() == [0, 50_000_000, 250_000_000]
    assert t.completion_ns.tolist() == [100_000_000, 200_000_000, 300_000_000]
    assert t.offset_bytes.tolist() == [4096, 12288, 8192]
    assert t.size_bytes.tolist() == [4096, 8192, 4096]
    assert t.is_write.tolist() == [False, False, True]
    assert t.device.tolist() == [0, 1, 0]


def test_from_pandas_maps_columns_and_units():
    df = pd.DataFrame(SECONDS)
    t = fallow.Trace.from_pandas(
        df, columns=MAPPING, time_unit="s", offset_unit_bytes=512, size_unit_bytes=512
    )
    check(t)


def test_from_pandas_datetime_columns():
    df = pd.DataFrame(
        {
            "arrival_ns": pd.to_datetime([0, 1_500], unit="ns"),
            "completion_ns": pd.to_timedelta([700, 2_000], unit="ns"),
        }
    )
    # Timedeltas and datetimes on one clock only in a real trace; here each
    # column is checked to be read as ns.
    t = fallow.Trace.from_pandas(df)
    assert t.arrival_ns.tolist() == [0, 1_500]
    assert t.completion_ns.tolist() == [700, 2_000]


def test_float_seconds_passed_as_ns_are_an_error():
    # from_columns once truncated 0.25 (seconds) to 0 ns silently.
    with pytest.raises(fallow.TraceFormatError) as e:
        fallow.Trace.from_columns([0.0, 0.25], completion_ns=[0.1, 0.3])
    assert "arrival_ns" in str(e.value) and "time_unit" in str(e.value)
    assert e.value.record == 1 and e.value.field == "arrival_ns"
    # Whole-number floats are ns as they are; time_unit scales.
    assert fallow.Trace.from_columns([0.0, 1500.0]).arrival_ns.tolist() == [0, 1500]
    t = fallow.Trace.from_columns([0.0, 0.25], time_unit="s")
    assert t.arrival_ns.tolist() == [0, 250_000_000]
    with pytest.raises(fallow.FallowError):
        fallow.Trace.from_columns([0, -5])
    with pytest.raises(fallow.FallowError):
        fallow.Trace.from_columns([0, 1], size_bytes=[1, 2**32])


def test_from_polars_dataframe_lazyframe_and_arrow():
    pl = pytest.importorskip("polars", reason="skip: polars not installed")
    df = pl.DataFrame(SECONDS)
    kwargs = dict(columns=MAPPING, time_unit="s", offset_unit_bytes=512, size_unit_bytes=512)
    check(fallow.Trace.from_polars(df, **kwargs))
    check(fallow.Trace.from_polars(df.lazy().with_columns(extra=pl.lit(1)), **kwargs))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        print("skip: pyarrow not installed; the pyarrow Table case did not run")
        return
    check(fallow.Trace.from_polars(df.to_arrow(), **kwargs))


def test_a_missing_mapped_column_names_it():
    df = pd.DataFrame({"t": [0, 1]})
    with pytest.raises(fallow.TraceFormatError) as e:
        fallow.Trace.from_pandas(df, columns={"completion_ns": "done"})
    assert "`arrival_ns`" in str(e.value)
    with pytest.raises(fallow.TraceFormatError) as e:
        fallow.Trace.from_pandas(df, columns={"arrival_ns": "t", "completion_ns": "done"})
    assert "`done`" in str(e.value) and e.value.field == "completion_ns"
    with pytest.raises(ValueError):
        fallow.Trace.from_pandas(df, columns={"arrival": "t"})


def test_periods_of_a_multi_device_trace_need_device():
    # idle_intervals() once merged the devices' timelines silently.
    t = fallow.Trace.from_pandas(
        pd.DataFrame(SECONDS), columns=MAPPING, time_unit="s", offset_unit_bytes=512
    )
    for call in (t.idle_intervals, t.idle_intervals_ns, t.busy_periods, t.busy_periods_ns):
        with pytest.raises(fallow.ParameterError, match="device="):
            call()
    # Device 0: busy [0, 0.1] and [0.25, 0.3]: one idle interval of 0.15 s.
    assert t.idle_intervals_ns(device=0).tolist() == [150_000_000]
    np.testing.assert_allclose(t.idle_intervals(device=0), [0.15])
    b = t.busy_periods_ns(device=0)
    assert b["start_ns"].tolist() == [0, 250_000_000]
    assert b["length_ns"].tolist() == [100_000_000, 50_000_000]
    # Device 1 alone: one busy period, no idle interval.
    assert t.idle_intervals_ns(device=1).tolist() == []
    assert t.busy_periods(device=1)["requests"].tolist() == [1]
    with pytest.raises(fallow.FallowError):
        t.idle_intervals(device=7)


def test_read_trace_plain_completion_column(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("1.5 0 0 4096 r 2.25\n3 0 8192 512 w 4\n")
    t = fallow.read_trace(p, format="plain", completion_column=True)
    # ms: arrivals 1.5 and 3 ms, completions 2.25 and 4 ms, rebased to 1.5 ms.
    assert t.arrival_ns.tolist() == [0, 1_500_000]
    assert t.completion_ns.tolist() == [750_000, 2_500_000]
