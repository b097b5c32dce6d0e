"""Hold a file's pages in the page cache until killed: mmap(MAP_SHARED) + mlock(2).

`bench/peer_bench.sh` measures fetches from a peer's page cache. On a machine whose memory is
full of page cache (free ≈ 0, kswapd reclaiming: a CI machine after a cargo build), reclaim
evicts single pages of the served file within seconds of warming it, and the peer then rightly
answers "not cached" (it never reads its disk for a peer, SARD §III). Pinning keeps the bench
measuring what it means to measure. Needs CAP_IPC_LOCK (root) for files above RLIMIT_MEMLOCK.

Usage: python3 bench/pin.py FILE READY_FILE   (writes READY_FILE once every page is locked)
"""

import ctypes
import os
import signal
import sys

PROT_READ = 0x1
MAP_SHARED = 0x01


def main() -> int:
    path, ready = sys.argv[1], sys.argv[2]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        print(f"pin.py: mmap {path}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    # mlock faults every page in (reading it from disk if it was evicted) and keeps it
    if libc.mlock(addr, size) != 0:
        print(f"pin.py: mlock {path}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    with open(ready, "w") as f:
        f.write(f"{size}\n")
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main())
