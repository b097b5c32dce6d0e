#!/usr/bin/env python3
"""Fleet-scale benchmark (docs/fleet.md): every volume of a synthetic
Alibaba-layout fleet file characterised in one pass, by fallow, polars and
DuckDB, then the file partitioned and one policy swept over every
partition with Dask.

One run:

1. **Generates** a fleet in the Alibaba Cloud block-trace layout
   (``device_id,opcode,offset,length,timestamp``, µs timestamps, no header,
   sorted by time; docs/formats.md): ``--volumes`` volumes (default 1,000)
   whose mean rates are heavy-tailed (Pareto, shape 1.2), each volume's
   rate modulated window by window (lognormal, σ = 1.5: on/off-like
   load) and its requests arriving in bursts (Poisson burst starts,
   geometric burst sizes of mean 8, exponential gaps of mean 300 µs
   inside a burst). The file is reused when its parameters match.
2. **Times, each in its own process** under ``/usr/bin/time`` (wall, CPU,
   peak RSS), all at the same priority:

   ``fallow analyze``  ``fallow analyze FILE --device all --service const:S --json``
   ``… (extension)``   the same command through the Python extension's CLI
                       (``python -m fallow``), when that is a release build
                       (``--fallow`` may be a dev-profile build); its rows
                       must equal the CLI's
   ``fallow convert``  ``fallow convert FILE --partition-by device -o DIR``
   ``polars``          ``scan_csv`` (schema given, only device and
                       timestamp read) → ``group_by(device).agg(…)``:
                       FCFS completions with a constant service time S as
                       a running max, idle gaps, their count, sum,
                       population std and 90th percentile
                       (``POLARS_MAX_THREADS=--threads``)
   ``duckdb``          the same in SQL with window functions
                       (``SET threads=--threads``)

   The service model is fallow's ``const:S`` (default 250 µs): a FCFS queue
   with a constant service time is the one ``--service`` model whose
   completions a dataframe engine can reproduce exactly (the others draw
   from a seeded random stream). For a device's requests in arrival order,
   ``c_i = max(a_i, c_{i-1}) + S`` is ``c_i = (i+1)·S + max_{j≤i}(a_j − j·S)``
   (a running max), an idle interval is ``a_i − c_{i-1}`` where positive,
   and busy periods tile the rest of ``[a_0, c_last]``.
3. **Checks** every device's figures of the three against each other:
   requests, idle count and busy count exactly; span, utilisation, idle
   total/mean and busy mean to a relative 1e-9; idle CV to 1e-6 (fallow
   uses Welford's running form); fallow's p90 (a histogram of 2
   significant digits) within 1 % of the exact order statistics bracketing
   the 90th percentile (polars' ``lower`` and ``higher`` ``quantile``),
   and within 1 % of DuckDB's ``quantile_disc`` (the nearest rank
   ``x_(⌈0.9 n⌉)``, the rank the histogram looks up; it must lie in
   polars' bracket). Any mismatch: exit status 1.
4. **Sweeps** one policy (``--policy``, ``--budget``, one BG request size)
   over every partition of the dataset with ``fallow.fleet.sweep(DIR,
   backend="dask")`` at each ``--sweep-workers`` count; the frames must be
   identical. It also times the largest partition's task alone, the floor
   of any worker count's wall time, and a sweep of the smallest partition
   alone (S: the cluster's start and stop), for a projection to N workers,
   ``T(N) = S + max((T(1) − S)/N, largest task)``.

With ``--memory-limit SIZE`` (root) every contender runs in a memory
cgroup of that size; one the limit kills is reported as such, with its
time until then, and its figures are left out of the comparison (polars
needs about 120 MiB per million requests here, so 200 M requests do not
fit this 24 GiB machine; DuckDB is told to spill at 3/4 of the limit).

Contenders whose package is absent (duckdb) are skipped with a ``skip:``
line; ``--only`` picks some (``fallow,extension,polars,duckdb``).

Usage:
  python bench/fleet_bench.py --requests 100000 --volumes 20 \
      --sweep-workers 1 --no-projection                  # CI smoke
  python bench/fleet_bench.py --requests 15000000 --keep --json bench/out/fleet.json

``--fallow PATH`` is the CLI (default: ``target/release/fallow``, else
``target/debug/fallow``, else ``fallow`` on PATH). Results in
``bench/out/`` are not committed; docs/fleet.md has the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
START_US = 1_577_836_800_000_000  # 2020-01-01, the Alibaba release's year
WINDOW_S = 60  # rate modulation window
BURST_MEAN = 8  # requests per burst
BURST_GAP_US = 300.0  # mean gap inside a burst
SIZES = np.array([4096, 8192, 16384, 32768, 65536, 131072, 524288], dtype=np.uint32)
SIZE_P = np.array([0.45, 0.15, 0.12, 0.08, 0.1, 0.07, 0.03])

# ------------------------------------------------------------------ generation


def _volume_rates(volumes: int, requests: int, duration_s: float, rng) -> np.ndarray:
    """Mean requests/s of each volume: Pareto (shape 1.2, heavy-tailed),
    scaled so they sum to the file's mean rate."""
    w = rng.pareto(1.2, volumes) + 1.0
    return w / w.sum() * (requests / duration_s)


def generate(path: Path, requests: int, volumes: int, duration_s: float, seed: int) -> int:
    """Write the fleet file; returns the number of requests written (the
    arrival processes are random, so close to but not exactly `requests`)."""
    import polars as pl

    rng = np.random.default_rng(seed)
    rates = _volume_rates(volumes, requests, duration_s, rng)
    # volume ids as in the release: a scattered set, not 0..n-1
    ids = np.sort(rng.choice(np.arange(1, 10 * volumes + 1), volumes, replace=False))
    capacity_blocks = (rng.integers(64, 2048, volumes) << 18).astype(np.int64)  # 4 KiB blocks
    windows = max(1, math.ceil(duration_s / WINDOW_S))
    sigma = 1.5
    written = 0
    with open(path, "wb") as out:
        for w in range(windows):
            start_us = START_US + int(w * WINDOW_S * 1e6)
            length_us = int(min(WINDOW_S, duration_s - w * WINDOW_S) * 1e6)
            # the window's load: lognormal with mean 1 (bursty on/off-like periods)
            load = rng.lognormal(-sigma * sigma / 2, sigma, volumes)
            bursts = rng.poisson(rates * load * (length_us / 1e6) / BURST_MEAN)
            n_bursts = int(bursts.sum())
            if n_bursts == 0:
                continue
            vol = np.repeat(np.arange(volumes), bursts)
            begin = rng.integers(0, length_us, n_bursts)
            size = rng.geometric(1.0 / BURST_MEAN, n_bursts)
            n = int(size.sum())
            req_vol = np.repeat(vol, size)
            # position inside each burst: cumulative exponential gaps
            gaps = rng.exponential(BURST_GAP_US, n)
            first = np.cumsum(size) - size
            cum = np.cumsum(gaps)
            offset_in_burst = cum - np.repeat(cum[first] - gaps[first], size)
            t = np.repeat(begin, size) + offset_in_burst.astype(np.int64)
            keep = t < length_us  # a burst running past the window is cut
            t, req_vol = t[keep] + start_us, req_vol[keep]
            order = np.argsort(t, kind="stable")
            t, req_vol = t[order], req_vol[order]
            m = len(t)
            frame = pl.DataFrame(
                {
                    "device_id": ids[req_vol],
                    "opcode": np.where(rng.random(m) < 0.7, "W", "R"),
                    "offset": rng.integers(0, capacity_blocks[req_vol]) * 4096,
                    "length": rng.choice(SIZES, m, p=SIZE_P),
                    "timestamp": t,
                }
            )
            frame.write_csv(out, include_header=False)
            written += m
    return written


def ensure_fleet(args, work: Path) -> tuple[Path, int]:
    path = work / "fleet.alibaba.csv"
    meta = work / "fleet.json"
    params = {
        "requests": args.requests,
        "volumes": args.volumes,
        "duration_s": args.duration_s,
        "seed": args.seed,
        "generator": 1,
    }
    if path.is_file() and meta.is_file():
        old = json.loads(meta.read_text())
        if old.get("params") == params and old.get("bytes") == path.stat().st_size:
            return path, old["written"]
    t0 = time.perf_counter()
    written = generate(path, args.requests, args.volumes, args.duration_s, args.seed)
    took = time.perf_counter() - t0
    meta.write_text(
        json.dumps({"params": params, "written": written, "bytes": path.stat().st_size})
    )
    print(f"generated {written:,} requests, {path.stat().st_size / 1e6:,.0f} MB in {took:.1f} s")
    return path, written


# ---------------------------------------------------------------- contenders

# One row per device: the raw integers each engine computes, from which
# _figures derives what `fallow analyze --device all` reports.
RAW = (
    "device",
    "requests",
    "first_ns",
    "last_c_ns",
    "idle_count",
    "idle_total_ns",
    "idle_std_ns",
    "p90_lo_ns",
    "p90_hi_ns",
)


def work_polars(path: str, service_ns: int, out: str) -> None:
    import polars as pl

    s = service_ns
    t = pl.col("ts") * 1000  # µs → ns
    i = pl.int_range(pl.len(), dtype=pl.Int64)
    c = (t - i * s).cum_max() + (i + 1) * s  # FCFS completions, constant service
    gap = t - c.shift(1)
    idle = gap.filter(gap > 0)
    frame = (
        pl.scan_csv(
            path,
            has_header=False,
            schema={
                "device": pl.Int64,
                "op": pl.String,
                "offset": pl.Int64,
                "length": pl.Int64,
                "ts": pl.Int64,
            },
        )
        .select("device", "ts")
        .group_by("device")
        .agg(
            requests=pl.len(),
            first_ns=t.first(),
            last_c_ns=c.last(),
            idle_count=idle.len(),
            idle_total_ns=idle.sum(),
            idle_std_ns=idle.std(ddof=0),
            p90_lo_ns=idle.quantile(0.9, "lower"),
            p90_hi_ns=idle.quantile(0.9, "higher"),
        )
        .sort("device")
        .collect()
    )
    frame.select(RAW).write_csv(out)


def work_duckdb(path: str, service_ns: int, threads: int, out: str) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    limit = os.environ.get("FLEET_BENCH_MEMORY_LIMIT_BYTES")
    if limit:
        # under --memory-limit: DuckDB spills to temp_directory at 3/4 of
        # the cgroup's limit (it does not read a v1 cgroup's limit itself)
        con.execute(f"SET memory_limit = '{int(limit) * 3 // 4 // 2**20}MiB'")
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"SET temp_directory = '{Path(out).parent / 'duckdb.tmp'}'")
    s = int(service_ns)
    rows = con.execute(
        f"""
        WITH r AS (
            SELECT device, ts * 1000 AS t FROM read_csv(?, header = false,
                columns = {{'device': 'BIGINT', 'op': 'VARCHAR', 'offset': 'BIGINT',
                            'length': 'BIGINT', 'ts': 'BIGINT'}})),
        n AS (
            SELECT device, t, row_number() OVER (PARTITION BY device ORDER BY t) - 1 AS i
            FROM r),
        k AS (
            SELECT device, t, i,
                max(t - i * {s}) OVER (PARTITION BY device ORDER BY i
                                      ROWS UNBOUNDED PRECEDING) + (i + 1) * {s} AS c
            FROM n),
        g AS (
            SELECT device, t, c, t - lag(c) OVER (PARTITION BY device ORDER BY i) AS gap
            FROM k)
        SELECT device,
            count(*) AS requests,
            min(t) AS first_ns,
            max(c) AS last_c_ns,
            count(*) FILTER (WHERE gap > 0) AS idle_count,
            sum(gap) FILTER (WHERE gap > 0) AS idle_total_ns,
            stddev_pop(gap) FILTER (WHERE gap > 0) AS idle_std_ns,
            -- the nearest-rank order statistic x_(ceil(0.9 n)), the rank
            -- fallow's histogram looks up: lower = higher here
            quantile_disc(gap, 0.9) FILTER (WHERE gap > 0) AS p90_lo_ns,
            quantile_disc(gap, 0.9) FILTER (WHERE gap > 0) AS p90_hi_ns
        FROM g GROUP BY device ORDER BY device
        """,
        [path],
    ).fetchall()
    with open(out, "w") as f:
        f.write(",".join(RAW) + "\n")
        for row in rows:
            f.write(",".join("" if v is None else str(v) for v in row) + "\n")


def run_worker(argv: list[str]) -> None:
    engine, path, service_ns, threads, out = argv
    if engine == "polars":
        work_polars(path, int(service_ns), out)
    else:
        work_duckdb(path, int(service_ns), int(threads), out)


def timed(
    cmd: list[str], env: dict[str, str] | None = None, cgroup: MemoryCgroup | None = None
) -> dict:
    """Run `cmd` under /usr/bin/time: wall s, CPU s, peak RSS MiB. In
    `cgroup` (``--memory-limit``), a run the limit ends is a result
    (``failed``), not an error: at 200 M requests polars needs more memory
    than this machine has."""
    fmt = "fleet_bench %e %U %S %M"
    inner = cmd
    if cgroup is not None:
        inner = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup.procs), *cmd]
        cgroup.reset()
    o = subprocess.run(
        ["/usr/bin/time", "-f", fmt, *inner],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines = [ln for ln in o.stderr.splitlines() if ln.startswith("fleet_bench ")]
    if o.returncode != 0:
        if cgroup is not None and cgroup.oom_killed() and lines:
            wall, user, sys_s, rss_kb = lines[-1].split()[1:]
            return {
                "failed": f"killed by the {cgroup.limit_bytes / 2**30:.1f} GiB memory limit",
                "wall_s": float(wall),
                "cpu_s": float(user) + float(sys_s),
                "peak_rss_mib": int(rss_kb) / 1024,
                "stdout": "",
            }
        sys.exit(f"{' '.join(cmd)} failed ({o.returncode}):\n{o.stderr[-3000:]}")
    wall, user, sys_s, rss_kb = lines[-1].split()[1:]
    return {
        "wall_s": float(wall),
        "cpu_s": float(user) + float(sys_s),
        "peak_rss_mib": int(rss_kb) / 1024,
        "stdout": o.stdout,
    }


class MemoryCgroup:
    """A memory cgroup of its own (v1 or v2, whichever has the memory
    controller), child of this process's, limited to `limit_bytes`: each
    contender is started in it, so one that outgrows the limit is killed
    there and reported, instead of the kernel's OOM killer choosing among
    the machine's processes."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        own = None
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if "memory" in controllers.split(","):
                own, self.v2 = rel, False
        mounts = [ln.split() for ln in Path("/proc/mounts").read_text().splitlines()]
        if own is not None:
            roots = [m[1] for m in mounts if m[2] == "cgroup" and "memory" in m[3].split(",")]
        else:
            rel = next(
                ln.split(":", 2)[2]
                for ln in Path("/proc/self/cgroup").read_text().splitlines()
                if ln.startswith("0::")
            )
            roots = (
                [
                    m[1]
                    for m in mounts
                    if m[2] == "cgroup2"
                    and "memory"
                    in (Path(m[1]) / rel.lstrip("/") / "cgroup.controllers").read_text().split()
                ]
                if rel
                else []
            )
            own, self.v2 = rel, True
        if not roots:
            sys.exit("--memory-limit: no cgroup memory controller mounted (v1 or v2)")
        self.path = Path(roots[0]) / own.lstrip("/") / f"fleet_bench_{os.getpid()}"
        try:
            self.path.mkdir()
            limit_file = "memory.max" if self.v2 else "memory.limit_in_bytes"
            (self.path / limit_file).write_text(str(limit_bytes))
        except OSError as e:
            sys.exit(f"--memory-limit: cannot make a cgroup at {self.path}: {e} (needs root)")
        self.procs = self.path / "cgroup.procs"

    def reset(self) -> None:
        self._ooms = self._oom_count()

    def _oom_count(self) -> int:
        if self.v2:
            events = (self.path / "memory.events").read_text().split()
            return int(events[events.index("oom_kill") + 1])
        # memory.oom_control's oom_kill (kernel 4.13+); not failcnt, which
        # also counts page cache reclaimed at the limit
        control = (self.path / "memory.oom_control").read_text().split()
        return int(control[control.index("oom_kill") + 1])

    def oom_killed(self) -> bool:
        return self._oom_count() > self._ooms

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def _parse_bytes(text: str) -> int:
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1] if t and t[-1] in units else ""
    number = t[: len(t) - len(unit)]
    try:
        value = float(number) * units[unit]
    except ValueError:
        sys.exit(f"--memory-limit {text!r}: expected a size such as 12GiB")
    if value < 2**26:
        sys.exit(f"--memory-limit {text!r}: at least 64 MiB")
    return int(value)


# ------------------------------------------------------------------ checking


def _figures(raw: dict) -> dict:
    """`fallow analyze --device all`'s figures from one engine's integers."""
    n = int(raw["requests"])
    idle_count = int(raw["idle_count"] or 0)
    # integers: ns since 1970 (~1.6e18) are past a float's 2^53
    idle_total_ns = int(raw["idle_total_ns"] or 0)
    span_ns = int(raw["last_c_ns"]) - int(raw["first_ns"])
    busy_ns = span_ns - idle_total_ns
    mean = idle_total_ns / idle_count if idle_count else 0.0
    std = float(raw["idle_std_ns"] or 0)
    return {
        "requests": n,
        "span_s": span_ns / 1e9,
        "utilization": busy_ns / span_ns if span_ns > 0 else 0.0,
        "idle_count": idle_count,
        "idle_total_s": idle_total_ns / 1e9,
        "idle_mean_s": mean / 1e9,
        "idle_cv": std / mean if mean > 0 else 0.0,
        "busy_count": idle_count + 1,
        "busy_mean_s": busy_ns / (idle_count + 1) / 1e9,
        "p90_lo_s": float(raw["p90_lo_ns"] or 0) / 1e9,
        "p90_hi_s": float(raw["p90_hi_ns"] or 0) / 1e9,
    }


def _read_raw(path: Path) -> dict[int, dict]:
    import csv

    with open(path) as f:
        return {int(r["device"]): _figures(r) for r in csv.DictReader(f)}


EXACT = ("requests", "idle_count", "busy_count")
REL_1E9 = ("span_s", "utilization", "idle_total_s", "idle_mean_s", "busy_mean_s")


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def compare(fallow_rows: list[dict], engines: dict[str, dict[int, dict]]) -> list[str]:
    """Every mismatch, as a line naming device, figure and values."""
    bad = []
    ours = {r["id"]: r for r in fallow_rows}
    for name, theirs in engines.items():
        if set(theirs) != set(ours):
            bad.append(f"{name}: devices differ ({len(theirs)} vs fallow's {len(ours)})")
            continue
        for dev, row in ours.items():
            t = theirs[dev]
            for k in EXACT:
                if row[k] != t[k]:
                    bad.append(f"{name} device {dev} {k}: {t[k]} vs fallow {row[k]}")
            for k in REL_1E9:
                if not _close(row[k], t[k], 1e-9):
                    bad.append(f"{name} device {dev} {k}: {t[k]!r} vs fallow {row[k]!r}")
            if not _close(row["idle_cv"], t["idle_cv"], 1e-6):
                bad.append(f"{name} device {dev} idle_cv: {t['idle_cv']} vs {row['idle_cv']}")
            if row["idle_count"] and not (
                t["p90_lo_s"] * 0.99 <= row["idle_p90_s"] <= t["p90_hi_s"] * 1.01
            ):
                bad.append(
                    f"{name} device {dev} idle_p90_s: fallow {row['idle_p90_s']} outside "
                    f"[{t['p90_lo_s']}, {t['p90_hi_s']}] ± 1 %"
                )
    if "polars" in engines and "duckdb" in engines:
        # DuckDB's nearest rank lies between polars' lower and higher ones
        p, d = engines["polars"], engines["duckdb"]
        for dev in set(p) & set(d):
            if not p[dev]["p90_lo_s"] <= d[dev]["p90_lo_s"] <= p[dev]["p90_hi_s"]:
                bad.append(f"duckdb device {dev} p90 {d[dev]['p90_lo_s']} outside polars' bracket")
    return bad


# -------------------------------------------------------------------- sweep


def sweep(dataset: Path, args, service: str) -> dict:
    import logging

    import pandas as pd

    # a LocalCluster closing logs its workers' closed heartbeats as errors
    logging.getLogger("distributed").setLevel(logging.CRITICAL)

    import fallow.fleet

    kw = dict(
        policies=[args.policy],
        budgets=[args.budget],
        sizes=args.size,
        service=service,
        backend="dask",
    )
    out: dict = {"policy": args.policy, "budget": args.budget, "size": args.size, "runs": []}
    frames = []
    for workers in args.sweep_workers:
        t0 = time.perf_counter()
        frame = fallow.fleet.sweep(dataset, workers=workers, **kw)
        took = time.perf_counter() - t0
        frames.append(frame)
        out["runs"].append({"workers": workers, "wall_s": took, "rows": len(frame)})
        print(f"  dask sweep, {workers} worker(s): {took:.1f} s, {len(frame)} rows")
    for f in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], f)
    out["identical"] = True
    out["status_counts"] = frames[0]["status"].value_counts().to_dict()
    if not args.projection:
        return out
    # the largest partition's task alone, in this process: no worker count
    # goes below it
    parts = sorted(
        dataset.glob("device=*"), key=lambda d: -sum(p.stat().st_size for p in d.iterdir())
    )
    files = sorted(str(p) for p in parts[0].glob("part-*.parquet"))
    options = dict(bg="size", sizes=args.size, max_delay=None, threads=1, service=service)
    t0 = time.perf_counter()
    fallow.fleet._tune_task(
        str(dataset), parts[0].name, args.policy, [args.budget], options, "raise", files
    )
    out["largest_partition_s"] = time.perf_counter() - t0
    out["largest_partition"] = parts[0].name
    # what does not divide among workers: a cluster's start and stop with
    # the smallest partition's task
    t0 = time.perf_counter()
    fallow.fleet.sweep([(dataset, parts[-1].name[len("device=") :])], workers=1, **kw)
    out["startup_s"] = startup_s = time.perf_counter() - t0
    runs = {r["workers"]: r["wall_s"] for r in out["runs"]}
    if 1 in runs:
        # T(N) = S + max(W/N, the largest task): W, the tasks' work, is the
        # 1-worker run less S, and divides among N workers (one core each,
        # tasks outnumbering workers) down to the largest partition's task,
        # which one worker runs alone
        work_s = max(runs[1] - startup_s, 0.0)
        out["projection_s"] = {
            n: startup_s + max(work_s / n, out["largest_partition_s"]) for n in (2, 4, 8, 16, 64)
        }
        print(
            f"  projection T(N) = {startup_s:.1f} s + max({work_s:.1f} s / N, "
            f"{out['largest_partition_s']:.1f} s): "
            + ", ".join(f"N={n}: {t:.1f} s" for n, t in out["projection_s"].items())
        )
    return out


# --------------------------------------------------------------------- main


def find_fallow(arg: str | None) -> str:
    if arg:
        return arg
    for p in (REPO / "target/release/fallow", REPO / "target/debug/fallow"):
        if p.is_file():
            return str(p)
    found = shutil.which("fallow")
    if not found:
        sys.exit("no fallow binary: build it or pass --fallow PATH")
    return found


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        run_worker(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200_000_000)
    ap.add_argument("--volumes", type=int, default=1000)
    ap.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="trace length (default: a mean fleet rate of 2,000 requests/s)",
    )
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--service", default="250us", help="constant service time (const:S)")
    ap.add_argument("--threads", type=int, default=2, help="polars and DuckDB threads")
    ap.add_argument("--fallow", help="the fallow CLI")
    ap.add_argument("--dir", type=Path, default=REPO / "bench/out/fleet")
    ap.add_argument("--keep", action="store_true", help="keep the CSV and dataset")
    ap.add_argument("--only", default="fallow,extension,polars,duckdb")
    ap.add_argument("--policy", default="fixed-wait")
    ap.add_argument("--budget", default="5%")
    ap.add_argument("--size", default="256KiB")
    ap.add_argument("--sweep-workers", default="1,2")
    ap.add_argument(
        "--no-projection",
        dest="projection",
        action="store_false",
        help="skip the largest-partition and start-up timings",
    )
    ap.add_argument(
        "--memory-limit",
        help="run every contender in a memory cgroup of this size (e.g. 12GiB; root): "
        "one that outgrows it is reported as killed, not left to the kernel's OOM killer",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.sweep_workers = [int(w) for w in args.sweep_workers.split(",") if w]
    if args.duration_s is None:
        args.duration_s = max(60.0, args.requests / 2000)
    only = set(args.only.split(","))
    cli = find_fallow(args.fallow)
    service_ns = _parse_ns(args.service)
    service = f"const:{service_ns}ns"
    work = args.dir
    work.mkdir(parents=True, exist_ok=True)
    path, written = ensure_fleet(args, work)
    size_bytes = path.stat().st_size
    with open(path, "rb") as f:  # warm the page cache
        while f.read(1 << 24):
            pass
    results: dict = {
        "requests": written,
        "volumes": args.volumes,
        "csv_bytes": size_bytes,
        "service": service,
        "threads": args.threads,
        "fallow": cli,
        "machine": {
            "cores": os.cpu_count(),
            "loadavg_before": os.getloadavg(),
            "python": platform.python_version(),
        },
        "contenders": {},
    }
    res = results["contenders"]
    cgroup = MemoryCgroup(_parse_bytes(args.memory_limit)) if args.memory_limit else None
    if cgroup is not None:
        results["memory_limit_bytes"] = cgroup.limit_bytes
    engines: dict[str, dict[int, dict]] = {}
    fallow_rows = None
    if "fallow" in only:
        r = timed(
            [cli, "analyze", str(path), "--device", "all", "--service", service, "--json"],
            cgroup=cgroup,
        )
        if "failed" in r:
            sys.exit(f"fallow analyze: {r['failed']}")
        fallow_rows = json.loads(r.pop("stdout"))["devices"]
        res["fallow analyze --device all"] = {**r, "threads": 1}
    if "extension" in only:
        # the same command through the Python extension's CLI, its rows
        # checked against the CLI's; an optimised build is timed as such, a
        # debug one (scripts/dev-python.sh's default, for the tests) is run
        # and checked all the same and named so: its time is not fallow's
        import fallow

        build = "debug build" if fallow._fallow._debug_build else "release"
        r = timed(
            [
                sys.executable,
                "-m",
                "fallow",
                "analyze",
                str(path),
                "--device",
                "all",
                "--service",
                service,
                "--json",
            ]
        )
        rows = json.loads(r.pop("stdout"))["devices"]
        if fallow_rows is not None and rows != fallow_rows:
            sys.exit("the extension's CLI and the fallow CLI give different rows")
        fallow_rows = fallow_rows or rows
        res[f"fallow analyze --device all (extension, {build})"] = {**r, "threads": 1}
    if "fallow" in only:
        dataset = work / "fleet.dataset"
        if dataset.exists():
            shutil.rmtree(dataset)
        r = timed(
            [cli, "convert", str(path), "--partition-by", "device", "-o", str(dataset)],
            cgroup=cgroup,
        )
        if "failed" in r:
            sys.exit(f"fallow convert: {r['failed']}")
        r.pop("stdout")
        files = list(dataset.glob("device=*/part-*.parquet"))
        r["files"] = len(files)
        r["dataset_bytes"] = sum(p.stat().st_size for p in files)
        res["fallow convert --partition-by device"] = {**r, "threads": 1}
    for engine in ("polars", "duckdb"):
        if engine not in only:
            continue
        if importlib.util.find_spec(engine) is None:
            print(f"skip: {engine} is not installed; not timed")
            continue
        out = work / f"{engine}.csv"
        r = timed(
            [
                sys.executable,
                __file__,
                "--worker",
                engine,
                str(path),
                str(service_ns),
                str(args.threads),
                str(out),
            ],
            env={
                "POLARS_MAX_THREADS": str(args.threads),
                "FLEET_BENCH_MEMORY_LIMIT_BYTES": str(cgroup.limit_bytes) if cgroup else "",
            },
            cgroup=cgroup,
        )
        r.pop("stdout")
        res[engine] = {**r, "threads": args.threads}
        if "failed" in r:
            print(
                f"{engine}: {r['failed']} after {r['wall_s']:.0f} s; its figures are not compared"
            )
            continue
        engines[engine] = _read_raw(out)
    if cgroup is not None:
        cgroup.remove()
    results["machine"]["loadavg_after"] = os.getloadavg()
    bad = compare(fallow_rows, engines) if fallow_rows is not None else []
    results["agreement"] = {"devices": len(fallow_rows or []), "mismatches": bad[:50]}
    _print_table(results)
    if bad:
        print(f"MISMATCH ({len(bad)}):", *bad[:20], sep="\n  ")
    elif fallow_rows is not None and engines:
        print(
            f"agreement: {len(fallow_rows)} devices, "
            f"{', '.join(engines)} = fallow (counts exact, times 1e-9, CV 1e-6, p90 1 %)"
        )
    if "fallow" in only and args.sweep_workers:
        results["sweep"] = sweep(work / "fleet.dataset", args, service)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    if not args.keep:
        shutil.rmtree(work / "fleet.dataset", ignore_errors=True)
        path.unlink()
        (work / "fleet.json").unlink()
    return 1 if bad else 0


def _parse_ns(text: str) -> int:
    for unit, scale in (("ns", 1), ("us", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return round(float(text[: -len(unit)]) * scale)
    sys.exit(f"--service {text!r}: expected a time such as 250us")


def _print_table(results: dict) -> None:
    n = results["requests"]
    print(
        f"\n{n:,} requests, {results['volumes']} volumes, "
        f"{results['csv_bytes'] / 1e6:,.0f} MB CSV, service {results['service']}"
    )
    print("| contender | threads | wall s | CPU s | M req/s | M req/s per core | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results["contenders"].items():
        if "failed" in r:
            print(
                f"| {name} | {r['threads']} | {r['failed']} after {r['wall_s']:.0f} s | "
                f"{r['cpu_s']:.2f} | – | – | {r['peak_rss_mib']:.0f} |"
            )
            continue
        per_core = n / r["cpu_s"] / 1e6 if r["cpu_s"] > 0 else float("nan")
        print(
            f"| {name} | {r['threads']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
            f"{n / r['wall_s'] / 1e6:.2f} | {per_core:.2f} | {r['peak_rss_mib']:.0f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
