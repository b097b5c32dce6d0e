#!/usr/bin/env bash
# Sets up everything and runs every test: Rust (unit, integration, doc, CLI),
# Python (pytest + doctests), lints, and short benchmark smoke runs.
# Usage: bash scripts/test.sh        (from anywhere in the repo)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts, in seconds since the script began, so a CI
# log shows where the time goes (docs/testing.md: the loop's time, phase by phase).
step() { printf '\n==> [%4d s] %s\n' "$SECONDS" "$*"; }

# Skips are counted, never passed silently (docs/testing.md):
# - a test that needs root or the shared traces is #[ignore = "needs …"];
#   libtest counts it as ignored unless --include-ignored is given, which we
#   do where root and ../shared/traces are both here (as in CI). Run that
#   way where one is missing, such a test FAILS naming what is missing.
#   FALLOW_TEST_IGNORED=include|exclude overrides the choice.
# - a test that cannot do one part here (a tool, a kernel feature) prints a
#   line starting `skip:`; the tests run with --show-output so those lines
#   reach the log, and the closing line counts them.
# No incremental caches: every cargo here builds in target/ from what the
# last build left, and a build from a fresh clone without them took 200 s
# and 392 s of CPU against 225 s and 426 s with them (idle 2-core machine;
# fallow-core at opt-level 2 is then 16 codegen units, not 256, and its
# `it` tests ran 5 % faster). An edit to a crate recompiles that crate
# whole; `cargo test -p CRATE` keeps the caches for an edit loop. Every
# cargo below inherits it, so all of them reuse one build (the setting is
# part of each workspace crate's hash).
export CARGO_INCREMENTAL=0
LOGS="${TMPDIR:-/tmp}/fallow-test-logs.$$"
mkdir -p "$LOGS"
trap 'rm -rf "$LOGS"' EXIT
traces_dir() {
    if [[ -n ${FALLOW_SHARED_TRACES:-} ]]; then echo "$FALLOW_SHARED_TRACES"; return; fi
    local d=$PWD
    while [[ $d != / ]]; do
        [[ -d $d/shared/traces ]] && { echo "$d/shared/traces"; return; }
        d=$(dirname "$d")
    done
    echo "$PWD/../shared/traces"
}
ignored_mode() {
    case ${FALLOW_TEST_IGNORED:-auto} in
    include | exclude) echo "$FALLOW_TEST_IGNORED" ;;
    auto) if [[ $(id -u) -eq 0 && -d $(traces_dir) ]]; then echo include; else echo exclude; fi ;;
    *) echo "FALLOW_TEST_IGNORED must be include, exclude or auto, not $FALLOW_TEST_IGNORED" >&2; exit 2 ;;
    esac
}
IGNORED_MODE=$(ignored_mode) # exits here (set -e) on a bad FALLOW_TEST_IGNORED
# One line totalling libtest's `test result:` lines, the `skip:` lines and
# pytest's closing line, of the logs so far.
summary() {
    cat "$LOGS"/*.log 2>/dev/null | awk '
        /^test result: / {
            for (i = 1; i <= NF; i++) {
                n = $i + 0
                if ($(i + 1) ~ /^passed/) p += n
                if ($(i + 1) ~ /^failed/) f += n
                if ($(i + 1) ~ /^ignored/) ig += n
            }
            bins++
        }
        tolower($0) ~ /^(skip|skipped)( \([^)]*\))?: / { parts++ }
        /^(=+ )?[0-9]+ (passed|failed|skipped|error)/ && / in [0-9.]+s/ {
            for (i = 1; i < NF; i++) {
                n = $i + 0; w = $(i + 1)
                if (w ~ /^passed/) pp += n
                if (w ~ /^failed/ || w ~ /^error/) pf += n
                if (w ~ /^skipped/) ps += n
            }
        }
        END {
            printf "TOTAL: %d passed, %d failed, %d skipped (Rust: %d passed, %d failed, %d ignored in %d test binaries, %d skip: lines; pytest: %d passed, %d failed, %d skipped)\n",
                p + pp, f + pf, ig + ps + parts, p, f, ig, bins, parts, pp, pf, ps
        }'
}

# wait_for NAME PID LOG: print the job's log, return its exit status
wait_for() {
    local job_rc=0
    wait "$2" || job_rc=$?
    echo "--- $1 (exit status $job_rc; it ran in the background, its output follows)"
    cat "$3"
    return "$job_rc"
}

step "system tools for the live tests (loop devices; FUSE needs no libfuse)"
# The emulated-disk and record tests run as root and use losetup (util-linux);
# without root, /dev/fuse or tracefs they skip with a message.
command -v losetup >/dev/null || { apt-get update && apt-get install -y mount; }
# The live benchmark's FG workloads and baseline scrubbers are fio jobs.
command -v fio >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y fio; } \
    || echo "no fio: the live benchmark will skip"
# `fallow scrub btrfs:MNT` drives the kernel's btrfs scrub through btrfs-progs
# (crates/fallow-cli/tests/integration/native.rs makes a btrfs on a loop device); FITRIM's
# test uses mkfs.ext4 (e2fsprogs).
if [ "$(id -u)" = 0 ] && ! command -v btrfs >/dev/null; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y btrfs-progs \
        || echo "no btrfs-progs: the native btrfs tests will skip"
fi

step "system tools for the operations tests (promtool, systemd-analyze)"
# crates/fallow-metrics/tests/scrape.rs pipes a scrape into `promtool check
# metrics` (Debian's prometheus package: 62 s to install on a loaded 2-core
# machine, not started); crates/fallow-cli/tests/integration/systemd_units.rs runs
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

step "rust: format"
cargo fmt --all -- --check

step "system tools for the live tests (root only; the tests skip without them)"
# fallow run's network tests make veth pairs and namespaces with ip (iproute2)
if [ "$(id -u)" = 0 ] && ! command -v ip >/dev/null; then
    apt-get update && apt-get install -y iproute2
fi

step "rust: build the tests, linted as they compile (clippy -D warnings)"
# Clippy lints the workspace's crates while the test build compiles them:
# clippy-driver as the workspace's rustc wrapper and the lint levels in
# CLIPPY_ARGS are all that `cargo clippy` sets before it runs `cargo check`
# (rust-clippy's src/main.rs). A `cargo clippy` of its own was a second,
# check-only build of every dependency: 240 s of CPU, where the lints cost
# 41 s this way (docs/testing.md). The wrapper is part of each workspace
# crate's hash, so every cargo below that builds in target/ runs with the
# same two variables (`linted`), or it would compile the crates again. The
# targets are those of `clippy --all-targets`: the test build compiles the
# libraries (with and without cfg(test)), binaries, tests and examples, the
# bench smoke runs the benches, the extension's build fallow-py.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) \
    || { echo "no clippy-driver: rustup component add clippy" >&2; exit 1; }
linted=(env RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__)
# --workspace includes fallow-py, which has no Rust tests: its features
# then count in the build, and the extension's build below reuses it
# (crates/fallow-py/Cargo.toml).
# The artifacts' JSON names the test executables (the `it` tests run by
# themselves below); diagnostics are still rendered for people.
"${linted[@]}" cargo test --workspace --locked --no-run --message-format=json-render-diagnostics \
    >"$LOGS/build.json"

# Two jobs that need nothing from the Rust tests run beside them, at nice 19
# so the tests keep the CPU they ask for (docs/testing.md: the loop's time).
# The Rust tests' run is mostly waiting (live tests on loop devices and
# emulated disks, network namespaces), so the two cores are free for much of
# it. They start after the test build, which keeps both cores busy (537 s of
# CPU in 278 s on an idle machine): started beside it, the fuzz build had
# reached only chrono when the build ended, 420 s in. Each job writes its
# own log, printed when it is waited for below.
step "background (nice 19): cargo-fuzz build of the fuzz targets, then their smoke runs; the Python packages"
fuzz_job() {
    # The first build compiles every dependency with the coverage
    # instrumentation and no sanitizer (fuzz/README.md, "The sanitizer":
    # 820 CPU-s from nothing against AddressSanitizer's 1,146, the same
    # afternoon; most of it one chain: arrow-select, parquet, fallow-core);
    # later runs reuse it.
    if ! cargo +nightly --version >/dev/null 2>&1; then
        echo "skip: fuzz smoke needs a nightly toolchain (rustup toolchain install nightly) and cargo-fuzz"
        return 0
    fi
    if ! cargo fuzz --version >/dev/null 2>&1; then
        # 2 min 30 s measured on a busy 2-core machine.
        cargo install cargo-fuzz --locked || { echo "skip: cannot install cargo-fuzz"; return 0; }
    fi
    bash scripts/fuzz.sh --build
    # every trace reader with overflow checks, for the time its coverage
    # needs (scripts/fuzz.sh --smoke: 5 s or 10 s), two at a time, in the
    # CPU the foreground leaves
    FUZZ_PARALLEL=2 bash scripts/fuzz.sh --smoke
}
# setsid: each job leads its own process group, so the trap below ends
# its cargo and rustc children too. A new session is also a new scheduler
# autogroup (kernel.sched_autogroup_enabled, on in Debian's kernels and
# here), and the CPU is shared between autogroups before nice counts:
# nice 19 alone left each job's session an equal share with the tests, and
# the Rust tests ran 2-3 times longer than on an idle machine (the CLI's
# integration binary 910 s against 385 s). The job sets its autogroup's
# nice to its own as well (/proc/PID/autogroup; sched(7)).
# (setsid, nice and bash exec each other: $! is the session's leader.)
at_niceness='n=$1; shift; echo "$n" >"/proc/$$/autogroup" 2>/dev/null || true; exec "$@"'
# in_background NICE LOG COMMAND...: COMMAND at niceness NICE in its own
# session and autogroup, its output in LOG; $! is the session's leader,
# which the EXIT trap ends with its process group.
background_groups=()
in_background() {
    local niceness=$1 log=$2
    shift 2
    setsid nice -n "$niceness" bash -c "$at_niceness" bash "$niceness" "$@" >"$log" 2>&1 &
    background_groups+=("-$!")
}
# An early exit (a failed step below) must not leave them running. The
# "|| true" matters: at the normal end the jobs are gone, kill fails, and
# under set -e a failing command in an EXIT trap becomes the script's exit
# status (stop 29's CI: every test passed and the run still exited 1).
trap 'kill -- "${background_groups[@]}" 2>/dev/null || true; rm -rf "$LOGS"' EXIT
in_background 19 "$LOGS/fuzz.out" bash -c "$(declare -f fuzz_job); set -euo pipefail; fuzz_job"
FUZZ_PID=$!
# The venv and its packages now; the extension once the Rust tests have
# let go of target/ (cargo locks it for a whole command).
in_background 19 "$LOGS/python-build.out" bash scripts/dev-python.sh --no-build
PYBUILD_PID=$!

step "rust: tests ($IGNORED_MODE the tests marked #[ignore = \"needs …\"])"
# libtest's threads stay at one a core, although the tests mostly wait:
# with three, live_tools::a_budgeted_scrub_on_the_emulated_hdd_refits_and_
# measures_the_fg failed twice the same way, its FG-alone baseline 35 ms a
# read against 17 ms with the scrub (docs/testing.md).
libtest_args=(--show-output)
[[ $IGNORED_MODE == include ]] && libtest_args+=(--include-ignored)
# fallow-core's `it` tests (30 s of two threads' CPU, simulations; no
# timing bound in them) run by themselves in the background at nice 19 in
# their own autogroup, beside the other binaries' tests; `cargo test`
# skips them by exact name. They ran one after the CLI's integration binary
# before, 30 s of the critical path. cargo holds the build directory for a
# whole `cargo test`, so the binary is run directly, from its package's
# directory as cargo runs it.
# The test executables from the build's JSON, the `it` tests' first (the
# script stops here if there is none), then every other one.
mapfile -t test_exes < <(python3 -c '
import json, sys
it, others = [], []
for line in open(sys.argv[1]):
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m.get("profile", {}).get("test"):
        continue
    is_it = t.get("name") == "it" and m["manifest_path"].endswith("/crates/fallow-core/Cargo.toml")
    (it if is_it else others).append(m["executable"])
if len(it) != 1:
    sys.exit(f"test.sh: {len(it)} executables for fallow-core\x27s it tests in the build\x27s JSON, not 1")
print("\n".join(it + others))
' "$LOGS/build.json")
it_exe=${test_exes[0]:-}
other_exes=("${test_exes[@]:1}")
[[ -x $it_exe ]] || { echo "test.sh: no executable for fallow-core's it tests" >&2; exit 1; }
mapfile -t it_tests < <("$it_exe" --list --format terse | sed -n 's/: test$//p')
# A skip is by exact name, in every binary: no other test may share one.
shared=$(for exe in "${other_exes[@]}"; do "$exe" --list --format terse 2>/dev/null; done \
    | sed -n 's/: test$//p' | sort -u | comm -12 - <(printf '%s\n' "${it_tests[@]}" | sort -u))
[[ -z $shared ]] || { echo "test.sh: tests of it and of other binaries share names: $shared" >&2; exit 1; }
skip_it=(--exact)
for t in "${it_tests[@]}"; do skip_it+=(--skip "$t"); done
in_background 19 "$LOGS/rust-it.out" \
    bash -c 'cd crates/fallow-core && exec "$@"' bash "$it_exe" "${libtest_args[@]}"
IT_PID=$!
rc=0
"${linted[@]}" cargo test --workspace --locked --no-fail-fast -- "${libtest_args[@]}" "${skip_it[@]}" 2>&1 \
    | tee "$LOGS/rust.log" || rc=$?
it_rc=0
wait_for "fallow-core's it tests" "$IT_PID" "$LOGS/rust-it.out" || it_rc=$?
cp "$LOGS/rust-it.out" "$LOGS/rust-it.log" # its test result line counts in the closing line
((rc != 0)) || rc=$it_rc
((rc == 0)) || { summary; exit "$rc"; }

# The venv was set up beside the Rust tests; the extension is built beside
# the quick live benchmark (below), once cargo has let go of target/ (it
# locks it for a whole command).
wait_for "python: set up .venv and its packages" "$PYBUILD_PID" "$LOGS/python-build.out"

# live_bench JSON_VAR JSON WHAT NEEDS [ARGS...]: `bench/live_bench.py
# --quick ARGS` as root, its JSON exported in JSON_VAR for pytest
# (tests/python/test_live_bench.py checks it); exit status 2 (something it
# needs is missing, it says what) and a run without root are counted skips.
live_bench() {
    local var=$1 json=$2 what=$3 needs=$4
    shift 4
    if [[ $(id -u) -ne 0 ]]; then
        echo "skip: $what needs root ($needs)"
        return 0
    fi
    export "$var=$json"
    local rc=0
    python3 bench/live_bench.py --quick "$@" --fallow target/debug/fallow --json "$json" || rc=$?
    if ((rc == 2)); then
        echo "skip: $what cannot run here (see above: $needs)"
        unset "$var"
    elif ((rc != 0)); then
        exit "$rc"
    fi
}

# The live benchmarks run in the foreground. Beside the quick one (plain
# loop devices, whose latencies before tuning drift with load) runs only
# work at nice 19 in its own autogroup: the fuzz job and the extension's
# build. With pytest beside it at nice 0 (rehearsal of 0aba6c1) those
# latencies came out further off what an idle machine gives; in a loop from
# a fresh clone they are off either way, for a cause not established
# (docs/testing.md). The btrfs benchmark (the emulated HDD, mostly waiting:
# the machine was 8-16 % busy during it) has the Python steps beside it.
step "background (nice 19): the Python extension, in target/, and docs/extending.md's recipes in a scratch copy, beside the quick live benchmark"
# every crate but pyo3, numpy and the extension comes from the test build
# (about 20 s of CPU; scripts/dev-python.sh says how)
in_background 19 "$LOGS/python-ext.out" "${linted[@]}" bash scripts/dev-python.sh
PYEXT_PID=$!
# docs/extending.md's recipes followed in a scratch copy: the worked policy
# and reader as one file and one line each, the CLI built from the copy in
# target/ (the test build's dependencies; its cargo waits for the
# extension's to let go of target/), and both checked where the recipes
# say they appear (scripts/recipe-check.sh)
in_background 19 "$LOGS/recipe.out" bash scripts/recipe-check.sh
RECIPE_PID=$!

step "live benchmark, quick: fallow scrub vs ionice -c3 vs a fixed rate on loop devices"
live_bench FALLOW_LIVE_BENCH_JSON "$PWD/bench/out/live-quick.json" \
    "the live benchmark" "loop devices, FUSE, tracefs, fio"

wait_for "python: the extension" "$PYEXT_PID" "$LOGS/python-ext.out"

# In the dev profile the tests built (fallow-core at opt-level 2): a smoke
# run checks that each bench runs and agrees with itself (tune's sweep =
# its simulation), which needs no second, release build of every
# dependency (minutes on 2 cores); the figures in docs come from release
# runs (`cargo bench` without --profile, docs/testing.md). The packages are
# the test build's (--workspace), so cargo resolves the
# same features and reuses its dependencies instead of building them again
# for fallow-core alone.
bench_smoke() { "${linted[@]}" cargo bench --workspace --profile dev --locked --bench "$@"; }
rust_bench_job() {
    bench_smoke sim -- --requests 200000
    bench_smoke tune -- --requests 20000 --workload mmpp
    # the earlier exact search (tune_exact_reference) against today's, same answers (~10 s of CPU)
    bench_smoke tune -- --requests 20000 --workload mmpp --compare-exact
    bench_smoke energy -- --requests 200000
    "${linted[@]}" bash bench/peer_bench.sh 8 1
}
# the CLI the Rust tests built: without it tests/python/test_energy.py builds
# one with cargo, whose narrower feature set (one package) rebuilds part of
# the tree and then the next test build rebuilds it back
export FALLOW_BIN="$PWD/target/debug/fallow"
python_job() {
    echo "--- python: lints"
    .venv/bin/ruff check python tests/python bench docs
    .venv/bin/ruff format --check python tests/python bench docs
    echo "--- bench smoke runs, Python"
    # --allow-debug: the extension is scripts/dev-python.sh's dev-profile build
    # (docs/testing.md: its CPU); the smoke run checks that every contender
    # gives the same idle intervals, and says its times are not fallow's
    .venv/bin/python bench/parse_bench.py --requests 200000 --cli none --allow-debug
    # the fleet pass (docs/fleet.md): fallow, polars and DuckDB (skipped if absent) agree
    # on every volume; one Dask sweep of the partitions (~13 s on 2 loaded cores)
    .venv/bin/python bench/fleet_bench.py --requests 100000 --volumes 20 --sweep-workers 1 \
        --no-projection --fallow target/debug/fallow
    echo "--- python: tests (but the live benchmark's, which read its results)"
    # tests/python + doctests (pyproject.toml); -rs lists each skip's reason
    .venv/bin/python -m pytest -q -rs --ignore tests/python/test_live_bench.py 2>&1 \
        | tee "$LOGS/pytest.log"
}
# Two jobs beside the btrfs benchmark: the Python steps at nice 10 and the
# Rust bench smoke runs at nice 19, each in its own autogroup. The
# benchmark's own processes (nice 0) take the CPU first when they wake, and
# the Python steps come before the bench smoke runs and the fuzz job: the
# SIGINT tests (tests/python/test_interrupt.py) bound a cancel to 0.5 s.
step "background: the Python steps (nice 10) and the Rust bench smoke runs (nice 19), beside the btrfs live benchmark"
in_background 10 "$LOGS/python.out" \
    bash -c "LOGS=$(printf %q "$LOGS"); $(declare -f python_job); set -euo pipefail; python_job"
PYTHON_PID=$!
in_background 19 "$LOGS/rust-bench.out" \
    bash -c "$(declare -p linted); $(declare -f bench_smoke rust_bench_job); set -euo pipefail; rust_bench_job"
RUST_BENCH_PID=$!

step "live benchmark, quick, btrfs: fallow scrub btrfs:MNT vs btrfs scrub -c 3, scrub_speed_max, unthrottled"
# docs/native.md's btrfs benchmark, on the emulated HDD (~60 s)
live_bench FALLOW_LIVE_BTRFS_JSON "$PWD/bench/out/live-btrfs-quick.json" \
    "the btrfs benchmark" "loop devices, FUSE, mount, btrfs-progs, fio" --btrfs

step "python: lints, bench smoke runs and tests (waiting for the background job)"
rc=0
wait_for "python: lints, bench smoke runs, tests" "$PYTHON_PID" "$LOGS/python.out" || rc=$?

step "python: the live benchmarks' tests (their results above)"
live_rc=0
.venv/bin/python -m pytest -q -rs tests/python/test_live_bench.py 2>&1 \
    | tee "$LOGS/pytest-live-bench.log" || live_rc=$?
((rc != 0)) || rc=$live_rc

step "docs/extending.md's recipes in a scratch copy (waiting for the background job)"
recipe_rc=0
wait_for "the recipes in a scratch copy" "$RECIPE_PID" "$LOGS/recipe.out" || recipe_rc=$?
((rc != 0)) || rc=$recipe_rc

step "bench smoke runs, Rust (waiting for the background job)"
bench_rc=0
wait_for "bench smoke runs, Rust" "$RUST_BENCH_PID" "$LOGS/rust-bench.out" || bench_rc=$?
((rc != 0)) || rc=$bench_rc

step "fuzz smoke (waiting for the background job; then the closing line totals every test)"
fuzz_rc=0
wait_for "fuzz smoke" "$FUZZ_PID" "$LOGS/fuzz.out" || fuzz_rc=$?
cp "$LOGS/fuzz.out" "$LOGS/fuzz.log" # its skip: lines count in the closing line
((rc != 0)) || rc=$fuzz_rc
step "done in $SECONDS s"
summary
exit "$rc"

