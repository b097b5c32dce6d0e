"""Shared fixtures: where the real traces are, the CLI's JSON, and a non-interactive matplotlib."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_traces() -> Path:
    """The real traces: $FALLOW_SHARED_TRACES, else <repo>/../shared/traces."""
    env = os.environ.get("FALLOW_SHARED_TRACES")
    return Path(env) if env else REPO.parent / "shared" / "traces"


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    d = shared_traces()
    if not d.is_dir():
        pytest.skip(f"real traces not found at {d} (set FALLOW_SHARED_TRACES)")
    return d


@pytest.fixture(scope="session")
def pgbench_path(traces_dir: Path) -> Path:
    p = traces_dir / "pgbench-ext4-loop" / "pgbench-ext4-loop.csv.gz"
    if not p.is_file():
        pytest.skip(f"{p} not found")
    return p


def run_cli_json(*args: str) -> Any:
    """``fallow ARGS --json`` parsed: the command line inside the extension
    (``python -m fallow``), run as a subprocess of this interpreter."""
    o = subprocess.run(
        [sys.executable, "-m", "fallow", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert o.returncode == 0, f"fallow {args} failed: {o.stderr}"
    return json.loads(o.stdout)


@pytest.fixture(scope="session")
def cli_json() -> Callable[..., Any]:
    """The CLI's ``--json`` output for the given arguments (see run_cli_json)."""
    return run_cli_json


@pytest.fixture(autouse=True, scope="session")
def _agg_backend():
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")


@pytest.fixture
def python_sigint_handler():
    """The test runs with Python's own SIGINT handler, restored after.

    A CI rehearsal saw tune, simulate and compare not interrupted at all
    when run after the rest of the session (they pass alone): an earlier
    test left another SIGINT handler installed. What these tests check is
    fallow's side (the core reads the flag Python's handler trips), so the
    handler is set here and the one found is printed."""
    found = signal.getsignal(signal.SIGINT)
    if found is not signal.default_int_handler:
        print(f"SIGINT handler left by an earlier test: {found!r}; using Python's default")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


def _interrupted_within(
    call, bound_s: float, after_s: float = 0.5, when: Callable[[], bool] | None = None
) -> float:
    """Run `call` with SIGINT sent `after_s` in (and then, with `when`, once
    `when()` holds, polled every 10 ms for up to 60 s: a state the call must
    have reached, which a loaded machine may delay past `after_s`); the
    latency of the KeyboardInterrupt after the signal, asserting it came
    within `bound_s` and that the call was still running when the signal
    was sent."""
    sent = {}

    def interrupt():
        deadline = time.monotonic() + 60
        while when is not None and not when() and time.monotonic() < deadline:
            time.sleep(0.01)
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(after_s, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    done = time.monotonic()
    assert "at" in sent, "the call ended before the signal was sent"
    latency = done - sent["at"]
    print(f"interrupted {latency * 1e3:.0f} ms after SIGINT")
    assert latency < bound_s, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
    return latency


@pytest.fixture
def interrupted_within(python_sigint_handler) -> Callable[..., float]:
    """``interrupted_within(call, bound_s, after_s=0.5, when=None)``: run
    `call` under Python's own SIGINT handler with SIGINT sent `after_s` in
    (and once `when()` holds, if given); the latency of the
    KeyboardInterrupt, asserted within `bound_s`, the call still running
    when the signal was sent."""
    return _interrupted_within
