"""Parquet and Arrow IPC between fallow's CLI and polars/pyarrow (docs/formats.md):
polars and pyarrow read what ``fallow convert -o x.parquet/.arrow`` wrote,
with the values of the CSV it came from, and ``fallow analyze`` reads what
polars and pandas wrote. Only the CLI and the data-frame libraries are
used: the command is ``python -m fallow``, or ``$FALLOW_CLI`` when set (a
``cargo build`` binary)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "tests" / "data" / "cli" / "two_hosts.csv"


def fallow(*args: str) -> subprocess.CompletedProcess:
    cmd = (
        [os.environ["FALLOW_CLI"]]
        if os.environ.get("FALLOW_CLI")
        else [sys.executable, "-m", "fallow"]
    )
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=False)


def analyze(path: Path) -> dict:
    out = fallow("analyze", str(path), "--device", "rsrch:0", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", ["t.parquet", "t.arrow"])
def test_polars_and_pyarrow_read_what_fallow_wrote(tmp_path: Path, name: str) -> None:
    pl = pytest.importorskip("polars")
    out = tmp_path / name
    done = fallow("convert", str(CSV), "-o", str(out))
    assert done.returncode == 0, done.stderr
    df = pl.read_parquet(out) if name.endswith(".parquet") else pl.read_ipc(out)
    # two_hosts.csv: 100-ns ticks 0, 100000, …: 0, 10, 20, 30, 40 ms; each
    # responds in 10000 ticks = 1 ms
    assert df["arrival_ns"].to_list() == [0, 10_000_000, 20_000_000, 30_000_000, 40_000_000]
    assert (df["completion_ns"] - df["arrival_ns"]).to_list() == [1_000_000] * 5
    assert df["host"].to_list() == ["hm", "rsrch", "hm", "rsrch", "rsrch"]
    assert df["device"].to_list() == [0] * 5
    assert df["is_write"].to_list() == [False, True, False, False, False]
    assert df["offset_bytes"].to_list() == [0, 8192, 4096, 0, 0]
    assert df["size_bytes"].to_list() == [4096] * 5
    pa = pytest.importorskip("pyarrow")
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(out)
    else:
        table = pa.ipc.open_file(out).read_all()
    assert table.num_rows == 5
    # the origin in Windows ticks × 100 ns, as fallow keeps it
    assert table.schema.metadata[b"fallow.origin_ns"] == str(128166372000000000 * 100).encode()


def test_fallow_reads_what_polars_and_pandas_wrote(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    rows = {
        "arrival_ns": [0, 10_000_000, 20_000_000, 30_000_000, 40_000_000],
        "completion_ns": [1_000_000, 11_000_000, 21_000_000, 31_000_000, 41_000_000],
        "offset_bytes": [0, 8192, 4096, 0, 0],
        "size_bytes": [4096] * 5,
        "is_write": [False, True, False, False, False],
        "device": [0] * 5,
        "host": ["hm", "rsrch", "hm", "rsrch", "rsrch"],
    }
    frame = pl.DataFrame(rows).with_columns(pl.col("host").cast(pl.Categorical))
    paths = [tmp_path / "p.parquet", tmp_path / "p.arrow", tmp_path / "p.arrows"]
    frame.write_parquet(paths[0])
    frame.write_ipc(paths[1])
    frame.write_ipc_stream(paths[2])
    try:
        import pandas as pd

        pdf = pd.DataFrame(rows).assign(
            arrival_ns=lambda d: pd.to_datetime(d["arrival_ns"], unit="ns")
        )
        pdf.to_parquet(tmp_path / "pandas.parquet")
        paths.append(tmp_path / "pandas.parquet")
    except ImportError:
        pass  # pandas.to_parquet needs pyarrow
    for path in paths:
        v = analyze(path)
        # rsrch:0 at 10, 30 and 40 ms, 1 ms each: idle 11→30 and 31→40 ms
        assert v["trace"]["requests"] == 3, path
        assert v["idle"]["count"] == 2, path
        assert v["idle"]["mean_s"] == pytest.approx(0.014, abs=1e-12), path
        names = [d["name"] for d in v["trace"]["devices"]]
        assert names == ["hm:0", "rsrch:0"], path
