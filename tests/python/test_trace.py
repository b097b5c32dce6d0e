"""The Trace class: columns, devices, periods, GIL release."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import fallow


def small():
    # [0,10] [5,12] | gap 3 | [15,20] [20,25] | gap 5 | [30,31]   (same as period.rs)
    return fallow.Trace.from_columns(
        arrival_ns=[0, 5, 15, 20, 30],
        completion_ns=[10, 12, 20, 25, 31],
        offset_bytes=[0, 4096, 8192, 0, 512],
        size_bytes=[4096, 4096, 512, 512, 512],
        is_write=[False, True, False, True, True],
        device=[0, 0, 0, 0, 0],
    )


def test_columns_and_dtypes():
    t = small()
    assert len(t) == 5
    assert t.arrival_ns.dtype == np.uint64
    assert t.completion_ns.dtype == np.uint64
    assert t.offset_bytes.dtype == np.uint64
    assert t.size_bytes.dtype == np.uint32
    assert t.is_write.dtype == np.bool_
    assert t.device.dtype == np.uint32
    assert t.is_write.tolist() == [False, True, False, True, True]
    cols = t.columns()
    assert set(cols) == {
        "arrival_ns",
        "completion_ns",
        "offset_bytes",
        "size_bytes",
        "is_write",
        "device",
    }
    assert t.span_ns == 31 and t.span_s == pytest.approx(31e-9)
    assert "5 requests" in repr(t)


def test_periods_by_hand():
    t = small()
    assert t.idle_intervals_ns().tolist() == [3, 5]
    b = t.busy_periods_ns()
    assert b["start_ns"].tolist() == [0, 15, 30]
    assert b["length_ns"].tolist() == [12, 10, 1]
    assert b["requests"].tolist() == [2, 2, 1]
    np.testing.assert_array_equal(t.busy_periods()["length_s"], np.array([12, 10, 1]) / 1e9)


def test_unsorted_columns_are_sorted_and_rebased():
    t = fallow.Trace.from_columns([1100, 1000, 1050], completion_ns=[1200, 1010, 1060])
    assert t.arrival_ns.tolist() == [0, 50, 100]
    assert t.completion_ns.tolist() == [10, 60, 200]
    assert t.report["reordered"] == 2  # 1000 and 1050 both arrive before 1100


def test_devices_and_selection():
    t = fallow.Trace.from_columns([0, 1, 2, 3], completion_ns=[1, 2, 3, 4], device=[2, 5, 2, 2])
    assert t.devices() == [{"id": 2, "requests": 3}, {"id": 5, "requests": 1}]
    d = t.select_device(2)
    assert len(d) == 3 and set(d.device.tolist()) == {2}


def test_service_model_for_trace_without_completions():
    t = fallow.Trace.from_columns(np.arange(0, 10_000_000, 1_000_000))  # every 1 ms
    # const:0.4ms -> busy 0.4 ms, idle 0.6 ms each
    assert t.idle_intervals_ns(service="const:400us").tolist() == [600_000] * 9
    # seeds change exponential draws
    a = t.idle_intervals_ns(service="exp:100us", seed=1)
    b = t.idle_intervals_ns(service="exp:100us", seed=2)
    assert not np.array_equal(a, b)


def test_long_calls_release_the_gil():
    # While the core generates and characterises a large trace, another
    # Python thread keeps running.
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    th = threading.Thread(target=count)
    th.start()
    try:
        start = ticks
        t = fallow.synthetic(rate=100, requests=2_000_000, seed=1)
        mid = ticks
        fallow.characterize(t)
    finally:
        done.set()
        th.join()
    assert mid - start > 5, "the counting thread did not run during synthetic()"
