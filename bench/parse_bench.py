#!/usr/bin/env python3
"""Speed benchmark (bench/README.md): read an MSR Cambridge CSV trace and extract its
idle intervals, with fallow, polars and pandas + numpy.

One run generates a realistic MSR-format CSV (default 10 M requests) in a
temporary directory, warms the page cache, then times each contender in its
own fresh subprocess:

  fallow           fallow.read_trace(path) + trace.idle_intervals_ns()
                   (Rust reader through Python, GIL released; a large
                   uncompressed trace is read on one thread per core)
  fallow-1thread   the same with FALLOW_THREADS=1 (one reading thread)
  polars-1thread   POLARS_MAX_THREADS=1; scan_csv with a schema, the trace
                   columns collected, idle intervals with expressions
                   (cum_max of completions, gap to the previous running max)
  polars           the same with all threads (reference)
  pandas+numpy     read_csv (C engine, dtypes given) + np.maximum.accumulate
  fallow-cli       `fallow analyze --json` (full characterisation, more work
                   than the others; reported separately, only if the binary
                   exists or --cli is given)

Every contender builds the same trace columns (arrival, completion, offset,
size, op, device; the hostname is not kept) and then the idle intervals; the
results must be identical (count, sum and a SHA-1 of the uint64 lengths),
else the script exits with status 1. Peak RSS is measured inside each
subprocess (VmHWM; see _rss_mb), next to its RSS after imports.

Usage:
  python bench/parse_bench.py                      # 10 M requests
  python bench/parse_bench.py --requests 200000    # CI smoke size
  python bench/parse_bench.py --json out.json --repeat 3

The fallow extension must be an optimised build for figures
(`FALLOW_PY_PROFILE=release scripts/dev-python.sh`; the script's default,
the dev profile, is a debug build); the script refuses a debug build unless
--allow-debug is given, and then says its times are not fallow's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
NAMES = ["ts", "host", "disk", "type", "offset", "size", "resp"]
BASE_TICKS = 128166372000000000  # 2007-02-22, the MSR Cambridge traces' week
CHUNK = 1_000_000


# ---------------------------------------------------------------- generation


def _digits(v: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Decimal ASCII of non-negative integers as an (n, width) byte matrix,
    with a mask that drops the leading zeros."""
    v = v.astype(np.uint64, copy=False)
    out = np.empty((len(v), width), dtype=np.uint8)
    x = v.copy()
    for j in range(width - 1, -1, -1):
        out[:, j] = x % np.uint64(10) + np.uint64(48)
        x //= np.uint64(10)
    ndig = np.ones(len(v), dtype=np.int64)
    p = 10
    for _ in range(1, width):
        ndig += v >= np.uint64(p)
        p *= 10
    mask = np.arange(width)[None, :] >= (width - ndig)[:, None]
    return out, mask


def _const(n: int, text: bytes) -> tuple[np.ndarray, np.ndarray]:
    row = np.frombuffer(text, dtype=np.uint8)
    return np.broadcast_to(row, (n, len(row))), np.ones((n, len(row)), dtype=bool)


def _csv_chunk(ts, host: bytes, write, offset, size, resp) -> bytes:
    n = len(ts)
    op = np.where(
        write[:, None], np.frombuffer(b"Write", np.uint8), np.frombuffer(b"Read ", np.uint8)
    )
    op_mask = np.ones((n, 5), dtype=bool)
    op_mask[:, 4] = write
    parts = [
        _digits(ts, 19),
        _const(n, b"," + host + b",0,"),
        (op, op_mask),
        _const(n, b","),
        _digits(offset, 13),
        _const(n, b","),
        _digits(size, 7),
        _const(n, b","),
        _digits(resp, 10),
        _const(n, b"\n"),
    ]
    mat = np.hstack([p[0] for p in parts])
    mask = np.hstack([p[1] for p in parts])
    return mat[mask].tobytes()


def generate(path: Path, requests: int, seed: int) -> None:
    """Write an MSR Cambridge CSV: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
    with filetime ticks (100 ns). Arrivals are bursty (mostly sub-millisecond
    gaps inside bursts, lognormal gaps between them, rare multi-second
    pauses); response times are lognormal (median 0.5 ms), so requests
    overlap and busy periods span several requests."""
    rng = np.random.default_rng(seed)
    t = BASE_TICKS
    with open(path, "wb") as f:
        for start in range(0, requests, CHUNK):
            n = min(CHUNK, requests - start)
            kind = rng.random(n)
            gaps = np.where(
                kind < 0.75,
                rng.exponential(3_000, n),  # inside a burst: mean 0.3 ms
                rng.lognormal(np.log(150_000), 1.2, n),  # between bursts: median 15 ms
            )
            gaps = np.where(kind > 0.9995, rng.exponential(2e7, n), gaps)  # pauses: mean 2 s
            ticks = np.maximum(gaps.round(), 1).astype(np.uint64)
            ts = np.uint64(t) + np.cumsum(ticks, dtype=np.uint64)
            t = int(ts[-1])
            write = rng.random(n) < 0.6
            offset = rng.integers(0, 500 * 2**30 // 4096, n, dtype=np.uint64) * np.uint64(4096)
            size = rng.choice(
                np.array([512, 4096, 8192, 16384, 32768, 65536], dtype=np.uint64),
                n,
                p=[0.05, 0.45, 0.2, 0.15, 0.05, 0.1],
            )
            resp = np.maximum(rng.lognormal(np.log(5_000), 1.0, n).round(), 1).astype(np.uint64)
            f.write(_csv_chunk(ts, b"usr", write, offset, size, resp))


# ---------------------------------------------------------------- contenders
# Each runs in a fresh interpreter (`--worker NAME PATH`) and prints one JSON line.


def _rss_mb() -> float:
    """Peak resident set size of this process so far, MB.

    VmHWM rather than getrusage's ru_maxrss: Linux keeps ru_maxrss across
    fork and execve, so a fresh worker would report the driver's peak (the
    generator's buffers) as its own; VmHWM belongs to the new address space.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _digest(idle: np.ndarray) -> dict:
    idle = np.ascontiguousarray(idle, dtype="<u8")
    return {
        "idle_count": int(len(idle)),
        "idle_sum_ns": int(idle.sum(dtype=np.uint64)),
        "idle_sha1": hashlib.sha1(idle.tobytes()).hexdigest(),
    }


def _cores() -> int:
    """Cores this process may run on (what Rust's available_parallelism sees)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def work_fallow(path: str) -> dict:
    import fallow

    if fallow._fallow._debug_build and not os.environ.get("FALLOW_BENCH_ALLOW_DEBUG"):
        raise SystemExit("the fallow extension is a debug build: run scripts/dev-python.sh first")
    base = _rss_mb()
    t0 = time.perf_counter()
    trace = fallow.read_trace(path)
    idle = trace.idle_intervals_ns()
    secs = time.perf_counter() - t0
    assert len(trace) > 0
    threads = int(os.environ.get("FALLOW_THREADS") or 0) or _cores()
    if os.path.getsize(path) < 32 << 20:  # Parallelism::MIN_FILE_BYTES in fallow-core
        threads = 1  # smaller files are read sequentially
    return {"seconds": secs, "base_rss_mb": base, "threads": threads, **_digest(idle)}


def work_polars(path: str) -> dict:
    import polars as pl

    base = _rss_mb()
    schema = {
        "ts": pl.UInt64,
        "host": pl.String,
        "disk": pl.UInt32,
        "type": pl.String,
        "offset": pl.UInt64,
        "size": pl.UInt32,
        "resp": pl.UInt64,
    }
    t0 = time.perf_counter()
    ts = pl.col("ts")
    # rebase before scaling: 2007 filetimes × 100 overflow int64
    arrival = ((ts - ts.first()) * 100).cast(pl.Int64)
    trace = (
        pl.scan_csv(path, has_header=False, schema=schema)
        .select(
            arrival.alias("arrival_ns"),
            (arrival + (pl.col("resp") * 100).cast(pl.Int64)).alias("completion_ns"),
            pl.col("offset").alias("offset_bytes"),
            pl.col("size").alias("size_bytes"),
            (pl.col("type") == "Write").alias("is_write"),
            pl.col("disk").alias("device"),
        )
        .collect()
    )
    gap = pl.col("arrival_ns") - pl.col("completion_ns").cum_max().shift(1)
    idle = trace.select(gap.alias("gap")).filter(pl.col("gap") > 0)["gap"].to_numpy()
    secs = time.perf_counter() - t0
    return {"seconds": secs, "base_rss_mb": base, "threads": pl.thread_pool_size(), **_digest(idle)}


def work_pandas(path: str) -> dict:
    import pandas as pd

    base = _rss_mb()
    t0 = time.perf_counter()
    df = pd.read_csv(
        path,
        header=None,
        names=NAMES,
        usecols=["ts", "disk", "type", "offset", "size", "resp"],
        dtype={
            "ts": np.uint64,
            "disk": np.uint32,
            "type": "category",
            "offset": np.uint64,
            "size": np.uint32,
            "resp": np.uint64,
        },
        engine="c",
    )
    ts = df["ts"].to_numpy()
    arrival = ((ts - ts[0]) * np.uint64(100)).astype(np.int64)
    completion = arrival + (df["resp"].to_numpy() * np.uint64(100)).astype(np.int64)
    is_write = (df["type"] == "Write").to_numpy()
    assert len(is_write) == len(arrival)
    run_max = np.maximum.accumulate(completion)
    gap = arrival[1:] - run_max[:-1]
    idle = gap[gap > 0]
    secs = time.perf_counter() - t0
    # pandas' C parser and numpy's accumulate run on one thread
    return {"seconds": secs, "base_rss_mb": base, "threads": 1, **_digest(idle)}


def work_cli(path: str) -> dict:
    cli = os.environ["FALLOW_BENCH_CLI"]
    t0 = time.perf_counter()
    out = subprocess.run([cli, "analyze", "--json", path], capture_output=True, check=True)
    secs = time.perf_counter() - t0
    # the CLI is this worker's only child; its ru_maxrss is at least this
    # (small) worker's RSS at fork, far below the CLI's own peak
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    res: dict = {"seconds": secs, "base_rss_mb": 0.0, "peak_rss_mb": rss}
    try:
        data = json.loads(out.stdout)
        res["idle_count"] = data["idle"]["count"]
    except (ValueError, KeyError, TypeError):
        pass
    return res


WORKERS = {
    "fallow": work_fallow,
    "fallow-1thread": work_fallow,
    "polars-1thread": work_polars,
    "polars": work_polars,
    "pandas+numpy": work_pandas,
    "fallow-cli": work_cli,
}


def run_worker(name: str, path: str) -> None:
    res = WORKERS[name](path)
    res.setdefault("peak_rss_mb", _rss_mb())
    print(json.dumps(res))


# ---------------------------------------------------------------- driver


def spawn(name: str, path: Path, cli: str | None) -> dict:
    env = dict(os.environ)
    if name == "fallow-1thread":
        env["FALLOW_THREADS"] = "1"  # read by the reader at each read
    elif name == "fallow":
        env.pop("FALLOW_THREADS", None)
    elif name == "polars-1thread":
        env["POLARS_MAX_THREADS"] = "1"  # read by polars at import
    elif name == "polars":
        env.pop("POLARS_MAX_THREADS", None)
    if cli:
        env["FALLOW_BENCH_CLI"] = cli
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", name, str(path)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def find_cli(arg: str | None) -> str | None:
    if arg == "none":
        return None
    if arg:
        return arg
    for p in (REPO / "target" / "release" / "fallow", Path(shutil.which("fallow") or "")):
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def available(name: str) -> bool:
    mod = {"polars-1thread": "polars", "polars": "polars", "pandas+numpy": "pandas"}.get(name)
    if mod is None:
        return True
    import importlib.util

    return importlib.util.find_spec(mod) is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000_000, help="requests in the trace (10 M)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="runs per contender; the fastest counts")
    ap.add_argument("--dir", help="where to write the CSV (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the generated CSV")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    ap.add_argument(
        "--cli", help="fallow binary to time (default target/release/fallow; 'none' to skip)"
    )
    ap.add_argument("--only", help="comma-separated contenders to run")
    ap.add_argument(
        "--allow-debug", action="store_true", help="time a debug build of the extension"
    )
    ap.add_argument("--worker", nargs=2, metavar=("NAME", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        run_worker(*args.worker)
        return 0
    if args.allow_debug:
        os.environ["FALLOW_BENCH_ALLOW_DEBUG"] = "1"
        import fallow

        if fallow._fallow._debug_build:
            # CI's smoke run: it checks that every contender gives the same
            # idle intervals; the times of a debug build are not fallow's
            print("note: the extension is a debug build (--allow-debug): not fallow's times")

    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fallow-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"msr-{args.requests}.csv"
    try:
        t0 = time.perf_counter()
        generate(path, args.requests, args.seed)
        gen_s = time.perf_counter() - t0
        size = path.stat().st_size
        with open(path, "rb") as f:  # warm the page cache: every contender reads from memory
            while f.read(1 << 24):
                pass
        print(
            f"trace: {path} — {args.requests:,} requests, {size / 1e6:,.1f} MB "
            f"(generated in {gen_s:.1f} s)"
        )

        cli = find_cli(args.cli)
        names = ["fallow", "fallow-1thread", "polars-1thread", "polars", "pandas+numpy"] + (
            ["fallow-cli"] if cli else []
        )
        if args.only:
            names = [n for n in names if n in args.only.split(",")]
        results: dict[str, dict] = {}
        for name in names:
            if not available(name):
                print(f"  {name}: skipped (not installed)")
                continue
            try:
                runs = [spawn(name, path, cli) for _ in range(max(1, args.repeat))]
            except RuntimeError as e:
                if name != "fallow-cli":
                    raise
                print(f"  {name}: failed, not counted ({str(e).splitlines()[-1]})")
                continue
            best = min(runs, key=lambda r: r["seconds"])
            best["all_seconds"] = [r["seconds"] for r in runs]
            results[name] = best
            print(f"  {name}: {best['seconds']:.3f} s")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
            if not args.dir:
                shutil.rmtree(tmp, ignore_errors=True)

    ref = results.get("fallow")
    for r in results.values():
        r["mb_per_s"] = size / 1e6 / r["seconds"]
        r["requests_per_s"] = args.requests / r["seconds"]
        r["ratio_vs_fallow"] = r["seconds"] / ref["seconds"] if ref else None

    print()
    head = (
        f"{'contender':<16}{'threads':>8}{'seconds':>9}{'MB/s':>9}{'Mreq/s':>9}{'× fallow':>10}"
        f"{'peak RSS':>10}{'after import':>14}{'idle intervals':>16}"
    )
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        ratio = f"{r['ratio_vs_fallow']:.2f}" if r["ratio_vs_fallow"] else "-"
        threads = r.get("threads", "-")
        print(
            f"{name:<16}{threads:>8}{r['seconds']:>9.3f}{r['mb_per_s']:>9.1f}"
            f"{r['requests_per_s'] / 1e6:>9.2f}"
            f"{ratio:>10}{r['peak_rss_mb']:>7.0f}MiB{r['base_rss_mb']:>11.0f}MiB"
            f"{format(r['idle_count'], ',') if 'idle_count' in r else '-':>16}"
        )
    cols_mb = args.requests * (8 + 8 + 8 + 4 + 1 + 4) / 1e6
    print(f"\ntrace columns alone: {cols_mb:,.0f} MB (33 bytes per request)")

    digests = {
        name: (r["idle_count"], r["idle_sum_ns"], r["idle_sha1"])
        for name, r in results.items()
        if "idle_sha1" in r
    }
    identical = len(set(digests.values())) <= 1
    if "fallow-cli" in results and "idle_count" in results["fallow-cli"] and ref:
        identical &= results["fallow-cli"]["idle_count"] == ref["idle_count"]
    if identical and digests:
        count, total, _ = next(iter(digests.values()))
        print(f"idle intervals identical: {count:,} intervals, {total / 1e9:,.3f} s in all")
    else:
        print("MISMATCH between contenders' idle intervals:")
        for name, d in digests.items():
            print(f"  {name}: count {d[0]:,}, sum {d[1]:,} ns, sha1 {d[2]}")

    if args.json:
        out = {
            "benchmark": "parse_bench: MSR CSV -> trace columns -> idle intervals",
            "requests": args.requests,
            "file_bytes": size,
            "generate_seconds": gen_s,
            "repeat": args.repeat,
            "identical": identical,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "results": results,
        }
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
