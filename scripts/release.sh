#!/usr/bin/env bash
# Build the release artefacts of the `fallow` Python package and check them:
#   - the wheel: abi3 (one wheel for CPython >= 3.9), manylinux-tagged,
#     stripped, with the `fallow` command (the CLI compiled into the
#     extension: `fallow = "fallow._cli:main"`), LICENSE-MIT and LICENSE-APACHE;
#   - the sdist: every crate the extension needs, both licence files;
#   - `twine check --strict` on both, `auditwheel show` on the wheel
#     (the tag it reports must be the one the wheel carries).
#
# Usage: scripts/release.sh [OUT_DIR]      (default dist/)
# Environment:
#   FALLOW_VENV       venv with maturin (default <repo>/.venv, made by
#                     scripts/dev-python.sh); twine and auditwheel are added to it
#   FALLOW_MANYLINUX  manylinux policy (default manylinux_2_28: zig links the
#                     extension against glibc 2.28's symbols; a native link
#                     would take the build machine's glibc, 2.35 here)
#   CARGO_TARGET_DIR  cargo target dir (default <repo>/target/py: `maturin
#                     --zig` builds every crate for its own linker and
#                     target triple, so nothing of target/ would be reused)
# The binary for `cargo install` is not built here: `cargo install --path
# crates/fallow-cli` builds it from the same sources.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/dist}"
venv="${FALLOW_VENV:-$root/.venv}"
policy="${FALLOW_MANYLINUX:-manylinux_2_28}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/py}"

if [[ ! -x "$venv/bin/maturin" ]]; then
  echo "release: no maturin in $venv: run scripts/dev-python.sh --no-build first" >&2
  exit 2
fi
"$venv/bin/python" -m pip install --quiet "twine>=5" "auditwheel>=6" "ziglang>=0.11"
# maturin builds for the interpreter it finds: the venv's, as dev-python.sh
# does, so cargo reuses that build (another interpreter would rebuild pyo3
# and everything above it: 8 min 51 s measured)
export VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH"

mkdir -p "$out"
rm -f "$out"/fallow-*.whl "$out"/fallow-*.tar.gz
cd "$root"
"$venv/bin/maturin" build --release --strip --zig --compatibility "$policy" --out "$out"
"$venv/bin/maturin" sdist --out "$out"

wheel="$(ls "$out"/fallow-*.whl)"
sdist="$(ls "$out"/fallow-*.tar.gz)"
"$venv/bin/twine" check --strict "$wheel" "$sdist"

# auditwheel: the wheel's tag must be one it agrees with
shown="$("$venv/bin/auditwheel" show "$wheel")"
echo "$shown"
tag="$(basename "$wheel" .whl | rev | cut -d- -f1 | rev)"
grep -q "\"$tag\"" <<<"$shown" \
  || { echo "release: auditwheel does not confirm the tag $tag" >&2; exit 1; }

# both licence files in both artefacts
for f in LICENSE-MIT LICENSE-APACHE; do
  "$venv/bin/python" - "$wheel" "$f" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert any(n.endswith(".dist-info/licenses/" + sys.argv[2]) or n.endswith(".dist-info/" + sys.argv[2]) for n in names), (sys.argv[2], names)
PY
  # (the listing first: grep -q closing the pipe early would fail it under pipefail)
  listing="$(tar tzf "$sdist")"
  grep -q "^fallow-[^/]*/$f\$" <<<"$listing" || { echo "release: $f not in $sdist" >&2; exit 1; }
done

ls -l "$wheel" "$sdist"
echo "release: ok: $(basename "$wheel") $(basename "$sdist")"
