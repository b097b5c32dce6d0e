"""The live benchmark, bench/live_bench.py, in its quick mode: the structure
and sanity of its JSON (positive figures, every scrubber scrubbed, the FG
ran at its rate), not the goal, which the full mode measures (README).

scripts/test.sh runs the quick mode once as root and passes its JSON in
FALLOW_LIVE_BENCH_JSON; without it this test runs the script itself, and
skips with the reason where it cannot (not root, no fio, no /dev/fuse).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "live_bench.py"
SCRUBBERS = ["alone", "fallow", "idle-class", "fixed-rate"]


def _module():
    spec = importlib.util.spec_from_file_location("live_bench", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fallow_binary() -> Path | None:
    """The newest fallow binary built in this checkout."""
    target = REPO / "target"
    found = [p for p in (target / "debug" / "fallow", target / "release" / "fallow") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    given = os.environ.get("FALLOW_LIVE_BENCH_JSON")
    if given:
        return json.loads(Path(given).read_text())
    if os.geteuid() != 0:
        pytest.skip("the live benchmark needs root (loop devices, FUSE, tracefs)")
    missing = [t for t in ("fio", "losetup", "ionice") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"the live benchmark needs {', '.join(missing)} (scripts/test.sh installs fio)")
    binary = _fallow_binary()
    if binary is None:
        pytest.skip("no fallow binary: cargo build -p fallow-cli")
    out = tmp_path_factory.mktemp("live") / "live.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--fallow", str(binary), "--json", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode == 2:
        pytest.skip(f"live benchmark: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]
    print(r.stdout)
    return json.loads(out.read_text())


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_devices_workloads_and_scrubbers_are_all_there(result):
    assert result["mode"] == "quick"
    assert [d["name"] for d in result["devices"]] == ["plain", "emu"]
    for d in result["devices"]:
        assert d["device"].startswith("/dev/loop")
        # a workload the bench could not run is listed under "skipped"
        gone = {s["workload"] for s in result.get("skipped", [])}
        want = [w for w in ["random", "sequential", "trace"] if w not in gone]
        assert [w["name"] for w in d["workloads"]] == want
        for w in d["workloads"]:
            names = [r["scrubber"] for r in w["runs"]]
            # fallow at the idle class's harm runs when there is harm to match
            idle = next(r for r in w["runs"] if r["scrubber"] == "idle-class")
            harmed = idle["fg"]["mean_ratio"] - 1 > result["settings"]["p99_tolerance"]
            assert names == SCRUBBERS + (["fallow-matched"] if harmed else []), names
            assert isinstance(w["goal"]["met"], bool)


def test_measured_service_times_make_a_bg_model(result):
    for d in result["devices"]:
        sv = d["service"]
        assert _positive(sv["seq_64k_s"]) and _positive(sv["seq_4m_s"])
        # 64 times the bytes cannot be faster than one request
        assert sv["seq_4m_s"] > sv["seq_64k_s"], sv
        assert all(_positive(v) for v in sv["random_read_s"].values())
        assert sv["bg_model"].startswith("size:base=")
    emu = next(d for d in result["devices"] if d["name"] == "emu")
    # the emulated HDD pays a rotation per request: milliseconds, not µs
    assert emu["service"]["random_read_s"]["4096"] > 2e-3


def _trace_requests(path: str, start_s: float, runtime_s: float) -> tuple[int, int]:
    """Requests and bytes of a trace's window, counted here from the file
    (4 KiB-aligned sizes, at most 1 MiB)."""
    n = total = 0
    t0 = None
    for line in Path(path).read_text().splitlines():
        t_ms, _, _, size, _ = line.split()
        t0 = float(t_ms) if t0 is None else t0
        at_ms = float(t_ms) - t0 - start_s * 1e3
        if at_ms < 0:
            continue
        if at_ms >= runtime_s * 1e3:
            break
        n += 1
        total += min(1 << 20, max(4096, (int(size) + 4095) // 4096 * 4096))
    return n, total


def test_fg_figures_are_sane_and_the_think_time_holds(result):
    for d in result["devices"]:
        for w in d["workloads"]:
            if w["name"] == "trace":
                want = _trace_requests(w["trace"]["path"], w["trace"]["start_s"], w["runtime_s"])
                for r in w["runs"]:
                    # the replay issues every request of the window, once
                    assert (r["fg"]["requests"], r["fg"]["bytes"]) == want, r["scrubber"]
                continue
            expected = w["fg_rate_iops"] * w["runtime_s"]
            for r in w["runs"]:
                fg = r["fg"]
                where = f"{d['name']}/{w['name']}/{r['scrubber']}"
                assert _positive(fg["mean_s"]) and _positive(fg["p99_s"]), where
                assert fg["max_s"] >= fg["p99_s"], where
                assert _positive(fg["mean_ratio"]) and _positive(fg["p99_ratio"]), where
                # a Poisson count around its mean, not a device flat out
                assert 0.3 * expected < fg["requests"] < 2.5 * expected, (where, fg["requests"])
                assert fg["bytes"] == fg["requests"] * (4096 if w["name"] == "random" else 65536)
            alone = w["runs"][0]
            assert alone["fg"]["mean_ratio"] == 1.0 and alone["fg"]["p99_ratio"] == 1.0
            # nothing but the FG read the device when it ran alone
            assert alone["scrub_bytes"] <= 1 << 20, (d["name"], w["name"], alone["scrub_bytes"])


def test_every_scrubber_scrubbed_or_the_test_says_why_not(result):
    for d in result["devices"]:
        for w in d["workloads"]:
            by = {r["scrubber"]: r for r in w["runs"]}
            for name in ("idle-class", "fixed-rate"):
                assert by[name]["scrub_bytes"] > 0, (d["name"], w["name"], name)
                assert _positive(by[name]["scrub_mb_s"])
                assert by[name]["scrubber_report"]["reported_bytes"] > 0
            fal = by["fallow"]
            if fal["scrub_bytes"] == 0:
                why = fal["scrubber_report"]["note"] or "no reason given"
                assert fal["scrubber_report"]["note"], "fallow scrubbed nothing without a note"
                where = f"{d['name']}/{w['name']}"
                warnings.warn(f"fallow scrubbed nothing on {where}: {why}", stacklevel=1)
            else:
                assert fal["scrubber_report"]["reported_bytes"] > 0
            chosen = w["tune"]["chosen"]
            if chosen is None:
                assert fal["scrub_bytes"] == 0
            else:
                assert chosen["spec"].startswith("fixed-wait:t=")
                assert chosen["request_size_bytes"] % 4096 == 0
            ratio = w["fallow_over_idle_class"]
            assert ratio == pytest.approx(fal["scrub_mb_s"] / by["idle-class"]["scrub_mb_s"])
            if "fallow-matched" in by:
                # its budget is the idle class's measured FG mean slowdown
                harm = by["idle-class"]["fg"]["mean_ratio"] - 1
                for c in w["tune_matched"]["candidates"]:
                    assert float(c["budget"].rstrip("%")) == pytest.approx(100 * harm, rel=5e-3)
            # a rate ceiling is a ceiling (10 % slack for the run's start and end)
            fixed = by["fixed-rate"]
            assert fixed["scrub_mb_s"] * 1e6 <= 1.1 * fixed["rate_bytes_per_s"] + 65536


def test_quantile_is_numpys_linear_interpolation():
    q = _module().quantile
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 10, 101, 1000):
        xs = sorted(rng.exponential(size=n).tolist())
        for p in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert q(xs, p) == pytest.approx(float(np.percentile(xs, 100 * p)))


def test_an_msr_cut_maps_onto_the_device_aligned_and_in_range(tmp_path):
    mod = _module()
    trace = tmp_path / "cut.trace"
    trace.write_text(
        "1000.0 0 8191 1 0\n"  # 1 byte at 8191: one aligned 4 KiB block at 4096
        "1000.5 0 99999999999 5000000 1\n"  # 5 MB far past the end: capped, wrapped
        "1002.0 0 0 4096 1\n"  # 2 ms after the first: beyond a 1.5 ms window
    )
    dev_bytes = 64 << 20
    events = mod.load_msr_cut(trace, 0.0015, dev_bytes)
    assert [e[0] for e in events] == [0, 500_000]
    span = 99999999999 + 5000000  # the cut's highest byte: the device's end
    at, off, size = events[1]
    assert size == 1 << 20
    assert off % 4096 == 0 and off + size <= dev_bytes
    # offsets scaled, keeping the volume's locality
    assert off == 99999999999 * ((dev_bytes - size) // 4096) // span * 4096
    assert events[0][1:] == (0, 4096)  # 8191 of 100 GB scales to block 0
    # a start skips the requests before it and times the rest from it
    assert mod.load_msr_cut(trace, 1.0, dev_bytes, start_s=0.0004)[0][0] == 100_000
    bad = tmp_path / "bad.trace"
    bad.write_text("1.0 0 x 4096 0\n")
    with pytest.raises(mod.BenchError, match=r"bad.trace:1"):
        mod.load_msr_cut(bad, 1.0, dev_bytes)


def test_burst_cuts_have_their_bursts_and_gaps(tmp_path):
    """The bursty FG shapes (docs/native.md): bursts of BURST_REQUESTS 4 KiB reads
    BURST_SPACING_MS apart, separated by idle gaps within the shape's range,
    read back by the replay's own loader."""
    mod = _module()
    cut = tmp_path / "bursts.trace"
    mod.write_burst_cut(cut, (4.0, 8.0), 60.0, 7)
    events = mod.load_msr_cut(cut, 60.0, 1 << 30)
    t_ms = [e[0] / 1e6 for e in events]
    n, step = mod.BURST_REQUESTS, mod.BURST_SPACING_MS
    bursts = [t_ms[i : i + n] for i in range(0, len(t_ms), n)]
    # 60 s of 4-8 s gaps (plus a 95 ms burst each): 8 to 15 bursts
    assert 8 <= len(bursts) <= 15, len(bursts)
    for b in bursts[:-1]:
        assert len(b) == n
        assert all(abs((y - x) - step) < 0.01 for x, y in zip(b, b[1:]))
    gaps_s = [(b[0] - a[-1]) / 1e3 for a, b in zip(bursts, bursts[1:])]
    assert all(4.0 <= g <= 8.0 + 1e-6 for g in gaps_s), gaps_s
    assert all(size == 4096 for _, _, size in events)


def test_bad_flags_exit_2_with_the_name():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--devices", "ssd"], capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "ssd" in r.stderr


# ---------------------------------------------------------------- the btrfs part (docs/native.md)

BTRFS_SCRUBBERS = ["alone", "fallow", "idle-class", "kernel-limit"]


@pytest.fixture(scope="module")
def btrfs_result(tmp_path_factory) -> dict:
    """The btrfs part's quick mode: FALLOW_LIVE_BTRFS_JSON (scripts/test.sh
    runs it as root), else run here, skipping with the reason where it cannot."""
    given = os.environ.get("FALLOW_LIVE_BTRFS_JSON")
    if given:
        return json.loads(Path(given).read_text())
    if os.geteuid() != 0:
        pytest.skip("the btrfs benchmark needs root (loop devices, FUSE, mount)")
    missing = [t for t in ("fio", "losetup", "btrfs", "mkfs.btrfs") if shutil.which(t) is None]
    if missing:
        pytest.skip(
            f"the btrfs benchmark needs {', '.join(missing)} (apt-get install btrfs-progs fio)"
        )
    binary = _fallow_binary()
    if binary is None:
        pytest.skip("no fallow binary: cargo build -p fallow-cli")
    out = tmp_path_factory.mktemp("btrfs") / "btrfs.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--btrfs", "--fallow", str(binary)]
    r = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, timeout=600)
    if r.returncode == 2:
        pytest.skip(f"btrfs benchmark: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-3000:]
    print(r.stdout)
    return json.loads(out.read_text())


def _seconds(text: str) -> float:
    """A fallow duration (`494ms`, `100s`, `200us`) in seconds."""
    for unit, scale in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def test_btrfs_every_scrubber_ran_and_scrubbed(btrfs_result):
    d = btrfs_result["btrfs"]
    assert btrfs_result["mode"] == "quick" and btrfs_result["devices"] == []
    assert d["device"].startswith("/dev/loop") and d["fill_bytes"] > 0
    gone = {s["workload"] for s in btrfs_result.get("skipped", [])}
    assert [w["name"] for w in d["workloads"]] == [w for w in ["trace", "random"] if w not in gone]
    for w in d["workloads"]:
        by = {r["scrubber"]: r for r in w["runs"]}
        harmed = (
            by["idle-class"]["fg"]["mean_ratio"] - 1 > btrfs_result["settings"]["p99_tolerance"]
        )
        want = BTRFS_SCRUBBERS + (["fallow-matched"] if harmed else []) + ["unthrottled"]
        assert [r["scrubber"] for r in w["runs"]] == want
        assert by["alone"]["scrub_bytes"] == 0
        for r in w["runs"][1:]:
            where = (w["name"], r["scrubber"])
            if r["scrubber"] == "fallow" and r["scrub_bytes"] == 0:
                # allowed only when tune's wait outlasts the run (no wait kept
                # the simulated p99 within the tolerance: t=100s, "never")
                wait_s = _seconds(w["tune"]["chosen"]["spec"].split("t=")[1])
                assert wait_s >= w["runtime_s"], (where, w["tune"]["chosen"]["spec"])
                warnings.warn(f"btrfs/{w['name']}: fallow's tuned wait {wait_s} s", stacklevel=1)
                continue
            assert r["scrub_bytes"] > 0 and _positive(r["scrub_mb_s"]), where
            assert r["scrub_mb_s"] == pytest.approx(r["scrub_bytes"] / r["wall_s"] / 1e6)
            # the data outlasts every run: no scrub finished inside its window
            assert r["scrub_status"] in ("running", "aborted", "interrupted"), where
            # btrfs's own count and the device's reads beyond the FG's agree
            # (tree blocks and a chunk re-read after a resume: a few MiB)
            diff = abs(r["scrub_bytes"] - r["device_other_bytes"])
            assert diff <= 0.1 * r["scrub_bytes"] + (8 << 20), (where, diff)
        for name in ("fallow", "fallow-matched"):
            if name in by and by[name]["scrub_bytes"] > 0:
                rep = by[name]["scrubber_report"]
                assert rep["reported_bytes"] > 0 and rep["policy"].startswith("fixed-wait")
                assert by[name]["command"][2].startswith("btrfs:")
        assert "-c" in by["idle-class"]["command"] and "-c" not in by["unthrottled"]["command"]


def test_btrfs_kernel_limit_is_fallows_rate_and_held(btrfs_result):
    for w in btrfs_result["btrfs"]["workloads"]:
        by = {r["scrubber"]: r for r in w["runs"]}
        fal = by["fallow"]
        fallow_bps = fal["scrub_bytes"] / fal["wall_s"]
        lim = by["kernel-limit"]
        want = fallow_bps if fallow_bps >= 65536 else 65536 / 0.016
        assert lim["rate_bytes_per_s"] == pytest.approx(want, rel=1e-9)
        # a ceiling (10 % slack, and 4 MiB of a scrub's burst at its start)
        assert lim["scrub_bytes"] <= 1.1 * want * lim["wall_s"] + (4 << 20), w["name"]


def test_btrfs_fg_counts_match_the_workload(btrfs_result):
    for w in btrfs_result["btrfs"]["workloads"]:
        if w["name"] == "trace":
            want = _trace_requests(w["trace"]["path"], w["trace"]["start_s"], w["runtime_s"])
            for r in w["runs"]:
                assert (r["fg"]["requests"], r["fg"]["bytes"]) == want, r["scrubber"]
            continue
        expected = w["fg_rate_iops"] * w["runtime_s"]
        for r in w["runs"]:
            fg = r["fg"]
            assert 0.3 * expected < fg["requests"] < 2.5 * expected, (r["scrubber"], fg["requests"])
            assert fg["bytes"] == fg["requests"] * 4096
            assert fg["max_s"] >= fg["p99_s"] >= 0 and _positive(fg["mean_s"])


def test_btrfs_goal_follows_from_the_runs(btrfs_result):
    for w in btrfs_result["btrfs"]["workloads"]:
        by = {r["scrubber"]: r for r in w["runs"]}
        idle = by["idle-class"]["scrub_mb_s"]
        assert w["fallow_over_idle_class"] == pytest.approx(by["fallow"]["scrub_mb_s"] / idle)
        tol = w["goal"]["p99_tolerance"]
        within = {n for n, r in by.items() if n != "alone" and r["fg"]["p99_ratio"] <= 1 + tol}
        assert set(w["within_p99"]["scrubbers"]) == within
        assert w["goal"]["met"] == (
            w["goal"]["at_idle_cost_met"] and w["goal"]["most_within_p99_met"]
        )


STATUS_R = """UUID:             097c9187-76a4-4843-99e9-768b4b3b9381
Scrub started:    Wed Nov 25 21:32:33 2026
Status:           aborted
Duration:         0:00:05
\tdata_extents_scrubbed: 1896
\ttree_extents_scrubbed: 186
\tdata_bytes_scrubbed: 124256256
\ttree_bytes_scrubbed: 3047424
\tread_errors: 0
\tlast_physical: 377749504
"""


def test_scrub_status_reads_btrfs_progs_output(monkeypatch):
    """`btrfs scrub status -R` as btrfs-progs v6.2 printed it here."""
    mod = _module()
    monkeypatch.setattr(
        mod, "run", lambda cmd, what: subprocess.CompletedProcess(cmd, 0, STATUS_R, "")
    )
    st = mod.scrub_status(Path("/mnt"))
    assert st["status"] == "aborted" and st["started"] == "Wed Nov 25 21:32:33 2026"
    assert st["bytes"] == 124256256 + 3047424
    assert st["counters"]["last_physical"] == 377749504
    never = "UUID: x\n\tno stats available\n"
    monkeypatch.setattr(
        mod, "run", lambda cmd, what: subprocess.CompletedProcess(cmd, 0, never, "")
    )
    assert mod.scrub_status(Path("/mnt"))["bytes"] == 0


STATUS_RESUMED = """UUID:             b638b314-095f-4724-8ed2-4f04a429c7a2
Scrub resumed:    Thu Nov 26 10:07:46 2026
Status:           running
Duration:         0:00:04
\tdata_extents_scrubbed: 1920
\ttree_extents_scrubbed: 62
\tdata_bytes_scrubbed: 125829120
\ttree_bytes_scrubbed: 1015808
\tread_errors: 0
\tlast_physical: 204865536
"""


def test_a_resumed_scrub_is_the_same_scrub_and_a_new_start_is_not(monkeypatch):
    """`btrfs scrub status -R` of a resumed scrub (btrfs-progs v6.2 here,
    `btrfs scrub resume -B` 1.5 s after a cancel) prints `Scrub resumed:`
    where a started one prints `Scrub started:`, and its counters go on:
    the window's bytes are the difference, not the total since the start."""
    mod = _module()
    texts = {
        "started": STATUS_R,
        "resumed": STATUS_RESUMED,
        "none": "UUID: x\n\tno stats available\n",
    }
    st = {}
    for k, text in texts.items():
        monkeypatch.setattr(
            mod, "run", lambda cmd, what, text=text: subprocess.CompletedProcess(cmd, 0, text, "")
        )
        st[k] = mod.scrub_status(Path("/mnt"))
    assert st["resumed"]["started"] is None
    assert st["resumed"]["resumed"] == "Thu Nov 26 10:07:46 2026"
    assert st["resumed"]["bytes"] == 125829120 + 1015808
    # resumed during the run: the same scrub, counted from the start of the run
    assert mod.same_scrub(st["started"], st["resumed"])
    assert mod.same_scrub(st["resumed"], st["resumed"])
    # a scrub started afresh during the run (or the first one) counts from 0
    other = dict(st["started"], started="Thu Nov 26 10:09:00 2026")
    assert not mod.same_scrub(st["started"], other)
    assert not mod.same_scrub(st["none"], st["started"])
    assert mod.same_scrub(st["started"], st["started"])


def _run(name: str, mbs: float, mean: float, p99: float) -> dict:
    return {"scrubber": name, "scrub_mb_s": mbs, "fg": {"mean_ratio": mean, "p99_ratio": p99}}


def test_btrfs_goal_by_hand():
    goal = _module().btrfs_goal
    runs = [
        _run("alone", 0, 1.0, 1.0),
        _run("fallow", 12.0, 1.01, 1.04),
        _run("idle-class", 2.0, 1.5, 1.3),
        _run("kernel-limit", 11.0, 1.02, 1.03),
        _run("fallow-matched", 13.0, 1.5, 1.6),
        _run("unthrottled", 20.0, 2.0, 2.5),
    ]
    g = goal(runs, 0.05)
    # 13 / 2 = 6.5 ≥ 6 at the idle class's cost; within p99 ×1.05 fallow's
    # 12 beats the limit's 11
    assert g["at_idle_cost"] == {"scrubber": "fallow-matched", "over_idle_class": 6.5}
    assert set(g["within_p99"]["scrubbers"]) == {"fallow", "kernel-limit"}
    assert g["goal"]["at_idle_cost_met"] and g["goal"]["most_within_p99_met"]
    nothing = [_run("alone", 0, 1.0, 1.0), _run("fallow", 0.0, 0.9, 0.5)]
    nothing += [_run("idle-class", 2.0, 1.5, 1.3)]
    g0 = goal(nothing, 0.05)
    # fallow kept the p99 by scrubbing nothing: not "the most within it"
    assert g0["within_p99"] == {"scrubbers": ["fallow"], "most_scrubbed": None}
    assert not g0["goal"]["most_within_p99_met"] and g0["at_idle_cost"]["over_idle_class"] == 0
    runs[3]["scrub_mb_s"] = 12.5  # the kernel limit now scrubs more within the p99
    assert not goal(runs, 0.05)["goal"]["most_within_p99_met"]
    runs[4]["scrub_mb_s"] = 11.0  # 5.5× the idle class
    assert not goal(runs, 0.05)["goal"]["at_idle_cost_met"]
    # no matched run: fallow's own counts only if it cost no more than the idle class
    g = goal([r for r in runs if r["scrubber"] != "fallow-matched"], 0.05)
    assert g["at_idle_cost"] == {"scrubber": "fallow", "over_idle_class": 6.0}


def _cell(label: str, p99: float, mb_s: float) -> dict:
    return {
        "scrubber": label,
        "label": label,
        "p99_ratio": {"mean": p99},
        "scrub_mb_s": {"mean": mb_s},
    }


def test_equal_p99_interpolates_the_static_curve_by_hand():
    """The verdict's figure (docs/native.md): the static limits' rate at fallow's FG p99."""
    eq = _module().equal_p99
    statics = [
        _cell("4", 1.2, 4.0),
        _cell("8", 1.6, 8.0),
        # slower and no gentler than "8": not on the curve
        _cell("8b", 1.7, 7.0),
        _cell("16", 2.4, 16.0),
        _cell("unthrottled", 3.0, 30.0),
    ]
    # between 8 (1.6) and 16 (2.4): 8 + 8 × (2.0 − 1.6) / 0.8 = 12 MB/s
    e = eq(_cell("fallow", 2.0, 30.0), statics)
    assert math.isclose(e["static_mb_s"], 12.0) and math.isclose(e["speedup"], 2.5)
    assert "8 and 16" in e["how"]
    # p99 1.65 would be 8.25 MB/s through "8b" (ignored): through 8-16 it is 8.5
    assert math.isclose(eq(_cell("fallow", 1.65, 17.0), statics)["static_mb_s"], 8.5)
    # gentler than every limit: the gentlest, at its higher p99
    e = eq(_cell("fallow", 1.05, 2.0), statics)
    assert e["static_mb_s"] == 4.0 and e["speedup"] == 0.5 and "gentlest" in e["how"]
    # harsher than all: the fastest
    e = eq(_cell("fallow", 4.0, 15.0), statics)
    assert e["static_mb_s"] == 30.0 and e["speedup"] == 0.5


def test_shape_verdict_wants_2x_on_bursts_and_1x_on_continuous():
    mod = _module()
    cells = [_cell("alone", 1.0, 0.0), _cell("fallow", 2.0, 19.0)]
    cells += [_cell("a", 1.6, 8.0), _cell("b", 2.4, 16.0)]
    cells[0]["scrubber"], cells[1]["scrubber"] = "alone", "fallow"
    # 12 MB/s at p99 2.0: 19/12 = 1.58×
    assert mod.shape_verdict({"gaps_s": None, "cells": cells})["met"]
    assert not mod.shape_verdict({"gaps_s": (0.5, 2.0), "cells": cells})["met"]
    cells[1]["scrub_mb_s"]["mean"] = 24.0
    assert mod.shape_verdict({"gaps_s": (0.5, 2.0), "cells": cells})["met"]


def test_bytes_in_bursts_by_hand(tmp_path):
    """The device's reads beyond the FG's own inside each burst's window
    (first arrival to last completion), from 5 ms samples."""
    mod = _module()
    start = 10_000_000_000
    out = tmp_path / "fg"
    (tmp_path / "fg.json").write_text(json.dumps({"replay": {"start_monotonic_ns": start}}))
    # burst 1: arrivals 0 and 5 ms, done at 20 and 30 ms; burst 2 (1 s later):
    # one request at 1000 ms done at 1010 ms
    (tmp_path / "fg_clat.1.log").write_text(
        "0, 20000000, 0, 4096, 0\n5, 25000000, 0, 4096, 0\n1000, 10000000, 0, 4096, 0\n"
    )
    # the device reads 1 MiB/s steadily (2048 sectors/s, 2.048 per ms)
    samples = [(start + ms * 1_000_000, round(ms * 2.048)) for ms in range(0, 1100, 5)]
    got = mod.bytes_in_bursts(samples, out)
    # windows 0-30 ms and 1000-1010 ms: 40 ms of 1 MiB/s, less the FG's 3 × 4096
    want = 0.040 * 2048 * 512 - 3 * 4096
    assert abs(got - want) <= 2 * 512, (got, want)


def test_btrfs_fill_beyond_the_file_system_exits_2_with_the_flag():
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--btrfs", "--btrfs-size", "1000", "--btrfs-fill", "900"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "--btrfs-fill 900" in r.stderr


def test_the_bench_removes_only_what_it_created(tmp_path):
    """`--workdir DIR` without `--keep` once deleted a directory the
    user already had, with its files."""
    bench = _module()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    work, remove = bench.choose_workdir(str(mine), keep=False)
    assert work.parent == mine.resolve() and remove == work
    shutil.rmtree(remove)
    assert (mine / "notes.txt").read_text() == "keep me"
    # with --keep the directory itself is used and nothing is removed
    assert bench.choose_workdir(str(mine), keep=True) == (mine.resolve(), None)
    # a directory the bench makes is its own to remove
    fresh = tmp_path / "fresh"
    assert bench.choose_workdir(str(fresh), keep=False) == (fresh.resolve(), fresh.resolve())
    work, remove = bench.choose_workdir(None, keep=False)
    assert remove == work and work.is_dir()
    shutil.rmtree(work)


def test_a_halfs_slowdown_interval_covers_the_true_ratio_95_percent_of_the_time():
    """slowdown_ci95 against simulation: latencies drawn with a known mean
    ratio (5.25 ms over two alone rounds of 5 ms: +5 %, sd 2.4 ms as the
    emulated HDD's sequential reads, 300 reads a half), the interval holds
    the true +5 % in 95 % of 2000 draws to within sampling error."""
    mod = _module()
    rng = np.random.default_rng(7)

    def half(mean, n=300):
        x = rng.normal(mean, 2.4e-3, n)
        return {"mean_s": float(x.mean()), "var_s2": float(x.var(ddof=1)), "requests": n}

    hits = 0
    for _ in range(2000):
        h, alones = half(5.25e-3), [half(5e-3), half(5e-3)]
        m0 = sum(a["mean_s"] for a in alones) / 2
        ci = mod.slowdown_ci95(h, alones)
        hits += abs(h["mean_s"] / m0 - 1 - 0.05) <= ci
    assert 0.93 <= hits / 2000 <= 0.97, hits


def _lat_log(path, lats_ns, offsets):
    rows = enumerate(zip(lats_ns, offsets))
    path.write_text("".join(f"{k}, {lat}, 0, 4096, {off}, 0\n" for k, (lat, off) in rows))


def test_paired_halves_by_hand(tmp_path):
    """Two FG-alone rounds (10 ms and 12 ms a read) and a run that slowed
    every 10th read of the first half by 22 ms: the first half's slowdown
    is 10 · 22 / (100 · 11) = +20 %, the second half's 0 ± 0; another
    offset anywhere and the runs are not paired."""
    mod = _module()
    offs = [k * 4096 * 7 for k in range(200)]
    _lat_log(tmp_path / "a1_clat.1.log", [10_000_000] * 200, offs)
    _lat_log(tmp_path / "a2_clat.1.log", [12_000_000] * 200, offs)
    run = [11_000_000 + (22_000_000 if k < 100 and k % 10 == 3 else 0) for k in range(200)]
    _lat_log(tmp_path / "r_clat.1.log", run, offs)
    # half at runtime_s · 500 ms: reads 0-99 (t_ms = k), then 100-199
    got = mod.paired_halves(tmp_path / "r", [tmp_path / "a1", tmp_path / "a2"], 0.2)
    assert [h["pairs"] for h in got] == [100, 100]
    assert abs(got[0]["slowdown"] - 0.2) < 1e-12 and got[0]["reads_slowed"] == 10
    assert got[1]["slowdown"] == 0 and got[1]["ci95"] == 0
    # 20 batches of 5 reads (55 ms alone), every other one holding the
    # slowed read: D_b − s·A_b = 22 − 11 or 0 − 11 ms, so the variance is
    # 20 · 11² · 20/19 / 1100² and the half-width t₁₉ · its root
    want = 2.093 * math.sqrt(20 * 11**2 * 20 / 19 / 1100**2)
    assert abs(got[0]["ci95"] - want) < 1e-12, (got[0]["ci95"], want)
    offs[150] += 4096
    _lat_log(tmp_path / "r_clat.1.log", run, offs)
    assert mod.paired_halves(tmp_path / "r", [tmp_path / "a1"], 0.2) is None
    # a log without offsets (fio's 5 fields) is refused, naming the read;
    # the halves' figures read it as before
    (tmp_path / "a1_clat.1.log").write_text(
        "".join(f"{k}, 10000000, 0, 4096, 0\n" for k in range(200))
    )
    with pytest.raises(mod.BenchError, match="read 1 has no offset"):
        mod.paired_halves(tmp_path / "r", [tmp_path / "a1"], 0.2)
    halves = mod.fg_halves(tmp_path / "a1", 0.2)
    assert [h["requests"] for h in halves] == [100, 100]
    assert abs(halves[0]["mean_s"] - 0.01) < 1e-15 and halves[0]["bytes"] == 100 * 4096


def test_the_paired_interval_covers_the_true_slowdown_95_percent_of_the_time():
    """paired_slowdown against simulation: alone reads ~ N(13 ms, 5 ms),
    one read in ten slowed by an exponential 13 ms (a true +10 %), 600
    pairs (a half of the random FG at 10 reads/s); the interval holds +10 %
    in 93 % of 2000 draws: a little under 95 %, since batches of 30 pairs
    hold 3 slowed reads on average and their skew narrows a t interval
    (300 pairs: 92 %; three reads in ten slowed: 94 %)."""
    mod = _module()
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(2000):
        alone = rng.normal(13e6, 5e6, 600)
        diff = (rng.random(600) < 0.1) * rng.exponential(13e6, 600)
        s, ci = mod.paired_slowdown(alone.tolist(), diff.tolist())
        hits += abs(s - 0.1) <= ci
    assert 0.92 <= hits / 2000 <= 0.97, hits


def test_a_half_is_within_over_or_unresolved_against_the_budgets_band():
    mod = _module()
    assert mod.budget_fraction("5%") == 0.05 and mod.budget_fraction("1ms") is None
    # the band's edge is 1.2 × 5 % = 6 %
    assert mod.budget_half_verdict(0.04, 0.015, 0.05) == "within"  # 5.5 % ≤ 6 %
    assert mod.budget_half_verdict(0.094, 0.030, 0.05) == "over"  # 6.4 % > 6 %
    assert mod.budget_half_verdict(0.068, 0.030, 0.05) == "unresolved"  # 3.8-9.8 %
    assert mod.budget_half_verdict(-0.02, 0.01, 0.05) == "within"
