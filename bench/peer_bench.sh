#!/usr/bin/env bash
# Remote chunk fetch (a peer's page cache over veth) against local O_DIRECT
# reads of the same file, in one run: `fallow peer bench` between two network
# namespaces joined by a veth pair, with the fleet's keys: every remote chunk
# travels over mutual TLS and is verified. Needs root and `ip netns`.
#
# Usage: bash bench/peer_bench.sh [SIZE_MB] [REPEAT]   (defaults 64, 3)
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
SERVER_PID= PIN_PID=
cleanup() {
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
