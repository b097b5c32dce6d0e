"""Tune three policies for two budgets on every trace in ../shared/traces, in parallel.

The example of docs/fleet.md, runnable as it stands (CI runs it):

    .venv/bin/python docs/examples/fleet_all_traces.py [local|dask|ray] [--out sweep.csv]

Traces come from $FALLOW_SHARED_TRACES, else <repo>/../shared/traces. The HP
trace holds two disks, so both are listed with their device. The vscsi and
MSR cuts record arrivals only: they get `service="disk"` (a seek + rotation +
transfer model) to derive completions; the others keep their recorded ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import fallow.fleet

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("FALLOW_SHARED_TRACES", REPO.parent / "shared" / "traces"))

NO_COMPLETIONS = {"service": "disk"}  # per-trace options: model the missing completions


def all_traces(root: Path) -> list:
    hp = root / "hp-hplajw-1992" / "ajw.1week.srt"
    traces = [
        (hp, 0),  # two physical disks: one entry each
        (hp, 1),
        root / "pgbench-ext4-loop" / "pgbench-ext4-loop.csv.gz",
        root / "blkparse-sample" / "blktrace.txt.gz",
        (root / "cloudphysics-vscsi" / "cloudPhysicsIO.vscsi", None, NO_COMPLETIONS),
    ]
    traces += [(p, None, NO_COMPLETIONS) for p in sorted((root / "msr-cuts").glob("*.trace"))]
    return traces


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backend", nargs="?", default="dask", choices=fallow.fleet.BACKENDS)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", help="also write the frame as CSV here")
    args = ap.parse_args()
    if not TRACES.is_dir():
        print(f"no traces at {TRACES} (set FALLOW_SHARED_TRACES)", file=sys.stderr)
        return 1

    start = time.perf_counter()
    frame = fallow.fleet.sweep(
        all_traces(TRACES),
        policies=["fixed-wait", "busy-bee", "bursty-cdf-estimates"],
        budgets=["1ms", "5%"],
        backend=args.backend,
        bg="size:base=8ms,knee=64KiB,rate=100MB",
        sizes="64KiB..4MiB/5",
        max_delay="50ms",
        workers=args.workers,
    )
    took = time.perf_counter() - start

    frame["trace"] = frame["trace"].map(lambda p: Path(p).name)
    frame["MB/s"] = frame["bg_throughput_bytes_per_s"] / 1e6
    frame["KiB"] = frame["request_size_bytes"] // 1024
    frame["added ms"] = frame["fg_mean_added_delay_s"] * 1e3
    cols = ["trace", "device", "budget", "policy", "spec", "KiB", "MB/s", "added ms", "status"]
    print(frame[cols].to_string(index=False, float_format=lambda x: f"{x:.3g}"))

    # The winner per trace and budget.
    ok = frame[frame["status"] == "ok"]
    best = ok.loc[ok.groupby(["trace", "device", "budget"], sort=False)["MB/s"].idxmax()]
    print("\nbest policy per trace and budget:")
    print(best[["trace", "device", "budget", "policy", "MB/s"]].to_string(index=False))
    print(f"\n{len(frame)} rows, {args.backend} backend, {took:.1f} s", file=sys.stderr)
    if args.out:
        frame.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
