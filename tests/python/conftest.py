"""Shared fixtures: where the real traces are, and a non-interactive matplotlib."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(autouse=True, scope="session")
def _agg_backend():
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
