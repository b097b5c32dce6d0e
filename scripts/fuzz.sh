#!/usr/bin/env bash
# Run the cargo-fuzz targets of the trace readers with optimisations AND
# overflow checks and debug assertions (`-O -a`): without `-a` an integer
# that wraps goes unnoticed (fuzz/README.md: the fallow_bin target panicked within
# seconds once overflow checks were on). Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz`).
# The sanitizer (fuzz/README.md, "The sanitizer"): FUZZ_SANITIZER, by
# default `none` for --build and --smoke (the test loop's build; fallow's
# readers have no unsafe code, and fuzz/src/lib.rs checks libFuzzer's
# malloc limit itself) and `address` for a campaign of SECONDS, which
# then also checks the unsafe code of Arrow and Parquet under the inputs.
# Usage: bash scripts/fuzz.sh SECONDS [TARGET...]   (default: every target)
#        bash scripts/fuzz.sh --smoke             (every target for its smoke
#                                                  time, below; scripts/test.sh)
#        bash scripts/fuzz.sh --build             (build every target, run none:
#                                                  scripts/test.sh builds them while
#                                                  the Rust tests run)
# Extra libFuzzer flags go in FUZZ_FLAGS, e.g. FUZZ_FLAGS="-jobs=1 -workers=1";
# FUZZ_PARALLEL=2 runs two targets at a time.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
case ${1:-} in
--build | --smoke) sanitizer=${FUZZ_SANITIZER:-none} ;;
*) sanitizer=${FUZZ_SANITIZER:-address} ;;
esac
if [[ ${1:-} == --build ]]; then
    # the same flags as `fuzz run` below, so the runs reuse this build
    exec cargo +nightly fuzz build -O -a -s "$sanitizer"
fi
all=(msr spc plain blkparse hp_srt vscsi fallow_bin detect biosnoop bpftrace blktrace fio_iolog fio_lat arrow parquet every_format)
# The smoke's time per target, sized to what each finds from the seed
# corpus (fuzz/README.md: edges reached against time, 40 s runs of each
# from a fresh corpus, two at a time, in the smoke's build). The line
# readers reach 89-100 % of their 40 s edges within 5 s; the structured
# formats (the binary cache, Arrow, Parquet, and the two that feed every
# reader) 88-100 % by 10 s, still finding more at 40 s. 5 s and 10 s
# leave corpora that cover what the ASan build's 10 s and 25 s left
# (fuzz/README.md, "The sanitizer"). Longest first, so two at a time end
# together.
declare -A secs_of=()
if [[ ${1:-} == --smoke ]]; then
    shift
    (($# == 0)) || { echo "fuzz.sh: --smoke runs every target; name targets with SECONDS instead (fuzz.sh 20 $*)" >&2; exit 2; }
    targets=(fallow_bin detect every_format arrow parquet)
    for t in "${targets[@]}"; do secs_of[$t]=10; done
    for t in "${all[@]}"; do
        [[ -v "secs_of[$t]" ]] && continue
        secs_of[$t]=5
        targets+=("$t")
    done
else
    secs=${1:?usage: fuzz.sh SECONDS [TARGET...] | --smoke}
    shift
    targets=("${@:-${all[@]}}")
    for t in "${targets[@]}"; do secs_of[$t]=$secs; done
fi

# Seed corpora from the hand-made fixtures (corpus/ is git-ignored).
for t in "${all[@]}"; do mkdir -p "corpus/$t"; done
data=../tests/data/traces
cp -n "$data"/*.trace corpus/plain/
cp -n "$data"/*.spc corpus/spc/
cp -n "$data"/*.blkparse corpus/blkparse/
cp -n "$data"/*.srt corpus/hp_srt/
cp -n "$data"/*.vscsi corpus/vscsi/
cp -n "$data"/*.fallow corpus/fallow_bin/
cp -n "$data"/small.* corpus/detect/
cp -n "$data"/small.* corpus/every_format/
cp -n "$data"/*.biosnoop corpus/biosnoop/
cp -n "$data"/*.bpftrace corpus/bpftrace/
cp -n "$data"/*.blktrace.* corpus/blktrace/
cp -n "$data"/*.iolog corpus/fio_iolog/
cp -n "$data"/*_clat.*.log corpus/fio_lat/
cp -n "$data"/*.arrow "$data"/*.arrows "$data"/*.feather corpus/arrow/
cp -n "$data"/*.parquet corpus/parquet/
[ -f corpus/msr/seed.csv ] ||
    printf '134085312000000000,pgbench,0,Read,138502144,4096,2670\n128166372003061629,usr,1,Write,3154132992,4096,1412\n' >corpus/msr/seed.csv
[ -f corpus/msr/hosts.csv ] ||
    printf 'Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,hm,0,Read,0,4096,10\n2,rsrch,0,Write,8192,512,10\n' >corpus/msr/hosts.csv

run_target() {
    local secs=${secs_of[$1]}
    echo "fuzz: $1 for ${secs}s (overflow checks on, sanitizer $sanitizer)"
    # shellcheck disable=SC2086
    cargo +nightly fuzz run -O -a -s "$sanitizer" "$1" "corpus/$1" -- \
        -max_total_time="$secs" -max_len=4096 ${FUZZ_FLAGS:-}
}
# FUZZ_PARALLEL=N runs N targets at a time (each still SECONDS of wall
# time; on an idle 2-core machine 2 at a time give each a core, as one at
# a time does), their logs printed in order as each ends; the exit status
# is the first failing target's.
parallel=${FUZZ_PARALLEL:-1}
if ((parallel <= 1)); then
    for t in "${targets[@]}"; do run_target "$t"; done
    exit 0
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A pid_of=()
status=0
finish_one() {
    local rc=0
    wait -n -p done_pid || rc=$?
    local t=${pid_of[$done_pid]}
    cat "$logs/$t.log"
    if ((rc != 0)); then
        echo "fuzz: $t FAILED (exit status $rc)"
        ((status != 0)) || status=$rc
    fi
    unset "pid_of[$done_pid]"
}
for t in "${targets[@]}"; do
    while ((${#pid_of[@]} >= parallel)); do finish_one; done
    run_target "$t" >"$logs/$t.log" 2>&1 &
    pid_of[$!]=$t
done
while ((${#pid_of[@]} > 0)); do finish_one; done
exit "$status"
