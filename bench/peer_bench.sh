#!/usr/bin/env bash
# Remote chunk fetch (a peer's page cache over veth) against local O_DIRECT
# reads of the same file, in one run: `fallow peer bench` between two network
# namespaces joined by a veth pair, with the fleet's keys: every remote chunk
# travels over mutual TLS and is verified. Then the reader's namespace mounts
# the overlay (`fallow peer mount`, its emulated disk asleep) over its cold copy
# and bench/overlay_read.py reads the file chunk by chunk through the mount and
# locally with O_DIRECT, in alternating passes: the latency an application sees.
# Needs root and `ip netns`; the overlay part needs /dev/fuse (else `skip:`).
#
# Usage: bash bench/peer_bench.sh [SIZE_MB] [REPEAT]   (defaults 64, 3)
#        OVERLAY=0 bash bench/peer_bench.sh            (only `fallow peer bench`)
# Build first (`nice -n 19 cargo build --release -p fallow-cli`): the script
# builds a missing debug binary itself, at the priority it is run at.
#        FALLOW=target/release/fallow bash bench/peer_bench.sh
# The figures in docs/peer.md come from a release build:
#        cargo build --release -p fallow-cli && FALLOW=target/release/fallow bash bench/peer_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${1:-64}
REPEAT=${2:-3}
FALLOW=${FALLOW:-target/debug/fallow}
[ -x "$FALLOW" ] || cargo build -q -p fallow-cli
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v nsenter >/dev/null; then
    echo "skipped: peer bench needs root, ip and nsenter"; exit 0
fi
TAG=pb$$
A=${TAG}a B=${TAG}b
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/peer-bench.XXXXXX")
SERVER_PID= PIN_PID= MOUNT_PID=
cleanup() {
    if [ -n "$MOUNT_PID" ]; then
        kill "$MOUNT_PID" 2>/dev/null || true
        wait "$MOUNT_PID" 2>/dev/null || true
        umount -l "$WORK/mnt" 2>/dev/null || true
    fi
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    [ -n "$PIN_PID" ] && kill "$PIN_PID" 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add "${TAG}x" type veth peer name "${TAG}y"
ip link set "${TAG}x" netns "$A"; ip link set "${TAG}y" netns "$B"
ip -n "$A" addr add 10.232.0.1/24 dev "${TAG}x"; ip -n "$A" link set "${TAG}x" up; ip -n "$A" link set lo up
ip -n "$B" addr add 10.232.0.2/24 dev "${TAG}y"; ip -n "$B" link set "${TAG}y" up; ip -n "$B" link set lo up

# the same file on both "machines": the server's copy in memory, the
# client's read with O_DIRECT
mkdir -p "$WORK/server/app" "$WORK/client/app"
head -c "$((SIZE_MB * 1048576))" /dev/urandom > "$WORK/server/app/big.bin"
cp "$WORK/server/app/big.bin" "$WORK/client/app/big.bin"
sync
# the server's copy stays in memory for the whole run: reading it once is not
# enough where reclaim runs (free memory ≈ 0 after a build), see bench/pin.py
python3 bench/pin.py "$WORK/server/app/big.bin" "$WORK/pinned" &
PIN_PID=$!
for _ in $(seq 300); do [ -s "$WORK/pinned" ] && break; kill -0 "$PIN_PID" || exit 1; sleep 0.1; done
[ -s "$WORK/pinned" ] || { echo "peer bench: could not pin the server's file in memory" >&2; exit 1; }

# a fleet of two: the server (10.232.0.1) and the bench client (10.232.0.2)
"$FALLOW" peer init --fleet "$WORK/fleet" > /dev/null
"$FALLOW" peer keygen --fleet "$WORK/fleet" --ip 10.232.0.1 --out "$WORK/keys1" > /dev/null
"$FALLOW" peer keygen --fleet "$WORK/fleet" --ip 10.232.0.2 --out "$WORK/keys2" > /dev/null

nsenter --net="/run/netns/$A" -- "$FALLOW" peer serve --keys "$WORK/keys1" --dir "app=$WORK/server/app" \
    --listen 10.232.0.1:7946 --fleet-size 2 2> "$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do
    nsenter --net="/run/netns/$B" -- "$FALLOW" peer status --keys "$WORK/keys2" --peer 10.232.0.1:7946 --json \
        2>/dev/null | grep -q '"advertised":{"files":1' && break
    sleep 0.2
done
echo "fallow: $FALLOW; file: ${SIZE_MB} MiB; mutual TLS; kernel $(uname -r); $(nproc) cores"
nsenter --net="/run/netns/$B" -- "$FALLOW" peer bench --keys "$WORK/keys2" --peer 10.232.0.1:7946 \
    --dir "app=$WORK/client/app" --file app/big.bin --repeat "$REPEAT" "${@:3}"

[ "${OVERLAY:-1}" = 1 ] || exit 0
if [ ! -c /dev/fuse ]; then
    echo "skip: overlay pass: no /dev/fuse"; exit 0
fi
# the reader mounts its copy; its emulated disk is asleep (and stays so: a
# read served by a peer does not wake it), so every read that misses its page
# cache goes to the peer, verified against its own manifest
mkdir -p "$WORK/mnt"
CHUNK_BYTES=131072
nsenter --net="/run/netns/$B" -- "$FALLOW" peer mount --keys "$WORK/keys2" --source "app=$WORK/client/app" \
    --mountpoint "$WORK/mnt" --listen 10.232.0.2:7946 --peers 10.232.0.1:7946 --fleet-size 2 \
    --disk-state emulated:t=1h,spinup=9s,shutdown=4s,start=asleep 2> "$WORK/mount.log" > "$WORK/mount.json" &
MOUNT_PID=$!
mstatus() {
    nsenter --net="/run/netns/$B" -- "$FALLOW" peer status --keys "$WORK/keys2" --peer 10.232.0.2:7946 --json 2>/dev/null
}
ready=
for _ in $(seq 150); do
    if mstatus | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if any(p["files"]==1 and not p["quarantined"] for p in s["peers"]) and s["disk"]["asleep"] else 1)' 2>/dev/null; then
        ready=1; break
    fi
    kill -0 "$MOUNT_PID" 2>/dev/null || break
    sleep 0.2
done
if [ -z "$ready" ]; then
    echo "peer bench: the overlay did not see the server's advertisement:" >&2
    cat "$WORK/mount.log" >&2; exit 1
fi
# the reader's copy out of its page cache (indexing read it): overlay reads
# that hit it would be served from memory, not by the peer
python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$WORK/client/app/big.bin"
echo "overlay: $WORK/mnt/big.bin (server pid $SERVER_PID, mount pid $MOUNT_PID), disk asleep; local O_DIRECT and overlay passes alternate, in order and shuffled, $REPEAT each; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# OVERLAY_WRAP: a command prefix for the reads, e.g. to trace the scheduler:
#   OVERLAY_WRAP="perf sched record -a -o /var/tmp/sched.data --" bash bench/peer_bench.sh
${OVERLAY_WRAP:-} python3 bench/overlay_read.py "$WORK/client/app/big.bin" "$WORK/mnt/big.bin" "$CHUNK_BYTES" "$REPEAT" > "$WORK/overlay.json"
mstatus > "$WORK/mstatus.json"
python3 - "$WORK/overlay.json" "$WORK/mstatus.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
reads = s["metrics"]["reads"]
print(f"{'pass':<34}{'reads':>7}{'MB/s':>8}{'p50 µs':>10}{'mean µs':>10}{'p99 µs':>10}{'max µs':>10}")
for name, k in (("local O_DIRECT, in order", "local_direct"), ("overlay (FUSE, remote), in order", "overlay"),
                ("local O_DIRECT, shuffled", "local_direct_shuffled"), ("overlay, shuffled", "overlay_shuffled")):
    p = r[k]
    print(f"{name:<34}{p['n']:>7}{p['mb_per_s']:>8}{p['p50_us']:>10}{p['mean_us']:>10}{p['p99_us']:>10}{p['max_us']:>10}")
lo, ov = r["local_direct"], r["overlay"]
print(f"overlay/local, in order: p50 {ov['p50_us'] / lo['p50_us']:.2f}x (goal <= 2), p99 {ov['p99_us'] / lo['p99_us']:.2f}x (goal <= 5)")
los, ovs = r["local_direct_shuffled"], r["overlay_shuffled"]
print(f"overlay/local, shuffled (no readahead): p50 {ovs['p50_us'] / los['p50_us']:.2f}x, p99 {ovs['p99_us'] / los['p99_us']:.2f}x")
served = {k: reads[k]["reads"] for k in ("page_cache", "local", "remote", "fallback")}
print(f"the mount's reads: {served}; inside the node: remote p50 {reads['remote']['latency']['p50_us']} µs, p99 {reads['remote']['latency']['p99_us']} µs; "
      f"chunk fetches p50 {s['metrics']['chunks']['fetch_latency']['p50_us']} µs, p99 {s['metrics']['chunks']['fetch_latency']['p99_us']} µs")
if served["remote"] != ov["n"] + ovs["n"]:
    sys.exit(f"peer bench: {ov['n'] + ovs['n']} overlay reads but {served['remote']} served remotely: {served}")
PY
