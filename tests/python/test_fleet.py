"""`fallow.fleet.sweep`: every backend gives the identical frame, and each
row is what `fallow.tune` answers for that trace, policy and budget alone."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import fallow
import fallow.fleet

POLICIES = ["fixed-wait", "busy-bee"]
BUDGETS = ["1ms", "5%"]
SIZES = "64KiB,1MiB"


@pytest.fixture(scope="module")
def completion_traces(traces_dir):
    """The shared traces with recorded completion times (no service model needed)."""
    paths = [
        (traces_dir / "hp-hplajw-1992" / "ajw.1week.srt", 0),
        traces_dir / "pgbench-ext4-loop" / "pgbench-ext4-loop.csv.gz",
        traces_dir / "blkparse-sample" / "blktrace.txt.gz",
    ]
    for p in paths:
        f = p[0] if isinstance(p, tuple) else p
        if not f.is_file():
            pytest.skip(f"{f} not found")
    return paths


@pytest.fixture(scope="module")
def local_frame(completion_traces):
    return fallow.fleet.sweep(completion_traces, POLICIES, BUDGETS, sizes=SIZES, workers=2)


def test_local_frame_shape_and_order(local_frame, completion_traces):
    assert list(local_frame.columns) == fallow.fleet.COLUMNS
    assert len(local_frame) == len(completion_traces) * len(POLICIES) * len(BUDGETS)
    # Traces outermost, then policies, then budgets, in the order given.
    assert list(local_frame["policy"][:4]) == ["fixed-wait", "fixed-wait", "busy-bee", "busy-bee"]
    assert list(local_frame["budget"][:4]) == BUDGETS * 2
    assert list(local_frame["device"][::4]) == [0, 0, 8388624]  # single devices filled in
    assert set(local_frame["status"]) <= {"ok", "infeasible"}
    ok = local_frame[local_frame["status"] == "ok"]
    assert (ok.loc[ok["budget"] == "1ms", "fg_mean_added_delay_s"] <= 1e-3).all()
    assert (ok.loc[ok["budget"] == "5%", "fg_slowdown"] <= 0.05).all()


def test_rows_equal_tune_alone(local_frame, completion_traces):
    # An independent path: read and tune in this process, one budget at a time
    # is not comparable (budgets tuned together may do better), so tune them together.
    path, device = completion_traces[0]
    trace = fallow.read_trace(path)
    for policy in POLICIES:
        results = fallow.tune(
            trace, policy, ",".join(BUDGETS), device=device, sizes=SIZES, bg="size"
        )
        rows = local_frame[(local_frame["trace"] == str(path)) & (local_frame["policy"] == policy)]
        for r, (_, row) in zip(results, rows.iterrows()):
            assert row["budget"] == r.budget
            if r.best is None:
                assert row["status"] == "infeasible"
            else:
                assert row["spec"] == r.best["spec"]
                assert row["bg_throughput_bytes_per_s"] == r.best["bg_throughput_bytes_per_s"]


def test_dask_equals_local(local_frame, completion_traces):
    pytest.importorskip("distributed", reason="the fleet extra (dask[distributed]) is absent")
    frame = fallow.fleet.sweep(
        completion_traces, POLICIES, BUDGETS, backend="dask", sizes=SIZES, workers=2
    )
    pd.testing.assert_frame_equal(local_frame, frame)


def test_dask_existing_client(completion_traces):
    distributed = pytest.importorskip("distributed")
    traces = completion_traces[2:]  # the small blkparse trace
    local = fallow.fleet.sweep(traces, POLICIES, BUDGETS, sizes=SIZES, workers=1)
    with distributed.Client(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as client:
        frame = fallow.fleet.sweep(
            traces, POLICIES, BUDGETS, backend="dask", client=client, sizes=SIZES
        )
        assert client.status == "running"  # a client passed in is left open
    pd.testing.assert_frame_equal(local, frame)


def test_ray_equals_local(local_frame, completion_traces):
    pytest.importorskip("ray", reason="the ray extra is absent")
    frame = fallow.fleet.sweep(
        completion_traces, POLICIES, BUDGETS, backend="ray", sizes=SIZES, workers=2
    )
    pd.testing.assert_frame_equal(local_frame, frame)


def test_bad_backend_is_a_clear_error():
    with pytest.raises(
        fallow.ParameterError, match="unknown fleet backend 'spark'.*local, dask, ray"
    ):
        fallow.fleet.sweep(["x.csv"], POLICIES, BUDGETS, backend="spark")


def test_missing_backend_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail
    with pytest.raises(fallow.MissingExtraError, match=r"fallow\[ray\]"):
        fallow.fleet.sweep(["x.csv"], POLICIES, BUDGETS, backend="ray")


def test_errors_record_keeps_the_sweep_going(tmp_path, completion_traces):
    missing = tmp_path / "missing.csv"
    frame = fallow.fleet.sweep(
        [missing, completion_traces[2]],
        ["fixed-wait"],
        BUDGETS,
        sizes=SIZES,
        workers=1,
        errors="record",
    )
    assert list(frame["status"][:2]) == ["error", "error"]
    assert "missing.csv" in frame["error"][0]
    assert (frame["status"][2:] != "error").all()
    with pytest.raises(OSError):
        fallow.fleet.sweep([missing], ["fixed-wait"], BUDGETS, sizes=SIZES, workers=1)
