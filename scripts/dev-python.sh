#!/usr/bin/env bash
# Set up the Python development environment of fallow:
#   .venv/ with maturin, numpy, pandas, matplotlib, polars, dask[distributed],
#   ray (the fleet backends), pytest and ruff,
#   and the `fallow` package built (cargo's dev profile, as `maturin develop`
#   builds it; FALLOW_PY_PROFILE=release for an optimised one) and installed into it,
#   with its `fallow` command (.venv/bin/fallow: the CLI inside the extension).
#   The one build makes the wheel `pip install` takes
#   ($CARGO_TARGET_DIR/wheels/fallow-*-abi3-manylinux_2_28_x86_64.whl, linked
#   by zig), which tests/python/test_install.py installs into a fresh venv,
#   and the venv's extension is taken from it: one build, two uses.
#
# Idempotent: packages are installed only when the list below changed (a
# stamp file in .venv remembers it), and cargo rebuilds the extension only
# when Rust sources changed. Re-runs take a few seconds.
#
# Usage: scripts/dev-python.sh            # set up / refresh, then build
#        scripts/dev-python.sh --no-build # only the packages
# Then:  .venv/bin/python -m pytest tests/python python/fallow --doctest-modules
#
# Environment:
#   PYTHON            interpreter to create the venv with (default python3)
#   FALLOW_VENV       venv location (default <repo>/.venv)
#   FALLOW_FORCE_BUILD=1  rebuild even when the extension looks up to date
#   FALLOW_MANYLINUX  the wheel's manylinux policy (default manylinux_2_28)
#   FALLOW_PY_PROFILE the cargo profile of the build (default dev)
#   CARGO_TARGET_DIR  cargo target dir (default <repo>/target, the workspace's:
#                     the extension reuses what the test build compiled)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FALLOW_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
# the wheel's platform tag; glibc 2.28 and later (see the build below)
manylinux="${FALLOW_MANYLINUX:-manylinux_2_28}"
# The dev profile (Cargo.toml: fallow-core and fallow-peer optimised in it,
# which is where the tests spend their CPU): measured on this 2-core
# machine, idle, from nothing, 365 s of CPU (3 min 13 s) against 663 s
# (5 min 47 s) for the optimised build this script made before, and pytest
# took the same time with either (60.5 s and 63.0 s without the live
# benchmark's tests). The wheel: 14.7 MB against 8.5 MB, stripped both.
profile="${FALLOW_PY_PROFILE:-dev}"
build=1
[[ "${1:-}" == "--no-build" ]] && build=0

# Keep in step with pyproject.toml ([project] dependencies, the `test`, `fleet` and
# `ray` extras). Ray is ~80 MB but installs in ~15 s; its fleet test takes ~10 s.
packages=(
  "maturin>=1.5,<2"
  "numpy>=1.21"
  "pandas>=1.5"
  "matplotlib>=3.5"
  "polars>=0.20"
  "dask[distributed]>=2023.1"
  "ray>=2.5"
  "pytest>=7"
  "ruff"
  "ziglang>=0.11"
  "auditwheel>=6"
)

if [[ ! -x "$venv/bin/python" ]]; then
  echo "dev-python: creating $venv" >&2
  "$python" -m venv "$venv"
fi

stamp="$venv/.fallow-packages"
want="$(printf '%s\n' "${packages[@]}")"
if [[ ! -f "$stamp" ]] || [[ "$(cat "$stamp")" != "$want" ]]; then
  echo "dev-python: installing ${packages[*]}" >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "${packages[@]}"
  printf '%s\n' "$want" >"$stamp"
fi

# Skip the build when the installed extension is newer than every input of
# it (Rust sources, manifests, lock file) and the venv imports it.
if [[ $build -eq 1 && "${FALLOW_FORCE_BUILD:-0}" != 1 ]]; then
  so="$(ls "$root"/python/fallow/_fallow*.so 2>/dev/null | head -n1 || true)"
  if [[ -n "$so" ]] \
    && [[ -z "$(find "$root/crates" "$root/Cargo.toml" "$root/Cargo.lock" "$root/pyproject.toml" \
                     -newer "$so" -print -quit)" ]] \
    && ls "${CARGO_TARGET_DIR:-$root/target}"/wheels/fallow-*.whl >/dev/null 2>&1 \
    && (cd / && "$venv/bin/python" -c 'import fallow._fallow' 2>/dev/null); then
    echo "dev-python: extension up to date ($so)" >&2
    build=0
  fi
fi

if [[ $build -eq 1 ]]; then
  export VIRTUAL_ENV="$venv"
  export PATH="$venv/bin:$PATH"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  echo "dev-python: building the extension (cargo profile $profile) into $venv" >&2
  # One build, two uses. The wheel: stripped and linked by zig
  # against glibc 2.28's symbols, so it installs on RHEL/Rocky 8+, Debian
  # 10+ and Ubuntu 20.04+ (a native link takes this machine's glibc 2.35;
  # tests/python/test_install.py); scripts/release.sh builds the same in release and runs
  # auditwheel on it.
  #
  # zig links the extension only: its linker is given to the last rustc
  # call (maturin's trailing arguments go to `cargo rustc -- ...`). `maturin
  # --zig` names the target triple (a build directory of its own) and sets
  # the linker of every crate (cargo's fingerprints hold it), so every
  # dependency compiled a second time: 365 s of CPU from nothing. Here,
  # after `cargo test --workspace --no-run` in the same target directory,
  # only pyo3, numpy and the extension compile (docs/testing.md). The two
  # builds share a crate only if its features agree in both:
  # crates/fallow-py/Cargo.toml says how that is kept.
  glibc="${manylinux#manylinux_}"
  if [[ ! "$glibc" =~ ^[0-9]+_[0-9]+$ ]]; then
    echo "dev-python: FALLOW_MANYLINUX must be manylinux_X_Y (X.Y: the oldest glibc), not $manylinux" >&2
    exit 2
  fi
  glibc="${glibc/_/.}"
  zig_cc="$CARGO_TARGET_DIR/zig/cc-$(uname -m)-linux-gnu.$glibc.sh"
  mkdir -p "$(dirname "$zig_cc")"
  # the wrapper `maturin --zig` writes for its linker
  cat >"$zig_cc.tmp" <<EOF
#!/bin/sh
# zig as the extension's linker, for glibc $glibc's symbols (scripts/dev-python.sh)
export CARGO_ZIGBUILD_ZIG_COMMAND="$venv/bin/python3" CARGO_ZIGBUILD_ZIG_COMMAND_ARGS='-m ziglang'
exec "$venv/bin/maturin" zig cc -- -g -fno-sanitize=all -target $(uname -m)-linux-gnu.$glibc "\$@"
EOF
  chmod +x "$zig_cc.tmp"
  mv "$zig_cc.tmp" "$zig_cc"
  rm -f "$CARGO_TARGET_DIR"/wheels/fallow-*.whl
  # scripts/release.sh builds the shipped wheel with --release.
  (cd "$root" && maturin build --profile "$profile" --strip --compatibility "$manylinux" --quiet \
    --out "$CARGO_TARGET_DIR/wheels" -- -C linker="$zig_cc")
  # The venv, from that wheel, as `maturin develop` would install it: the
  # extension module into python/fallow (the package is used in place, so
  # Python edits need no rebuild), a .pth naming python/, and the `fallow`
  # console script. Not `maturin develop` itself: it would build again, to
  # link natively.
  wheel="$(ls "$CARGO_TARGET_DIR"/wheels/fallow-*.whl)"
  "$venv/bin/python" - "$wheel" "$root" <<'PY'
import os
import pathlib
import sys
import sysconfig
import zipfile

wheel, root = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    so = next(n for n in z.namelist() if n.startswith("fallow/_fallow") and n.endswith(".so"))
    dest = root / "python" / so
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(z.read(so))
    tmp.chmod(0o755)
    os.replace(tmp, dest)  # a running interpreter keeps the old mapping
site = pathlib.Path(sysconfig.get_paths()["purelib"])
(site / "fallow.pth").write_text(f"{root / 'python'}\n")
script = pathlib.Path(sys.prefix) / "bin" / "fallow"
script.write_text(
    f"#!{sys.executable}\nimport sys\nfrom fallow._cli import main\n\n"
    "if __name__ == '__main__':\n    sys.exit(main())\n"
)
script.chmod(0o755)
PY
  "$venv/bin/python" -c 'import fallow, sys; sys.stderr.write("dev-python: fallow %s ready\n" % fallow.__version__)'
fi
