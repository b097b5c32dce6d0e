#!/usr/bin/env python3
"""Write the binary trace fixtures next to this script, reproducibly.

    python3 tests/data/traces/make_fixtures.py

The text fixtures beside them are written by hand. Every value here is
spelled out so the Rust tests (crates/fallow-core/tests/it/readers/) can
state their expectations from this file alone; the comments give them.
Uses only the standard library (struct), nothing from fallow.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


# --- HP SRT: text header ending in a form feed, big-endian int32 records ---
# A 48-byte header: two lines of text and the form feed.
HP_HEADER = b"$$TR_IOREC-1.3 (fallow fixture)\n" + b"version = 1.3;\n" + b"\x0c"
assert len(HP_HEADER) == 48


def hp(version, kind, sec, usec, start, stop, size, sectno, devno, flags, extra=()):
    words = [sec, usec, start, stop, size, sectno, devno, 4, 0, flags, 0]
    if version == 4:
        words.append(1)  # queuelen
    if kind == 4:
        words.append(0)  # susflags
    words += list(extra)
    body = struct.pack(">I", (version << 16) | kind) + struct.pack(">%dI" % len(words), *words)
    return struct.pack(">I", 4 + len(body)) + body


HP_RECORDS = [
    # r1 @48: disk 0 (devno 0x08000008), read (0x1b has B_READ), 100.5 s, done 20 ms later
    hp(4, 1, 100, 500000, 100, 20000, 4096, 1000, 0x08000008, 0x1B),
    # r2 @104: disk 1 (0x08000107), write (0x8810a), 100.51 s, done 5 ms later
    hp(4, 1, 100, 510000, 0, 5000, 8192, 2000, 0x08000107, 0x8810A),
    # r3 @160: version 1 (52 bytes, no queuelen), disk 0 (0x0800000E), read, 101 s, 30 ms
    hp(1, 1, 101, 0, 10, 30000, 1024, 3, 0x0800000E, 0x1),
    # r4 @212: suspect I/O (60 bytes): ignored, as DiskSim does
    hp(4, 4, 100, 700000, 0, 100, 512, 9, 0x08000008, 0x1),
    # r5 @272: 64 bytes (two unknown extra words, skipped by the size field),
    # disk 0 (0x07000008), write, 99.999999 s: earlier than r1, so reordered; 1 ms
    hp(4, 1, 99, 999999, 0, 1000, 2048, 77, 0x07000008, 0x0, extra=(0xDEAD, 0xBEEF)),
]
assert [len(r) for r in HP_RECORDS] == [56, 56, 52, 60, 64]
write("small.srt", HP_HEADER + b"".join(HP_RECORDS))
# r3 cut after 30 of its 52 bytes: the cut falls in `sectno` (bytes 28..32) of
# the record at byte offset 48 + 56 + 56 = 160.
write("truncated.srt", HP_HEADER + HP_RECORDS[0] + HP_RECORDS[1] + HP_RECORDS[2][:30])
# r2 with usec = 2,000,000 (not below a second): bad record at byte offset 104.
write(
    "bad_usec.srt",
    HP_HEADER
    + HP_RECORDS[0]
    + hp(4, 1, 100, 2000000, 0, 5000, 8192, 2000, 0x08000107, 0x8810A)
    + HP_RECORDS[2],
)
# A record length of 5000 at byte offset 104: fatal, the stream cannot be resynchronised.
write("bad_size.srt", HP_HEADER + HP_RECORDS[0] + struct.pack(">I", 5000) + HP_RECORDS[1][4:])


# --- VMware vscsi v1: 32-byte little-endian records ---
def vscsi(sn, length, cmd, lbn, ts_us, ver=0x0100):
    return struct.pack("<IIIHHQQ", sn, length, 1, cmd, ver, lbn, ts_us)


VSCSI_RECORDS = [
    vscsi(1, 4096, 0x28, 100, 1_000_000),  # READ(10), 1.0 s, sector 100
    vscsi(2, 8192, 0x2A, 200, 1_000_500),  # WRITE(10), +0.5 ms
    vscsi(3, 0, 0x35, 0, 1_000_600),  # SYNCHRONIZE CACHE: ignored
    vscsi(4, 512, 0x88, 300, 999_000),  # READ(16), earlier than the first: reordered
    vscsi(5, 65536, 0x8A, 400, 1_002_000),  # WRITE(16)
]
assert all(len(r) == 32 for r in VSCSI_RECORDS)
write("small.vscsi", b"".join(VSCSI_RECORDS))
# Third record cut after 20 bytes, inside `lbn` (bytes 16..24), at byte offset 64.
write("truncated.vscsi", b"".join(VSCSI_RECORDS[:2]) + VSCSI_RECORDS[2][:20])
# Second record claims version 3: bad record at byte offset 32.
write(
    "bad_version.vscsi",
    VSCSI_RECORDS[0] + vscsi(2, 8192, 0x2A, 200, 1_000_500, ver=0x0300) + VSCSI_RECORDS[4],
)


# --- fallow's own binary columns (layout in crates/fallow-core/src/trace/fallow_bin.rs) ---
def fallow(arrival, completion, offset, size, op, device, origin=0, source=0, counts=(0, 0, 0)):
    n = len(arrival)
    flags = 1 if completion is not None else 0
    h = b"FALLOWT\x01" + struct.pack("<IIQQII", 1, flags, n, origin, source, 0)
    h += struct.pack("<QQQ", *counts)
    assert len(h) == 64
    cols = struct.pack("<%dQ" % n, *arrival)
    if completion is not None:
        cols += struct.pack("<%dQ" % n, *completion)
    cols += struct.pack("<%dQ" % n, *offset)
    cols += struct.pack("<%dI" % n, *size)
    cols += bytes(op)
    cols += struct.pack("<%dI" % n, *device)
    return h + cols


# 3 requests; origin 1 s in the source's clock; source format 3 (hp-srt);
# skipped 4, reordered 5, ignored 6 when the source was read.
SMALL = dict(
    arrival=[0, 1000, 5000],
    completion=[700, 9000, 5001],
    offset=[0, 4096, 1 << 40],
    size=[4096, 512, 131072],
    op=[0, 1, 0],
    device=[0, 0, 7],
    origin=1_000_000_000,
    source=3,
    counts=(4, 5, 6),
)
write("small.fallow", fallow(**SMALL))
# Cut inside the offset column: 64 + 24 (arrivals) + 24 (completions) + 12 bytes,
# i.e. at byte offset 124, one whole offset value read.
write("truncated.fallow", fallow(**SMALL)[: 64 + 24 + 24 + 12])
# Second request completes (500) before it arrives (1000): its completion value
# sits at byte offset 64 + 24 + 8 = 96.
BAD = dict(SMALL, completion=[700, 500, 5001])
write("bad_completion.fallow", fallow(**BAD))

# --- random bytes: no format ---
write("unknown.bin", bytes((i * 37 + 11) % 256 for i in range(200)))
