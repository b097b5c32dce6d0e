"""`fallow.energy`: the binding returns what `fallow energy --json` prints on
the same input (the CLI run as a subprocess), a trace worked out by hand
from the power model, and bad input raises the typed errors naming the
argument, file, line or field."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import fallow

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "cli"
HAND = DATA / "energy.csv"  # the trace worked by hand in fallow-core/src/energy/sim.rs
FILES = DATA / "energy_files.csv"
S = 1_000_000_000

# The WD2500JD (SARD seed, Table III), written out here so the hand-computed
# case does not read its figures from the code under test.
RW_W, IDLE_W, STANDBY_W = 10.6, 10.0, 1.8
SPINUP_J, SPINUP_S, SHUTDOWN_J, SHUTDOWN_S = 148.5, 9.0, 6.4, 4.0


@pytest.fixture(scope="session")
def fallow_bin() -> str:
    """The `fallow` binary: $FALLOW_BIN, else built (or found up to date) by cargo."""
    env = os.environ.get("FALLOW_BIN")
    if env:
        return env
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo not found and $FALLOW_BIN not set: cannot run `fallow energy`")
    out = subprocess.run(
        [cargo, "build", "--quiet", "--locked", "-p", "fallow-cli", "--bin", "fallow"]
        + ["--message-format=json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            if msg["target"]["name"] == "fallow":
                return msg["executable"]
    raise AssertionError("cargo built no `fallow` executable")


def cli(fallow_bin: str, *args: str) -> dict[str, Any]:
    o = subprocess.run(
        [fallow_bin, "energy", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert o.returncode == 0, f"fallow energy {args} failed: {o.stderr}"
    return json.loads(o.stdout)


def same_figures(py: fallow.EnergyResult, ref: dict[str, Any]) -> None:
    """Every figure of every run, the power model, the network and the input
    counts are equal: both sides serialise the core's report."""
    got = py.data
    assert len(got["runs"]) == len(ref["runs"])
    for mine, theirs in zip(got["runs"], ref["runs"]):
        for key in ("policy", "setting", "spinups", "idle_periods", "exposed_delay_s"):
            assert mine[key] == theirs[key], (key, mine["policy"], mine["setting"])
        assert mine["energy_j"] == theirs["energy_j"], (mine["policy"], mine["setting"])
        assert mine == theirs
    for key in ("power", "break_even_s", "network", "remote_when", "bg"):
        assert got[key] == ref[key], key
    for key in ("kind", "device", "requests", "disk_requests", "mandatory_local", "span_s"):
        assert got["input"][key] == ref["input"][key], key


def test_every_policy_and_share_equals_the_cli(fallow_bin: str) -> None:
    py = fallow.energy(str(HAND), policy=None, bg_work="1MiB")
    ref = cli(fallow_bin, str(HAND), "--bg-work", "1MiB")
    same_figures(py, ref)
    # the default: three policies × the seed's six shares
    assert len(py.data["runs"]) == 18
    # a path and the Trace read from it give the same report, path included
    assert py.data["input"] == ref["input"]
    again = fallow.energy(fallow.read_trace(HAND), policy=None, bg_work="1MiB")
    assert again.data == py.data


def test_options_equal_the_cli_flags(fallow_bin: str, tmp_path: Path) -> None:
    toml = tmp_path / "power.toml"
    toml.write_text("idle_w = 8.0\nspinup_s = 6\n")
    py = fallow.energy(
        HAND,
        policy=["timeout:t=5s", "adaptive:t=2s"],
        local_fraction=[1, 0.5, 0.25],
        remote="always",
        power={"idle_w": 8.0, "spinup_s": 6},
        net_latency=0.001,
        net_bandwidth="10MB",
        net_contention=0.5,
        seed=7,
    )
    ref = cli(
        fallow_bin,
        str(HAND),
        *("--policy", "timeout:t=5s", "--policy", "adaptive:t=2s"),
        *("--local-fraction", "1,0.5,0.25", "--remote", "always"),
        *("--power", str(toml), "--net-latency", "1ms", "--net-bandwidth", "10MB"),
        *("--net-contention", "0.5", "--seed", "7"),
    )
    same_figures(py, ref)
    assert py["power"]["idle_w"] == 8.0 and py["power"]["spinup_ns"] == 6 * S
    # the TOML file given as a path is the same model
    assert fallow.energy(HAND, power=toml, local_fraction=1)["power"] == py["power"]


def test_modelled_completions_and_peers_equal_the_cli(fallow_bin: str) -> None:
    small = REPO / "tests" / "data" / "traces" / "small.trace"
    py = fallow.energy(small, service="exp:5ms", peers=20, peer_prob=0.3)
    ref = cli(
        fallow_bin,
        *(str(small), "--service", "exp:5ms", "--policy", "timeout:t=10s"),
        *("--peers", "20", "--peer-prob", "0.3"),
    )
    same_figures(py, ref)
    assert py["input"]["completions"] == "modelled: exp:5ms"


def test_file_level_trace_equals_the_cli(fallow_bin: str) -> None:
    py = fallow.energy(FILES, files=True, user_data="server", peers=20, peer_prob=1)
    ref = cli(
        fallow_bin,
        *(str(FILES), "--files", "--user-data", "server", "--policy", "timeout:t=10s"),
        *("--peers", "20", "--peer-prob", "1"),
    )
    same_figures(py, ref)
    alone, peers = py.runs.iloc[0], py.runs.iloc[1]
    assert (alone["spinups"], alone["server_requests"]) == (2, 2)
    assert (peers["spinups"], peers["remote_requests"]) == (0, 2)


def test_shared_hp_trace_equals_the_cli(fallow_bin: str, traces_dir: Path) -> None:
    hp = traces_dir / "hp-hplajw-1992" / "ajw.1week.srt"
    if not hp.is_file():
        pytest.skip(f"{hp} not found")
    py = fallow.energy(hp, device=0, local_fraction=[1, 0.01])
    ref = cli(fallow_bin, str(hp), "--device", "0", "--policy", "timeout:t=10s")
    ref["runs"] = [r for r in ref["runs"] if r["setting"] in ("100 % local", "1 % local")]
    same_figures(py, ref)
    # the seed's headline: at 1 % local the exposed spin-up delay falls by ≥ 70 %
    assert py.runs.loc[1, "exposed_delay_vs_standalone"] <= 0.30


def test_one_idle_gap_longer_than_the_timeout_by_hand() -> None:
    # Two sequential 1 s reads (the second starts where the first ended: no
    # seek), at 0 s and 100 s; 10 s timeout.
    # Disk: busy 0-1, idle 1-11, shutdown 11-15, standby 15-100, spin-up
    # 100-109, busy 109-110: one spin-up, the second read waits 9 s.
    trace = fallow.from_columns(
        [0, 100 * S], completion_ns=[S, 101 * S], offset_bytes=[0, 4096], size_bytes=[4096] * 2
    )
    r = fallow.energy(trace, policy="timeout:t=10s", local_fraction=1)
    (run,) = r["runs"]
    assert r["input"]["device"] == 0 and run["setting"] == "100 % local"
    assert (run["spinups"], run["shutdowns"], run["idle_periods"]) == (1, 1, 1)
    assert run["mean_idle_s"] == pytest.approx(99.0)  # from falling idle to the read
    assert run["exposed_delay_s"] == pytest.approx(SPINUP_S)
    assert run["exposed_delay_per_request_s"] == pytest.approx(SPINUP_S / 2)
    t = run["time_s"]
    assert (t["busy"], t["idle"], t["shutdown"], t["standby"], t["spinup"]) == pytest.approx(
        (2.0, 10.0, SHUTDOWN_S, 85.0, SPINUP_S)
    )
    assert t["total"] == pytest.approx(110.0)
    busy, idle, cycle, standby = 2 * RW_W, 10 * IDLE_W, SHUTDOWN_J + SPINUP_J, 85 * STANDBY_W
    e = run["energy_j"]
    assert e["busy"] == pytest.approx(busy)
    assert e["idle"] == pytest.approx(idle)
    assert e["power_cycle"] == pytest.approx(cycle)
    assert e["standby"] == pytest.approx(standby)
    total = busy + idle + cycle + standby  # 429.1 J
    assert e["total"] == pytest.approx(total)
    assert run["edp"] == pytest.approx(total * (101 + SPINUP_S))  # span + exposed delay
    # always-on: 2 s busy and 99 s idle over the 101 s span
    always_on = 2 * RW_W + 99 * IDLE_W
    assert run["vs_always_on"]["energy"] == pytest.approx(total / always_on)
    assert run["vs_always_on"]["edp"] == pytest.approx(total * 110 / (always_on * 101))
    # break-even: (cycle − standby · shutdown) / (idle − standby) = 18.0 s
    want = (SPINUP_J + SHUTDOWN_J - STANDBY_W * SHUTDOWN_S) / (IDLE_W - STANDBY_W)
    assert r.break_even_s == pytest.approx(want, abs=1e-9)

    # With no request kept local, the read at 100 s finds the disk asleep and
    # a peer serves it over the network: no spin-up, no exposed delay, and a
    # response of latency + 4096 B / 125 MB/s, up to 20 % slower.
    sard = fallow.energy(trace, local_fraction=[1, 0]).runs.iloc[1]
    assert (sard["spinups"], sard["remote_requests"], sard["exposed_delay_s"]) == (0, 1, 0)
    transfer = 4096 / 125e6
    assert 200e-6 + transfer <= sard["remote_mean_response_s"] <= 200e-6 + 1.2 * transfer + 1e-9


def test_runs_frame_and_json() -> None:
    r = fallow.energy(HAND, policy=["timeout:t=10s", "predictive"], bg_work="1MiB")
    frame = r.runs
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [c for c, _ in fallow.power.RUN_COLUMNS]
    assert len(frame) == 12 and list(frame["policy"].unique()) == ["timeout:t=10s", "predictive"]
    assert (frame["energy_j"] == [x["energy_j"]["total"] for x in r["runs"]]).all()
    assert (frame["bg_done_bytes"] > 0).any()
    # the CLI's first key, then the result's data
    assert json.loads(r.to_json()) == {"schema_version": fallow.SCHEMA_VERSION, **r.data}
    assert "energy.csv" in repr(r) and "predictive" in repr(r)
    # without BG work the BG columns are empty, not an error
    assert fallow.energy(HAND, local_fraction=1).runs["bg_done_bytes"].isna().all()


def test_busiest_device_by_default_as_the_cli(fallow_bin: str) -> None:
    two = DATA / "two_devices.csv"
    py = fallow.energy(two, local_fraction=1)
    ref = cli(fallow_bin, str(two), "--policy", "timeout:t=10s", "--local-fraction", "1")
    assert py["input"]["device"] == ref["input"]["device"]
    same_figures(py, ref)


@pytest.mark.parametrize(
    ("options", "name", "text"),
    [
        ({"policy": "nap"}, "policy", "unknown policy `nap`"),
        ({"policy": "timeout:t=later"}, "policy", "later"),
        ({"policy": []}, "policy", "at least one"),
        ({"local_fraction": 1.5}, "local_fraction", "between 0 and 1"),
        ({"local_fraction": "most"}, "local_fraction", "share"),
        ({"peers": 3, "peer_prob": 2}, "peer_prob", "probability"),
        ({"peers": 3, "peer_prob_for": {"/usr": -1}}, "peer_prob_for", "/usr"),
        ({"peer_prob": 0.5}, "peer_prob", "needs peers"),
        ({"peers": 3, "local_fraction": 0.1}, "local_fraction", "not both"),
        ({"remote": "never"}, "remote", "never"),
        ({"user_data": "server"}, "user_data", "files=True"),
        ({"bg_size": "1MiB"}, "bg_size", "needs bg_work"),
        ({"bg_work": 0}, "bg_work", "at least 1 byte"),
        ({"net_contention": -1}, "net_contention", "non-negative"),
        ({"net_latency": "soon"}, "net_latency", "soon"),
        ({"net_bandwidth": "lots"}, "net_bandwidth", "lots"),
        ({"bg_work": "1GiB", "bg_wait": -1}, "bg_wait", "non-negative"),
        ({"device": 9}, "device", "no device 9"),
        ({"power": {"idle_watts": 3}}, "power", "idle_watts"),
        ({"power": {"standby_w": 12}}, "power", "above idle power"),
        ({"power": {"idle_w": "high"}}, "power", "invalid type"),
        ({"power": {"idle_w": float("nan")}}, "power", "finite"),
    ],
)
def test_bad_arguments_raise_parameter_error(
    options: dict[str, Any], name: str | None, text: str
) -> None:
    with pytest.raises(fallow.ParameterError) as err:
        fallow.energy(HAND, **options)
    if name is not None:
        assert err.value.name == name
    assert text in str(err.value)


def test_bad_files_name_the_file_line_and_field(tmp_path: Path) -> None:
    toml = tmp_path / "p.toml"
    toml.write_text("idle_w = 10\nidle_watts = 3\n")
    with pytest.raises(fallow.TraceFormatError) as err:
        fallow.energy(HAND, power=toml)
    assert (err.value.path, err.value.line, err.value.field) == (str(toml), 2, "power model")

    bad = tmp_path / "bad.csv"
    bad.write_text("0,/a,0,10,R,app\n1,/a,0,10,Q,app\n")
    with pytest.raises(fallow.TraceFormatError) as err:
        fallow.energy(bad, files=True)
    assert (err.value.path, err.value.line, err.value.field) == (str(bad), 2, "op")

    with pytest.raises(FileNotFoundError):
        fallow.energy(tmp_path / "missing.csv", files=True)
    with pytest.raises(fallow.ParameterError, match="not a Trace"):
        fallow.energy(fallow.read_trace(HAND), files=True)
    # a block trace without completion times needs a service model
    no_completions = fallow.from_columns([0, S, 50 * S])
    with pytest.raises(fallow.FallowError, match="no completion times"):
        fallow.energy(no_completions)
