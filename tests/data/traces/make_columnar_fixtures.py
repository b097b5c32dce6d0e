"""Write the Parquet/Arrow fixtures with the writers users have (pandas on
pyarrow, polars, pyarrow's feather), so fallow's readers are tested on
files it did not write: five requests, two MSR hosts, times in ns.

    python tests/data/traces/make_columnar_fixtures.py tests/data/traces

The committed files were written with pandas 3.1.1, polars 2.1.0 and
pyarrow 26.0.1 (printed when run). Expected values, from `rows` below:
5 requests, hm:0 at 0 and 20 ms, rsrch:0 at 10, 30 and 40 ms, each
completing 1 ms later; 3 writes; offsets sum to 28672 bytes, sizes to
17408. `pandas-gzip.parquet` uses a codec fallow is built without.
"""

import sys
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather

out = Path(sys.argv[1])
print("pandas", pd.__version__, "polars", pl.__version__, "pyarrow", pa.__version__)
# rsrch:0 at 10, 30, 40 ms and hm:0 at 0, 20 ms, each 1 ms (two_hosts.csv)
rows = {
    "arrival_ns": [0, 10_000_000, 20_000_000, 30_000_000, 40_000_000],
    "completion_ns": [1_000_000, 11_000_000, 21_000_000, 31_000_000, 41_000_000],
    "offset_bytes": [0, 8192, 4096, 16384, 0],
    "size_bytes": [4096, 512, 4096, 512, 8192],
    "is_write": [False, True, False, True, True],
    "device": [0, 0, 0, 0, 0],
    "host": ["hm", "rsrch", "hm", "rsrch", "rsrch"],
}
df = pd.DataFrame(rows)
# pandas: datetime64[ns] arrivals, snappy (pandas' default codec)
pdf = df.assign(arrival_ns=pd.to_datetime(df["arrival_ns"], unit="ns"))
pdf.to_parquet(out / "pandas-snappy.parquet")
pdf.to_parquet(out / "pandas-gzip.parquet", compression="gzip")
# polars: categorical host, zstd (polars' default)
pldf = pl.from_pandas(df).with_columns(pl.col("host").cast(pl.Categorical))
pldf.write_parquet(out / "polars-zstd.parquet")
pldf.write_ipc(out / "polars.arrow")
pldf.write_ipc_stream(out / "polars.arrows")
# pyarrow's feather v2: lz4 by default
feather.write_feather(pa.Table.from_pandas(df), out / "pyarrow-lz4.feather")
