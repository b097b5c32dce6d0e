#!/usr/bin/env bash
# What `fallow spindown` costs on an idle disk (goal: <= 0.1 % of a
# core; docs/spindown.md, "Cost"): two daemons in the same run, one on the block-tracepoint source
# (FALLOW_MONITOR=auto) and one polling the sysfs counters
# (FALLOW_MONITOR=poll, the default --poll, 50 ms), each on its own idle loop
# device, in dry-run mode (a loop device has no ATA actuator). CPU is the
# whole process's, from /proc/PID/stat (utime+stime, in clock ticks) and
# /proc/PID/task/*/schedstat (ns on a CPU), over the measured window after
# a settling time; the load average is printed because the machine may be
# shared: CPU time, not wall time, is the figure.
#
# usage: sudo scripts/spindown-cost.sh [FALLOW_BINARY] [SECONDS]
#   FALLOW_BINARY defaults to target/debug/fallow, SECONDS to 60.
set -euo pipefail
bin=${1:-target/debug/fallow}
secs=${2:-60}
settle=10
[ "$(id -u)" = 0 ] || { echo "skip: needs root (loop devices, perf events)" >&2; exit 77; }
[ -x "$bin" ] || { echo "no fallow binary at $bin" >&2; exit 2; }
tmp=$(mktemp -d)
devs=()
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for d in "${devs[@]}"; do losetup -d "$d" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
dur=$((settle + secs + 5))
for src in auto poll; do
    truncate -s 64M "$tmp/$src.img"
    d=$(losetup -f --show "$tmp/$src.img")
    devs+=("$d")
    FALLOW_MONITOR=$src "$bin" spindown "$d" --dry-run --policy timeout:t=2s \
        --duration "${dur}s" --state "$tmp/$src.state.json" --json \
        >"$tmp/$src.json" 2>"$tmp/$src.err" &
    pids+=("$!")
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sched_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'; }
sleep "$settle"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A t0 n0
for i in 0 1; do t0[$i]=$(ticks "${pids[$i]}"); n0[$i]=$(sched_ns "${pids[$i]}"); done
w0=$(date +%s.%N)
sleep "$secs"
declare -A t1 n1
for i in 0 1; do t1[$i]=$(ticks "${pids[$i]}"); n1[$i]=$(sched_ns "${pids[$i]}"); done
w1=$(date +%s.%N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
hz=$(getconf CLK_TCK)
wall=$(echo "$w1 - $w0" | bc -l)
echo "$(date -u '+%Y-%m-%d %H:%M UTC'): ${wall%.*} s idle on ${devs[0]} (auto) and ${devs[1]} (poll);" \
    "load average $load0 at the start, $load1 at the end, $(nproc) cores"
printf '%-8s %8s %12s %14s %12s\n' source ticks "CPU ms" "schedstat ms" "% of core"
for i in 0 1; do
    src=$([ "$i" = 0 ] && echo auto || echo poll)
    dt=$((t1[$i] - t0[$i]))
    dn=$((n1[$i] - n0[$i]))
    printf '%-8s %8d %12.1f %14.3f %12.4f\n' "$src" "$dt" "$(echo "$dt * 1000 / $hz" | bc -l)" \
        "$(echo "$dn / 1000000" | bc -l)" "$(echo "$dn / 10000000 / $wall" | bc -l)"
done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()
for src in auto poll; do
    echo "$src: $(head -n1 "$tmp/$src.err" | cut -c1-160)"
    python3 - "$tmp/$src.json" <<'EOF' || true
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  daemon loop thread: cpu_s {s['cpu_s']:.4f} over {s['uptime_s']:.1f} s, wakeups {s.get('wakeups')}")
EOF
done
