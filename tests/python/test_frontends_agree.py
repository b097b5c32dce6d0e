"""The CLI and Python give the same numbers for the same call.

Both convert their arguments into the core's ``sim::Request`` and take its
defaults (the README's ``fallow.compare(workload=…,
utilization=0.3)`` used to simulate 100,000 requests where ``fallow
compare`` simulated 1,000,000). The CLI runs as a subprocess of this
interpreter (``python -m fallow``: the command line inside the extension).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fallow
import fallow.live

REPO = Path(__file__).resolve().parents[2]


def test_simulate_with_defaults_agrees_with_the_cli(cli_json):
    # no --requests / requests=: both must take the one default
    args = dict(workload="poisson", utilization=0.3, policy="busy-bee")
    py = fallow.simulate(**args)
    ref = cli_json(
        "simulate", "--workload", "poisson", "--utilization", "0.3", "--policy", "busy-bee"
    )
    assert ref["input"]["requests"] == 1_000_000
    assert py["fg"]["requests"] == ref["input"]["requests"]
    for key in ("slowdown", "mean_added_delay_s", "p99_response_s", "collisions"):
        assert py["fg"][key] == ref["fg"][key], key
    for key in ("completed", "bytes", "throughput_bytes_per_s"):
        assert py["bg"][key] == ref["bg"][key], key
    assert py["utilization"] == ref["utilization"]


def test_compare_agrees_with_the_cli_on_every_setting_given(cli_json):
    py = fallow.compare(
        workload="mmpp:cv=9,burst=1000",
        utilization=0.3,
        requests=20_000,
        request_size="8KiB",
        write_fraction=0.25,
        bg="const:4ms",
        bg_size=131072,
        switch_penalty="1ms",
        seed=7,
        policies=["aggressive", "fixed-wait:t=50ms"],
    )
    ref = cli_json(
        "compare",
        "--workload", "mmpp:cv=9,burst=1000",
        "--utilization", "0.3",
        "--requests", "20000",
        "--request-size", "8KiB",
        "--write-fraction", "0.25",
        "--bg", "const:4ms",
        "--bg-size", "128KiB",
        "--switch-penalty", "1ms",
        "--seed", "7",
        "--policy", "aggressive",
        "--policy", "fixed-wait:t=50ms",
    )  # fmt: skip
    runs = ref  # a JSON list, one run per policy
    assert list(py["policy"]) == [r["spec"] for r in runs]
    for row, r in zip(py.to_dict("records"), runs):
        assert row["slowdown"] == r["fg"]["slowdown"]
        assert row["bg_bytes"] == r["bg"]["bytes"]
        assert row["collisions"] == r["fg"]["collisions"]
        assert row["idle_intervals"] == r["idle_intervals"]


def test_pareto_is_the_clis_json(cli_json):
    # one library call behind both (fallow_core::tune::pareto), with the
    # same default line-up when no policy is named
    args = dict(workload="hyperexp:cv=4", utilization=0.2, requests=5_000, bg_size=262144)
    py = fallow.pareto(**args)
    ref = cli_json(
        "pareto", "--workload", "hyperexp:cv=4", "--utilization", "0.2",
        "--requests", "5000", "--bg-size", "256KiB",
    )  # fmt: skip
    # the CLI's list carries the schema version in each document
    for front in ref:
        front.pop("schema_version", None)
    assert py.fronts == ref
    assert len(py.points) == sum(len(f["points"]) for f in ref)


def test_recommend_is_the_clis_json_without_its_commands(cli_json):
    args = dict(workload="hyperexp:cv=4", utilization=0.2, requests=5_000)
    bg = "size:base=4ms,knee=64KiB,rate=100MB"
    py = fallow.recommend(budget="2ms", sizes="64KiB,1MiB", bg=bg, **args)
    ref = cli_json(
        "recommend", "--workload", "hyperexp:cv=4", "--utilization", "0.2",
        "--requests", "5000", "--budget", "2ms", "--sizes", "64KiB,1MiB",
        "--bg", bg,
    )  # fmt: skip
    # the CLI adds the `fallow simulate` command of each entry, and the
    # schema version every CLI document carries
    for entry in ref["ranking"]:
        entry.pop("reproduce", None)
        entry.pop("reproduce_args", None)
    ref.pop("schema_version", None)
    assert py.data == ref
    assert py.best is not None and py.best["policy"] == ref["ranking"][0]["policy"]


def test_defaults_are_the_cores():
    d = fallow._fallow.defaults()
    assert d["requests"] == 1_000_000
    assert (d["request_size"], d["bg_size"], d["seed"]) == (4096, 65536, 1)
    assert (d["bg"], d["bg_work"], d["workload_service"]) == ("exp:10ms", "endless", "exp:10ms")


def test_analyze_is_the_clis_json(cli_json):
    # one library call (fallow_core::analyze) behind both: the same keys,
    # numbers and findings; two devices, so both choose the busiest
    path = str(REPO / "tests" / "data" / "cli" / "two_devices.csv")
    py = fallow.analyze(fallow.read_trace(path))
    ref = cli_json("analyze", path)
    assert ref.pop("schema_version") == fallow.SCHEMA_VERSION
    assert py == ref
    assert py["findings"][0]["topic"] == "idle time"
    # the busiest device asked for by name gives the same report
    again = fallow.analyze(fallow.read_trace(path), device=py["trace"]["device"])
    assert again == py


def test_analyze_html_is_the_clis_page(tmp_path):
    # `fallow analyze --html` and `fallow.analyze(html=)` write one page,
    # byte for byte: the CLI's renderer, reached through the library
    path = str(REPO / "tests" / "data" / "cli" / "two_devices.csv")
    cli_page, py_page = tmp_path / "cli.html", tmp_path / "py.html"
    o = subprocess.run(
        [sys.executable, "-m", "fallow", "analyze", path, "--html", str(cli_page)],
        capture_output=True,
        text=True,
    )
    assert o.returncode == 0, o.stderr
    result = fallow.analyze(fallow.read_trace(path), html=py_page)
    assert py_page.read_bytes() == cli_page.read_bytes()
    page = py_page.read_text()
    assert page.startswith("<!DOCTYPE html>") and result["findings"][0]["text"][:40] in page
    # a page fallow wrote may be replaced; the trace itself, a device node
    # or a file fallow did not write may not (checked before the analysis)
    fallow.analyze(fallow.read_trace(path), html=py_page)
    with pytest.raises(fallow.ParameterError, match="html") as e:
        fallow.analyze(fallow.read_trace(path), html=path)
    assert "input of this command" in str(e.value)
    mine = tmp_path / "notes.html"
    mine.write_text("mine")
    with pytest.raises(fallow.ParameterError, match="html"):
        fallow.analyze(fallow.read_trace(path), html=mine)
    assert mine.read_text() == "mine"
    fallow.analyze(fallow.read_trace(path), html=mine, overwrite=True)
    assert mine.read_bytes() == cli_page.read_bytes()
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    with pytest.raises(fallow.ParameterError, match="html"):
        fallow.analyze(fallow.read_trace(path), html=fifo, overwrite=True)


def _cli_page(tmp_path, name, *args):
    """The page of ``fallow ARGS --html tmp_path/NAME``, as bytes."""
    page = tmp_path / name
    o = subprocess.run(
        [sys.executable, "-m", "fallow", *args, "--html", str(page)],
        capture_output=True,
        text=True,
    )
    assert o.returncode == 0, o.stderr
    return page.read_bytes()


def test_compare_pareto_and_energy_pages_are_the_clis(tmp_path):
    # one renderer (fallow_report) and one description of the input behind
    # `--html` and `html=`: the same bytes for a workload and for a trace
    workload = ["--workload", "mmpp:cv=9,burst=1000", "--utilization", "0.3"]
    workload += ["--requests", "20000", "--bg", "size", "--seed", "7"]
    kw = dict(workload="mmpp:cv=9,burst=1000", utilization=0.3, requests=20_000)
    kw.update(bg="size", seed=7)
    lineup = ["aggressive", "fixed-wait:t=50ms"]
    cli = _cli_page(
        tmp_path, "c.html", "compare", *workload, *[a for p in lineup for a in ("--policy", p)]
    )
    fallow.compare(policies=lineup, html=tmp_path / "p.html", **kw)
    assert (tmp_path / "p.html").read_bytes() == cli
    assert b"synthetic workload" in cli and b"fixed-wait:t=50ms" in cli

    cli = _cli_page(tmp_path, "c.html", "pareto", *workload, "--policy", "fixed-wait")
    fallow.pareto(policies=["fixed-wait"], html=tmp_path / "p.html", **kw)
    assert (tmp_path / "p.html").read_bytes() == cli

    trace = str(REPO / "tests" / "data" / "cli" / "two_devices.csv")
    cli = _cli_page(tmp_path, "c.html", "compare", trace, "--device", "3", "--policy", "aggressive")
    t = fallow.read_trace(trace)
    fallow.compare(t, ["aggressive"], device=3, html=tmp_path / "p.html")
    assert (tmp_path / "p.html").read_bytes() == cli
    assert b"two_devices.csv" in cli and b"device 3 of 2" in cli

    energy = str(REPO / "tests" / "data" / "cli" / "energy.csv")
    cli = _cli_page(tmp_path, "c.html", "energy", energy)
    fallow.energy(energy, policy=None, html=tmp_path / "p.html")
    assert (tmp_path / "p.html").read_bytes() == cli
    # the paths are checked before any work, as the CLI checks them
    for run in (
        lambda: fallow.compare(t, ["aggressive"], device=3, html=trace),
        lambda: fallow.pareto(t, ["fixed-wait"], device=3, html=trace),
        lambda: fallow.energy(energy, html=energy),
    ):
        with pytest.raises(fallow.ParameterError, match="html") as e:
            run()
        assert "input of this command" in str(e.value)
    mine = tmp_path / "notes.html"
    mine.write_text("mine")
    with pytest.raises(fallow.ParameterError, match="html"):
        fallow.compare(policies=lineup, html=mine, **kw)
    assert mine.read_text() == "mine"


def test_analyze_all_devices_is_the_clis_json_and_page(cli_json, tmp_path):
    # one streaming pass behind `--device all` and `analyze_all_devices`
    path = str(REPO / "tests" / "data" / "cli" / "two_hosts.csv")
    ref = cli_json("analyze", path, "--device", "all")
    assert ref.pop("schema_version") == fallow.SCHEMA_VERSION
    py = fallow.analyze_all_devices(path, html=tmp_path / "p.html")
    assert py == ref
    assert len(py["devices"]) >= 2
    assert (tmp_path / "p.html").read_bytes() == _cli_page(
        tmp_path, "c.html", "analyze", path, "--device", "all"
    )
    with pytest.raises(fallow.ParameterError, match="html"):
        fallow.analyze_all_devices(path, html=path)


def test_trace_write_is_fallow_convert(tmp_path):
    # one writer per format (the registry's, through
    # fallow_core::outpath::write_trace) behind `convert -o` and Trace.write
    path = str(REPO / "tests" / "data" / "cli" / "two_devices.csv")
    t = fallow.read_trace(path)
    for ext, name in (("fbt", "fallow"), ("csv", "msr"), ("parquet", "parquet")):
        cli = tmp_path / f"cli.{ext}"
        o = subprocess.run(
            [sys.executable, "-m", "fallow", "convert", path, "-o", str(cli)],
            capture_output=True,
            text=True,
        )
        assert o.returncode == 0, o.stderr
        mine = tmp_path / f"py.{ext}"
        assert t.write(mine) == name
        assert mine.read_bytes() == cli.read_bytes(), ext
        back = fallow.read_trace(str(mine))
        assert (back.arrival_ns == t.arrival_ns).all(), ext
    # the paths are checked as the CLI checks -o
    with pytest.raises(fallow.ParameterError, match="path") as e:
        t.write(path)
    assert "input of this command" in str(e.value)
    notes = tmp_path / "notes.csv"
    notes.write_text("mine")
    with pytest.raises(fallow.ParameterError, match="path"):
        t.write(notes)
    assert notes.read_text() == "mine"
    t.write(notes, overwrite=True)
    assert notes.read_bytes() == (tmp_path / "cli.csv").read_bytes()


def test_scrub_plan_is_the_clis_json(cli_json):
    # one request (fallow_core::scrubplan::PlanRequest) behind both: with
    # the defaults, and with every setting given (the Monte Carlo seeded)
    ref = cli_json("scrub-plan")
    assert ref.pop("schema_version") == fallow.SCHEMA_VERSION
    assert fallow.live.scrub_plan() == ref
    ref = cli_json(
        "scrub-plan",
        "--capacity", "10GB",
        "--segment", "64KiB,256KiB",
        "--regions", "16,128",
        "--burst-span", "1MiB",
        "--rpm", "7200",
        "--rate", "150MB",
        "--full-stroke", "15ms",
        "--duty", "0.5",
        "--check", "2000",
        "--seed", "3",
    )  # fmt: skip
    ref.pop("schema_version")
    py = fallow.live.scrub_plan(
        capacity="10GB",
        segments=[65536, "256KiB"],
        regions=[16, 128],
        burst_span="1MiB",
        rpm=7200,
        rate="150MB",
        full_stroke="15ms",
        duty=0.5,
        check=2000,
        seed=3,
    )
    assert py == ref
    assert all("monte_carlo" in row for row in py["rows"])


def test_scrub_plan_names_a_wrong_value():
    for kwargs, name in [
        (dict(rpm=0), "rpm"),
        (dict(regions=[]), "regions"),
        (dict(segments=["1x"]), "segments"),
        (dict(duty=2.0), "duty"),
    ]:
        with pytest.raises(fallow.ParameterError) as e:
            fallow.live.scrub_plan(**kwargs)
        assert e.value.name == name, (kwargs, e.value)
