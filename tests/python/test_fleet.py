"""`fallow.fleet.sweep`: every backend gives the identical frame, and each
row is what `fallow.tune` answers for that trace, policy and budget alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
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


# --- a partitioned dataset (`fallow convert FILE --partition-by device`) ----

FLEET_KW = dict(policies=["fixed-wait"], budgets=BUDGETS, sizes=SIZES, service="disk")
VOLUMES = {17: 40.0, 419: 12.0, 5: 90.0}  # volume -> mean requests/s


def _fallow_cli() -> list[str] | None:
    """A `fallow` command line that has `convert --partition-by`: $FALLOW_BIN,
    the `fallow` on PATH, or the extension's own CLI (`python -m fallow`)."""
    candidates = []
    if os.environ.get("FALLOW_BIN"):
        candidates.append([os.environ["FALLOW_BIN"]])
    if shutil.which("fallow"):
        candidates.append([shutil.which("fallow")])
    candidates.append([sys.executable, "-m", "fallow"])
    for cmd in candidates:
        o = subprocess.run([*cmd, "convert", "--help"], capture_output=True, text=True)
        if o.returncode == 0 and "--partition-by" in o.stdout:
            return cmd
    return None


@pytest.fixture(scope="module")
def fleet_source(tmp_path_factory):
    """A 3-volume file in the Alibaba layout (arrivals interleaved in time
    order, as in the release) and its dataset written by the CLI."""
    cli = _fallow_cli()
    if cli is None:
        pytest.skip(
            "skip: no `fallow` with `convert --partition-by` ($FALLOW_BIN, PATH or "
            "python -m fallow): the dataset sweep was not tested"
        )
    rng = np.random.default_rng(26)
    records = []
    for volume, rate in VOLUMES.items():
        gaps_us = rng.exponential(1e6 / rate, 400).astype(np.int64) + 1
        for t_us in 1_577_836_800_000_000 + np.cumsum(gaps_us):
            size = int(rng.choice([4096, 16384, 65536]))
            offset = int(rng.integers(0, 1 << 18)) * 4096
            records.append((int(t_us), volume, "RW"[int(rng.integers(2))], offset, size))
    records.sort()
    d = tmp_path_factory.mktemp("fleet")
    source = d / "vols.csv"
    source.write_text("".join(f"{v},{op},{o},{s},{t}\n" for t, v, op, o, s in records))
    dataset = d / "vols"
    subprocess.run(
        [*cli, "convert", str(source), "--partition-by", "device", "-o", str(dataset)],
        check=True,
        capture_output=True,
    )
    return source, dataset


@pytest.fixture(scope="module")
def per_device_frame(fleet_source):
    """The source swept per device, `(file, volume)`: what every dataset sweep must equal."""
    source, _ = fleet_source
    return fallow.fleet.sweep([(source, v) for v in sorted(VOLUMES)], workers=2, **FLEET_KW)


def _without_trace(frame):
    return frame.drop(columns="trace")


def test_per_device_frame_is_real(per_device_frame):
    assert list(per_device_frame["device"]) == [5, 5, 17, 17, 419, 419]
    assert (per_device_frame["status"] == "ok").all()
    assert (per_device_frame["bg_throughput_bytes_per_s"] > 0).all()


@pytest.mark.parametrize("workers", [1, 2])
def test_dataset_local_equals_source(fleet_source, per_device_frame, workers):
    _, dataset = fleet_source
    frame = fallow.fleet.sweep(dataset, workers=workers, **FLEET_KW)
    assert (frame["trace"] == str(dataset)).all()
    pd.testing.assert_frame_equal(_without_trace(frame), _without_trace(per_device_frame))


def test_dataset_dask_equals_source(fleet_source, per_device_frame):
    pytest.importorskip("distributed", reason="the fleet extra (dask[distributed]) is absent")
    _, dataset = fleet_source
    frame = fallow.fleet.sweep(dataset, backend="dask", workers=2, **FLEET_KW)
    pd.testing.assert_frame_equal(_without_trace(frame), _without_trace(per_device_frame))


def test_dataset_ray_equals_source(fleet_source, per_device_frame):
    pytest.importorskip("ray", reason="the ray extra is absent")
    _, dataset = fleet_source
    frame = fallow.fleet.sweep(dataset, backend="ray", workers=2, **FLEET_KW)
    pd.testing.assert_frame_equal(_without_trace(frame), _without_trace(per_device_frame))


def test_dataset_one_partition_and_a_glob(fleet_source, per_device_frame):
    _, dataset = fleet_source
    one = fallow.fleet.sweep([(dataset, "17")], workers=1, **FLEET_KW)
    expected = per_device_frame[per_device_frame["device"] == 17].reset_index(drop=True)
    pd.testing.assert_frame_equal(_without_trace(one), _without_trace(expected))
    # a glob of per-device files: one trace each, its only device filled in
    files = fallow.fleet.sweep(str(dataset / "device=*" / "part-0.parquet"), workers=2, **FLEET_KW)
    assert sorted(files["device"]) == sorted(per_device_frame["device"])
    assert all(f"device={d}" in t for d, t in zip(files["device"], files["trace"]))
    by_device = files.sort_values(["device", "budget"], kind="stable").reset_index(drop=True)
    expected = per_device_frame.sort_values(["device", "budget"], kind="stable")
    pd.testing.assert_frame_equal(
        _without_trace(by_device), _without_trace(expected.reset_index(drop=True))
    )


def test_partition_of_several_parts(fleet_source, per_device_frame, tmp_path):
    """A device whose rows went to part-0, part-1 and part-2 (the writer
    closed its file, docs/fleet.md): each part written with the device's
    origin, as the CLI does; read in part order on one clock."""
    pl = pytest.importorskip("polars")
    _, dataset = fleet_source
    src = dataset / "device=17" / "part-0.parquet"
    metadata = {k: v for k, v in pl.read_parquet_metadata(src).items() if k.startswith("fallow.")}
    rows = pl.read_parquet(src)
    assert rows["arrival_ns"][0] == 0  # times from the device's origin, in every part
    split = tmp_path / "split" / "device=17"
    split.mkdir(parents=True)
    cuts = [0, 100, 250, len(rows)]
    for n, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        rows[lo:hi].write_parquet(split / f"part-{n}.parquet", metadata=metadata)
    frame = fallow.fleet.sweep(tmp_path / "split", workers=1, **FLEET_KW)
    expected = per_device_frame[per_device_frame["device"] == 17].reset_index(drop=True)
    pd.testing.assert_frame_equal(_without_trace(frame), _without_trace(expected))


def test_dataset_errors(fleet_source, tmp_path):
    _, dataset = fleet_source
    with pytest.raises(fallow.ParameterError, match="not a partitioned dataset"):
        fallow.fleet.sweep(tmp_path, **FLEET_KW)
    with pytest.raises(fallow.ParameterError, match="no partition device=999"):
        fallow.fleet.sweep([(dataset, 999)], **FLEET_KW)
    with pytest.raises(fallow.ParameterError, match="matches no file"):
        fallow.fleet.sweep(str(tmp_path / "*.csv"), **FLEET_KW)
    with pytest.raises(fallow.ParameterError, match="format does not apply"):
        fallow.fleet.sweep([(dataset, None, {"format": "alibaba"})], **FLEET_KW)
    (tmp_path / "device=1").mkdir()
    with pytest.raises(fallow.ParameterError, match="without part-N.parquet"):
        fallow.fleet.sweep(tmp_path, **FLEET_KW)
