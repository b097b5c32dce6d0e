#!/usr/bin/env python3
"""Live benchmark (docs/live.md): fallow scrub against `ionice -c3` on BFQ and a
fixed-rate scrubber, on real loop devices, under an fio foreground workload.

Per device — (a) a plain loop device over an image file on this machine's
disk (`losetup --direct-io=on`), (b) an emulated HDD (`fallow emulate-disk`,
a loop device over its `MOUNT/disk`) — with the BFQ scheduler, and per
foreground (FG) workload, Practical Scrubbing §IV-B's two:

  random       4 KiB random reads
  sequential   64 KiB reads, sequential with a jump to a random offset on
               1 % of requests (runs of 6.4 MB on average, §IV-B: 8 MB)

each with exponential think times of 100 ms mean (§IV-B): fio's --thinktime
is a constant, so arrivals are a Poisson process instead (--rate_iops 10
--rate_process=poisson), open-loop like the simulator's replay; and the
kind of workload behind the seeds' Table III headline:

  trace        an MSR Cambridge cut replayed open loop at its own times
               (bursts between heavy-tailed idle intervals; 16 threads, so
               an arrival never waits for a thread), from --trace-start on

All reads are O_DIRECT (fio's psync, one at a time; the replay's threads
one each). The runs, all of the same length:

  FG alone     recorded with `fallow record` (the trace fallow tunes on)
  fallow       `fallow tune` on that trace (fixed-wait, several mean-slowdown
               budgets, BG service measured on the device), keeping the
               budget whose answer `fallow simulate` says holds the FG p99
               within the tolerance; then `fallow scrub DEV --tuned ...`
  idle class   `ionice -c3 fio --rw=read --bs=64k --direct=1`: back-to-back
               64 KiB reads in BFQ's idle class (the seeds' CFQ baseline)
  fixed rate   `fio --rw=read --bs=64k --direct=1 --rate=R` at the default
               priority, R = fallow's measured scrub rate on the same run
               (64 KiB every 16 ms, Practical Scrubbing §III-C, if fallow
               scrubbed nothing): the same work without watching the device
  FG alone     again, at the end (full mode): the run-to-run noise

and reports FG mean and p99 completion latency (exact, from the per-I/O
latency log; from arrival for the replay, queueing included) against FG
alone, and the scrub rate: the device's bytes read during the FG run minus
the FG's own, over the run's wall time.

The btrfs part (`--btrfs`, docs/native.md) asks the same of a scrub
users already run: btrfs on the emulated HDD (made and filled with
incompressible data on the raw image, then served by `fallow emulate-disk`
and mounted from a loop device over it, BFQ), FG = the trace replay and
random 4 KiB reads on that device, each scrubber a fresh scrub from the
start of the file system, started a second before the FG and cancelled
after it:

  FG alone       recorded with `fallow record`
  fallow         `fallow scrub btrfs:MNT --tuned ...` (tuned as above, at the
                 default I/O priority: its pauses are its only throttle)
  idle class     `btrfs scrub start -B -c 3 MNT`
  kernel limit   `btrfs scrub start -B MNT` under the kernel's own
                 `/sys/fs/btrfs/<fsid>/devinfo/<id>/scrub_speed_max` (what
                 `btrfs scrub limit` sets) at fallow's measured rate
  fallow at the idle class's harm (as above, when it exceeds 5 %)
  unthrottled    `btrfs scrub start -B MNT`

The scrub rate is what `btrfs scrub status -R` says was scrubbed (data +
tree bytes) during the FG run over its wall time, cross-checked against
the device's bytes read beyond the FG's own.

`--btrfs --btrfs-shapes` (docs/native.md, "The brake") runs, instead of those workloads, the
comparison that decides the brake: three FG shapes (continuous 20 IOPS
random 4 KiB reads; bursts of 20 reads 5 ms apart with idle gaps uniform
in 0.5-2 s; the same with 4-8 s gaps, written as MSR-format cuts and
replayed), each against FG alone, `fallow scrub btrfs:MNT --policy
fixed-wait:t=200ms` (the brake, where the event monitor runs), the kernel's
static `scrub_speed_max` (`--limits`; by default 0.5-8 MB/s under the
continuous FG, 4-33 MB/s on the bursty shapes), and an unthrottled scrub.
`--repeats` rounds (full mode 3), each running every shape's every cell,
FG alone included, in an order rotated from round to round, each ratio
taken against its own round's FG alone. Per cell, mean ±
sd over the rounds: FG p50 and p99 over alone, the MB scrubbed during the
run (and, on the bursty shapes, while a burst was in the system), and the
time the file system's data would take at that rate (a projection: runs
are time-bounded). The verdict: the static limits' scrub rate at fallow's
FG p99, linear between the two limits around it on their efficient curve
(the gentlest limit where fallow is gentler than all), against fallow's.

Usage (as root; needs fio, losetup, ionice, /dev/fuse and BFQ; --btrfs
also btrfs-progs):
  python3 bench/live_bench.py --quick             # CI: small images, 3 s runs, ~2 min
  python3 bench/live_bench.py --quick --btrfs     # CI: the btrfs part, 3 s runs, ~75 s
  python3 bench/live_bench.py --btrfs --json b.json   # its figures: 30 s runs, ~10 min
  python3 bench/live_bench.py --quick --btrfs --btrfs-shapes --runtime 10   # the shapes, ~5 min
  python3 bench/live_bench.py --btrfs --btrfs-shapes --runtime 40 --btrfs-size 4096 \
      --btrfs-fill 3072 --json s.json   # docs/native.md's verdict: 3 rounds, ~55 min
  python3 bench/live_bench.py --json out.json     # full mode: the README's figures
  python3 bench/live_bench.py --fallow target/debug/fallow --devices emu --runtime 30

The fallow binary is --fallow, else `cargo build --release -p fallow-cli`.
Everything it sets up (loop devices, the FUSE mount, fio and fallow
processes, the schedulers it changed) is undone on exit, on failure and on
SIGINT/SIGTERM/SIGHUP. Exit status 2 when something it needs is missing.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import math
import mmap
import os
import platform
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIB = 1024
MIB = 1024 * 1024

# Practical Scrubbing §IV-B: 100 ms mean think time; §IV-B/Table III: the
# idle-class baseline scrubs with 64 KiB requests.
FG_RATE_IOPS = 10
BASELINE_BS = 64 * KIB
# §III-C's "Def. 16ms" scrubber: 64 KB every 16 ms (3.9 MB/s), the fixed
# rate when fallow's own rate gives none.
PAPER_FIXED_RATE = 64 * KIB / 0.016
# The goal (docs/live.md, "Benchmark"): fallow ≥ 6× the idle class at an FG p99 within 5 %.
GOAL_RATIO = 6.0

WORKLOADS = {
    "random": {
        "title": "random 4 KiB reads",
        "bs": 4 * KIB,
        "fio": ["--rw=randread", "--bs=4k", "--norandommap"],
    },
    "sequential": {
        "title": "sequential 64 KiB reads (1 % random jumps)",
        "bs": 64 * KIB,
        "fio": ["--rw=randread", "--percentage_random=1", "--bs=64k", "--norandommap"],
    },
    # Practical Scrubbing Table III's workloads are traces: bursts separated
    # by long, heavy-tailed idle intervals, where waiting pays off
    "trace": {
        "title": "MSR Cambridge trace replay",
        "bs": 4 * KIB,  # the cut's median request size (the switch penalty's)
    },
}
# The trace workload: the MSR cut whose idle intervals are heavy-tailed
# (gap CV 3.4; 1,253 gaps over 10 ms hold 241 of its 243 s) and whose rate
# (41 requests/s) an HDD can serve. Its writes are replayed as reads of the
# same size and place: the emulated disk times both alike, and the
# benchmark writes nothing to a device.
DEFAULT_TRACE = (
    Path(os.environ.get("FALLOW_SHARED_TRACES") or REPO.parent / "shared/traces")
    / "msr-cuts/msr.cut.per_10k.rw_20_80.105.trace"
)
# Where the replay starts in the default cut: its 30-40 s hold 1,879
# requests, a backlog of ~25 s on the emulated HDD that would swamp every
# run; from 40 s on it asks for 20-47 requests/s.
DEFAULT_TRACE_START_S = 40.0
# Largest request the replay issues, and its alignment (O_DIRECT).
REPLAY_MAX_BYTES = 1 * MIB
REPLAY_ALIGN = 4 * KIB
# The replay issues one request at a time, in arrival order, as fio's
# psync jobs do: an arrival that finds one in service waits in the
# replay's FIFO (and that wait counts in its latency). With several in
# flight, the order in which BFQ and the emulated disk's lock serve them
# varies from run to run, and so does every seek after: FG alone differed
# by 30 % in mean between two identical 60 s replays on the emulated HDD.
REPLAY_WORKERS = 1
# The live budget's FG (docs/live.md): the three above and one that changes shape halfway.
BUDGET_WORKLOADS = {
    "random": WORKLOADS["random"]["title"],
    "sequential": WORKLOADS["sequential"]["title"],
    "trace": WORKLOADS["trace"]["title"],
    "changing": "bursts of 20 random 4 KiB reads (0.5-2 s gaps), then sequential 64 KiB reads",
}
DEVICES = {
    "plain": "Plain loop device over an image on this machine's disk",
    "emu": "Emulated HDD, a loop device over `fallow emulate-disk` (hdd model)",
}


class BenchError(Exception):
    """A failure worth one line: which step, which device, what happened."""


class Missing(BenchError):
    """Something the benchmark needs is not on this machine."""


def log(msg: str) -> None:
    print(f"live_bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes and cleanup


class Cleanup:
    """Undo steps run last-in first-out, each once, whatever fails; the
    signal handlers turn SIGTERM/SIGHUP into an exception so they run."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, object]] = []
        self._procs: list[subprocess.Popen] = []

    def add(self, what: str, fn) -> None:
        self._steps.append((what, fn))

    def proc(self, p: subprocess.Popen) -> subprocess.Popen:
        self._procs.append(p)
        return p

    def run(self) -> None:
        # a second Ctrl-C must not cut the undoing short
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        for p in self._procs:
            stop_process(p, signal.SIGTERM, 5.0)
        self._procs.clear()
        while self._steps:
            what, fn = self._steps.pop()
            try:
                fn()
            except Exception as e:  # keep undoing the rest
                log(f"cleanup: {what}: {e}")


def stop_process(p: subprocess.Popen, sig: int, wait_s: float) -> None:
    """Signal a child we started and reap it, killing it if it lingers."""
    if p.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        p.send_signal(sig)
    try:
        p.wait(wait_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            p.kill()
        p.wait()


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    """Run a command to completion; a failure names the step and its stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
        raise BenchError(f"{what}: `{' '.join(cmd)}` exited {r.returncode}: " + " | ".join(tail))
    return r


# ---------------------------------------------------------------- environment


def check_tools(need_cargo: bool) -> None:
    missing = []
    if os.geteuid() != 0:
        missing.append("root (loop devices, FUSE, tracefs, I/O schedulers)")
    for tool, pkg in [("fio", "fio"), ("losetup", "mount"), ("ionice", "util-linux")]:
        if shutil.which(tool) is None:
            missing.append(f"{tool} (apt-get install {pkg})")
    if need_cargo and shutil.which("cargo") is None:
        missing.append("cargo (or give --fallow PATH)")
    if not os.path.exists("/dev/fuse"):
        missing.append("/dev/fuse (the emulated HDD)")
    with open("/proc/filesystems") as f:
        if "tracefs" not in f.read():
            missing.append("tracefs (fallow record)")
    if missing:
        raise Missing("missing: " + "; ".join(missing))


def find_fallow(path: str | None) -> Path:
    if path:
        p = Path(path).resolve()
        if not os.access(p, os.X_OK):
            raise Missing(f"--fallow {path}: not an executable file")
        return p
    log("building the release binary: cargo build --release -p fallow-cli")
    r = subprocess.run(
        ["cargo", "build", "--release", "-p", "fallow-cli", "--quiet"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if r.returncode != 0:
        raise BenchError("cargo build --release -p fallow-cli failed: " + r.stderr.strip()[-500:])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "release" / "fallow"


def fio_version() -> str:
    return run(["fio", "--version"], "fio --version").stdout.strip()


# ---------------------------------------------------------------- devices


def loop_name(dev: str) -> str:
    return os.path.basename(dev)


def read_sectors(dev: str) -> int:
    """Sectors read so far (field 3 of /sys/block/<dev>/stat)."""
    with open(f"/sys/block/{loop_name(dev)}/stat") as f:
        return int(f.read().split()[2])


def attach_loop(image: Path, cleanup: Cleanup) -> tuple[str, bool]:
    """A free loop device over `image`, with direct I/O where the backing
    file takes it (else the host's page cache would answer repeated reads)."""
    direct = True
    r = subprocess.run(
        ["losetup", "-f", "--show", "--direct-io=on", str(image)], capture_output=True, text=True
    )
    if r.returncode != 0:
        direct = False
        r = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"losetup -f --show {image}: {r.stderr.strip()}")
    dev = r.stdout.strip()
    cleanup.add(f"losetup -d {dev}", lambda: run(["losetup", "-d", dev], f"detach {dev}"))
    # a direct-I/O request to the backing file may still be refused later
    # (unaligned image); losetup reports what it really set
    dio = Path(f"/sys/block/{loop_name(dev)}/loop/dio")
    if dio.exists():
        direct = dio.read_text().strip() == "1"
    return dev, direct


def set_scheduler(dev: str, name: str) -> str:
    """Select an I/O scheduler; returns the one it replaced."""
    path = Path(f"/sys/block/{loop_name(dev)}/queue/scheduler")
    text = path.read_text()
    if name not in text.replace("[", " ").replace("]", " ").split():
        hint = "; try `modprobe bfq`" if name == "bfq" else ""
        raise Missing(f"{dev}: no {name} scheduler ({text.strip()}){hint}")
    before = text[text.index("[") + 1 : text.index("]")]
    path.write_text(name)
    if f"[{name}]" not in path.read_text():
        raise BenchError(f"{dev}: could not select {name} in {path}")
    return before


def set_bfq(dev: str, cleanup: Cleanup) -> None:
    before = set_scheduler(dev, "bfq")
    cleanup.add(f"restore {dev}'s scheduler", lambda: set_scheduler(dev, before))


def make_plain(work: Path, size: int, cleanup: Cleanup) -> dict:
    """An image filled with data (holes would read as free) and a loop device."""
    image = work / "plain.img"
    block = random.Random(7).randbytes(MIB)
    with open(image, "wb") as f:
        for _ in range(size // MIB):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    cleanup.add(f"rm {image}", lambda: image.unlink(missing_ok=True))
    dev, direct = attach_loop(image, cleanup)
    set_bfq(dev, cleanup)
    return {
        "name": "plain",
        "title": DEVICES["plain"],
        "device": dev,
        "direct_io": direct,
        "image_bytes": size,
    }


def make_emu(
    fallow: Path,
    work: Path,
    size: int,
    cleanup: Cleanup,
    image: Path | None = None,
    draws: str = "in-order",
) -> dict:
    """`fallow emulate-disk` over a sparse image (its timing is the model's,
    not the image's), or over `image` as it is, then a loop device over
    MOUNT/disk. `draws="per-request"`: each request's rotational position
    is a function of the request, so runs issuing the same FG requests can
    be paired request by request (`paired_halves`)."""
    if image is None:
        image = work / "emu.img"
        with open(image, "wb") as f:
            f.truncate(size)
        cleanup.add(f"rm {image}", lambda: image.unlink(missing_ok=True))
        mnt = work / "emu"
    else:
        mnt = work / f"{image.stem}-emu"
    mnt.mkdir(exist_ok=True)
    logf = work / "emu.log"
    r = run(
        [
            *(str(fallow), "emulate-disk", str(image), str(mnt), "--json"),
            *("--log", str(logf), "--draws", draws),
        ],
        "fallow emulate-disk",
    )
    info = json.loads(r.stdout)
    pid = int(info["pid"])

    def unmount() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _mounted(mnt):
            time.sleep(0.05)
        if _mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)], check=False)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    cleanup.add(f"unmount {mnt} (emulator pid {pid})", unmount)
    dev, direct = attach_loop(Path(info["disk"]), cleanup)
    set_bfq(dev, cleanup)
    return {
        "name": "emu",
        "title": DEVICES["emu"],
        "device": dev,
        "direct_io": direct,
        "image_bytes": size,
        "model": info.get("model"),
        "draws": info.get("draws"),
    }


def _mounted(mnt: Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(mnt) for line in f)


# ---------------------------------------------------------------- service times


def time_reads(dev: str, size: int, offsets: list[int]) -> float:
    """Mean seconds of O_DIRECT reads of `size` bytes at these offsets."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
    try:
        total = 0
        for off in offsets:
            t0 = time.perf_counter_ns()
            n = os.preadv(fd, [buf], off)
            total += time.perf_counter_ns() - t0
            if n != size:
                raise BenchError(f"{dev}: short read at {off}: {n} of {size} bytes")
        return total / len(offsets) / 1e9
    finally:
        buf.close()
        os.close(fd)


def measure_service(dev: str, dev_bytes: int, quick: bool, rng: random.Random) -> dict:
    """The BG service model for `fallow tune --bg size:…`: the scrubber
    reads sequentially, so base = one sequential 64 KiB read and the rate
    the slope to 4 MiB (Practical Scrubbing Fig. 4's shape); and random
    reads of each FG size, for the repositioning an FG request pays after
    BG work (the switch penalty)."""
    n = 12 if quick else 40
    big = 4 * MIB

    def seq(size: int, count: int) -> float:
        start = rng.randrange(0, (dev_bytes - size * count) // size) * size
        offs = [start + i * size for i in range(count)]
        time_reads(dev, size, offs[:2])  # position the head; not timed
        return time_reads(dev, size, offs)

    def rand(size: int, count: int) -> float:
        return time_reads(
            dev, size, [rng.randrange(0, dev_bytes // size) * size for _ in range(count)]
        )

    base_s = seq(64 * KIB, n)
    big_s = seq(big, max(4, n // 5))
    # a device whose large reads are no slower per byte than small ones
    # (a cached SSD) still gets a finite, positive rate
    slope_s = max(big_s - base_s, 1e-6)
    rate_bps = (big - 64 * KIB) / slope_s
    # random reads of each FG size and of the baseline's 64 KiB
    sizes = sorted({BASELINE_BS, *(w["bs"] for w in WORKLOADS.values())})
    random_s = {str(b): rand(b, n) for b in sizes}
    worst_s = max(random_s[str(BASELINE_BS)], base_s)

    def model(b: float) -> str:
        return f"size:base={round(b * 1e9)}ns,knee=65536B,rate={round(rate_bps)}B"

    return {
        "seq_64k_s": base_s,
        "seq_4m_s": big_s,
        "random_read_s": random_s,
        "bg_model": model(base_s),
        # the first scrub read of an idle interval seeks from where the FG
        # left the head: the collision an FG request may meet is that long
        "bg_model_seeking": model(worst_s),
    }


# ---------------------------------------------------------------- fio


def fg_command(dev: str, workload: str, args, out: Path) -> list[str]:
    runtime_s, rate_iops, seed = args.runtime, args.fg_iops, args.seed
    if workload == "trace":
        return [
            sys.executable,
            str(Path(__file__).resolve()),
            "__replay",
            str(args.trace),
            dev,
            f"{runtime_s:g}",
            str(out),
            f"{args.trace_start:g}",
            # the bursty shapes' window is the whole runtime, gaps included
            *(["hold"] if getattr(args, "replay_hold", False) else []),
        ]
    return [
        "fio",
        "--name=fg",
        f"--filename={dev}",
        *WORKLOADS[workload]["fio"],
        "--direct=1",
        "--ioengine=psync",
        f"--rate_iops={rate_iops}",
        "--rate_process=poisson",
        "--time_based",
        f"--runtime={runtime_s:g}s",
        f"--randseed={seed}",
        "--percentile_list=50:90:99:99.9",
        "--output-format=json",
        f"--output={out}.json",
        f"--write_lat_log={out}",
        "--log_avg_msec=0",
        # each read's offset: the budget bench pairs runs request by request
        "--log_offset=1",
    ]


def scrub_fio_command(dev: str, out: Path, rate_bps: float | None) -> list[str]:
    cmd = [
        "fio",
        "--name=scrub",
        f"--filename={dev}",
        "--rw=read",
        f"--bs={BASELINE_BS}",
        "--direct=1",
        "--ioengine=psync",
        "--time_based",
        "--runtime=1h",  # stopped with SIGINT when the FG run ends
        "--output-format=json",
        f"--output={out}",
    ]
    if rate_bps is not None:
        cmd.append(f"--rate={max(1, round(rate_bps))}")
    else:
        cmd = ["ionice", "-c3", *cmd]
    return cmd


def load_fio_json(path: Path) -> dict:
    """fio's JSON report; fio stopped by a signal writes a line before it."""
    text = path.read_text()
    start = text.find("{")
    if start < 0:
        raise BenchError(f"{path}: fio wrote no JSON report")
    return json.loads(text[start:])


def fg_result(out: Path) -> dict:
    """FG figures from fio's JSON (or the replay's) and the per-I/O
    completion-latency log."""
    doc = load_fio_json(Path(f"{out}.json"))
    if "replay" in doc:
        read = {"io_bytes": doc["replay"]["bytes"]}
    else:
        job = doc["jobs"][0]
        if job.get("error"):
            raise BenchError(f"fio FG job failed: error {job['error']}")
        read = job["read"]
    lats = []
    for logf in sorted(out.parent.glob(f"{out.name}_clat.*.log")):
        for line in logf.read_text().splitlines():
            fields = line.split(",")
            if len(fields) >= 2:
                lats.append(int(fields[1]) / 1e9)
    if not lats:
        raise BenchError(f"fio wrote no latency log for {out}")
    lats.sort()
    return {
        "requests": len(lats),
        "bytes": int(read["io_bytes"]),
        "mean_s": sum(lats) / len(lats),
        "p50_s": quantile(lats, 0.5),
        "p99_s": quantile(lats, 0.99),
        "max_s": lats[-1],
        # fio's own account, to cross-check ours (none for the replay)
        "fio_mean_s": read["clat_ns"]["mean"] / 1e9 if "clat_ns" in read else None,
        "fio_p99_s": (
            read["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1e9
            if "clat_ns" in read
            else None
        ),
    }


def quantile(sorted_xs: list[float], q: float) -> float:
    """The q-quantile, linear between order statistics (numpy's default)."""
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


# ---------------------------------------------------------------- trace replay


def device_bytes(dev: str) -> int:
    return int(Path(f"/sys/class/block/{loop_name(dev)}/size").read_text()) * 512


def load_msr_cut(
    trace: Path, runtime_s: float, dev_bytes: int, start_s: float = 0.0
) -> list[tuple[int, int, int]]:
    """(arrival_ns from the first request, offset, size) of the requests of
    an MSR cut (`t_ms dev offset_bytes size_bytes op`) that arrive within
    `runtime_s`, mapped onto the device: sizes rounded up to the alignment
    (at most REPLAY_MAX_BYTES), offsets scaled from the cut's span onto
    the device and aligned."""
    requests = []  # (t_ms, offset, size), read once
    with open(trace) as f:
        for n, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                requests.append((float(fields[0]), int(fields[2]), int(fields[3])))
            except (IndexError, ValueError):
                raise BenchError(
                    f"{trace}:{n}: want `t_ms dev offset_bytes size_bytes op`, got {line.strip()!r}"
                ) from None
    # offsets scaled, not wrapped: the volume's locality (a hot region
    # holds a quarter of the cut's requests) is what an HDD's seeks feel
    span = max((off + size for _, off, size in requests), default=1)
    events = []
    t0 = requests[0][0] if requests else 0.0
    for t_ms, off, size in requests:
        at_ns = round((t_ms - t0 - start_s * 1e3) * 1e6)
        if at_ns < 0:
            continue
        if at_ns >= runtime_s * 1e9:
            break
        size = min(REPLAY_MAX_BYTES, max(REPLAY_ALIGN, -(-size // REPLAY_ALIGN) * REPLAY_ALIGN))
        room = (dev_bytes - size) // REPLAY_ALIGN
        events.append((at_ns, off * room // span * REPLAY_ALIGN, size))
    if not events:
        raise BenchError(f"{trace}: no requests")
    return events


def replay(
    trace: Path, dev: str, runtime_s: float, out: Path, start_s: float = 0.0, hold: bool = False
) -> None:
    """Replay `runtime_s` of the cut from `start_s`, open loop: each
    request is queued at its arrival time for the replay's worker
    (REPLAY_WORKERS), and its latency runs from that arrival to its
    completion (queueing included, as the trace's response times do).
    Writes `OUT_clat.1.log` in fio's latency-log format with offsets
    (`t_ms, latency_ns, dir, bytes, offset, prio`) and `OUT.json`."""
    events = load_msr_cut(trace, runtime_s, device_bytes(dev), start_s)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    lat_ns = [0] * len(events)
    errors: list[str] = []

    def worker() -> None:
        buf = mmap.mmap(-1, REPLAY_MAX_BYTES)  # page-aligned, as O_DIRECT wants
        view = memoryview(buf)
        while (job := jobs.get()) is not None:
            i, arrival_ns, off, size = job
            try:
                n = os.preadv(fd, [view[:size]], off)
                if n != size:
                    errors.append(f"{dev}: short read at {off}: {n} of {size} bytes")
            except OSError as e:
                errors.append(f"{dev}: read of {size} bytes at {off}: {e}")
            lat_ns[i] = time.monotonic_ns() - arrival_ns

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(REPLAY_WORKERS)]
    for t in threads:
        t.start()
    start_ns = time.monotonic_ns() + 50_000_000
    late_ns = 0
    for i, (at_ns, off, size) in enumerate(events):
        target = start_ns + at_ns
        while (now := time.monotonic_ns()) < target:
            time.sleep(min((target - now) / 1e9, 0.05))
        late_ns = max(late_ns, now - target)
        jobs.put((i, target, off, size))
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join()
    os.close(fd)
    if hold:
        # a cut of bursts ends in a gap: the run's window is its runtime,
        # not its last burst (the scrub's rate is over the window)
        while (left := start_ns + runtime_s * 1e9 - time.monotonic_ns()) > 0:
            time.sleep(min(left / 1e9, 0.05))
    if errors:
        raise BenchError(errors[0])
    with open(f"{out}_clat.1.log", "w") as f:
        for (at_ns, off, size), lat in zip(events, lat_ns):
            f.write(f"{at_ns // 1_000_000}, {lat}, 0, {size}, {off}, 0\n")
    Path(f"{out}.json").write_text(
        json.dumps(
            {
                "replay": {
                    "trace": str(trace),
                    "requests": len(events),
                    "bytes": sum(e[2] for e in events),
                    "runtime_s": runtime_s,
                    "workers": REPLAY_WORKERS,
                    "latest_dispatch_s": late_ns / 1e9,
                    # CLOCK_MONOTONIC is system-wide: the bench places
                    # the bursts on its own samples of the device's reads
                    "start_monotonic_ns": start_ns,
                }
            }
        )
    )


# ---------------------------------------------------------------- scrubbers


class FioScrubber:
    """Back-to-back 64 KiB O_DIRECT reads: in BFQ's idle class (rate None)
    or at a fixed rate at the default priority."""

    def __init__(self, dev: str, out: Path, rate_bps: float | None, cleanup: Cleanup):
        self.cmd = scrub_fio_command(dev, out, rate_bps)
        self.out = out
        self.cleanup = cleanup
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = self.cleanup.proc(
            subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )

    def stop(self) -> dict:
        assert self.proc is not None
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip()
            raise BenchError(f"`{' '.join(self.cmd)}` ended early ({self.proc.returncode}): {err}")
        stop_process(self.proc, signal.SIGINT, 30.0)  # fio writes its report on SIGINT
        job = load_fio_json(self.out)["jobs"][0]
        return {"reported_bytes": int(job["read"]["io_bytes"]), "note": ""}


class FallowScrubber:
    """`fallow scrub DEV --tuned T`, relaunched with --resume whenever it
    finishes a pass before the run ends (a small image on a fast device)."""

    def __init__(
        self,
        fallow: Path,
        dev: str,
        tuned: Path,
        ck: Path | None,
        idle_class: bool,
        cleanup: Cleanup,
        resume: bool = False,
    ):
        # a native target (btrfs:MNT) keeps its checkpoint where its tool does
        ck_args = ["--checkpoint", str(ck)] if ck is not None else []
        # a tuned result, or a policy spec given as `policy:SPEC`
        # (`budget:5%`: a budget held live with no tune file, docs/live.md)
        if str(tuned).startswith("policy:"):
            how = ["--policy", str(tuned)[len("policy:") :]]
        elif str(tuned).startswith("budget:"):
            how = ["--budget", str(tuned)[len("budget:") :]]
        else:
            how = ["--tuned", str(tuned)]
        self.base = [str(fallow), "scrub", dev, *how, *ck_args]
        if idle_class:
            self.base = ["ionice", "-c3", *self.base]
        # the first run (--resume: continue another run's pass); later ones
        # (after a complete pass) --resume
        self.resume = resume
        self.cmd = [*self.base, "--resume" if resume else "--restart", "--json"]
        self.cleanup = cleanup
        self.lock = threading.Lock()
        self.stopping = False
        self.proc: subprocess.Popen | None = None
        self.reports: list[dict] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        first = True
        while True:
            with self.lock:
                if self.stopping:
                    return
                flag = "--restart" if first and not self.resume else "--resume"
                self.proc = self.cleanup.proc(
                    subprocess.Popen(
                        [*self.base, flag, "--json"],
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            first = False
            out, err = self.proc.communicate()
            # status 1 with a report: stopped by our SIGTERM
            if out.strip():
                try:
                    self.reports.append(json.loads(out))
                except json.JSONDecodeError:
                    self.error = f"fallow scrub printed no JSON: {out[:200]}"
                    return
            if self.proc.returncode != 0:
                with self.lock:
                    if not self.stopping:
                        self.error = (
                            f"fallow scrub exited {self.proc.returncode}: {err.strip()[-400:]}"
                        )
                return

    def stop(self) -> dict:
        with self.lock:
            self.stopping = True
            if self.proc is not None:
                stop_process(self.proc, signal.SIGTERM, 30.0)
        self.thread.join(60)
        if self.error:
            raise BenchError(self.error)
        return {
            "reported_bytes": sum(int(r["run_bytes"]) for r in self.reports),
            "passes_completed": sum(1 for r in self.reports if r.get("complete")),
            "policy": self.reports[-1]["policy"] if self.reports else None,
            "collisions": sum(int(r["driver"].get("collisions", 0)) for r in self.reports),
            "note": "",
            "runs": self.reports,
        }


# ---------------------------------------------------------------- one workload


def run_window(dev: str, fg_cmd: list[str], out: Path, cleanup: Cleanup) -> dict:
    """One FG run; the device's bytes read beyond the FG's own are the scrub's."""
    s0 = read_sectors(dev)
    t0 = time.monotonic()
    p = cleanup.proc(subprocess.Popen(fg_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    _, err = p.communicate()
    wall_s = time.monotonic() - t0
    s1 = read_sectors(dev)
    if p.returncode != 0:
        raise BenchError(f"fio FG on {dev} exited {p.returncode}: {err.decode().strip()[-400:]}")
    fg = fg_result(out)
    other = max(0, (s1 - s0) * 512 - fg["bytes"])
    return {"fg": fg, "wall_s": wall_s, "scrub_bytes": other, "scrub_mb_s": other / wall_s / 1e6}


def tune(
    fallow: Path,
    trace: Path,
    service: dict,
    penalty_ns: int,
    budgets: str,
    sizes: str,
    tolerance: float,
    work: Path,
    name: str = "tune.json",
) -> dict:
    """`fallow tune` at each budget; keep the answer with the most BG
    throughput whose re-simulation keeps the FG p99 within the tolerance
    (the goal is stated on p99, tune's budgets on the mean), else the
    smallest budget's."""
    cmd = [
        str(fallow),
        "tune",
        str(trace),
        "--policy",
        "fixed-wait",
        "--budget",
        budgets,
        "--bg",
        service["bg_model"],
        "--switch-penalty",
        f"{penalty_ns}ns",
        "--sizes",
        sizes,
        "--json",
    ]
    docs = json.loads(run(cmd, "fallow tune").stdout)
    # tune --json is one object with a `budgets` list (schema_version 2);
    # older fallows printed one object per budget, or a list of them
    if isinstance(docs, dict):
        docs = docs.get("budgets", [docs])
    candidates = []
    for doc in docs:
        if doc.get("best") is None:
            continue
        best = doc["best"]
        # the p99 check re-simulates with every BG request paying a random
        # access: tune's model (sequential reads) leaves out the seek of an
        # interval's first request, the one an early FG arrival meets
        check = list(best["reproduce_args"])
        check[check.index("--bg") + 1] = service["bg_model_seeking"]
        fg = json.loads(run([str(fallow), *check, "--json"], "fallow simulate").stdout)["fg"]
        base_p99 = fg["baseline_p99_response_s"]
        candidates.append(
            {
                "doc": doc,
                "budget": doc["budget_text"],
                "spec": best["spec"],
                "request_size_bytes": best["request_size_bytes"],
                "sim_bg_mb_s": best["bg_throughput_bytes_per_s"] / 1e6,
                "sim_slowdown": best["fg_slowdown"],
                "sim_collision_rate": best["fg_collision_rate"],
                "check_p99_ratio": fg["p99_response_s"] / base_p99 if base_p99 > 0 else None,
                "check_slowdown": fg["slowdown"],
            }
        )
    result = {
        "command": cmd,
        "candidates": [{k: v for k, v in c.items() if k != "doc"} for c in candidates],
    }
    if not candidates:
        result["chosen"] = None
        return result
    ok = [
        c
        for c in candidates
        if c["check_p99_ratio"] is not None and c["check_p99_ratio"] <= 1 + tolerance
    ]
    chosen = max(ok, key=lambda c: c["sim_bg_mb_s"]) if ok else candidates[0]
    path = work / name
    path.write_text(json.dumps(chosen["doc"], indent=1))
    result["chosen"] = {k: v for k, v in chosen.items() if k != "doc"}
    result["chosen"]["within_tolerance"] = bool(ok)
    result["tuned_json"] = str(path)
    return result


def bench_workload(
    fallow: Path, device: dict, workload: str, args, cleanup: Cleanup, work: Path
) -> dict:
    dev = device["device"]
    wdir = work / f"{device['name']}-{workload}"
    wdir.mkdir()
    rt = args.runtime

    def fg(tag: str) -> list[str]:
        return fg_command(dev, workload, args, wdir / tag)

    def settle() -> None:
        time.sleep(0.5 if args.quick else 2.0)

    def with_scrubber(scrubber, tag: str) -> dict:
        """One FG run with `scrubber` started a second before (its monitor
        and first reads under way) and stopped after."""
        scrubber.start()
        try:
            time.sleep(1.0)
            r = run_window(dev, fg(tag), wdir / tag, cleanup)
        finally:
            report = scrubber.stop()
        r["scrubber_report"] = report
        r["command"] = scrubber.cmd
        return r

    out: dict = {
        "name": workload,
        "title": WORKLOADS[workload]["title"]
        + (
            f" ({args.trace.name}, {args.trace_start:g} s to {args.trace_start + rt:g} s)"
            if workload == "trace"
            else ""
        ),
        "fg_rate_iops": None if workload == "trace" else args.fg_iops,
        "trace": (
            {"path": str(args.trace), "start_s": args.trace_start} if workload == "trace" else None
        ),
        "runtime_s": rt,
        "fg_command": fg("TAG"),
        "runs": [],
    }
    log(f"{device['name']}/{workload}: FG alone, recorded with fallow record")
    trace = wdir / "fg.csv"
    alone, out["record"] = record_alone(
        fallow, dev, trace, cleanup, lambda: run_window(dev, fg("alone"), wdir / "alone", cleanup)
    )
    out["runs"].append({"scrubber": "alone", "label": "FG alone", **alone})
    ref = alone["fg"]

    # the FG request that follows BG work repositions: a random read of its
    # size instead of its usual service (≈ 0 for random FG, a seek for sequential)
    rand_s = device["service"]["random_read_s"][str(WORKLOADS[workload]["bs"])]
    penalty_ns = max(0, round((rand_s - ref["mean_s"]) * 1e9))
    tuned = tune(
        fallow, trace, device["service"], penalty_ns, args.budgets, args.sizes, args.tolerance, wdir
    )
    tuned["switch_penalty_s"] = penalty_ns / 1e9
    out["tune"] = tuned

    def fallow_run(tuned: dict, scrubber: str, what: str) -> dict:
        if tuned["chosen"] is None:
            log(f"{device['name']}/{workload}: no budget gave a setting: fallow does not scrub")
            r = run_window(dev, fg(scrubber), wdir / scrubber, cleanup)
            r.update(scrubber=scrubber, label=f"{what}: no setting met a budget")
            r["scrubber_report"] = {"reported_bytes": 0, "note": "no setting met any budget"}
            return r
        c = tuned["chosen"]
        size = _size(c["request_size_bytes"])
        log(f"{device['name']}/{workload}: FG + {what} ({c['spec']}, {size})")
        s = FallowScrubber(
            fallow,
            dev,
            Path(tuned["tuned_json"]),
            args.ckdir / "ck.json",
            args.fallow_sched == "bfq-idle",
            cleanup,
        )
        sched = args.fallow_sched if args.fallow_sched in ("none", "mq-deadline") else None
        if sched:
            set_scheduler(dev, sched)
        try:
            r = with_scrubber(s, scrubber)
        finally:
            if sched:
                set_scheduler(dev, "bfq")
        how = {"bfq-idle": ", ionice -c3", "bfq": ", BFQ default class"}.get(
            args.fallow_sched, f", {args.fallow_sched}"
        )
        r.update(scrubber=scrubber, label=f"{what}: {c['spec']}, {size}{how}")
        r["scheduler"] = args.fallow_sched
        if r["scrub_bytes"] == 0:
            note = "the tuned wait was never reached: no idle interval long enough"
            r["scrubber_report"]["note"] = note
        return r

    runs = []
    settle()
    runs.append(fallow_run(tuned, "fallow", "fallow scrub"))
    settle()

    log(f"{device['name']}/{workload}: FG + ionice -c3 fio (BFQ idle class)")
    r = with_scrubber(FioScrubber(dev, wdir / "idle.json", None, cleanup), "idle")
    r.update(scrubber="idle-class", label="ionice -c3, BFQ, 64 KiB")
    runs.append(r)
    settle()

    fallow_bps = runs[0]["scrub_mb_s"] * 1e6
    rate = args.fixed_rate or (fallow_bps if fallow_bps >= 64 * KIB else PAPER_FIXED_RATE)
    log(f"{device['name']}/{workload}: FG + fixed-rate fio ({rate / 1e6:.2f} MB/s)")
    r = with_scrubber(FioScrubber(dev, wdir / "fixed.json", rate, cleanup), "fixed")
    r.update(scrubber="fixed-rate", label=f"fixed rate {rate / 1e6:.2f} MB/s, 64 KiB")
    r["rate_bytes_per_s"] = rate
    runs.append(r)

    # The goal compares at fallow's FG p99; the idle class seldom holds it.
    # At the idle class's own harm (its measured FG mean slowdown as the
    # budget), how much does fallow scrub?
    harm = runs[1]["fg"]["mean_s"] / ref["mean_s"] - 1
    if harm > args.tolerance:
        settle()
        budget = f"{harm * 100:.3g}%"
        matched = tune(
            fallow,
            trace,
            device["service"],
            penalty_ns,
            budget,
            args.sizes,
            math.inf,  # no p99 filter: the idle class's harm is the budget
            wdir,
            "tune-matched.json",
        )
        out["tune_matched"] = matched
        runs.append(fallow_run(matched, "fallow-matched", f"fallow, budget +{budget}"))
    else:
        out["tune_matched"] = None

    if not args.quick:
        settle()
        log(f"{device['name']}/{workload}: FG alone again (run-to-run noise)")
        again = run_window(dev, fg("again"), wdir / "again", cleanup)
        runs.append({"scrubber": "alone-again", "label": "FG alone, again", **again})

    for r in [out["runs"][0], *runs]:
        r["fg"]["mean_ratio"] = r["fg"]["mean_s"] / ref["mean_s"]
        r["fg"]["p99_ratio"] = r["fg"]["p99_s"] / ref["p99_s"]
    out["runs"].extend(runs)
    by = {r["scrubber"]: r for r in out["runs"]}
    fal, idle = by["fallow"], by["idle-class"]
    out["fallow_over_idle_class"] = (
        fal["scrub_mb_s"] / idle["scrub_mb_s"] if idle["scrub_mb_s"] > 0 else None
    )
    m = by.get("fallow-matched")
    out["matched_over_idle_class"] = (
        m["scrub_mb_s"] / idle["scrub_mb_s"] if m and idle["scrub_mb_s"] > 0 else None
    )
    out["goal"] = {
        "ratio": GOAL_RATIO,
        "p99_tolerance": args.tolerance,
        "fallow_p99_within": fal["fg"]["p99_ratio"] <= 1 + args.tolerance,
        "met": bool(
            fal["fg"]["p99_ratio"] <= 1 + args.tolerance
            and out["fallow_over_idle_class"] is not None
            and out["fallow_over_idle_class"] >= GOAL_RATIO
        ),
    }
    return out


# ---------------------------------------------------------------- a budget held live (docs/live.md)

# The changing FG (docs/live.md, "The benchmark"): for the first half, bursts of
# BURST_REQUESTS random 4 KiB reads BURST_SPACING_MS apart with gaps uniform
# in CHANGING_GAPS_S; for the second, sequential 64 KiB reads (a random
# jump on 1 % of them) at Poisson arrivals of --fg-iops, as the sequential
# workload's. Written as an MSR-format cut and replayed open loop.
CHANGING_GAPS_S = (0.5, 2.0)


def write_changing_cut(path: Path, runtime_s: float, dev_bytes: int, iops: float, seed: int):
    rng = random.Random(seed)
    half_ms = runtime_s * 1e3 / 2

    def anywhere(size: int) -> int:
        return rng.randrange(0, (dev_bytes - size) // REPLAY_ALIGN) * REPLAY_ALIGN

    t_ms, lines = 0.0, []
    while t_ms < half_ms:
        for i in range(BURST_REQUESTS):
            lines.append(f"{t_ms + i * BURST_SPACING_MS:.3f} 0 {anywhere(4 * KIB)} 4096 Read")
        t_ms += (BURST_REQUESTS - 1) * BURST_SPACING_MS + rng.uniform(*CHANGING_GAPS_S) * 1e3
    t_ms, size = max(t_ms, half_ms), 64 * KIB
    off = anywhere(size)
    while t_ms < (runtime_s + 10) * 1e3:
        lines.append(f"{t_ms:.3f} 0 {off} {size} Read")
        off += size
        if rng.random() < 0.01 or off + size > dev_bytes:
            off = anywhere(size)
        t_ms += rng.expovariate(iops) * 1e3
    # the replay scales offsets from the cut's span onto the device: one
    # request at its end, after the run, makes the span the device's (so
    # sequential stays sequential)
    lines.append(f"{(runtime_s + 20) * 1e3:.3f} 0 {dev_bytes - 4 * KIB} 4096 Read")
    path.write_text("\n".join(lines) + "\n")


def fg_halves(out: Path, runtime_s: float) -> list[dict]:
    """The FG's latency log cut at half the run (fio logs completion times,
    the replay arrival times, ms from the start): per half, requests,
    bytes, mean and p99 latency."""
    halves: list[list[tuple[float, int]]] = [[], []]
    for t_ms, lat_ns, size, _ in read_lat_log(out):
        halves[0 if t_ms < runtime_s * 500 else 1].append((lat_ns / 1e9, size))
    result = []
    for h in halves:
        lats = sorted(x for x, _ in h)
        if not lats:
            raise BenchError(f"{out}: no FG request in a half of the run")
        mean = sum(lats) / len(lats)
        var = sum((x - mean) ** 2 for x in lats) / (len(lats) - 1) if len(lats) > 1 else 0.0
        result.append(
            {
                "requests": len(lats),
                "bytes": sum(b for _, b in h),
                "mean_s": mean,
                # unbiased, s²: the half's mean is known to ±1.96·sqrt(var/n)
                "var_s2": var,
                "p99_s": quantile(lats, 0.99),
            }
        )
    return result


def slowdown_ci95(half: dict, alones: list[dict]) -> float:
    """95 % half-width of a half's mean slowdown over the mean of FG
    alone's same half in `alones` (the rounds): the delta method for the
    ratio of two independent means, r·1.96·sqrt(var/(n·m²) + var0/m0²),
    where the baseline's variance of its mean is that of the rounds' mean
    of means. Request-to-request variance only: what one run of this
    length can resolve, not the drift between runs (the alone rounds'
    own deviations show that)."""
    k = len(alones)
    m0 = sum(a["mean_s"] for a in alones) / k
    var_m0 = sum(a["var_s2"] / a["requests"] for a in alones) / (k * k)
    m, n = half["mean_s"], half["requests"]
    if m0 <= 0 or m <= 0:
        return math.inf
    r = m / m0
    return 1.96 * r * math.sqrt(half["var_s2"] / (n * m * m) + var_m0 / (m0 * m0))


def read_lat_log(out: Path) -> list[tuple[float, int, int, int | None]]:
    """The FG's latency log in issue order (fio's psync job and the
    replay's one worker serve one read at a time): (t_ms, latency_ns,
    bytes, offset) per read; the offset None where the log has none (fio
    writes it with --log_offset=1, as its sixth field). Lines of fewer
    than 4 fields are skipped."""
    reads = []
    for logf in sorted(out.parent.glob(f"{out.name}_clat.*.log")):
        for line in logf.read_text().splitlines():
            f = line.split(",")
            if len(f) >= 4:
                off = int(f[4]) if len(f) >= 6 else None
                reads.append((float(f[0]), int(f[1]), int(f[3]), off))
    return reads


# Batches per half for the paired slowdown's interval: consecutive reads
# share a queue, so their differences are not independent; batch means of
# ~30 reads are (docs/live.md, "Paired with FG alone").
PAIRED_BATCHES = 20
# Student's t, 97.5 % quantile, 19 degrees of freedom: the interval over
# 20 batch means (1.96 covered 90 % in the skewed simulation of
# tests/python/test_live_bench.py)
PAIRED_T95 = 2.093


def paired_halves(run: Path, alones: list[Path], runtime_s: float) -> list[dict] | None:
    """Each half's FG mean slowdown, read by read: the k-th read of `run`
    against the k-th read of each FG-alone round in `alones`, which on the
    emulated disk with per-request draws is the same request at the same
    rotational position. A read the BG work left alone differs only by the
    machine's jitter; the slowdown is Σ(run − alone) / Σ alone over the
    half's pairs (the halves cut at the first alone round's times), its
    95 % interval from PAIRED_BATCHES batch means (the ratio estimator's
    variance). None when the runs did not issue the same reads (another
    seed, another device)."""
    mine = read_lat_log(run)
    base = [read_lat_log(a) for a in alones]
    for path, reads in [(run, mine), *zip(alones, base)]:
        k = next((k for k, r in enumerate(reads, 1) if r[3] is None), None)
        if k is not None:
            raise BenchError(
                f"{path}_clat.*.log: read {k} has no offset (fio --log_offset=1 writes 6 fields)"
            )
    n = min(len(mine), *(len(b) for b in base))
    for b in base:
        for k in range(n):
            if (mine[k][2], mine[k][3]) != (b[k][2], b[k][3]):
                return None
    out = []
    for half in (0, 1):
        ks = [k for k in range(n) if (base[0][k][0] < runtime_s * 500) == (half == 0)]
        if len(ks) < 2 * PAIRED_BATCHES:
            return None
        alone_ns = [sum(b[k][1] for b in base) / len(base) for k in ks]
        diff_ns = [mine[k][1] - a for k, a in zip(ks, alone_ns)]
        s, ci = paired_slowdown(alone_ns, diff_ns)
        out.append(
            {
                "pairs": len(ks),
                "slowdown": s,
                "ci95": ci,
                # reads slower than alone by more than the machine's jitter
                "reads_slowed": sum(1 for d in diff_ns if d > 1_000_000),
            }
        )
    return out


def paired_slowdown(alone: list[float], diff: list[float]) -> tuple[float, float]:
    """Σ diff / Σ alone over pairs in issue order, and its 95 % half-width
    from PAIRED_BATCHES consecutive batches (the ratio estimator's
    variance, Σ_b (D_b − s·A_b)² · B/(B−1) / (Σ A)², times Student's t)."""
    total_alone = sum(alone)
    s = sum(diff) / total_alone
    size = len(alone) // PAIRED_BATCHES
    resid = 0.0
    for j in range(PAIRED_BATCHES):
        lo, hi = j * size, (len(alone) if j == PAIRED_BATCHES - 1 else (j + 1) * size)
        resid += (sum(diff[lo:hi]) - s * sum(alone[lo:hi])) ** 2
    var = resid * PAIRED_BATCHES / (PAIRED_BATCHES - 1) / total_alone**2
    return s, PAIRED_T95 * math.sqrt(var)


def budget_fraction(budget: str) -> float | None:
    """A slowdown budget (`5%`) as a fraction; None for a delay budget."""
    b = budget.strip()
    if not b.endswith("%"):
        return None
    try:
        return float(b[:-1]) / 100
    except ValueError:
        return None


def budget_half_verdict(slowdown: float, ci: float, budget: float) -> str:
    """A half against the goal (its FG mean slowdown within the budget,
    ± 20 % of it): `within` when even the interval's upper end is at most
    1.2·budget, `over` when its lower end is above, `unresolved` when the
    interval contains 1.2·budget (the run is too short to tell)."""
    limit = 1.2 * budget
    if slowdown + ci <= limit:
        return "within"
    if slowdown - ci > limit:
        return "over"
    return "unresolved"


def run_window_halves(
    dev: str, fg_cmd: list[str], out: Path, runtime_s: float, cleanup: Cleanup, at_half=None
) -> dict:
    """run_window, with the device's sectors read also sampled at half the
    run (then `at_half()` runs: the per-half setting's switch): the scrub's
    bytes per half are the device's beyond the FG's own in that half."""
    s0 = read_sectors(dev)
    t0 = time.monotonic()
    p = cleanup.proc(subprocess.Popen(fg_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    mid: dict = {}

    def half() -> None:
        time.sleep(max(0.0, t0 + runtime_s / 2 - time.monotonic()))
        mid["sectors"], mid["t"] = read_sectors(dev), time.monotonic()
        if at_half is not None:
            try:
                at_half()
            except BenchError as e:
                mid["error"] = str(e)

    th = threading.Thread(target=half, daemon=True)
    th.start()
    _, err = p.communicate()
    th.join(120)
    wall_s = time.monotonic() - t0
    s1 = read_sectors(dev)
    if p.returncode != 0:
        raise BenchError(f"FG on {dev} exited {p.returncode}: {err.decode().strip()[-400:]}")
    if "error" in mid:
        raise BenchError(mid["error"])
    if "sectors" not in mid:
        raise BenchError(f"FG on {dev} ended before half its run ({wall_s:.1f} s)")
    fg = fg_result(out)
    halves = fg_halves(out, runtime_s)
    spans = [(s0, mid["sectors"], mid["t"] - t0), (mid["sectors"], s1, t0 + wall_s - mid["t"])]
    for h, (a, b, dur_s) in zip(halves, spans):
        h["scrub_bytes"] = max(0, (b - a) * 512 - h["bytes"])
        h["scrub_mb_s"] = h["scrub_bytes"] / dur_s / 1e6
    other = max(0, (s1 - s0) * 512 - fg["bytes"])
    return {
        "fg": fg,
        "halves": halves,
        "wall_s": wall_s,
        "scrub_bytes": other,
        "scrub_mb_s": other / wall_s / 1e6,
    }


def split_recording(trace: Path, runtime_s: float, into: tuple[Path, Path]) -> None:
    """Cut a `fallow record` CSV (MSR/SNIA: Timestamp in 100 ns ticks
    first, a header line) at half the run from its first request."""
    lines = trace.read_text().splitlines()
    header, rows = lines[0], [ln for ln in lines[1:] if ln.strip()]
    if not rows:
        raise BenchError(f"{trace}: fallow record saw no FG request")
    t0 = int(rows[0].split(",")[0])
    cut = t0 + round(runtime_s / 2 * 1e7)
    halves = ([r for r in rows if int(r.split(",")[0]) < cut], [])
    halves[1].extend(r for r in rows if int(r.split(",")[0]) >= cut)
    for path, h in zip(into, halves):
        if not h:
            raise BenchError(f"{trace}: no FG request in a half of the run")
        path.write_text("\n".join([header, *h]) + "\n")


def recording_mean_response_s(trace: Path) -> float:
    """The mean ResponseTime (block-layer issue to completion, 100 ns
    ticks) of a `fallow record` CSV."""
    rows = [ln.split(",") for ln in trace.read_text().splitlines()[1:] if ln.strip()]
    if not rows:
        raise BenchError(f"{trace}: fallow record saw no FG request")
    return sum(int(r[6]) for r in rows) / len(rows) * 1e-7


def bench_budget_workload(
    fallow: Path, device: dict, workload: str, args, cleanup: Cleanup, work: Path
) -> dict:
    """The budget benchmark (docs/live.md) on one FG: FG alone (recorded; the whole trace and
    each half tuned offline at the budget), then `fallow scrub --budget`
    with no tune file (no saved window), (a) the whole run's tuned setting,
    (b) each half's (switched at half the run, --resume): per half, the FG
    mean slowdown over the same half of FG alone, the scrub rate, and the
    budget run's refits."""
    dev = device["device"]
    wdir = work / f"{device['name']}-budget-{workload}"
    wdir.mkdir()
    rt = args.runtime
    wargs = argparse.Namespace(**vars(args))
    kind = workload
    if workload == "changing":
        cut = wdir / "changing.trace"
        write_changing_cut(cut, rt, device_bytes(dev), args.fg_iops, args.seed)
        wargs.trace, wargs.trace_start, kind = cut, 0.0, "trace"

    def fg(tag: str) -> list[str]:
        return fg_command(dev, kind, wargs, wdir / tag)

    def settle() -> None:
        time.sleep(0.5 if args.quick else 2.0)

    out: dict = {"name": workload, "title": BUDGET_WORKLOADS[workload], "runtime_s": rt}
    log(f"{device['name']}/budget/{workload}: FG alone, recorded with fallow record")
    trace = wdir / "fg.csv"
    alone, out["record"] = record_alone(
        fallow,
        dev,
        trace,
        cleanup,
        lambda: run_window_halves(dev, fg("alone"), wdir / "alone", rt, cleanup),
    )
    halves_csv = (wdir / "fg-half1.csv", wdir / "fg-half2.csv")
    split_recording(trace, rt, halves_csv)
    # the same reads timed at the block layer: what fio's mean holds beyond
    # it (the submitting call, the wake-up) is compared with the budgeted
    # runs' (fio's mean against the driver's block-layer mean) in the table
    alone["fg"]["block_mean_s"] = recording_mean_response_s(trace)
    ref = alone["fg"]
    bs = 64 * KIB if workload == "sequential" else 4 * KIB
    rand_s = device["service"]["random_read_s"][str(bs)]
    penalty_ns = max(0, round((rand_s - ref["mean_s"]) * 1e9))
    budget = args.live_budget
    # the offline answer at the same budget, no p99 filter (the budget is on the mean)
    tuned = (
        {}
        if args.budget_only
        else {
            "whole": tune(
                fallow,
                trace,
                device["service"],
                penalty_ns,
                budget,
                args.sizes,
                math.inf,
                wdir,
                "tune-whole.json",
            ),
            "half1": tune(
                fallow,
                halves_csv[0],
                device["service"],
                penalty_ns,
                budget,
                args.sizes,
                math.inf,
                wdir,
                "tune-half1.json",
            ),
            "half2": tune(
                fallow,
                halves_csv[1],
                device["service"],
                penalty_ns,
                budget,
                args.sizes,
                math.inf,
                wdir,
                "tune-half2.json",
            ),
        }
    )
    out["tune"] = tuned
    out["switch_penalty_s"] = penalty_ns / 1e9
    idle = args.fallow_sched == "bfq-idle"
    ck = args.ckdir / "ck.json"

    def scrubber(setting: str, resume: bool = False) -> FallowScrubber:
        return FallowScrubber(fallow, dev, Path(setting), ck, idle, cleanup, resume)

    def setting_of(t: dict) -> str:
        # no setting met the budget offline: the least aggressive wait
        return t["tuned_json"] if t["chosen"] else "policy:fixed-wait:t=100s"

    def label(t: dict) -> str:
        c = t["chosen"]
        return f"{c['spec']}, {_size(c['request_size_bytes'])}" if c else "none met the budget"

    def one(tag: str, what: str, first: str, second: str | None = None) -> dict:
        log(f"{device['name']}/budget/{workload}: FG + {what}")
        ck.unlink(missing_ok=True)
        ck.with_suffix(".budget.json").unlink(missing_ok=True)
        state = {"s": scrubber(first)}
        stopped: list[dict] = []

        def switch() -> None:
            stopped.append(state["s"].stop())
            state["s"] = scrubber(second, resume=True)
            state["s"].start()

        state["s"].start()
        try:
            time.sleep(1.0)
            r = run_window_halves(dev, fg(tag), wdir / tag, rt, cleanup, switch if second else None)
        finally:
            stopped.append(state["s"].stop())
        r["scrubber"], r["label"] = tag, what
        r["scrubber_reports"] = stopped
        # the machine's load at the end: other engineers' builds and benches
        r["loadavg_1m"] = os.getloadavg()[0]
        settle()
        return r

    runs = {"alone": alone}
    for rep in range(args.budget_repeats):
        sfx = "" if rep == 0 else f"-{rep + 1}"
        if rep > 0:
            # FG alone again in each round: the baseline is the mean of
            # every round's, and each alone run's own deviation from it is
            # the noise floor the table prints beside the slowdowns
            log(f"{device['name']}/budget/{workload}: FG alone, round {rep + 1}")
            runs["alone" + sfx] = run_window_halves(
                dev, fg("alone" + sfx), wdir / ("alone" + sfx), rt, cleanup
            )
            runs["alone" + sfx]["scrubber"] = "alone" + sfx
            runs["alone" + sfx]["label"] = f"FG alone, round {rep + 1}"
            settle()
        runs["budget" + sfx] = one(
            "budget" + sfx, f"fallow scrub --budget {budget}", f"budget:{budget}"
        )
        if args.budget_watch_run:
            runs["watch" + sfx] = one(
                "watch" + sfx,
                "fallow scrub --budget 0.01%: monitoring, no setting met, no BG read",
                "budget:0.01%",
            )
        if args.budget_only:
            continue
        runs["a" + sfx] = one(
            "a" + sfx,
            f"(a) tuned on the whole run: {label(tuned['whole'])}",
            setting_of(tuned["whole"]),
        )
        runs["b" + sfx] = one(
            "b" + sfx,
            f"(b) tuned per half: {label(tuned['half1'])}, then {label(tuned['half2'])}",
            setting_of(tuned["half1"]),
            setting_of(tuned["half2"]),
        )
    alones = [r for tag, r in runs.items() if tag.startswith("alone")]
    base_halves = [sum(r["halves"][i]["mean_s"] for r in alones) / len(alones) for i in range(2)]
    base_fg = sum(r["fg"]["mean_s"] for r in alones) / len(alones)
    out["alone_rounds"] = len(alones)
    for r in runs.values():
        for i, (h, h0) in enumerate(zip(r["halves"], base_halves)):
            h["mean_slowdown"] = h["mean_s"] / h0 - 1
            if all("var_s2" in a["halves"][i] for a in alones) and "var_s2" in h:
                h["mean_slowdown_ci95"] = slowdown_ci95(h, [a["halves"][i] for a in alones])
        r["fg"]["mean_slowdown"] = r["fg"]["mean_s"] / base_fg - 1
    # read by read against FG alone (per-request draws): the same figure
    # without the request-to-request variance; an alone round against the
    # first one is the method's noise floor
    alone_outs = [wdir / tag for tag in runs if tag.startswith("alone")]
    if device.get("draws") == "per-request":
        for tag, r in runs.items():
            against = alone_outs[:1] if tag.startswith("alone") else alone_outs
            if tag == "alone":
                continue
            r["paired"] = paired_halves(wdir / tag, against, rt)
    out["runs"] = runs
    out["trajectory"] = {}
    for tag, r in runs.items():
        if not tag.startswith("budget"):
            continue
        rep = [x for s in r["scrubber_reports"] for x in s.get("runs", [])]
        b = [x["driver"].get("budget") for x in rep if x.get("driver", {}).get("budget")]
        out["trajectory"][tag] = [
            {
                "history": [
                    {
                        "time_s": h["time_s"],
                        "knob": h["knob"],
                        "backed_off": h.get("backed_off", False),
                        "size_bytes": h.get("size_bytes"),
                        "fit_slowdown": (h.get("fit") or {}).get("slowdown"),
                    }
                    for h in x["history"]
                ],
                "control": x["control"],
                "measured_recent": x["measured_recent"],
                "setting": x["setting"],
                "start": x["start"],
                "unmet": x["unmet"],
            }
            for x in b
        ]
    return out


def budget_table(d: dict, budget: str) -> str:
    frac = budget_fraction(budget)
    lines = [
        f"\n{d['title']}: {d['device']}; budget {budget}"
        " (FG mean slowdown per half over the mean of FG alone's same half, every round)"
    ]
    for w in d["budget_workloads"]:
        lines.append(f"  {w['title']}, {w['runtime_s']:g} s per run")
        lines.append(
            f"    {'run':<70} {'FG 1st half':>11} {'FG 2nd half':>11}"
            f" {'BG MB/s 1st':>11} {'BG MB/s 2nd':>11}"
        )
        for tag, r in w["runs"].items():
            h = r["halves"]
            if tag.startswith("alone"):
                what = "FG alone" if tag == "alone" else r["label"]
                dev_ = ""
                if w.get("alone_rounds", 1) > 1:
                    # its own deviation from the rounds' mean: the noise floor
                    dev_ = (
                        f" ({h[0]['mean_slowdown'] * 100:+.1f} %,"
                        f" {h[1]['mean_slowdown'] * 100:+.1f} % from the rounds' mean)"
                    )
                lines.append(
                    f"    {what:<70} {_ms(h[0]['mean_s']):>11} {_ms(h[1]['mean_s']):>11}{dev_}"
                )
                continue
            lines.append(
                f"    {r['label'][:70]:<70} {h[0]['mean_slowdown'] * 100:>+10.1f}%"
                f" {h[1]['mean_slowdown'] * 100:>+10.1f}%"
                f" {h[0]['scrub_mb_s']:>11.3g} {h[1]['scrub_mb_s']:>11.3g}"
            )
            if all("mean_slowdown_ci95" in x for x in h):
                # what a run of this length can tell (request-to-request
                # variance), and the goal's verdict on it for a % budget
                parts = []
                for x in h:
                    v = x["mean_slowdown"] * 100
                    ci = x["mean_slowdown_ci95"] * 100
                    part = f"{v:+.1f} % ± {ci:.1f}"
                    if frac is not None and tag.startswith("budget"):
                        verdict = budget_half_verdict(
                            x["mean_slowdown"], x["mean_slowdown_ci95"], frac
                        )
                        part += f" ({verdict})"
                    parts.append(part)
                lines.append(f"    {'':<4}95 % intervals per half: " + "; ".join(parts))
            if r.get("paired"):
                parts = []
                for x in r["paired"]:
                    part = f"{x['slowdown'] * 100:+.2f} % ± {x['ci95'] * 100:.2f}"
                    if frac is not None and tag.startswith("budget"):
                        part += f" ({budget_half_verdict(x['slowdown'], x['ci95'], frac)})"
                    parts.append(part + f", {x['reads_slowed']} of {x['pairs']} reads slowed")
                lines.append(f"    {'':<4}paired read by read with FG alone: " + "; ".join(parts))
        # time outside the block layer: fio's mean over the block layer's
        # mean of the same reads, FG alone (the recording) and budgeted
        # (the driver's measurement over every FG read)
        gaps = []
        blk = w["runs"]["alone"]["fg"].get("block_mean_s")
        if blk is not None:
            gaps.append(f"FG alone {_ms(w['runs']['alone']['fg']['mean_s'] - blk)}")
        for tag, tr in w["trajectory"].items():
            for x in tr:
                m = x.get("measured_recent")
                if m and m.get("fg_reads"):
                    gaps.append(f"{tag} {_ms(w['runs'][tag]['fg']['mean_s'] - m['mean_s'])}")
        if gaps:
            lines.append("    fio's mean beyond the block layer's: " + ", ".join(gaps))
        for tag, tr in w["trajectory"].items():
            for x in tr:
                # the monitor's clock: from the run's first point
                t0 = x["history"][0]["time_s"] if x["history"] else 0.0
                pts = ", ".join(
                    f"{h['time_s'] - t0:.0f}s {h['knob']}"
                    + (f" {_size(h['size_bytes'])}" if h.get("size_bytes") else "")
                    + (" (back-off)" if h["backed_off"] else "")
                    for h in x["history"]
                )
                lines.append(f"    {tag} trajectory: {pts}; ends {x['setting']}")
                m = x.get("measured_recent")
                if m:
                    lines.append(
                        f"    {tag} driver's own measurement (clean reads as baseline):"
                        f" {m['slowdown'] * 100:+.1f} % ± {m['slowdown_ci95'] * 100:.1f} %"
                        f" over {m['fg_reads']} reads ({m['overlapped']} overlapped),"
                        f" clean mean {_ms(m['baseline_mean_s'])}"
                    )
    return "\n".join(lines)


def record_alone(fallow: Path, dev: str, trace: Path, cleanup: Cleanup, window) -> tuple:
    """The FG alone (`window()`), recorded by `fallow record DEV` into
    `trace`: the run's result and the recorder's JSON report."""
    rec = cleanup.proc(
        subprocess.Popen(
            # the trace of an earlier run in the same --workdir is replaced
            [str(fallow), "record", dev, "-o", str(trace), "--overwrite", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    _wait_for_line(rec, "recording", 15.0)
    alone = window()
    stop_process(rec, signal.SIGTERM, 30.0)
    rec_out, rec_err = rec.communicate()
    if rec.returncode != 0:
        raise BenchError(f"fallow record {dev} exited {rec.returncode}: {rec_err.strip()[-400:]}")
    return alone, json.loads(rec_out)


def _wait_for_line(p: subprocess.Popen, word: str, timeout_s: float) -> None:
    """Block until the child prints a stderr line containing `word` (the
    recorder is armed), failing if it exits first."""
    deadline = time.monotonic() + timeout_s
    lines = []
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        if word in line:
            return
    p.poll()
    raise BenchError(f"fallow record did not start ({p.returncode}): {''.join(lines).strip()}")


# ---------------------------------------------------------------- btrfs (docs/native.md)

# The btrfs part's workloads: the trace replay and random 4 KiB reads
# (docs/native.md, "Benchmark"), on the raw device under the file system, as the block
# part's FG runs (reads only: nothing the scrub checks is changed).
BTRFS_WORKLOADS = "trace,random"
# The kernel's rate limit may overshoot by its accounting period's work at
# the run's start; the bench's own check (and the pytest's) allows this.
BTRFS_LIMIT_TOLERANCE = 0.1


def check_btrfs_tools() -> None:
    missing = [
        f"{t} (apt-get install btrfs-progs)" for t in ("btrfs", "mkfs.btrfs") if not shutil.which(t)
    ]
    with open("/proc/filesystems") as f:
        known = "btrfs" in f.read()
    if not known and shutil.which("modprobe"):
        subprocess.run(["modprobe", "btrfs"], capture_output=True)
        with open("/proc/filesystems") as f:
            known = "btrfs" in f.read()
    if not known:
        missing.append("btrfs in the kernel (modprobe btrfs)")
    if missing:
        raise Missing("the btrfs part needs " + "; ".join(missing))


def btrfs_version() -> str:
    return run(["btrfs", "--version"], "btrfs --version").stdout.strip()


def scrub_status(mnt: Path) -> dict:
    """`btrfs scrub status -R MNT`: its counters, its state, when the scrub
    started (`Scrub started:`) or was last resumed (`Scrub resumed:`, which
    btrfs-progs prints instead once a scrub is resumed; the counters carry
    on from before the resume); `bytes` = data + tree bytes scrubbed (0
    before any scrub)."""
    text = run(["btrfs", "scrub", "status", "-R", str(mnt)], "btrfs scrub status").stdout
    st: dict = {"status": "none", "started": None, "resumed": None, "counters": {}}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Status":
            st["status"] = value
        elif key == "Scrub started":
            st["started"] = value
        elif key == "Scrub resumed":
            st["resumed"] = value
        elif value.isdigit():
            st["counters"][key] = int(value)
    c = st["counters"]
    st["bytes"] = c.get("data_bytes_scrubbed", 0) + c.get("tree_bytes_scrubbed", 0)
    return st


def make_btrfs(fallow: Path, work: Path, size: int, fill: int, cleanup: Cleanup) -> dict:
    """btrfs on the emulated HDD, holding `fill` bytes of incompressible
    data. It is made and filled on a loop device straight over the image
    (at the page cache's speed), then the emulator serves the same bytes
    with an HDD's timing and the file system is mounted from it."""
    image = work / "btrfs.img"
    with open(image, "wb") as f:
        f.truncate(size)
    cleanup.add(f"rm {image}", lambda: image.unlink(missing_ok=True))
    raw = run(["losetup", "-f", "--show", str(image)], "losetup (fill)").stdout.strip()
    fill_mnt = work / "btrfs-fill"
    fill_mnt.mkdir(exist_ok=True)
    try:
        run(["mkfs.btrfs", "-q", "-f", raw], "mkfs.btrfs")
        run(["mount", raw, str(fill_mnt)], "mount (fill)")
        try:
            # one random MiB over and over: btrfs neither compresses
            # (not mounted so) nor deduplicates, so every block is read
            block = random.Random(11).randbytes(MIB)
            left, n = fill // MIB, 0
            while left > 0:
                with open(fill_mnt / f"data{n:03d}", "wb") as f:
                    for _ in range(min(256, left)):
                        f.write(block)
                left -= min(256, left)
                n += 1
            os.sync()
        finally:
            run(["umount", str(fill_mnt)], "umount (fill)")
    finally:
        run(["losetup", "-d", raw], f"detach {raw}")
    device = make_emu(fallow, work, size, cleanup, image=image)
    dev = device["device"]
    mnt = work / "btrfs"
    mnt.mkdir(exist_ok=True)
    run(["mount", dev, str(mnt)], f"mount {dev}")

    def unmount() -> None:
        # a scrub left running (a failure mid-run) would hold the mount
        subprocess.run(["btrfs", "scrub", "cancel", str(mnt)], capture_output=True)
        run(["umount", str(mnt)], f"umount {mnt}")

    cleanup.add(f"umount {mnt}", unmount)
    fsids = [
        d for d in Path("/sys/fs/btrfs").iterdir() if (d / "devices" / loop_name(dev)).exists()
    ]
    if len(fsids) != 1:
        raise BenchError(f"{dev}: no single btrfs in /sys/fs/btrfs holds it ({fsids})")
    fsdir = fsids[0]
    for name in (f"scrub.status.{fsdir.name}", f"scrub.progress.{fsdir.name}"):
        # btrfs-progs' status files of this (throw-away) file system
        f = Path("/var/lib/btrfs") / name
        cleanup.add(f"rm {f}", lambda f=f: f.unlink(missing_ok=True))
    devinfo = sorted((fsdir / "devinfo").iterdir())
    if len(devinfo) != 1:
        raise BenchError(f"{fsdir}/devinfo: want one member device, found {len(devinfo)}")
    speed = devinfo[0] / "scrub_speed_max"
    device.update(
        name="btrfs",
        title="btrfs on the emulated HDD (a loop device over `fallow emulate-disk`, hdd model)",
        mount=str(mnt),
        fsid=fsdir.name,
        fill_bytes=fill // MIB * MIB,
        speed_file=str(speed) if speed.exists() else None,
    )
    return device


class BtrfsScrubber:
    """`btrfs scrub start -B MNT` for the run, then `btrfs scrub cancel`:
    unthrottled, in the idle I/O class (`-c 3`), or under the kernel's own
    limit (`scrub_speed_max`, what `btrfs scrub limit` sets in btrfs-progs
    ≥ 6.5; v6.2 has no such subcommand, so the file is written here and
    restored after)."""

    def __init__(
        self, mnt: str, how: str, cleanup: Cleanup, speed_file: str | None, rate_bps: float = 0
    ):
        self.mnt, self.how, self.cleanup = mnt, how, cleanup
        self.cmd = ["btrfs", "scrub", "start", "-B", *(["-c", "3"] if how == "idle" else []), mnt]
        self.speed = Path(speed_file) if speed_file else None
        self.rate_bps = rate_bps
        self.before: str | None = None
        self.proc: subprocess.Popen | None = None

    def _restore(self) -> None:
        if self.speed is not None and self.before is not None:
            self.speed.write_text(self.before)

    def start(self) -> None:
        if self.how == "limit":
            if self.speed is None:
                raise Missing("the kernel has no scrub_speed_max (btrfs scrub limit needs 5.14+)")
            self.before = self.speed.read_text().strip()
            self.cleanup.add(f"restore {self.speed}", self._restore)
            self.speed.write_text(str(max(1, round(self.rate_bps))))
        self.proc = self.cleanup.proc(
            subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )

    def stop(self) -> dict:
        assert self.proc is not None
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip()
            st = scrub_status(Path(self.mnt))
            why = (
                "finished before the run ended: fill more data (--btrfs-fill)"
                if st["status"] == "finished"
                else f"ended early ({self.proc.returncode}): {err}"
            )
            raise BenchError(f"`{' '.join(self.cmd)}` {why}")
        run(["btrfs", "scrub", "cancel", self.mnt], "btrfs scrub cancel")
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            raise BenchError(f"`{' '.join(self.cmd)}` still runs 30 s after its cancel") from None
        self._restore()
        st = scrub_status(Path(self.mnt))
        return {"reported_bytes": st["bytes"], "status": st["status"], "note": ""}


class SectorSampler:
    """(CLOCK_MONOTONIC ns, sectors read) of `dev` every BURST_SAMPLE_S, in a
    thread, until stop()."""

    def __init__(self, dev: str):
        self.dev = dev
        self.samples: list[tuple[int, int]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic_ns(), read_sectors(self.dev)))
            if self.done.wait(BURST_SAMPLE_S):
                self.samples.append((time.monotonic_ns(), read_sectors(self.dev)))
                return

    def stop(self) -> None:
        self.done.set()
        self.thread.join(5)


def _sectors_at(samples: list[tuple[int, int]], t_ns: int) -> float:
    """Sectors read by `t_ns`, linear between the samples around it."""
    i = bisect.bisect_left(samples, (t_ns, -1))
    if i <= 0:
        return float(samples[0][1])
    if i >= len(samples):
        return float(samples[-1][1])
    (t0, s0), (t1, s1) = samples[i - 1], samples[i]
    return s0 + (s1 - s0) * (t_ns - t0) / max(1, t1 - t0)


def bytes_in_bursts(samples: list[tuple[int, int]], out: Path) -> int:
    """The device's bytes read beyond the FG's own while a burst of the
    replay `out` was in the system. A burst: requests arriving less than
    BURST_SPLIT_MS apart (the shapes' gaps are ≥ 500 ms, their requests
    5 ms apart); its window runs from its first arrival to its last
    completion. The replay's log gives arrivals (ms from its start) and
    latencies; its JSON the start on CLOCK_MONOTONIC."""
    start_ns = int(load_fio_json(Path(f"{out}.json"))["replay"]["start_monotonic_ns"])
    reqs = []  # (arrival_ns, completion_ns, bytes)
    for line in Path(f"{out}_clat.1.log").read_text().splitlines():
        f = line.split(",")
        at = start_ns + int(f[0]) * 1_000_000
        reqs.append((at, at + int(f[1]), int(f[3])))
    bursts: list[list] = []
    for at, done, size in reqs:
        if bursts and at - bursts[-1][3] < BURST_SPLIT_MS * 1_000_000:
            b = bursts[-1]
            b[1], b[2], b[3] = max(b[1], done), b[2] + size, at
        else:
            bursts.append([at, done, size, at])
    total = 0.0
    for first, last_done, fg_bytes, _ in bursts:
        dev_bytes = (_sectors_at(samples, last_done) - _sectors_at(samples, first)) * 512
        total += max(0.0, dev_bytes - fg_bytes)
    return round(total)


def same_scrub(st0: dict, st1: dict) -> bool:
    """Whether the scrub of status `st1` is the one of `st0`, resumed or
    not, so that its counters go on from `st0`'s. Only a fresh start (a
    `Scrub started:` time other than `st0`'s) begins a new count: a resume
    prints `Scrub resumed:` and keeps the counters (fallow's slices resume
    the scrub at every pause; comparing the start lines alone took the
    first resume inside a run for a new scrub, and counted the 33 MB fallow
    scrubbed in the second before the run as the run's)."""
    return st1["started"] is None or st1["started"] == st0["started"]


def btrfs_window(
    dev: str, mnt: Path, fg_cmd: list[str], out: Path, cleanup: Cleanup, bursts: bool = False
) -> dict:
    """One FG run; the scrub's bytes are what `btrfs scrub status -R` says
    it scrubbed during the run (data + tree bytes, which count a chunk
    re-read after a resume again), and, as a cross-check, the device's bytes
    read beyond the FG's own. With `bursts` (a replayed cut of bursts), also
    the device's bytes read beyond the FG's own while a burst was in the
    system (first arrival to last completion): `scrub_bytes_in_bursts`."""
    st0 = scrub_status(mnt)
    sampler = SectorSampler(dev) if bursts else None
    try:
        r = run_window(dev, fg_cmd, out, cleanup)
    finally:
        if sampler is not None:
            sampler.stop()
    st1 = scrub_status(mnt)
    if sampler is not None:
        r["scrub_bytes_in_bursts"] = bytes_in_bursts(sampler.samples, out)
    before = st0["bytes"] if same_scrub(st0, st1) else 0
    scrubbed = max(0, st1["bytes"] - before)
    r["device_other_bytes"] = r.pop("scrub_bytes")
    r["device_other_mb_s"] = r.pop("scrub_mb_s")
    r["scrub_bytes"] = scrubbed
    r["scrub_mb_s"] = scrubbed / r["wall_s"] / 1e6
    r["scrub_status"] = st1["status"]
    return r


def bench_btrfs_workload(
    fallow: Path, device: dict, workload: str, args, cleanup: Cleanup, work: Path
) -> dict:
    dev, mnt = device["device"], Path(device["mount"])
    wdir = work / f"btrfs-{workload}"
    wdir.mkdir()
    rt = args.runtime
    target = f"btrfs:{mnt}"

    def fg(tag: str) -> list[str]:
        return fg_command(dev, workload, args, wdir / tag)

    def settle() -> None:
        time.sleep(0.5 if args.quick else 2.0)

    def with_scrubber(scrubber, tag: str) -> dict:
        """One FG run with `scrubber` started a second before and stopped after."""
        scrubber.start()
        try:
            time.sleep(1.0)
            r = btrfs_window(dev, mnt, fg(tag), wdir / tag, cleanup)
        finally:
            report = scrubber.stop()
        r["scrubber_report"] = report
        r["command"] = scrubber.cmd
        log(
            f"btrfs/{workload}: FG mean {_ms(r['fg']['mean_s'])}, p99 {_ms(r['fg']['p99_s'])};"
            f" scrubbed {r['scrub_mb_s']:.3g} MB/s ({r['scrub_status']})"
        )
        return r

    out: dict = {
        "name": workload,
        "title": WORKLOADS[workload]["title"]
        + (
            f" ({args.trace.name}, {args.trace_start:g} s to {args.trace_start + rt:g} s)"
            if workload == "trace"
            else ""
        ),
        "fg_rate_iops": None if workload == "trace" else args.fg_iops,
        "trace": (
            {"path": str(args.trace), "start_s": args.trace_start} if workload == "trace" else None
        ),
        "runtime_s": rt,
        "fg_command": fg("TAG"),
        "runs": [],
    }
    log(f"btrfs/{workload}: FG alone, recorded with fallow record")
    trace = wdir / "fg.csv"
    alone, out["record"] = record_alone(
        fallow,
        dev,
        trace,
        cleanup,
        lambda: btrfs_window(dev, mnt, fg("alone"), wdir / "alone", cleanup),
    )
    out["runs"].append({"scrubber": "alone", "label": "FG alone", **alone})
    ref = alone["fg"]
    rand_s = device["service"]["random_read_s"][str(WORKLOADS[workload]["bs"])]
    penalty_ns = max(0, round((rand_s - ref["mean_s"]) * 1e9))
    tuned = tune(
        fallow, trace, device["service"], penalty_ns, args.budgets, args.sizes, args.tolerance, wdir
    )
    tuned["switch_penalty_s"] = penalty_ns / 1e9
    out["tune"] = tuned

    def fallow_run(tuned: dict, scrubber: str, what: str) -> dict:
        if tuned["chosen"] is None:
            log(f"btrfs/{workload}: no budget gave a setting: fallow does not scrub")
            r = btrfs_window(dev, mnt, fg(scrubber), wdir / scrubber, cleanup)
            r.update(scrubber=scrubber, label=f"{what}: no setting met a budget")
            r["scrubber_report"] = {"reported_bytes": 0, "note": "no setting met any budget"}
            return r
        c = tuned["chosen"]
        size = _size(c["request_size_bytes"])
        log(f"btrfs/{workload}: FG + {what} ({c['spec']}, {size})")
        # at the default I/O priority: fallow's pauses are its only throttle
        s = FallowScrubber(fallow, target, Path(tuned["tuned_json"]), None, False, cleanup)
        r = with_scrubber(s, scrubber)
        r.update(scrubber=scrubber, label=f"{what}: {c['spec']}, {size}")
        if r["scrub_bytes"] == 0:
            r["scrubber_report"]["note"] = (
                "the tuned wait was never reached: no idle interval long enough"
            )
        return r

    runs = []
    settle()
    runs.append(fallow_run(tuned, "fallow", "fallow scrub btrfs:MNT"))
    settle()
    log(f"btrfs/{workload}: FG + btrfs scrub start -c 3 (BFQ idle class)")
    r = with_scrubber(BtrfsScrubber(str(mnt), "idle", cleanup, None), "idle")
    r.update(scrubber="idle-class", label="btrfs scrub start -c 3, BFQ")
    runs.append(r)
    settle()

    fallow_bps = runs[0]["scrub_mb_s"] * 1e6
    rate = args.fixed_rate or (fallow_bps if fallow_bps >= 64 * KIB else PAPER_FIXED_RATE)
    log(f"btrfs/{workload}: FG + btrfs scrub under scrub_speed_max = {rate / 1e6:.2f} MB/s")
    s = BtrfsScrubber(str(mnt), "limit", cleanup, device["speed_file"], rate)
    r = with_scrubber(s, "limit")
    r.update(scrubber="kernel-limit", label=f"btrfs scrub, scrub_speed_max {rate / 1e6:.2f} MB/s")
    r["rate_bytes_per_s"] = rate
    runs.append(r)
    settle()

    # the idle class's harm as fallow's budget (the block part's fourth run)
    harm = runs[1]["fg"]["mean_s"] / ref["mean_s"] - 1
    if harm > args.tolerance:
        # no exponent: `fallow tune --budget` reads a plain number
        budget = f"{harm * 100:.3g}%" if harm < 10 else f"{harm * 100:.0f}%"
        matched = tune(
            fallow,
            trace,
            device["service"],
            penalty_ns,
            budget,
            args.sizes,
            math.inf,
            wdir,
            "tune-matched.json",
        )
        out["tune_matched"] = matched
        runs.append(fallow_run(matched, "fallow-matched", f"fallow, budget +{budget}"))
        settle()
    else:
        out["tune_matched"] = None

    log(f"btrfs/{workload}: FG + btrfs scrub start, unthrottled")
    r = with_scrubber(BtrfsScrubber(str(mnt), "unthrottled", cleanup, None), "unthrottled")
    r.update(scrubber="unthrottled", label="btrfs scrub start, unthrottled")
    runs.append(r)

    for r in [out["runs"][0], *runs]:
        r["fg"]["mean_ratio"] = r["fg"]["mean_s"] / ref["mean_s"]
        r["fg"]["p99_ratio"] = r["fg"]["p99_s"] / ref["p99_s"]
    out["runs"].extend(runs)
    out.update(btrfs_goal(out["runs"], args.tolerance))
    return out


def btrfs_goal(runs: list[dict], tolerance: float) -> dict:
    """docs/native.md's goal on one workload's runs: at the idle class's own FG
    cost, ≥ GOAL_RATIO × its scrub rate; within `tolerance` of FG alone's
    p99, more scrubbed than by any other scrubber that stays within it."""
    by = {r["scrubber"]: r for r in runs}
    fal, idle = by["fallow"], by["idle-class"]

    def over_idle(r: dict | None) -> float | None:
        if r is None or idle["scrub_mb_s"] <= 0:
            return None
        return r["scrub_mb_s"] / idle["scrub_mb_s"]

    # at the idle class's cost: the run tuned to it, else (the idle class
    # cost less than the tolerance) fallow's own run if it cost no more
    at_cost = by.get("fallow-matched")
    if at_cost is None and fal["fg"]["mean_ratio"] <= idle["fg"]["mean_ratio"]:
        at_cost = fal
    within = [r for r in runs if r["scrubber"] != "alone" and r["fg"]["p99_ratio"] <= 1 + tolerance]
    # a scrubber that scrubbed nothing kept the p99 trivially: not "the most"
    best = max(
        (r for r in within if r["scrub_mb_s"] > 0), key=lambda r: r["scrub_mb_s"], default=None
    )
    fal_within = fal["fg"]["p99_ratio"] <= 1 + tolerance
    others = [r["scrub_mb_s"] for r in within if not r["scrubber"].startswith("fallow")]
    at_cost_ratio = over_idle(at_cost)
    return {
        "fallow_over_idle_class": over_idle(fal),
        "matched_over_idle_class": over_idle(by.get("fallow-matched")),
        "at_idle_cost": {
            "scrubber": at_cost["scrubber"] if at_cost else None,
            "over_idle_class": at_cost_ratio,
        },
        "within_p99": {
            "scrubbers": [r["scrubber"] for r in within],
            "most_scrubbed": best["scrubber"] if best else None,
        },
        "goal": {
            "ratio": GOAL_RATIO,
            "p99_tolerance": tolerance,
            "fallow_p99_within": fal_within,
            "at_idle_cost_met": at_cost_ratio is not None and at_cost_ratio >= GOAL_RATIO,
            "most_within_p99_met": bool(
                fal_within and fal["scrub_mb_s"] > 0 and fal["scrub_mb_s"] > max(others, default=0)
            ),
        },
    }


# ---------------------------------------------------------------- btrfs shapes (docs/native.md)

# The FG shapes of the brake's comparison (docs/native.md): a continuous 20 IOPS (fio,
# Poisson) and bursts separated by idle gaps drawn uniformly from a range.
# A burst is BURST_REQUESTS random 4 KiB reads arriving BURST_SPACING_MS
# apart (a 95 ms burst), written as an MSR-format cut that the replay runs.
BTRFS_SHAPES = {
    "continuous-20iops": None,
    "bursts-gaps-0.5-2s": (0.5, 2.0),
    "bursts-gaps-4-8s": (4.0, 8.0),
}
BURST_REQUESTS = 20
BURST_SPACING_MS = 5.0
# the device's reads are sampled this often to tell what the scrub read
# while a burst was in the system; arrivals closer than BURST_SPLIT_MS
# belong to one burst
BURST_SAMPLE_S = 0.005
BURST_SPLIT_MS = 250.0
# Static scrub_speed_max values spanning the kernel limit's trade-off curve
# on the emulated HDD, per shape. Under the continuous FG fallow reads about
# 1 MB/s at an FG p99 within 10 % of alone (idle-machine run, 2026-11-29),
# where 4 MB/s already costs 3×: its curve is read from 0.5 MB/s up. On the
# bursty shapes fallow reads 15-45 MB/s, so theirs spans 4-33 MB/s.
BTRFS_STATIC_LIMITS = {
    "continuous-20iops": (0.5e6, 1e6, 2e6, 4e6, 8e6),
    "bursts-gaps-0.5-2s": (4e6, 8e6, 16.5e6, 33e6),
    "bursts-gaps-4-8s": (4e6, 8e6, 16.5e6, 33e6),
}
# The policy fallow runs in this comparison by default (--shapes-policy).
BTRFS_SHAPES_POLICY = "fixed-wait:t=200ms"


def write_burst_cut(path: Path, gaps_s: tuple[float, float], runtime_s: float, seed: int) -> None:
    """An MSR-format cut (`t_ms dev offset_bytes size_bytes op`) of bursts
    whose gaps are uniform in `gaps_s`, random offsets over 1 GiB (the
    replay scales them onto the device)."""
    rng = random.Random(seed)
    t_ms, lines = 0.0, []
    while t_ms < (runtime_s + 10) * 1e3:
        for i in range(BURST_REQUESTS):
            off = rng.randrange(0, (1 << 30) // REPLAY_ALIGN) * REPLAY_ALIGN
            lines.append(f"{t_ms + i * BURST_SPACING_MS:.3f} 0 {off} 4096 Read")
        # the gap runs from the burst's last arrival to the next's first
        t_ms += (BURST_REQUESTS - 1) * BURST_SPACING_MS + rng.uniform(*gaps_s) * 1e3
    path.write_text("\n".join(lines) + "\n")


def bench_btrfs_shapes(
    fallow: Path, device: dict, args, cleanup: Cleanup, work: Path
) -> list[dict]:
    """The brake's comparison (docs/native.md) on each FG shape: FG alone, fallow (its
    policy, the brake where the event monitor runs), the kernel's static
    `scrub_speed_max` at BTRFS_STATIC_LIMITS, and an unthrottled scrub.
    Per run: FG p50/p99 over the same repeat's alone, the scrub's MB
    during the run (and, for bursts, during the bursts) and the time it
    would take to scrub the file system's data at that rate.

    `--repeats` rounds, each running every shape's every cell, FG alone
    included, the cells' order rotated from round to round: load drift
    (a shared machine) falls on every cell alike, and each ratio is taken
    against the alone run of its own round."""
    wanted = args.shapes.split(",") if args.shapes else list(BTRFS_SHAPES)
    cells_of = {shape: btrfs_shape_cells(args, shape) for shape in wanted}
    per = {shape: [] for shape in wanted}
    for rep in range(args.repeats):
        for shape in wanted:
            cells = cells_of[shape]
            k = rep % len(cells)
            order = cells[k:] + cells[:k]
            per[shape].append(
                bench_btrfs_shape_round(
                    fallow, device, args, cleanup, work, shape, BTRFS_SHAPES[shape], rep, order
                )
            )
    out = []
    for shape in wanted:
        sh = summarize_shape(
            shape, BTRFS_SHAPES[shape], per[shape], [c[0] for c in cells_of[shape]]
        )
        sh.update(shape_verdict(sh))
        out.append(sh)
    return out


def btrfs_shape_cells(args, shape: str) -> list[tuple[str, str, float | None]]:
    """(tag, label, static rate or None) of each cell of a round of `shape`
    (`--limits`, else the shape's BTRFS_STATIC_LIMITS)."""
    cells = [
        ("alone", "FG alone", None),
        ("fallow", f"fallow scrub btrfs:MNT --policy {args.shapes_policy}", None),
    ]
    for rate in args.limits or BTRFS_STATIC_LIMITS[shape]:
        cells.append((f"limit-{rate / 1e6:g}", f"scrub_speed_max {rate / 1e6:g} MB/s", rate))
    cells.append(("unthrottled", "unthrottled", 0.0))
    return cells


def bench_btrfs_shape_round(
    fallow: Path,
    device: dict,
    args,
    cleanup: Cleanup,
    work: Path,
    shape: str,
    gaps: tuple[float, float] | None,
    rep: int,
    order: list[tuple[str, str, float | None]],
) -> dict:
    dev, mnt = device["device"], Path(device["mount"])
    data_bytes = device.get("fill_bytes") or args.btrfs_fill * MIB
    wdir = work / f"btrfs-shape-{shape}" / f"round{rep}"
    wdir.mkdir(parents=True)
    sargs = argparse.Namespace(**vars(args))
    # each round its own draw, the same for every cell of the round
    sargs.seed = args.seed + rep
    if gaps is None:
        sargs.fg_iops = 20
        workload = "random"
    else:
        cut = wdir / "bursts.trace"
        write_burst_cut(cut, gaps, args.runtime, sargs.seed)
        sargs.trace, sargs.trace_start, sargs.replay_hold = cut, 0.0, True
        workload = "trace"

    def one(tag: str, label: str, rate: float | None) -> dict:
        report = None
        if tag == "alone":
            scrubber = None
        elif tag == "fallow":
            policy = Path(f"policy:{args.shapes_policy}")
            scrubber = FallowScrubber(fallow, f"btrfs:{mnt}", policy, None, False, cleanup)
        elif rate:
            scrubber = BtrfsScrubber(str(mnt), "limit", cleanup, device["speed_file"], rate)
        else:
            scrubber = BtrfsScrubber(str(mnt), "unthrottled", cleanup, None)
        if scrubber is not None:
            scrubber.start()
        try:
            if scrubber is not None:
                time.sleep(1.0)
            fg = fg_command(dev, workload, sargs, wdir / tag)
            r = btrfs_window(dev, mnt, fg, wdir / tag, cleanup, bursts=gaps is not None)
        finally:
            if scrubber is not None:
                report = scrubber.stop()
        r["scrubber"], r["label"], r["scrubber_report"] = tag, label, report
        mb_s = r["scrub_mb_s"]
        r["finish_s"] = data_bytes / (mb_s * 1e6) if mb_s > 0 else None
        during = r.get("scrub_bytes_in_bursts")
        log(
            f"btrfs/{shape} round {rep + 1}: {label}: FG p50 {_ms(r['fg']['p50_s'])},"
            f" p99 {_ms(r['fg']['p99_s'])}; scrubbed {r['scrub_bytes'] / 1e6:.1f} MB"
            + ("" if during is None else f", {during / 1e6:.1f} MB of it during bursts")
        )
        time.sleep(0.5 if args.quick else 2.0)
        return r

    runs = {tag: one(tag, label, rate) for tag, label, rate in order}
    ref = runs["alone"]["fg"]
    for r in runs.values():
        r["fg"]["p99_ratio"] = r["fg"]["p99_s"] / ref["p99_s"]
        r["fg"]["p50_ratio"] = r["fg"]["p50_s"] / ref["p50_s"]
    return {"round": rep, "seed": sargs.seed, "order": [c[0] for c in order], "runs": runs}


def _mean_sd(xs: list[float]) -> dict:
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return {"mean": m, "sd": sd, "min": min(xs), "max": max(xs), "n": len(xs)}


def summarize_shape(
    shape: str, gaps: tuple[float, float] | None, rounds: list[dict], tags: list[str]
) -> dict:
    """Per cell, over the rounds: FG p50/p99 × alone, MB scrubbed in the
    run (and in the bursts), scrub rate and projected finish."""
    cells = []
    for tag in tags:
        rs = [rd["runs"][tag] for rd in rounds]
        c = {
            "scrubber": tag,
            "label": rs[0]["label"],
            "p50_ratio": _mean_sd(
                [r["fg"]["p50_s"] / rd["runs"]["alone"]["fg"]["p50_s"] for r, rd in zip(rs, rounds)]
            ),
            "p99_ratio": _mean_sd(
                [r["fg"]["p99_s"] / rd["runs"]["alone"]["fg"]["p99_s"] for r, rd in zip(rs, rounds)]
            ),
            "p50_s": _mean_sd([r["fg"]["p50_s"] for r in rs]),
            "p99_s": _mean_sd([r["fg"]["p99_s"] for r in rs]),
            "scrub_mb": _mean_sd([r["scrub_bytes"] / 1e6 for r in rs]),
            "scrub_mb_s": _mean_sd([r["scrub_mb_s"] for r in rs]),
        }
        if all(r.get("scrub_bytes_in_bursts") is not None for r in rs):
            c["scrub_mb_in_bursts"] = _mean_sd([r["scrub_bytes_in_bursts"] / 1e6 for r in rs])
        rate = c["scrub_mb_s"]["mean"]
        data = rs[0]["finish_s"] * rs[0]["scrub_mb_s"] * 1e6 if rs[0].get("finish_s") else None
        # the finish time at the mean rate (a mean of 1/rate would let one
        # slow round dominate)
        c["finish_s"] = data / (rate * 1e6) if data and rate > 0 else None
        cells.append(c)
    return {"shape": shape, "gaps_s": gaps, "cells": cells, "rounds": rounds}


def equal_p99(fallow: dict, statics: list[dict]) -> dict:
    """The static limits' scrub rate at fallow's FG p99 (× alone, means
    over the rounds). The static cells (the limits and unthrottled, a
    limit of infinity) make a curve of rate against p99; only its
    efficient points count (no other point scrubs more at a p99 as low).
    Inside the curve's span, linear between the two points around
    fallow's p99 (a limit between theirs); below it (fallow gentler than
    every limit), the gentlest limit, whose FG p99 is above fallow's: a
    comparison that favours the limit; above it, the fastest."""
    pts = sorted(
        ((s["p99_ratio"]["mean"], s["scrub_mb_s"]["mean"], s["label"]) for s in statics),
        key=lambda p: (p[0], -p[1]),
    )
    front = []
    for p in pts:
        if not front or p[1] > front[-1][1]:
            front.append(p)
    x = fallow["p99_ratio"]["mean"]
    if x <= front[0][0]:
        rate, how = (
            front[0][1],
            f"the gentlest static limit ({front[0][2]}, p99 ×{front[0][0]:.2f})",
        )
    elif x >= front[-1][0]:
        rate, how = front[-1][1], f"the fastest at or below fallow's p99 ({front[-1][2]})"
    else:
        i = next(i for i in range(1, len(front)) if front[i][0] >= x)
        (x0, y0, l0), (x1, y1, l1) = front[i - 1], front[i]
        rate = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        how = f"interpolated between {l0} and {l1}"
    fr = fallow["scrub_mb_s"]["mean"]
    return {
        "fallow_p99_ratio": x,
        "static_mb_s": rate,
        "how": how,
        "fallow_mb_s": fr,
        # finish-time ratio: static's finish over fallow's = fallow's rate over static's
        "speedup": fr / rate if rate > 0 else None,
    }


def shape_verdict(sh: dict) -> dict:
    """The brake's goal (docs/native.md): at equal FG p99, fallow finishes ≥ 2× sooner than
    the static limits on the bursty shapes and not later on the
    continuous one."""
    by = {c["scrubber"]: c for c in sh["cells"]}
    statics = [c for c in sh["cells"] if c["scrubber"] not in ("alone", "fallow")]
    eq = equal_p99(by["fallow"], statics)
    want = 1.0 if sh["gaps_s"] is None else 2.0
    return {
        "equal_p99": eq,
        "goal_speedup": want,
        "met": bool(eq["speedup"] and eq["speedup"] >= want),
    }


def _pm(s: dict, fmt: str = ".2f") -> str:
    return f"{s['mean']:{fmt}} ± {s['sd']:{fmt}}"


def shapes_table(shapes: list[dict]) -> str:
    rows = [
        "| FG shape | scrubber | FG p50 × alone | FG p99 × alone | MB scrubbed in the run"
        " | of it during bursts | finish (projected) |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for sh in shapes:
        for c in sh["cells"]:
            fin = "—" if c.get("finish_s") is None else f"{c['finish_s']:.0f} s"
            if c["scrubber"] == "alone":
                p50 = f"1 ({_ms(c['p50_s']['mean'])})"
                p99 = f"1 ({_ms(c['p99_s']['mean'])})"
            else:
                p50, p99 = _pm(c["p50_ratio"]), _pm(c["p99_ratio"])
            bursts = c.get("scrub_mb_in_bursts")
            rows.append(
                f"| {sh['shape']} | {c['label']} | {p50} | {p99} | {_pm(c['scrub_mb'], '.0f')}"
                f" | {'—' if bursts is None else _pm(bursts, '.0f')} | {fin} |"
            )
    rows.append("")
    for sh in shapes:
        eq = sh["equal_p99"]
        sp = "—" if eq["speedup"] is None else f"{eq['speedup']:.2f}×"
        rows.append(
            f"- {sh['shape']}: fallow {eq['fallow_mb_s']:.1f} MB/s"
            f" at FG p99 ×{eq['fallow_p99_ratio']:.2f};"
            f" static at that p99 {eq['static_mb_s']:.1f} MB/s ({eq['how']}): fallow finishes"
            f" {sp} sooner (goal ≥ {sh['goal_speedup']:g}×: {'met' if sh['met'] else 'not met'})"
        )
    return "\n".join(rows)


def bench_btrfs(fallow: Path, args, cleanup: Cleanup, work: Path, rng: random.Random) -> dict:
    check_btrfs_tools()
    t0 = time.monotonic()
    log(f"btrfs: {args.btrfs_size} MiB file system, {args.btrfs_fill} MiB of data")
    device = make_btrfs(fallow, work, args.btrfs_size * MIB, args.btrfs_fill * MIB, cleanup)
    device["btrfs_progs"] = btrfs_version()
    device["service"] = measure_service(device["device"], device["image_bytes"], args.quick, rng)
    if args.btrfs_shapes:
        device["shapes"] = bench_btrfs_shapes(fallow, device, args, cleanup, work)
        log("btrfs shapes:\n" + shapes_table(device["shapes"]))
        device["workloads"] = []
        device["elapsed_s"] = time.monotonic() - t0
        return device
    device["workloads"] = [
        bench_btrfs_workload(fallow, device, w, args, cleanup, work) for w in args.workloads_list
    ]
    for w in device["workloads"]:
        g = w["goal"]
        g["met"] = bool(g["at_idle_cost_met"] and g["most_within_p99_met"])
    # CI's budget for the quick mode is 90 s: the JSON says what it took
    device["elapsed_s"] = time.monotonic() - t0
    return device


# ---------------------------------------------------------------- output


def _size(b: int) -> str:
    return f"{b // MIB} MiB" if b % MIB == 0 else f"{b // KIB} KiB"


def _ms(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} µs"


def table(doc: dict) -> str:
    lines = []
    for d in doc["devices"]:
        sv = d["service"]
        lines.append(
            f"\n{d['title']}: {d['device']}, BFQ, {'direct' if d['direct_io'] else 'buffered'} "
            f"loop I/O, {_size(d['image_bytes'])} image"
        )
        lines.append(
            f"  measured: sequential 64 KiB {_ms(sv['seq_64k_s'])}, 4 MiB {_ms(sv['seq_4m_s'])}"
            f" → --bg {sv['bg_model']}"
        )
        for w in d["workloads"]:
            lines.append(
                f"  {w['title']}"
                + (f", Poisson {w['fg_rate_iops']}/s" if w["fg_rate_iops"] else ", open loop")
                + f", {w['runtime_s']:g} s per run"
            )
            lines.append(
                f"    {'scrubber':<56} {'FG mean':>9} {'×alone':>7} {'FG p99':>9} {'×alone':>7}"
                f" {'scrub MB/s':>11}"
            )
            for r in w["runs"]:
                fg = r["fg"]
                mbs = "—" if r["scrubber"].startswith("alone") else f"{r['scrub_mb_s']:.3g}"
                lines.append(
                    f"    {r['label']:<56} {_ms(fg['mean_s']):>9} {fg['mean_ratio']:>7.3f}"
                    f" {_ms(fg['p99_s']):>9} {fg['p99_ratio']:>7.3f} {mbs:>11}"
                )
            t = w["tune"]
            c = t["chosen"]
            if c:
                lines.append(
                    f"    tuned: budget {c['budget']}, switch penalty {_ms(t['switch_penalty_s'])};"
                    f" simulated {c['sim_slowdown'] * 100:+.2f} % mean,"
                    f" {c['sim_bg_mb_s']:.3g} MB/s;"
                    f" p99 ×{c['check_p99_ratio']:.3f} with a seek per BG request"
                    + ("" if c["within_tolerance"] else " (no budget kept it in tolerance)")
                )
            ratio = w["fallow_over_idle_class"]
            fal = next(r for r in w["runs"] if r["scrubber"] == "fallow")
            note = fal["scrubber_report"].get("note")
            lines.append(
                "    fallow / idle class: "
                + (f"{ratio:.3g}× the scrub rate" if ratio is not None else "idle class scrubbed 0")
                + f"; fallow's FG p99 ×{fal['fg']['p99_ratio']:.3f} alone"
                + (f" ({note})" if note else "")
            )
            mr = w.get("matched_over_idle_class")
            if mr is not None:
                lines.append(f"    fallow at the idle class's FG mean / idle class: {mr:.3g}×")
            g = w["goal"]
            lines.append(
                f"    goal (≥ {g['ratio']:g}× at FG p99 ≤ ×{1 + g['p99_tolerance']:.2f}): "
                + ("met" if g["met"] else "not met")
            )
        if d.get("budget_workloads"):
            lines.append(budget_table(d, doc["live_budget"]))
    if doc.get("btrfs"):
        lines.append(table_btrfs(doc["btrfs"]))
    return "\n".join(lines)


def markdown(doc: dict) -> str:
    """The results as Markdown tables (docs/live.md, the README)."""
    out = []
    for d in doc["devices"]:
        sv = d["service"]
        out.append(
            f"**{d['title']}**, {_size(d['image_bytes'])}: sequential 64 KiB read "
            f"{_ms(sv['seq_64k_s'])}, 4 MiB {_ms(sv['seq_4m_s'])}, random 4 KiB "
            f"{_ms(sv['random_read_s'][str(4 * KIB)])}.\n"
        )
        out.append("| FG | scrubber | FG mean | × alone | FG p99 | × alone | scrub MB/s |")
        out.append("|---|---|--:|--:|--:|--:|--:|")
        for w in d["workloads"]:
            for r in w["runs"]:
                fg = r["fg"]
                mbs = "—" if r["scrubber"].startswith("alone") else f"{r['scrub_mb_s']:.3g}"
                out.append(
                    f"| {w['name']} | {r['label']} | {_ms(fg['mean_s'])} | {fg['mean_ratio']:.2f}"
                    f" | {_ms(fg['p99_s'])} | {fg['p99_ratio']:.2f} | {mbs} |"
                )
        out.append("")
        for w in d["workloads"]:
            fal = next(r for r in w["runs"] if r["scrubber"] == "fallow")
            ratio = w["fallow_over_idle_class"]
            line = f"- {w['name']}: fallow scrubs " + (
                f"{ratio:.2g}× the idle class's rate" if ratio is not None else "(idle class: 0)"
            )
            line += f" at FG p99 ×{fal['fg']['p99_ratio']:.2f}"
            mr = w.get("matched_over_idle_class")
            if mr is not None:
                line += f"; at the idle class's FG mean, {mr:.2g}×"
            line += f"; goal {'met' if w['goal']['met'] else 'not met'}."
            out.append(line)
        out.append("")
    if doc.get("btrfs"):
        out.append(markdown_btrfs(doc["btrfs"]))
    return "\n".join(out)


def _btrfs_rows(w: dict) -> list[tuple]:
    rows = []
    for r in w["runs"]:
        fg = r["fg"]
        mbs = "—" if r["scrubber"] == "alone" else f"{r['scrub_mb_s']:.3g}"
        rows.append((r["label"], fg, mbs))
    return rows


def _btrfs_verdict(w: dict) -> str:
    g, a, within = w["goal"], w["at_idle_cost"], w["within_p99"]
    ratio = a["over_idle_class"]
    fal = next(r for r in w["runs"] if r["scrubber"] == "fallow")
    return (
        f"at the idle class's FG cost ({a['scrubber'] or 'no fallow run at it'}): "
        + (f"{ratio:.3g}× its scrub rate" if ratio is not None else "no ratio")
        + f" (goal ≥ {g['ratio']:g}×: {'met' if g['at_idle_cost_met'] else 'not met'}); "
        f"fallow's FG p99 ×{fal['fg']['p99_ratio']:.3f}; within ×{1 + g['p99_tolerance']:.2f}"
        f" of FG alone's p99 the most scrubbed by {within['most_scrubbed'] or 'none'}"
        f" ({'met' if g['most_within_p99_met'] else 'not met'});"
        f" goal {'met' if g['met'] else 'not met'}"
    )


def table_btrfs(d: dict) -> str:
    sv = d["service"]
    lines = [
        f"\n{d['title']}: {d['device']}, BFQ, {_size(d['image_bytes'])} image, "
        f"{_size(d['fill_bytes'])} of data, {d['btrfs_progs']}",
        f"  measured: sequential 64 KiB {_ms(sv['seq_64k_s'])}, 4 MiB {_ms(sv['seq_4m_s'])}"
        f" → --bg {sv['bg_model']}",
    ]
    for w in d["workloads"]:
        lines.append(
            f"  {w['title']}"
            + (f", Poisson {w['fg_rate_iops']}/s" if w["fg_rate_iops"] else ", open loop")
            + f", {w['runtime_s']:g} s per run"
        )
        lines.append(
            f"    {'scrubber':<56} {'FG mean':>9} {'×alone':>7} {'FG p99':>9} {'×alone':>7}"
            f" {'scrub MB/s':>11}"
        )
        for label, fg, mbs in _btrfs_rows(w):
            lines.append(
                f"    {label:<56} {_ms(fg['mean_s']):>9} {fg['mean_ratio']:>7.3f}"
                f" {_ms(fg['p99_s']):>9} {fg['p99_ratio']:>7.3f} {mbs:>11}"
            )
        lines.append("    " + _btrfs_verdict(w))
    if d.get("shapes"):
        lines.append(shapes_table(d["shapes"]))
    return "\n".join(lines)


def markdown_btrfs(d: dict) -> str:
    sv = d["service"]
    out = [
        f"**{d['title']}**, {_size(d['image_bytes'])} with {_size(d['fill_bytes'])} of data "
        f"({d['btrfs_progs']}): sequential 64 KiB read {_ms(sv['seq_64k_s'])}, 4 MiB "
        f"{_ms(sv['seq_4m_s'])}.\n",
        "| FG | scrubber | FG mean | × alone | FG p99 | × alone | scrub MB/s |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for w in d["workloads"]:
        for label, fg, mbs in _btrfs_rows(w):
            out.append(
                f"| {w['name']} | {label} | {_ms(fg['mean_s'])} | {fg['mean_ratio']:.2f}"
                f" | {_ms(fg['p99_s'])} | {fg['p99_ratio']:.2f} | {mbs} |"
            )
    out.append("")
    for w in d["workloads"]:
        out.append(f"- {w['name']}: {_btrfs_verdict(w)}.")
    out.append("")
    if d.get("shapes"):
        out = out[:1] + [shapes_table(d["shapes"]), ""]
    return "\n".join(out)


# ---------------------------------------------------------------- main


def choose_workdir(workdir: str | None, keep: bool) -> tuple[Path, Path | None]:
    """The work directory and what to remove at the end (None: nothing).

    Only what the bench created is ever removed: a `--workdir` that already
    existed holds the user's files, so without `--keep` the bench works in a
    fresh directory inside it and removes only that; with `--keep` it works
    in the directory itself (reusing an earlier run's images) and removes
    nothing.
    """
    if workdir is None:
        work = Path(tempfile.mkdtemp(prefix="fallow-live-bench-")).resolve()
        return work, None if keep else work
    given = Path(workdir).resolve()
    if keep:
        given.mkdir(parents=True, exist_ok=True)
        return given, None
    if given.exists():
        work = Path(tempfile.mkdtemp(prefix="fallow-live-bench-", dir=given)).resolve()
        return work, work
    given.mkdir(parents=True)
    return given, given


def main() -> int:
    if sys.argv[1:2] == ["__replay"]:
        # the trace workload's FG process: __replay TRACE DEV RUNTIME_S OUT START_S
        # [hold]: hold until RUNTIME_S has passed after the last completion
        trace, dev, runtime_s, out, start_s = sys.argv[2:7]
        hold = sys.argv[7:8] == ["hold"]
        try:
            replay(Path(trace), dev, float(runtime_s), Path(out), float(start_s), hold)
        except BenchError as e:
            log(f"replay: {e}")
            return 1
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI mode: small images, 3 s runs")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON ('-': stdout)")
    ap.add_argument("--fallow", metavar="PATH", help="fallow binary (default: build release)")
    ap.add_argument("--devices", default="plain,emu", help="plain,emu (default both)")
    ap.add_argument(
        "--workloads",
        help="random,sequential,trace (default all three; with --btrfs " + BTRFS_WORKLOADS + ")",
    )
    ap.add_argument(
        "--btrfs",
        action="store_true",
        help="run the btrfs part (docs/native.md): fallow scrub btrfs:MNT vs btrfs scrub -c 3, "
        "the kernel's scrub_speed_max and an unthrottled scrub, instead of the block devices",
    )
    ap.add_argument(
        "--btrfs-shapes",
        action="store_true",
        help="with --btrfs: the brake's comparison instead of the workloads: FG shapes "
        "(continuous 20 IOPS; bursts with 0.5-2 s and 4-8 s gaps) against fallow, three static "
        "scrub_speed_max values and an unthrottled scrub",
    )
    ap.add_argument(
        "--shapes",
        help="with --btrfs-shapes: which, comma-separated (default all: "
        + ",".join(BTRFS_SHAPES)
        + ")",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        help="with --btrfs-shapes: rounds of every shape's cells, FG alone in each, the cells'"
        " order rotated from round to round (quick 1, full 3)",
    )
    ap.add_argument(
        "--limits",
        help="with --btrfs-shapes: the static scrub_speed_max values, MB/s, comma-separated"
        " (default per shape: "
        + "; ".join(
            f"{shape} " + ",".join(f"{r / 1e6:g}" for r in rates)
            for shape, rates in BTRFS_STATIC_LIMITS.items()
        )
        + ")",
    )
    ap.add_argument(
        "--shapes-policy",
        default=BTRFS_SHAPES_POLICY,
        help="with --btrfs-shapes: fallow scrub's --policy (default %(default)s)",
    )
    ap.add_argument("--btrfs-size", type=int, help="btrfs image MiB (quick 1024, full 8192)")
    ap.add_argument(
        "--btrfs-fill", type=int, help="MiB of data on the btrfs (quick 640, full 6144)"
    )
    ap.add_argument(
        "--trace",
        type=Path,
        default=DEFAULT_TRACE,
        help="MSR cut the trace workload replays (default $FALLOW_SHARED_TRACES or "
        "../shared/traces, msr-cuts/msr.cut.per_10k.rw_20_80.105.trace)",
    )
    ap.add_argument(
        "--trace-start",
        type=float,
        default=DEFAULT_TRACE_START_S,
        help="seconds into the trace where the replay starts (default %(default)g: "
        "the default cut's 30-40 s hold 1,879 requests, more than an HDD serves in 10 s)",
    )
    ap.add_argument(
        "--runtime",
        type=float,
        help="seconds per run (quick 3; full 60, --btrfs 30)",
    )
    ap.add_argument("--fg-iops", type=int, default=FG_RATE_IOPS, help="FG Poisson rate (10/s)")
    ap.add_argument(
        "--budgets",
        default="0.1%,0.25%,0.5%,1%,2%,5%",
        help="mean-slowdown budgets fallow tune tries (default 0.1%%,0.25%%,0.5%%,1%%,2%%,5%%)",
    )
    ap.add_argument("--sizes", help="fallow tune --sizes (default 64KiB..4MiB/8, quick /4)")
    ap.add_argument(
        "--tolerance", type=float, default=0.05, help="FG p99 tolerance of the goal (0.05)"
    )
    ap.add_argument("--fixed-rate", type=float, help="fixed-rate scrubber, bytes/s")
    ap.add_argument("--plain-size", help="plain image MiB (quick 128, full 2048)", type=int)
    ap.add_argument("--emu-size", help="emulated image MiB (quick 256, full 4096)", type=int)
    ap.add_argument(
        "--fallow-sched",
        default="bfq-idle",
        choices=["bfq-idle", "bfq", "none", "mq-deadline"],
        help="how fallow scrubs: under BFQ in the idle class (ionice -c3, the default), "
        "BFQ's default class, or another scheduler for its run",
    )
    ap.add_argument(
        "--live-budget",
        metavar="BUDGET",
        help="a budget held live (docs/live.md) instead of the scrubber comparison: "
        "`fallow scrub --budget BUDGET` (no tune file) against the setting tuned offline at "
        "BUDGET for the whole run and for each half, on random, sequential, trace and changing "
        "(bursty, then sequential) FG; emulated HDD only",
    )
    ap.add_argument(
        "--budget-repeats", type=int, default=1, help="with --live-budget: rounds of the 3 runs"
    )
    ap.add_argument(
        "--budget-only",
        action="store_true",
        help="with --live-budget: FG alone and the budgeted runs only (no offline tuning)",
    )
    ap.add_argument(
        "--budget-watch-run",
        action="store_true",
        help="with --live-budget: in each round, also `fallow scrub --budget 0.01%%`, which"
        " monitors and times the FG as a budgeted run does and finds no setting that"
        " meets so small a budget, so reads nothing: what fallow's presence costs the FG"
        " without BG reads (paired with FG alone)",
    )
    ap.add_argument("--seed", type=int, default=1, help="fio's and the measurements' seed")
    ap.add_argument(
        "--workdir",
        help="where images and logs go (default: a temporary dir); an existing directory is "
        "never removed: without --keep the bench works in a new directory inside it",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument(
        "--markdown",
        metavar="JSON",
        help="print the Markdown tables of an earlier run's --json result and exit",
    )
    args = ap.parse_args()
    if args.markdown:
        try:
            doc = json.loads(Path(args.markdown).read_text())
            for w in doc.get("btrfs", {}).get("workloads", []):
                # the verdict follows from the runs: recomputed by today's rule
                w.update(btrfs_goal(w["runs"], w["goal"]["p99_tolerance"]))
                g = w["goal"]
                g["met"] = bool(g["at_idle_cost_met"] and g["most_within_p99_met"])
            for sh in doc.get("btrfs", {}).get("shapes", []):
                sh.update(shape_verdict(sh))
            text = markdown(doc)
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"--markdown {args.markdown}: not a live_bench JSON result ({e!r})")
        print(text)
        return 0
    if args.runtime is None:
        # quick (CI's smoke run): 3 s a run, the block devices' 29 runs
        # in about 2 min, the btrfs part's 12 in about 1 min
        full_s = 30.0 if args.btrfs else 60.0
        args.runtime = 3.0 if args.quick else full_s
    try:
        # None: each shape's own BTRFS_STATIC_LIMITS
        given = args.limits
        args.limits = [float(x) * 1e6 for x in given.split(",")] if given else None
    except ValueError:
        ap.error(f"--limits {given}: want MB/s values, comma-separated (e.g. 1,2,4)")
    if given is not None and (not args.limits or any(not (0 < r < 1e12) for r in args.limits)):
        ap.error(f"--limits: want positive MB/s values, got {given}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: want at least 1")
    if args.sizes is None:
        args.sizes = "64KiB..4MiB/4" if args.quick else "64KiB..4MiB/8"
    plain_mib = args.plain_size or (128 if args.quick else 2048)
    emu_mib = args.emu_size or (256 if args.quick else 4096)
    devices = [d for d in args.devices.split(",") if d]
    if args.live_budget:
        if args.btrfs:
            ap.error("--live-budget runs on the emulated HDD, not with --btrfs")
        devices = ["emu"]
    if args.workloads is None:
        args.workloads = (
            ",".join(BUDGET_WORKLOADS)
            if args.live_budget
            else BTRFS_WORKLOADS
            if args.btrfs
            else "random,sequential,trace"
        )
    workloads = [w for w in args.workloads.split(",") if w]
    args.workloads_list = workloads
    # an unthrottled scrub must not finish within a run: the emulated HDD's
    # media rate (150 MB/s) bounds it, 6 GiB outlast a 31 s run at that rate
    args.btrfs_size = args.btrfs_size or (1024 if args.quick else 8192)
    args.btrfs_fill = args.btrfs_fill or (640 if args.quick else 6144)
    if not 0 < args.btrfs_fill * 4 <= args.btrfs_size * 3:
        ap.error(f"--btrfs-fill {args.btrfs_fill}: want 1 .. 3/4 of --btrfs-size (MiB)")
    for d in devices:
        if d not in DEVICES:
            ap.error(f"--devices: unknown device {d!r} (plain, emu)")
    for sh in (args.shapes or "").split(","):
        if sh and sh not in BTRFS_SHAPES:
            ap.error(f"--shapes: unknown shape {sh!r} ({', '.join(BTRFS_SHAPES)})")
    for w in workloads:
        if args.live_budget and w in BUDGET_WORKLOADS:
            continue
        if w not in WORKLOADS:
            ap.error(f"--workloads: unknown workload {w!r} (random, sequential, trace)")
    # run what can run; one line on what cannot (a user without the shared
    # traces still gets the synthetic workloads)
    skipped = []
    if "trace" in workloads and not args.trace.is_file():
        skipped.append(
            {
                "workload": "trace",
                "reason": f"{args.trace}: no such file (set FALLOW_SHARED_TRACES or --trace)",
            }
        )
        workloads = [w for w in workloads if w != "trace"]
        args.workloads_list = workloads
    if skipped:
        log(
            "skipped "
            + "; ".join(f"the {s['workload']} workload: {s['reason']}" for s in skipped)
            + (f"; running {', '.join(workloads)}" if workloads else "; nothing left to run")
        )
    if not workloads:
        return 2

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_exit)
    cleanup = Cleanup()
    try:
        check_tools(need_cargo=args.fallow is None)
        fallow = find_fallow(args.fallow)
        work, ours = choose_workdir(args.workdir, args.keep)
        if ours is not None:
            cleanup.add(f"rm -r {ours}", lambda: shutil.rmtree(ours, ignore_errors=True))
        # fallow's checkpoint (fsynced after every request) goes to memory:
        # the plain loop device's image is on this machine's only disk, and
        # docs/live.md asks for the checkpoint on another device than the one
        # scrubbed, whose writes the monitor cannot attribute
        shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
        args.ckdir = Path(tempfile.mkdtemp(prefix="fallow-live-bench-", dir=shm))
        cleanup.add(f"rm -r {args.ckdir}", lambda: shutil.rmtree(args.ckdir, ignore_errors=True))
        rng = random.Random(args.seed)
        doc = {
            "mode": "quick" if args.quick else "full",
            "fallow": str(fallow),
            "fio": fio_version(),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "settings": {
                "runtime_s": args.runtime,
                "fg_rate_iops": args.fg_iops,
                "budgets": args.budgets,
                "sizes": args.sizes,
                "p99_tolerance": args.tolerance,
                "goal_ratio": GOAL_RATIO,
                "seed": args.seed,
            },
            "devices": [],
            "skipped": skipped,
        }
        if args.btrfs:
            # the btrfs part alone: its own runs, its own JSON key
            devices = []
            doc["part"] = "btrfs"
            doc["btrfs"] = bench_btrfs(fallow, args, cleanup, work, rng)
        for name in devices:
            log(f"setting up the {name} device")
            if name == "plain":
                device = make_plain(work, plain_mib * MIB, cleanup)
            else:
                # the budget's runs are paired with FG alone request by
                # request (docs/live.md, "The benchmark")
                draws = "per-request" if args.live_budget else "in-order"
                device = make_emu(fallow, work, emu_mib * MIB, cleanup, draws=draws)
            device["service"] = measure_service(
                device["device"], device["image_bytes"], args.quick, rng
            )
            if args.live_budget:
                doc["live_budget"] = args.live_budget
                device["workloads"] = []
                device["budget_workloads"] = []
                for w in workloads:
                    device["budget_workloads"].append(
                        bench_budget_workload(fallow, device, w, args, cleanup, work)
                    )
                    # a long run's figures so far survive an interruption
                    if args.json and args.json != "-":
                        Path(f"{args.json}.partial").write_text(
                            json.dumps({**doc, "devices": [*doc["devices"], device]}, indent=1)
                        )
            else:
                device["workloads"] = [
                    bench_workload(fallow, device, w, args, cleanup, work) for w in workloads
                ]
            doc["devices"].append(device)
        # with --json - the JSON owns stdout
        print(table(doc), file=sys.stderr if args.json == "-" else sys.stdout)
        if args.json:
            text = json.dumps(doc, indent=1) + "\n"
            if args.json == "-":
                sys.stdout.write(text)
            else:
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(text)
        return 0
    except Missing as e:
        log(str(e))
        return 2
    except BenchError as e:
        log(f"error: {e}")
        return 1
    finally:
        cleanup.run()


if __name__ == "__main__":
    sys.exit(main())
