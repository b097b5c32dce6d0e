"""Rust errors become the documented Python exceptions, with their attributes."""

from __future__ import annotations

import gzip
import sys

import numpy as np
import pytest

import fallow

GOOD = [
    "128166372003061629,hm,0,Read,3154152960,32768,1500",
    "128166372016382155,hm,0,Write,3154152960,4096,500",
]


def write(tmp_path, name, lines, compress=False):
    p = tmp_path / name
    data = ("\n".join(lines) + "\n").encode()
    p.write_bytes(gzip.compress(data) if compress else data)
    return p


def test_hierarchy():
    assert issubclass(fallow.TraceFormatError, fallow.FallowError)
    assert issubclass(fallow.ParameterError, fallow.FallowError)
    assert issubclass(fallow.FallowError, Exception)
    assert fallow.errors.TraceFormatError is fallow.TraceFormatError


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_bad_record_names_line_and_field(tmp_path, compress):
    p = write(tmp_path, "bad.csv", [*GOOD, "128166372016382160,hm,0,Read,0,lots,5"], compress)
    with pytest.raises(fallow.TraceFormatError) as info:
        fallow.read_trace(p, format="msr")
    e = info.value
    assert (e.path, e.line, e.field) == (str(p), 3, "size")
    assert e.offset is None and e.record is None
    assert "line 3" in str(e) and "size" in str(e)


def test_bad_record_detected_format(tmp_path):
    p = write(tmp_path, "bad.csv", [*GOOD, "128166372016382160,hm,0,Erase,0,512,5"])
    with pytest.raises(fallow.TraceFormatError) as info:
        fallow.read_trace(p)
    assert (info.value.line, info.value.field) == (3, "type")


def test_skip_bad_counts(tmp_path):
    p = write(tmp_path, "bad.csv", [GOOD[0], "x,hm,0,Read,0,512,5", GOOD[1]])
    t = fallow.read_trace(p, format="msr", skip_bad=True)
    assert len(t) == 2
    assert t.report["skipped"] == 1
    assert "line 2" in t.report["skip_examples"][0]


def test_empty_file(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_bytes(b"")
    with pytest.raises(fallow.TraceFormatError) as info:
        fallow.read_trace(p)
    assert info.value.path == str(p)
    assert info.value.line is None


def test_missing_file_is_oserror(tmp_path):
    p = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError) as info:
        fallow.read_trace(p)
    assert info.value.filename == str(p)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.idle_intervals(service="warp"),
        lambda t: t.busy_periods(service="exp:-1s"),
        lambda t: fallow.characterize(t, service="exp:0"),
        lambda t: fallow.synthetic(rate=10, service="disk:rpm=fast"),
        lambda t: fallow.synthetic(arrival="bursty", rate=10),
        lambda t: fallow.synthetic(arrival="erlang", rate=10),
        lambda t: fallow.synthetic(rate=-1),
        lambda t: t.select_device(7),
        lambda t: fallow.read_trace("x.csv", format="nosuch"),
        lambda t: fallow.read_trace("x.csv", time_unit="fortnights"),
    ],
    ids=[
        "unknown-model",
        "negative-mean",
        "zero-mean",
        "disk-param",
        "unknown-arrival",
        "erlang-without-k",
        "negative-rate",
        "no-such-device",
        "unknown-format",
        "unknown-unit",
    ],
)
def test_parameter_errors(call):
    t = fallow.synthetic(rate=10, requests=100)
    with pytest.raises(fallow.ParameterError) as info:
        call(t)
    assert info.value.name


def test_service_model_error_names_parameter():
    t = fallow.synthetic(rate=10, requests=100)
    with pytest.raises(fallow.ParameterError, match="service model") as info:
        t.idle_intervals(service="warp")
    assert info.value.name == "service model"


def test_no_completions_needs_a_service_model():
    t = fallow.Trace.from_columns([0, 10, 20])
    assert not t.has_completions
    with pytest.raises(fallow.FallowError, match="service"):
        t.idle_intervals()
    assert len(t.idle_intervals(service="const:1ns")) == 2


def test_columns_errors():
    with pytest.raises(fallow.ParameterError) as info:
        fallow.Trace.from_columns([0, 1, 2], offset_bytes=[0, 1])
    assert info.value.name == "offset_bytes"
    with pytest.raises(fallow.TraceFormatError) as info:
        fallow.Trace.from_columns([0, 100], completion_ns=[5, 50])
    assert (info.value.record, info.value.field, info.value.line) == (1, "completion", None)


def test_several_devices_need_a_choice():
    t = fallow.Trace.from_columns(
        [0, 10, 20, 30], completion_ns=[1, 11, 21, 31], device=[0, 1, 0, 1]
    )
    with pytest.raises(fallow.ParameterError, match="device"):
        fallow.characterize(t)
    c = fallow.characterize(t, device=1)
    assert c.data["trace"]["requests"] == 2
    assert c.data["trace"]["device"] == 1


def test_missing_extra_is_explained(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "polars", None)  # import polars -> ImportError
    t = fallow.Trace.from_columns(np.arange(3))
    with pytest.raises(fallow.MissingExtraError, match=r"fallow\[parquet\]") as info:
        fallow.to_parquet(t, tmp_path / "t.parquet")
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value, fallow.FallowError)
