"""The built wheel installs into a fresh venv and gives both the library and
the ``fallow`` command.

The wheel is the one ``scripts/dev-python.sh`` builds once
(``$CARGO_TARGET_DIR/wheels``, default ``target/wheels``) or
``$FALLOW_WHEEL``; no second release build runs here. The fresh venv
installs the wheel with ``pip`` (numpy and pandas come from pip's cache
after the first time) and the checks run from a directory outside the
repository, so nothing of ``python/`` is on the path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _wheel() -> Path:
    env = os.environ.get("FALLOW_WHEEL")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    wheels = sorted((target / "wheels").glob("fallow-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        pytest.skip(
            f"no wheel in {target / 'wheels'}: run scripts/dev-python.sh (it builds one) "
            "or set FALLOW_WHEEL"
        )
    return wheels[-1]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return _wheel()


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    where = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=True).create(where)
    subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        cwd=where,
    )
    return where


def test_the_wheel_is_manylinux_abi3_stripped_and_licensed(wheel: Path) -> None:
    # name-version-cp39-abi3-manylinux_2_28_x86_64.whl (PEP 427 / 600)
    tags = wheel.stem.split("-")[-3:]
    assert tags[0] == "cp39" and tags[1] == "abi3", wheel.name
    assert tags[2].startswith("manylinux_2_"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        licenses = {Path(n).name for n in names if ".dist-info/" in n and "LICENSE" in n}
        assert {"LICENSE-MIT", "LICENSE-APACHE"} <= licenses, names
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = z.read(entry).decode().replace(" ", "")
        assert "[console_scripts]\nfallow=fallow._cli:main" in scripts, scripts
        so = next(n for n in names if n.startswith("fallow/_fallow") and n.endswith(".so"))
        data = z.read(so)
    # stripped: no .symtab section (ELF64 little-endian section headers)
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize = int.from_bytes(data[0x3A:0x3C], "little")
    shnum = int.from_bytes(data[0x3C:0x3E], "little")
    shstrndx = int.from_bytes(data[0x3E:0x40], "little")

    def section(i: int) -> tuple[int, int, int]:
        h = data[shoff + i * shentsize : shoff + (i + 1) * shentsize]
        name = int.from_bytes(h[0:4], "little")
        off = int.from_bytes(h[0x18:0x20], "little")
        size = int.from_bytes(h[0x20:0x28], "little")
        return name, off, size

    _, str_off, _ = section(shstrndx)
    names_of = set()
    for i in range(shnum):
        n, _, _ = section(i)
        end = data.index(b"\0", str_off + n)
        names_of.add(data[str_off + n : end].decode())
    assert ".text" in names_of, names_of
    assert ".symtab" not in names_of and ".debug_info" not in names_of, names_of


def test_auditwheel_confirms_the_wheels_manylinux_tag(wheel: Path) -> None:
    """The wheel installs on glibc 2.28 and later (RHEL/Rocky
    8+, Debian 10+, Ubuntu 20.04+), which auditwheel confirms from the
    symbol versions the extension links against."""
    auditwheel = Path(sys.executable).parent / "auditwheel"
    if not auditwheel.exists():
        pytest.skip(f"{auditwheel} not found: scripts/dev-python.sh installs it")
    tag = wheel.stem.split("-")[-1]
    shown = subprocess.run(
        [str(auditwheel), "show", str(wheel)], capture_output=True, text=True, check=True
    ).stdout
    print(shown)
    assert f'"{tag}"' in shown, shown
    # glibc 2.28 or older: the policy the build asks for (manylinux_2_28)
    glibc = tuple(int(x) for x in tag.split("_")[1:3])
    assert glibc <= (2, 28), f"{wheel.name} needs glibc {glibc[0]}.{glibc[1]}"


def test_a_fresh_venv_gets_the_library_and_the_command(fresh_venv: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv / "bin"
    out = subprocess.run(
        [str(bin_dir / "fallow"), "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    import fallow  # the development install, for the expected version

    assert out.stdout.strip() == f"fallow {fallow.__version__}"
    imp = subprocess.run(
        [str(bin_dir / "python"), "-c", "import fallow, sys; print(fallow.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    # the installed copy, not the repository's python/
    assert str(fresh_venv) in imp.stdout, imp.stdout
    assert str(ROOT / "python") not in imp.stdout


def test_a_fresh_venv_runs_the_demo(fresh_venv: Path, tmp_path: Path) -> None:
    """A fresh venv pip installs the wheel and runs fallow demo:
    the installed command writes the trace and a report that opens with the
    decision (a smaller workload than the default, for time)."""
    out = subprocess.run(
        [str(fresh_venv / "bin" / "fallow"), "demo", "--requests", "20000", "--out", "d"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    d = tmp_path / "d"
    rows = (d / "trace.csv").read_text().splitlines()
    assert len(rows) >= 20000, len(rows)
    assert "What to do" in (d / "report.html").read_text()
    report = json.loads((d / "report.json").read_text())
    assert report["trace"], report.keys()


def test_the_command_is_the_real_cli(fresh_venv: Path, tmp_path: Path) -> None:
    """The installed command analyses a trace as the library does, and keeps
    the CLI's exit codes: 2 for bad input, 0 for help."""
    tiny = ROOT / "tests" / "data" / "cli" / "tiny.csv"
    fallow_cmd = str(fresh_venv / "bin" / "fallow")
    out = subprocess.run(
        [fallow_cmd, "analyze", str(tiny), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    import fallow

    lib = fallow.characterize(fallow.read_trace(str(tiny)))
    assert cli["trace"]["requests"] == lib.data["trace"]["requests"] == 6
    assert cli["utilization"] == pytest.approx(lib.data["utilization"], rel=1e-12)

    bad = subprocess.run(
        [fallow_cmd, "analyze", str(tmp_path / "missing.csv")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert bad.returncode == 2, bad.stderr
    assert "missing.csv" in bad.stderr
    usage = subprocess.run([fallow_cmd, "--bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and "--bogus" in usage.stderr
    # python -m fallow is the same command
    m = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-m", "fallow", "policies", "--csv"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert m.returncode == 0, m.stderr
    assert m.stdout.splitlines()[0] == "name,summary,params,clairvoyant"
    # output through a pipe that closes early ends quietly, as the binary does
    head = subprocess.run(
        f"'{fallow_cmd}' completions bash | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert head.returncode == 0 and head.stdout.strip(), head.stderr
    assert "Traceback" not in head.stderr and "panicked" not in head.stderr, head.stderr


def _unit_features(args: list[str]) -> dict[tuple[str, str], set[tuple[str, ...]]]:
    """Each compiled crate of a build, with the features it gets (cargo's
    unit graph; nightly only), keyed by package and target."""
    out = subprocess.run(
        ["cargo", "+nightly", *args, "--locked", "--unit-graph", "-Z", "unstable-options"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        # nothing is built, but cargo would take target/'s lock
        env={**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target" / "unit-graph")},
    )
    assert out.returncode == 0, out.stderr
    units: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for u in json.loads(out.stdout)["units"]:
        if u["mode"] != "build" or u["target"]["kind"] == ["custom-build"]:
            continue
        key = (u["pkg_id"], u["target"]["name"])
        units.setdefault(key, set()).add(tuple(sorted(u["features"])))
    return units


def test_the_extension_build_reuses_the_test_builds_crates() -> None:
    """scripts/dev-python.sh builds the extension in the test build's target
    directory, where cargo reuses a crate only if both builds give it the
    same features; else every crate above it compiles again (365 s of CPU
    on 2 cores, against about 20 s shared: docs/testing.md).
    crates/fallow-py/Cargo.toml keeps them equal; a new dev-dependency
    feature breaks that silently, so it is checked here."""
    probe = subprocess.run(["cargo", "+nightly", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(
            "cargo's unit graph needs a nightly toolchain (rustup toolchain install nightly)"
        )
    tests = _unit_features(["test", "--workspace", "--no-run"])
    ext = _unit_features(["build", "-p", "fallow-py", "--lib"])
    differ = {
        key[0]: (sorted(tests[key]), sorted(ext[key]))
        for key in tests.keys() & ext.keys()
        if tests[key] != ext[key]
    }
    assert not differ, f"features the test build and the extension's build differ in: {differ}"
    # the check sees the crates both builds compile
    shared = {target for _, target in tests.keys() & ext.keys()}
    assert {"fallow_core", "fallow_cli", "serde"} <= shared, sorted(shared)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
