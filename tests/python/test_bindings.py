"""The thin bindings: keyword signatures spelled once
(fallow/_options.py) and accepted by the compiled core, errors naming the
Python keyword, typed results, and Trace's Python-side unit conversions
against hand calculations."""

from __future__ import annotations

import inspect

import pytest

import fallow
from fallow import _fallow
from fallow._options import CompareOptions, SimulateOptions, TuneOptions

WORKLOAD = dict(workload="poisson:rate=20", requests=2_000, service="exp:5ms")


def kw_only(f) -> list[str]:
    return [p.name for p in inspect.signature(f).parameters.values() if p.kind == p.KEYWORD_ONLY]


@pytest.mark.parametrize(
    ("function", "options"),
    [
        (fallow.simulate, SimulateOptions),
        (fallow.compare, CompareOptions),
        (fallow.tune, TuneOptions),
    ],
)
def test_signatures_come_from_the_one_table(function, options) -> None:
    assert sorted(kw_only(function)) == sorted(options.__annotations__)
    assert all(
        p.default is None
        for p in inspect.signature(function).parameters.values()
        if p.kind == p.KEYWORD_ONLY
    )


def test_the_core_reads_every_documented_keyword() -> None:
    # The core takes a keyword off the dict when it reads it (None: not
    # given) and refuses what is left: so every name of the table is known
    # to it, and a name outside the table is not.
    def none_but(options, given):
        return {k: None for k in options.__annotations__} | given

    r = _fallow.simulate(None, "aggressive", **none_but(SimulateOptions, WORKLOAD))
    assert r["spec"] == "aggressive"
    runs = _fallow.compare(None, ["aggressive"], **none_but(CompareOptions, WORKLOAD))
    assert [run["spec"] for run in runs] == ["aggressive"]
    tuned = _fallow.tune(
        None, "fixed-wait", "50%", **none_but(TuneOptions, WORKLOAD | {"sizes": 65536})
    )
    assert tuned["budget_text"] == "50%"
    with pytest.raises(TypeError, match="retune_windw"):
        fallow.simulate(policy="aggressive", retune_windw=5, **WORKLOAD)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (
            lambda: fallow.simulate(policy="aggressive", request_size="lots", **WORKLOAD),
            "request_size",
        ),
        (lambda: fallow.simulate(policy="aggressive", bg_size=0, **WORKLOAD), "bg_size"),
        (
            lambda: fallow.simulate(policy="aggressive", switch_penalty="3 parsecs", **WORKLOAD),
            "switch_penalty",
        ),
        (
            lambda: fallow.simulate(policy="aggressive", switch_penalty=-1, **WORKLOAD),
            "switch_penalty",
        ),
        (lambda: fallow.tune(policy="fixed-wait", max_delay="soon", **WORKLOAD), "max_delay"),
        (lambda: fallow.synthetic(rate=1, mmpp_rates=(1, 2)), "mmpp_switch"),
    ],
)
def test_errors_name_the_keyword_not_a_flag(call, name: str) -> None:
    with pytest.raises(fallow.ParameterError) as err:
        call()
    assert err.value.name == name
    assert "--" not in str(err.value)


def test_policy_info_is_a_typed_read_only_result() -> None:
    infos = _fallow.policies()
    names = [p.name for p in infos]
    assert "fixed-wait" in names and names == list(fallow.policies()["name"])
    fw = infos[names.index("fixed-wait")]
    assert isinstance(fw.summary, str) and isinstance(fw.params, str)
    assert fw.clairvoyant is False
    assert fw.to_dict() == {
        "name": "fixed-wait",
        "summary": fw.summary,
        "params": fw.params,
        "clairvoyant": False,
    }
    with pytest.raises(AttributeError):
        fw.name = "other"


def test_trace_unit_conversions_by_hand() -> None:
    # busy [0, 5] and [10, 20], [100, 150] ns: idle gaps 5 ns and 80 ns
    t = fallow.Trace.from_columns([0, 10, 100], completion_ns=[5, 20, 150])
    assert t.idle_intervals().tolist() == [5e-9, 80e-9]
    busy = t.busy_periods()
    assert busy["start_s"].tolist() == [0.0, 10e-9, 100e-9]
    assert busy["length_s"].tolist() == [5e-9, 10e-9, 50e-9]
    assert busy["requests"].tolist() == [1, 1, 1]
    assert t.span_s == 150e-9
    assert sorted(t.columns()) == [
        "arrival_ns",
        "completion_ns",
        "device",
        "is_write",
        "offset_bytes",
        "size_bytes",
    ]
    assert repr(t) == "<fallow.Trace 3 requests, 1 device, 0.000 s, columns, with completions>"
