#!/usr/bin/env bash
# Sets up everything and runs every test: Rust (unit, integration, doc, CLI),
# Python (pytest + doctests), lints, and short benchmark smoke runs.
# Usage: bash scripts/test.sh        (from anywhere in the repo)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "system tools for the live tests (loop devices; FUSE needs no libfuse)"
# The emulated-disk and record tests run as root and use losetup (util-linux);
# without root, /dev/fuse or tracefs they skip with a message.
command -v losetup >/dev/null || { apt-get update && apt-get install -y mount; }
# The live benchmark's FG workloads and baseline scrubbers are fio jobs.
command -v fio >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y fio; } \
    || echo "no fio: the live benchmark will skip"
# `fallow scrub btrfs:MNT` drives the kernel's btrfs scrub through btrfs-progs
# (crates/fallow-cli/tests/native.rs makes a btrfs on a loop device); FITRIM's
# test uses mkfs.ext4 (e2fsprogs).
if [ "$(id -u)" = 0 ] && ! command -v btrfs >/dev/null; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y btrfs-progs \
        || echo "no btrfs-progs: the native btrfs tests will skip"
fi

step "system tools for the operations tests (promtool, systemd-analyze)"
# crates/fallow-metrics/tests/scrape.rs pipes a scrape into `promtool check
# metrics` (Debian's prometheus package: 62 s to install on a loaded 2-core
# machine, not started); crates/fallow-cli/tests/systemd_units.rs runs
# `systemd-analyze verify` and `security` on docs/examples/fallow-scrub.*.
# Both tests print a `skip:` line without them.
if [ "$(id -u)" = 0 ] && ! command -v promtool >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
        || echo "no promtool: the metrics test checks the text format without it"
fi
command -v systemd-analyze >/dev/null || echo "no systemd-analyze: the unit tests will skip"

step "system tools for the peer namespace tests (ip netns, nsenter)"
if [ "$(id -u)" = 0 ] && { ! command -v ip >/dev/null || ! command -v nsenter >/dev/null; }; then
    apt-get update -qq && apt-get install -y -qq iproute2 util-linux >/dev/null
fi

step "rust: format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

step "system tools for the live tests (root only; the tests skip without them)"
# fallow run's network tests make veth pairs and namespaces with ip (iproute2)
if [ "$(id -u)" = 0 ] && ! command -v ip >/dev/null; then
    apt-get update && apt-get install -y iproute2
fi

step "rust: tests"
# fallow-py is a Python extension (no libpython link); pytest tests it below.
cargo test --workspace --exclude fallow-py --locked --no-fail-fast

step "fuzz smoke: every trace reader for 20 s with overflow checks (cargo-fuzz, nightly)"
# The first build of the targets compiles every dependency with the
# sanitizer (15 min on a busy 2-core machine); later runs reuse it.
if cargo +nightly --version >/dev/null 2>&1; then
    if ! cargo fuzz --version >/dev/null 2>&1; then
        # 2 min 30 s measured on a busy 2-core machine.
        cargo install cargo-fuzz --locked || echo "skip: cannot install cargo-fuzz"
    fi
    if cargo fuzz --version >/dev/null 2>&1; then
        bash scripts/fuzz.sh 20
    fi
else
    echo "skip: fuzz smoke needs a nightly toolchain (rustup toolchain install nightly) and cargo-fuzz"
fi

step "python: set up .venv and build the extension"
bash scripts/dev-python.sh

step "python: lints"
.venv/bin/ruff check python tests/python bench docs
.venv/bin/ruff format --check python tests/python bench docs

step "bench smoke runs (figures in docs come from the full runs)"
.venv/bin/python bench/parse_bench.py --requests 200000 --cli none
cargo bench -p fallow-core --bench sim --locked -- --requests 200000
cargo bench -p fallow-core --bench tune --locked -- --requests 20000 --workload mmpp
bash bench/peer_bench.sh 8 1

step "live benchmark, quick: fallow scrub vs ionice -c3 vs a fixed rate on loop devices"
# As root only (loop devices, FUSE, tracefs); pytest checks its JSON
# (tests/python/test_live_bench.py). Exit status 2: something it needs is missing.
if [[ $(id -u) -eq 0 ]]; then
    export FALLOW_LIVE_BENCH_JSON="$PWD/bench/out/live-quick.json"
    rc=0
    .venv/bin/python bench/live_bench.py --quick --fallow target/debug/fallow \
        --json "$FALLOW_LIVE_BENCH_JSON" || rc=$?
    if ((rc == 2)); then
        echo "skip: the live benchmark cannot run here (see above)"
        unset FALLOW_LIVE_BENCH_JSON
    elif ((rc != 0)); then
        exit "$rc"
    fi
else
    echo "skip: the live benchmark needs root (loop devices, FUSE, tracefs)"
fi

step "live benchmark, quick, btrfs: fallow scrub btrfs:MNT vs btrfs scrub -c 3, scrub_speed_max, unthrottled"
# issue 13 item 4, on the emulated HDD (~75 s); tests/python/test_live_bench.py checks its JSON
if [[ $(id -u) -eq 0 ]]; then
    export FALLOW_LIVE_BTRFS_JSON="$PWD/bench/out/live-btrfs-quick.json"
    rc=0
    .venv/bin/python bench/live_bench.py --quick --btrfs --fallow target/debug/fallow \
        --json "$FALLOW_LIVE_BTRFS_JSON" || rc=$?
    if ((rc == 2)); then
        echo "skip: the btrfs benchmark cannot run here (see above: btrfs-progs, fio or FUSE missing)"
        unset FALLOW_LIVE_BTRFS_JSON
    elif ((rc != 0)); then
        exit "$rc"
    fi
else
    echo "skip: the btrfs benchmark needs root (loop devices, FUSE, mount)"
fi

step "python: tests (last, so the closing line is the test summary)"
.venv/bin/python -m pytest -q   # tests/python + doctests (pyproject.toml)

