"""Ctrl-C interrupts a long `fallow.tune` call and every other long call
within 0.5 s (docs/tuning.md): the call releases the GIL and checks
Python's signals every 20 ms while the core works, and the core reads the
cancel flag the check sets every 64 Ki requests while preparing a trace,
every 1,024 busy periods while simulating and every 4,096 requests in an
energy run, so SIGINT raises KeyboardInterrupt promptly instead of after
the call."""

import os
import signal
import threading
import time

import pytest

fallow = pytest.importorskip("fallow")

# every test here runs with Python's own SIGINT handler (conftest.py)
pytestmark = pytest.mark.usefixtures("python_sigint_handler")


def test_sigint_interrupts_a_long_tune_within_half_a_second():
    sent = {}

    def interrupt():
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # the exact search of a 300k-request workload over 30 sizes takes
        # far longer than the bound below
        fallow.tune(
            policy="fixed-wait",
            budget="1ms,2ms,4ms",
            workload="poisson",
            utilization=0.3,
            requests=300_000,
            bg="size:base=8ms,knee=64KiB,rate=100MB",
            threads=1,
        )
    done = time.monotonic()
    timer.cancel()
    assert "at" in sent, "the call ended before the signal was sent"
    latency = done - sent["at"]
    print(f"interrupted {latency * 1e3:.0f} ms after SIGINT ({done - start:.2f} s in all)")
    assert latency < 0.5, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"


@pytest.fixture(scope="module")
def long_trace():
    # 20 M requests: cdf-estimates runs at 8-14 M requests/s in a release
    # build (README, Speed), so simulating it alone takes 1.4-2.5 s, well
    # past the signal at 0.5 s; a compare of every policy far longer
    return fallow.synthetic(
        arrival="poisson", rate=50, requests=20_000_000, service="exp:5ms", seed=7
    )


# The bound is 0.5 s (docs/tuning.md). Preparing the trace's periods and simulating
# both read the cancel flag (every 64 Ki requests, every 1,024 busy
# periods; until this bound was set, every 1 Mi requests and 4,096 periods,
# measured 53-608 ms after SIGINT at load 4-5), and the binding looks at
# Python's signals every 20 ms (was 50), and the one-device check no
# longer takes a map update per request (0.2 s on 20 M, unchecked). With
# two busy loops beside it at load 6-7 (a dev-profile build): at most
# 76-155 ms after SIGINT for these five calls, 280 ms for tune
# (docs/tuning.md has the table).
def test_sigint_interrupts_simulate_within_half_a_second(long_trace, interrupted_within):
    """`fallow.simulate` once ran to its end after SIGINT."""
    interrupted_within(
        lambda: fallow.simulate(long_trace, policy="cdf-estimates", bg="exp:5ms"),
        0.5,
    )


def test_sigint_interrupts_compare_within_half_a_second(long_trace, interrupted_within):
    """A 30 M-request `fallow.compare` once exited 21 s after SIGINT."""
    interrupted_within(lambda: fallow.compare(long_trace, bg="exp:5ms"), 0.5)


def test_sigint_interrupts_pareto_within_half_a_second(long_trace, interrupted_within):
    """Every long Python call stops promptly; `fallow.pareto`
    reads the flag before each setting (one simulation of the trace)."""
    interrupted_within(lambda: fallow.pareto(long_trace, bg="exp:5ms"), 0.5)


def test_sigint_interrupts_recommend_within_half_a_second(long_trace, interrupted_within):
    """`fallow.recommend` stops within one batch of settings of
    the policy being tuned."""
    interrupted_within(
        lambda: fallow.recommend(long_trace, budget="1ms", bg="exp:5ms", sizes="64KiB"),
        0.5,
    )


@pytest.fixture(scope="module")
def energy_trace():
    # 2 M requests: an energy study of one policy takes about 0.13 s per
    # row on it (a release build here: 1.5 s for 8 shares), preparation
    # about 0.25 s, so the signal at 0.5 s finds the rows below running
    return fallow.synthetic(
        arrival="poisson", rate=50, requests=2_000_000, service="exp:5ms", seed=7
    )


# Each run of the study reads the cancel flag every 4,096 requests and
# every step between runs reads it, so the latency is the 20 ms signal
# poll plus scheduling. Against the earlier extension it failed:
# KeyboardInterrupt 6.81 s after SIGINT.
def test_sigint_interrupts_energy_within_half_a_second(energy_trace, interrupted_within):
    """`fallow.energy` once ran to its end after SIGINT."""
    # 40 shares: some 5 s of runs uninterrupted
    shares = [i / 50 for i in range(1, 41)]
    interrupted_within(lambda: fallow.energy(energy_trace, local_fraction=shares), 0.5)


def test_sigint_stops_a_local_fleet_sweep_and_its_workers(traces_dir):
    """Ctrl-C in `fallow.fleet.sweep(backend="local")` reached the
    caller at once, but leaving the process pool waited for every queued
    task; now the queue is dropped and the workers are ended."""
    import multiprocessing

    import fallow.fleet

    trace = traces_dir / "hp-hplajw-1992" / "ajw.1week.srt"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    try:
        # polars (2.1) installs its own SIGINT handler with SA_RESTART: an
        # untimed wait is then not interrupted. CI failed on exactly this
        # (12.6 s, polars imported by an earlier test), so import it here
        # and the test does not depend on the order it runs in.
        import polars  # noqa: F401
    except ImportError:
        print("polars not installed: the SA_RESTART case did not run")
    # 24 tasks of a few seconds each on 2 workers: far past the signal,
    # which comes after the spawned workers have started
    entries = [(trace, 0, {"seed": s}) for s in range(12)]
    sent = {}

    def interrupt():
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(3.0, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            fallow.fleet.sweep(
                entries,
                ["fixed-wait", "busy-bee"],
                ["1ms", "2ms", "4ms"],
                sizes="64KiB..4MiB/30",
                workers=2,
            )
    finally:
        timer.cancel()
    done = time.monotonic()
    assert "at" in sent, "the sweep ended before the signal was sent"
    latency = done - sent["at"]
    print(f"interrupted {latency * 1e3:.0f} ms after SIGINT")
    assert latency < 0.5, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
    # the pool's manager thread reaps what it started: allow it a moment
    deadline = time.monotonic() + 5.0
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = multiprocessing.active_children()
    assert not left, f"workers outlived the sweep: {left}"
