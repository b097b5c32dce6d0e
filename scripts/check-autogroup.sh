#!/usr/bin/env bash
# Does `setsid nice -n 19` keep a background job off the foreground's CPU?
# (docs/testing.md: the loop's time.) Two CPU-bound workers run in the
# foreground, alone, then beside two busy loops in a `setsid nice -n 19`
# session, then beside the same with the session's autogroup at nice 19
# (/proc/PID/autogroup, sched(7)). Prints each worker's seconds. Takes
# about 10 s and both cores; run it on an otherwise idle machine.
set -euo pipefail
worker() {
    python3 -c 'import time
t = time.time()
x = 0
for i in range(20_000_000):
    x += i
print(round(time.time() - t, 2))'
}
pair() {
    local a b
    a=$(mktemp)
    b=$(mktemp)
    worker >"$a" &
    worker >"$b"
    wait
    echo "$(cat "$a") $(cat "$b")"
    rm -f "$a" "$b"
}
echo "sched_autogroup_enabled: $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo absent)"
echo "alone: $(pair)"
for mode in "nice 19" "nice 19 and autogroup nice 19"; do
    if [[ $mode == "nice 19" ]]; then
        pre='exec "$@"'
    else
        pre='echo 19 >"/proc/$$/autogroup"; exec "$@"'
    fi
    setsid nice -n 19 bash -c "$pre" bash \
        bash -c 'sh -c "while :; do :; done" & sh -c "while :; do :; done" & wait' &
    hogs=$!
    sleep 1
    echo "beside two busy loops, $mode: $(pair)"
    kill -- "-$hogs"
    wait "$hogs" 2>/dev/null || true
done
