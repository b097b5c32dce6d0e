"""Shared fixtures: where the real traces are, the CLI's JSON, and a non-interactive matplotlib."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
