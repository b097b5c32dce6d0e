"""Every result's ``to_json()`` opens with the ``schema_version`` the CLI's ``--json`` opens with
(every ``--json`` carries one), and the rest is the result's data.

The reference is the CLI's own output (``python -m fallow … --json``, the command line inside
the extension), not the constant the Python side reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fallow

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
TRACE = DATA / "traces" / "small.blkparse"  # with completions: analyze needs no service model
ENERGY = DATA / "cli" / "energy.csv"
WORKLOAD = dict(workload="poisson", utilization=0.3, requests=2_000, seed=5)
BG = "size:base=4ms,knee=64KiB,rate=100MB"


def versioned(result: Any) -> dict[str, Any]:
    doc = json.loads(result.to_json())
    assert next(iter(doc)) == "schema_version", "schema_version is not the first key"
    rest = {k: v for k, v in doc.items() if k != "schema_version"}
    assert rest == json.loads(json.dumps(result.data)), "to_json() changed the result's data"
    return doc


def test_the_cli_and_python_write_the_same_schema_version(cli_json) -> None:
    ref = cli_json("analyze", str(TRACE), "--device", "8,0")
    assert isinstance(ref["schema_version"], int) and ref["schema_version"] >= 1
    assert fallow.SCHEMA_VERSION == ref["schema_version"]
    assert (
        versioned(fallow.characterize(fallow.read_trace(TRACE), device="8,0"))["schema_version"]
        == (ref["schema_version"])
    )


def test_every_result_class_carries_it() -> None:
    sim = fallow.simulate(policy="fixed-wait:t=50ms", **WORKLOAD)
    tuned = fallow.tune(policy="fixed-wait", budget="1ms", sizes="64KiB", bg=BG, **WORKLOAD)
    energy = fallow.energy(str(ENERGY), policy="timeout:t=10s")
    for result in (sim, tuned, energy):
        assert versioned(result)["schema_version"] == fallow.SCHEMA_VERSION, type(result)
