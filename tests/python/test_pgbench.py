"""The pgbench trace (MSR CSV, recorded for fallow) against an independent
computation in numpy from the CSV read with Python's own csv and gzip."""

from __future__ import annotations

import csv
import gzip

import numpy as np
import pytest

import fallow


@pytest.fixture(scope="module")
def reference(pgbench_path):
    """Columns and periods computed without fallow: arrival = ts·100 ns,
    completion = arrival + resp·100 ns, busy = union of [arrival, completion]
    (running maximum of completions), idle = positive gaps."""
    with gzip.open(pgbench_path, "rt", newline="") as f:
        rows = [r for r in csv.reader(f) if r and not r[0].startswith("Timestamp")]
    ts = [int(r[0]) for r in rows]
    resp = [int(r[6]) for r in rows]
    t0 = min(ts)
    # Python ints first: ticks·100 of 2013 filetimes is near the top of uint64.
    arrival = np.array([(t - t0) * 100 for t in ts], dtype=np.uint64)
    completion = arrival + np.array(resp, dtype=np.uint64) * np.uint64(100)
    order = np.argsort(arrival, kind="stable")
    arrival, completion = arrival[order], completion[order]
    is_write = np.array([rows[i][3].lower().startswith("w") for i in order])

    run_max = np.maximum.accumulate(completion)
    gap = arrival[1:].astype(np.int64) - run_max[:-1].astype(np.int64)
    new_period = gap > 0
    idle_ns = gap[new_period].astype(np.uint64)
    # busy period k spans from the arrival opening it to the running max before the next one
    starts = np.concatenate([[0], np.nonzero(new_period)[0] + 1])
    ends = np.concatenate([starts[1:], [len(arrival)]])
    busy_len_ns = run_max[ends - 1] - arrival[starts]
    busy_requests = ends - starts
    return {
        "arrival": arrival,
        "completion": completion,
        "is_write": is_write,
        "idle_ns": idle_ns,
        "busy_len_ns": busy_len_ns,
        "busy_requests": busy_requests,
    }


@pytest.fixture(scope="module")
def trace(pgbench_path):
    return fallow.read_trace(pgbench_path)


def test_request_count_and_columns(trace, reference):
    assert len(trace) == 24_708
    assert trace.report["format"] == "msr"
    assert trace.devices() == [{"id": 0, "requests": 24_708}]
    np.testing.assert_array_equal(trace.arrival_ns, reference["arrival"])
    np.testing.assert_array_equal(trace.completion_ns, reference["completion"])
    assert int(trace.is_write.sum()) == 24_708 - 8_969  # README: 8,969 reads
    np.testing.assert_array_equal(trace.is_write, reference["is_write"])
    assert trace.span_s == pytest.approx(241.7, abs=0.05)


def test_idle_intervals_equal_numpy_exactly(trace, reference):
    idle_ns = trace.idle_intervals_ns()
    assert idle_ns.dtype == np.uint64
    np.testing.assert_array_equal(idle_ns, reference["idle_ns"])
    assert len(idle_ns) == 19_287  # README
    idle_s = trace.idle_intervals()
    assert idle_s.dtype == np.float64
    np.testing.assert_array_equal(idle_s, reference["idle_ns"] / 1e9)


def test_busy_periods_equal_numpy_exactly(trace, reference):
    b = trace.busy_periods_ns()
    np.testing.assert_array_equal(b["length_ns"], reference["busy_len_ns"])
    np.testing.assert_array_equal(b["requests"], reference["busy_requests"])
    assert b["requests"].sum() == len(trace)
    s = trace.busy_periods()
    np.testing.assert_array_equal(s["length_s"], reference["busy_len_ns"] / 1e9)
    assert reference["busy_requests"].mean() == pytest.approx(1.28, abs=0.005)  # README


def test_characterize_matches_numpy(trace, reference):
    c = fallow.characterize(trace)
    idle = reference["idle_ns"] / 1e9
    got = c.data["idle"]
    assert got["count"] == len(idle)
    rel = 1e-12
    assert got["total_s"] == pytest.approx(idle.sum(), rel=rel)
    assert got["mean_s"] == pytest.approx(idle.mean(), rel=rel)
    assert got["std_s"] == pytest.approx(idle.std(), rel=1e-9)  # population std (ddof=0)
    assert got["cv"] == pytest.approx(idle.std() / idle.mean(), rel=1e-9)
    assert got["min_s"] == idle.min()
    assert got["max_s"] == idle.max()
    for key, q in [("p50_s", 50), ("p90_s", 90), ("p99_s", 99), ("p999_s", 99.9)]:
        assert got[key] == pytest.approx(np.percentile(idle, q), rel=rel), key
    # the README's numbers for this trace
    assert got["mean_s"] == pytest.approx(12.3e-3, abs=0.05e-3)
    assert got["cv"] == pytest.approx(2.31, abs=0.005)
    assert got["max_s"] == pytest.approx(0.70, abs=0.005)

    busy_s = reference["busy_len_ns"] / 1e9
    b = c.data["busy"]
    assert b["count"] == len(busy_s)
    assert b["mean_s"] == pytest.approx(busy_s.mean(), rel=rel)
    assert b["p90_s"] == pytest.approx(np.percentile(busy_s, 90), rel=rel)
    assert b["mean_requests"] == pytest.approx(reference["busy_requests"].mean(), rel=rel)
    assert b["max_requests"] == reference["busy_requests"].max()
    # Threshold: smallest length T with at most 10 % of busy periods at or above it
    reqs = reference["busy_requests"]
    t = next(t for t in range(1, reqs.max() + 2) if (reqs >= t).sum() <= 0.1 * len(reqs))
    assert b["threshold_requests"] == t
    assert b["long_fraction"] == pytest.approx((reqs >= t).mean(), rel=1e-12)
    assert 0 < b["long_fraction"] <= 0.1
    util = busy_s.sum() / (busy_s.sum() + idle.sum())
    assert c.data["utilization"] == pytest.approx(util, rel=1e-12)

    # curves: CDF points are fractions of intervals at or below x
    cdf = c.idle_cdf
    sorted_idle = np.sort(idle)
    expect = np.searchsorted(sorted_idle, cdf["x_s"].to_numpy(), side="right") / len(idle)
    np.testing.assert_allclose(cdf["cdf"], expect)
    # ACF at lag 1 with the biased estimator
    d = idle - idle.mean()
    r1 = (d[:-1] * d[1:]).sum() / (d * d).sum()
    assert c.acf.loc[1, "acf"] == pytest.approx(r1, rel=1e-9)
    # concentration: share of idle time in the longest 10 %
    k = int(np.ceil(0.1 * len(idle)))
    top10 = sorted_idle[::-1][:k].sum() / idle.sum()
    assert c.data["concentration"]["top10_fraction"] == pytest.approx(top10, rel=1e-12)


def test_summary_and_frames(trace):
    c = fallow.characterize(trace)
    s = c.summary
    assert s["requests"] == 24_708
    assert s["idle_count"] == 19_287
    for frame in (
        c.idle_cdf,
        c.remaining,
        c.concentration,
        c.lag_pairs,
        c.busy_p_lag,
        c.acf,
        c.rate,
    ):
        assert len(frame) > 0
    assert list(c.lag_pairs.index) == list(range(1, 10))
    assert list(c.busy_p_lag.index) == list(range(1, 21))
    # rate: the bins hold every request
    r = c.rate
    assert (r["requests_per_s"] * c.data["rate"]["bin_s"]).sum() == pytest.approx(24_708)
    assert "Characterization" in repr(c)
    assert '"utilization"' in c.to_json()
