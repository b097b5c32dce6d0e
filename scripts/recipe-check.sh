#!/usr/bin/env bash
# Follows docs/extending.md's recipes in a scratch copy of the workspace, as
# a new contributor would: the page's worked policy (`every-other`) and
# worked reader (`logfmt`) become files of fallow-core, each registered by
# the one line its recipe names, and nothing else is edited. Then it builds
# the CLI from the copy and checks that both reached what the recipes say
# they reach: `fallow policies`, simulate (its defaults from the key table),
# tune (its knob), compare; detection, `--format`, analyze and `convert`
# (docs/testing.md). The doctests of the page run the same code outside the
# crate; this runs it inside, where the registry is.
#
# Usage: bash scripts/recipe-check.sh   (from anywhere in the repo)
# CARGO_TARGET_DIR (default: the repo's target/) holds the copy
# (recipe-copy/) and its build, so the test build's dependencies are
# reused: only the copy's own crates compile (they have another path, so
# other hashes). The copy's binary is renamed
# `fallow-recipe` so that it never replaces target/debug/fallow. Python's
# front end reads the same registry; building a second extension for it is
# not done here.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
# The copy lives at one path in the target directory: its crates' hashes
# (which include their paths) stay the same from run to run, so their
# artifacts replace the last run's instead of piling up beside them.
scratch=$target/recipe-copy
rm -rf "$scratch"
mkdir -p "$scratch"
fail() {
    echo "recipe-check: FAILED: $*" >&2
    exit 1
}

# The workspace as it is on disk (a developer's edits included), without
# its build.
cp -r Cargo.toml Cargo.lock crates docs "$scratch/"
core=$scratch/crates/fallow-core

# worked_example HEADING: the first ```rust block after the page's heading,
# up to its test part (which starts at `# fn main`)
worked_example() {
    awk -v heading="$1" '
        $0 == heading { in_section = 1; next }
        in_section && /^```rust/ { in_block = 1; next }
        in_block && (/^# fn main/ || /^```/) { exit }
        in_block { print }
    ' docs/extending.md
}

# 1. The policy: its file, as the page gives it, with the crate's paths
#    (the page: "in the crate it would say use super::… and crate::…").
policy_file=$core/src/policy/every_other.rs
worked_example "## Worked example: a policy in one file" | sed 's/fallow_core::/crate::/g' >"$policy_file"
grep -q "pub const ENTRY: Entry" "$policy_file" || fail "no policy ENTRY in docs/extending.md's worked example"
# ... and its one line in `policies!`, alphabetically (the recipe's step 2)
python3 - "$core/src/policy/mod.rs" every_other <<'EOS'
import re, sys
path, module = sys.argv[1], sys.argv[2]
text = open(path).read()
m = re.search(r"^policies! \{\n((?:    \w+,\n)+)\}", text, re.M)
if not m:
    sys.exit(f"{path}: no `policies!` list")
names = re.findall(r"    (\w+),", m.group(1))
names = sorted(names + [module])
body = "".join(f"    {n},\n" for n in names)
open(path, "w").write(text[: m.start(1)] + body + text[m.end(1) :])
EOS

# 2. The reader: its file (the page: "in the crate it would say
#    pub(crate) const READER, use super::… and crate::…") ...
reader_file=$core/src/trace/logfmt.rs
worked_example "## Worked example: a reader in one file" \
    | sed -e 's/fallow_core::/crate::/g' -e 's/^pub const READER/pub(crate) const READER/' >"$reader_file"
grep -q "pub(crate) const READER: ReaderEntry" "$reader_file" || fail "no READER in docs/extending.md's worked example"
# ... `mod logfmt;` and `logfmt::READER,` in `readers!` by name (step 3)
python3 - "$core/src/trace/mod.rs" logfmt <<'EOS'
import re, sys
path, module = sys.argv[1], sys.argv[2]
text = open(path).read()
# before the first `mod NAME;` that carries no attribute
mods = re.search(r"(?<=\n\n)mod \w+;\n|(?<=;\n)mod \w+;\n", text)
if not mods:
    sys.exit(f"{path}: no `mod` declaration without an attribute")
text = text[: mods.start()] + f"mod {module};\n" + text[mods.start() :]
m = re.search(r"^readers! \{\n((?:    [\w:]+,\n)+)\}", text, re.M)
if not m:
    sys.exit(f"{path}: no `readers!` list")
lines = re.findall(r"    ([\w:]+),", m.group(1))
# the list is alphabetical by format name, which is not the module's for
# columnar::ARROW and ::PARQUET: insert before the first line whose
# module sorts after the new one, as a contributor reading it would
line = f"{module}::READER"
at = next((i for i, l in enumerate(lines) if l.split("::")[0] > module and not l.startswith("columnar")), len(lines))
lines.insert(at, line)
body = "".join(f"    {l},\n" for l in lines)
open(path, "w").write(text[: m.start(1)] + body + text[m.end(1) :])
EOS

# 3. The recipes' registry checks (their step 3: `cargo test -p
#    fallow-core policy` and `--test it readers::registry`), as an example
#    of the copy's fallow-core: `-p` would resolve features for one
#    package and compile the dependencies again, and an example builds
#    against the workspace's resolution. Names sorted and unique (the
#    lists' order), then the readers' binary-cache codes and detection
#    ranks unique.
mkdir -p "$core/examples"
cat >"$core/examples/recipe_registry_check.rs" <<'EOS'
//! scripts/recipe-check.sh: the registries' consistency after the recipes.
fn main() {
    let mut problems = Vec::new();
    for (what, check) in [
        ("policies", fallow_core::policy::policies().check()),
        ("formats", fallow_core::trace::formats().check()),
    ] {
        if let Err(e) = check {
            problems.push(format!("{what}: {e}"));
        }
    }
    let readers = fallow_core::trace::readers();
    for (i, a) in readers.iter().enumerate() {
        for b in &readers[i + 1..] {
            if a.code == b.code {
                problems.push(format!("formats {} and {} share code {}", a.name, b.name, a.code));
            }
            if a.detect_rank == b.detect_rank {
                problems.push(format!("formats {} and {} share rank {}", a.name, b.name, a.detect_rank));
            }
        }
    }
    for p in &problems {
        eprintln!("recipe-check: {p}");
    }
    std::process::exit(i32::from(!problems.is_empty()));
}
EOS

# 4. Build the CLI from the copy, renamed first (see above), and the check.
sed -i 's/^name = "fallow"$/name = "fallow-recipe"/' "$scratch/crates/fallow-cli/Cargo.toml"
grep -q '^name = "fallow-recipe"$' "$scratch/crates/fallow-cli/Cargo.toml" \
    || fail "crates/fallow-cli/Cargo.toml has no [[bin]] name = \"fallow\" to rename"
echo "recipe-check: building the CLI from the copy ($scratch), in $target"
# The copy's fallow-core and fallow-peer at opt-level 0: the workspace
# optimises them for the tests' long simulations and the peer's scans,
# while the recipes run a few small commands. Measured on a built tree:
# 33 CPU-s and 21 s instead of 105 CPU-s and 59 s, and the build runs
# beside the quick live benchmark on a machine that is busy throughout.
(cd "$scratch" && CARGO_TARGET_DIR=$target cargo build --workspace --locked \
    --config profile.dev.package.fallow-core.opt-level=0 \
    --config profile.dev.package.fallow-peer.opt-level=0 \
    --bin fallow-recipe --example recipe_registry_check) 2>&1 | tee "$scratch/build.log"
fallow=$target/debug/fallow-recipe
[[ -x $fallow ]] || fail "no $fallow after the build"
# The workspace's own code builds with no warning (clippy -D warnings in
# scripts/test.sh), so a warning here is the recipes' files': an import
# left unused, an entry never registered.
if grep -q '^warning' "$scratch/build.log"; then
    fail "the copy built with warnings (above): the recipes' files are not complete as given"
fi
"$target/debug/examples/recipe_registry_check" || fail "the registries are inconsistent after the recipes"
echo "recipe-check: the policy and format registries are consistent (sorted, unique names, codes and ranks)"

# 5. The policy everywhere the recipe says, nothing else edited.
"$fallow" policies --json | python3 -c '
import json, sys
entries = {e["name"]: e for e in json.load(sys.stdin)}
e = entries.get("every-other") or sys.exit("fallow policies does not list every-other")
want = "t=DURATION (default 100ms), n=N (requests per used interval, default 10)"
got = e["params"]
if got != want:
    sys.exit(f"every-other params {got!r}, the key table gives {want!r}")
print("recipe-check: fallow policies lists every-other:", got)
'
# one synthetic FG for simulate, tune and compare
workload=(--workload poisson --utilization 0.3 --requests 20000)
# simulate's JSON without the spec as given, keys sorted
simulated() {
    "$fallow" simulate "${workload[@]}" --json --policy "$1" \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("spec"); print(json.dumps(d, sort_keys=True))'
}
defaults=$(simulated every-other)
given=$(simulated every-other:t=100ms,n=10)
[[ $defaults == "$given" ]] || fail "simulate: every-other alone differs from every-other:t=100ms,n=10"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["bg"]["completed"] > 0, d["bg"]' "$defaults" \
    || fail "simulate: every-other did no BG work"
echo "recipe-check: simulate runs every-other; with no keys it is every-other:t=100ms,n=10"
# (each output is taken whole first: a fallow error stops here, not in the check)
tuned=$("$fallow" tune "${workload[@]}" --policy every-other --budget 5% --sizes 64KiB --json)
python3 -c '
import json, sys
d = json.load(sys.stdin)
if (d["policy"], d["knob"]["name"]) != ("every-other", "t"):
    sys.exit(f"tune: policy {d['policy']}, knob {d['knob']['name']}, not every-other by t")
print("recipe-check: tune searches every-other by its knob t")
' <<<"$tuned"
compared=$("$fallow" compare "${workload[@]}" --json)
python3 -c '
import json, sys
if "every-other" not in json.dumps(json.load(sys.stdin)):
    sys.exit("compare: every-other is not in the line-up")
print("recipe-check: compare runs every-other with the others")
' <<<"$compared"

# 6. The reader: detected, named by --format, analysed, converted.
printf 't_us=500 dev=0 off=4096 len=4096 rw=R lat_us=250\nt_us=1500 dev=0 off=0 len=512 rw=W lat_us=100\n' >"$scratch/io.log"
# the format `fallow analyze ARGS` read the file as
analyzed_as() {
    "$fallow" analyze "$scratch/io.log" "$@" --json \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["trace"]["format"])'
}
format=$(analyzed_as)
[[ $format == logfmt ]] || fail "analyze detected $format, not logfmt"
format=$(analyzed_as --format logfmt)
[[ $format == logfmt ]] || fail "analyze --format logfmt read it as $format"
echo "recipe-check: analyze detects logfmt and takes --format logfmt"
"$fallow" convert "$scratch/io.log" -o "$scratch/io.csv"
# By hand from the two lines: MSR's times are in 100 ns ticks, arrivals
# rebased to the first (0 and 1 ms), latencies 250 and 100 µs.
python3 - "$scratch/io.csv" <<'EOS' || fail "convert -o io.csv"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
want = [
    ["Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime"],
    ["0", "fallow", "0", "Read", "4096", "4096", "2500"],
    ["10000", "fallow", "0", "Write", "0", "512", "1000"],
]
if rows != want:
    sys.exit(f"{sys.argv[1]}: {rows}, not {want}")
EOS
echo "recipe-check: convert writes its 2 requests as MSR CSV, as by hand"
echo "recipe-check: ok (docs/extending.md's policy and reader, each one file and one line)"
