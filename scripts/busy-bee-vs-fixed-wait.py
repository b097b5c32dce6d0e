#!/usr/bin/env python3
"""Busy Bee against the fixed wait it starts from, on the shared real traces
(docs/policies.md, "Where Busy Bee loses on real traces").

For each trace: `fallow simulate` (default BG service, default seed) of
`busy-bee:idle-wait=100ms`, and of `fixed-wait:t=T` for T on a log grid
from 1 ms to 10 s, 40 values per decade (161 settings; the fixed wait is
not monotone in T on these traces, so no bisection). At equal FG
response, Busy Bee loses where some fixed wait gives at least its
throughput at a lower mean added delay; the figures:
  - equal delay: the most BG throughput of a fixed wait adding at most
    Busy Bee's delay, and how much more that is than Busy Bee's;
  - equal throughput: the least delay of a fixed wait giving at least
    Busy Bee's throughput, and how much more delay Busy Bee adds.
Prints one JSON line per trace and a Markdown table.

Usage: scripts/busy-bee-vs-fixed-wait.py [FALLOW_BINARY] [TRACES_DIR]
(defaults: target/release/fallow, else target/debug/fallow; /work/shared/traces).
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for b in ("target/release/fallow", "target/debug/fallow"):
        p = os.path.join(ROOT, b)
        if os.path.exists(p):
            return p
    sys.exit("no fallow binary: build one or pass its path")


def traces(d):
    hp = os.path.join(d, "hp-hplajw-1992/ajw.1week.srt")
    return [
        ("HP disk 0 (`--device 0`)", [hp, "--device", "0"]),
        ("HP disk 1 (`--device 1`)", [hp, "--device", "1"]),
        ("pgbench-ext4-loop", [os.path.join(d, "pgbench-ext4-loop/pgbench-ext4-loop.csv.gz")]),
        ("blkparse-sample", [os.path.join(d, "blkparse-sample/blktrace.txt.gz")]),
        (
            "cloudphysics-vscsi (`--service disk`)",
            [os.path.join(d, "cloudphysics-vscsi/cloudPhysicsIO.vscsi"), "--service", "disk"],
        ),
        (
            "msr-cut 1370 (`--service disk`)",
            [
                os.path.join(d, "msr-cuts/msr.cut.per_10k.rw_40_60.1370.trace"),
                "--service",
                "disk",
            ],
        ),
    ]


def run(fallow, args, policy):
    out = subprocess.run(
        [fallow, "simulate", *args, "--policy", policy, "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    j = json.loads(out)
    return j["bg"]["throughput_bytes_per_s"], j["fg"]["mean_added_delay_s"], j.get("notes", [])


GRID_S = [10 ** (-3 + i / 40) for i in range(161)]


def main():
    fallow = binary()
    d = sys.argv[2] if len(sys.argv) > 2 else "/work/shared/traces"
    rows = []
    for name, args in traces(d):
        bb_tp, bb_d, notes = run(fallow, args, "busy-bee:idle-wait=100ms")
        fw_tp, fw_d, _ = run(fallow, args, "fixed-wait:t=100ms")
        grid = [(t, *run(fallow, args, f"fixed-wait:t={t * 1e9:.0f}ns")[:2]) for t in GRID_S]
        at_delay = max((g for g in grid if g[2] <= bb_d), key=lambda g: g[1], default=None)
        at_tp = min((g for g in grid if g[1] >= bb_tp), key=lambda g: g[2], default=None)
        row = {
            "trace": name,
            "busy_bee": [bb_tp, bb_d],
            "fixed_wait_100ms": [fw_tp, fw_d],
            "equal_delay": at_delay,
            "equal_throughput": at_tp,
            "notes": notes,
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print(
        "| trace | Busy Bee 100 ms | fixed-wait 100 ms | best fixed wait at <= Busy Bee's delay "
        "| least-delay fixed wait at >= its throughput | Busy Bee loses by |"
    )
    print("|---|---|---|---|---|---|")
    fmt = lambda tp, d: f"{tp / 1e6:.3f} MB/s at {d * 1e3:.3g} ms"
    for r in rows:
        (btp, bd), (ftp, fd) = r["busy_bee"], r["fixed_wait_100ms"]
        e, q = r["equal_delay"], r["equal_throughput"]
        ecell = f"t = {e[0] * 1e3:.3g} ms: {fmt(e[1], e[2])}" if e else "none"
        qcell = f"t = {q[0] * 1e3:.3g} ms: {fmt(q[1], q[2])}" if q else "none"
        loses = []
        if e and e[1] > btp:
            loses.append(f"{(e[1] / btp - 1) * 100:.2f} % less BG")
        if q and q[2] < bd and q[2] > 0:
            loses.append(f"{(bd / q[2] - 1) * 100:.1f} % more FG delay")
        print(
            f"| {r['trace']} | {fmt(btp, bd)} | {fmt(ftp, fd)} | {ecell} | {qcell} "
            f"| {'; '.join(loses) or 'does not lose'} |"
        )


if __name__ == "__main__":
    main()
