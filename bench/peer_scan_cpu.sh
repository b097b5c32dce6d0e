#!/usr/bin/env bash
# CPU time of an idle `fallow peer serve` over a tree of FILES small files
# (default 60,000): the residency scan that decides what to advertise is the
# main cost. Prints the process's user + system time over SECONDS (default
# 60) after indexing, as a share of one core, and how many files it
# indexed and advertises by then. Loopback only, no keys needed.
#
# Usage: bash bench/peer_scan_cpu.sh [FILES] [SECONDS]
#        FALLOW=target/release/fallow bash bench/peer_scan_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-60000}
SECS=${2:-60}
FALLOW=${FALLOW:-target/debug/fallow}
[ -x "$FALLOW" ] || cargo build -q -p fallow-cli
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/peer-scan.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
# FILES files of 1-4 KiB, 200 a directory
python3 - "$WORK/tree" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    d = os.path.join(root, f"d{k // 200}")
    if k % 200 == 0:
        os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{k % 200}"), "wb") as f:
        f.write(os.urandom(1024 + (k * 37) % 3000))
PY
PORT=$((20000 + $$ % 20000))
"$FALLOW" peer serve --dir "t=$WORK/tree" --listen "127.0.0.1:$PORT" --rescan 1h \
    --advertise-every 2s 2> "$WORK/serve.log" &
PID=$!
for _ in $(seq 600); do
    "$FALLOW" peer status --json --peer "127.0.0.1:$PORT" > /dev/null 2>&1 && break
    sleep 1
done
sleep 5
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
T0=$(ticks); sleep "$SECS"; T1=$(ticks)
STATUS=$("$FALLOW" peer status --json --peer "127.0.0.1:$PORT")
python3 - "$STATUS" "$T0" "$T1" "$(getconf CLK_TCK)" "$SECS" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
t0, t1, hz, secs = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
print(f"indexed {s['index']['files']} files, advertising {s['advertised']['files']}; "
      f"CPU over {secs:.0f} s: {(t1 - t0) / hz / secs * 100:.2f} % of a core")
PY
