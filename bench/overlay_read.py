"""Read one file chunk by chunk through a `fallow peer mount` and locally with O_DIRECT, in
alternating passes, and print the latency of each read (p50, mean, p99, max in µs).

`bench/peer_bench.sh` runs it once the overlay is mounted with the local disk "asleep" (the
emulated model) and the source file out of the page cache, so every overlay read is fetched from
the peer's memory over mutual TLS and verified; the local O_DIRECT reads of the same file are the
disk read it replaces. Both passes use the same loop, buffer and clock, so the harness costs both
the same (`os.preadv` into one 4 KiB-aligned buffer, `time.perf_counter_ns` around the call).
Every chunk read through the overlay is compared with the same chunk read locally (outside the
timed call): a wrong byte stops the bench.

Each repeat reads the file twice on each side: in order (what an application loading a file
does, and where the overlay's readahead works) and in a shuffled order fixed by a seed (no read
follows the one before, so nothing is fetched ahead: each overlay read waits for its own chunk
fetch).

Usage: python3 bench/overlay_read.py LOCAL_FILE OVERLAY_FILE CHUNK_BYTES REPEAT
Prints one JSON object: {"local_direct": {...}, "overlay": {...}, "local_direct_shuffled":
{...}, "overlay_shuffled": {...}} with n, p50_us, mean_us, p99_us, max_us and mb_per_s (10^6
bytes / s of read time).
"""

import ctypes
import hashlib
import json
import mmap
import os
import random
import sys
import time


def stats(lat_ns: list[int], nbytes: int) -> dict:
    s = sorted(lat_ns)
    n = len(s)

    def q(p: float) -> float:
        # nearest rank, as hdrhistogram's value_at_quantile
        return s[min(n - 1, max(0, int(p * n + 0.999999) - 1))] / 1000

    return {
        "n": n,
        "p50_us": round(q(0.50), 1),
        "mean_us": round(sum(s) / n / 1000, 1),
        "p99_us": round(q(0.99), 1),
        "max_us": round(s[-1] / 1000, 1),
        "mb_per_s": round(nbytes / (sum(s) / 1e9) / 1e6, 1),
    }


def one_pass(
    fd: int, buf: mmap.mmap, size: int, chunk: int, offsets: list, digests: dict, check: bool
):
    lat = []
    total = 0
    for off in offsets:
        want = min(chunk, size - off)
        view = memoryview(buf)[:chunk]
        t = time.perf_counter_ns()
        n = os.preadv(fd, [view], off)
        lat.append(time.perf_counter_ns() - t)
        if n != want:
            raise SystemExit(f"overlay_read.py: short read at {off}: {n} of {want} bytes")
        d = hashlib.blake2b(view[:n], digest_size=16).digest()
        if check and d != digests[off]:
            raise SystemExit(f"overlay_read.py: chunk at {off} differs from the local file")
        if not check:
            digests[off] = d
        total += n
    return lat, total


def main() -> int:
    # a name of its own for scheduler traces (`perf sched timehist`), not "python3"
    ctypes.CDLL(None).prctl(15, b"overlay_read", 0, 0, 0)  # PR_SET_NAME
    local, overlay, chunk, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if chunk <= 0 or chunk % 4096 or repeat <= 0:
        print(
            "overlay_read.py: CHUNK_BYTES must be a positive multiple of 4096, REPEAT > 0",
            file=sys.stderr,
        )
        return 2
    size = os.stat(local).st_size
    if os.stat(overlay).st_size != size:
        print(f"overlay_read.py: {overlay} and {local} differ in size", file=sys.stderr)
        return 1
    lfd = os.open(local, os.O_RDONLY | os.O_DIRECT)
    ofd = os.open(overlay, os.O_RDONLY)
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    in_order = list(range(0, size, chunk))
    shuffled = in_order[:]
    random.Random(1).shuffle(shuffled)
    lat = {k: [] for k in ("local_direct", "overlay", "local_direct_shuffled", "overlay_shuffled")}
    nbytes = dict.fromkeys(lat, 0)
    for _ in range(repeat):
        for offsets, suffix in ((in_order, ""), (shuffled, "_shuffled")):
            digests = {}
            for fd, name, check in ((lfd, "local_direct", False), (ofd, "overlay", True)):
                got, b = one_pass(fd, buf, size, chunk, offsets, digests, check)
                lat[name + suffix] += got
                nbytes[name + suffix] += b
    print(json.dumps({k: stats(v, nbytes[k]) for k, v in lat.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
