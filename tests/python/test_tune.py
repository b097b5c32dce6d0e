"""`fallow.tune`: the tuned setting meets its budget, re-simulating it
reproduces its figures exactly, and more budget never buys less throughput."""

from __future__ import annotations

import pandas as pd
import pytest

import fallow

# A small M/M/1 foreground (utilisation 0.3) and size-dependent BG service:
# larger requests move more bytes per collision but delay FG requests longer.
OPTIONS = dict(
    workload="poisson",
    arrival_rate=30,
    service="exp:10ms",
    requests=5_000,
    bg="size:base=4ms,knee=64KiB,rate=100MB",
    seed=3,
)
SIZES = "64KiB,256KiB,1MiB"


@pytest.mark.parametrize("policy", ["fixed-wait", "busy-bee"])
def test_best_meets_budget_and_reproduces_exactly(policy: str) -> None:
    t = fallow.tune(policy=policy, budget="1ms", sizes=SIZES, **OPTIONS)
    assert isinstance(t, fallow.TuneResult)
    best = t.best
    assert best is not None
    assert best["fg_mean_added_delay_s"] <= 1e-3
    assert best["bg_throughput_bytes_per_s"] > 0
    assert best["bg_throughput_bytes_per_s"] == max(
        r["best"]["bg_throughput_bytes_per_s"] for r in t.data["sizes"] if r["best"]
    )
    r = fallow.simulate(policy=best["spec"], bg_size=best["bg_size_bytes"], **OPTIONS)
    assert r.mean_added_delay_s == best["fg_mean_added_delay_s"]
    assert r.bg_throughput_bytes_per_s == best["bg_throughput_bytes_per_s"]
    assert r.slowdown == best["fg_slowdown"]


def test_sizes_frame_has_one_row_per_size() -> None:
    t = fallow.tune(policy="fixed-wait", budget="1ms", sizes=[65536, "256KiB"], **OPTIONS)
    frame = t.sizes
    assert isinstance(frame, pd.DataFrame)
    assert list(frame["request_size_bytes"]) == [65536, 262144]
    assert set(frame["status"]) <= {"ok", "infeasible", "excluded"}
    ok = frame[frame["status"] == "ok"]
    assert (ok["fg_mean_added_delay_s"] <= 1e-3).all()
    assert ok["bg_throughput_bytes_per_s"].max() == t.best["bg_throughput_bytes_per_s"]
    assert t.budget == "1ms" and t.data["budget"] == {"kind": "added_delay", "ns": 1_000_000}
    assert t.baseline["policy"] == "kernel-idle-class"


def test_max_delay_excludes_large_sizes() -> None:
    # one 1 MiB request takes 4 ms + (1 MiB - 64 KiB) / 100 MB/s ≈ 13.8 ms
    t = fallow.tune(policy="fixed-wait", budget="1ms", sizes=SIZES, max_delay="10ms", **OPTIONS)
    assert list(t.sizes["status"])[-1] == "excluded"
    assert t.best["request_size_bytes"] < 1 << 20


def test_throughput_non_decreasing_over_budgets() -> None:
    ts = fallow.tune(policy="fixed-wait", budget="0.5ms,1ms,2ms", sizes=SIZES, **OPTIONS)
    assert [t.budget for t in ts] == ["500us", "1ms", "2ms"]
    got = [t.best["bg_throughput_bytes_per_s"] for t in ts]
    assert got == sorted(got)
    assert got[0] < got[-1]
    for t, limit in zip(ts, [0.5e-3, 1e-3, 2e-3]):
        assert t.best["fg_mean_added_delay_s"] <= limit


def test_threads_do_not_change_the_result() -> None:
    one = fallow.tune(policy="fixed-wait", budget="1ms", sizes=SIZES, threads=1, **OPTIONS)
    many = fallow.tune(policy="fixed-wait", budget="1ms", sizes=SIZES, threads=3, **OPTIONS)
    assert one.data == many.data


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(budget="fast"), "budget"),
        (dict(budget="5"), "budget"),
        (dict(budget=""), "budget"),
        (dict(budget="0ms"), "budget"),
        (dict(sizes="4MiB..64KiB"), "sizes"),
        (dict(sizes=[]), "sizes"),
        (dict(sizes=0), "sizes"),
        (dict(threads=0), "threads"),
        (dict(policy=""), "policy"),
        (dict(policy="fixed-wait:t=10ms"), None),
    ],
)
def test_bad_arguments_raise_parameter_error(kwargs: dict, name: str | None) -> None:
    args = dict(policy="fixed-wait", budget="1ms", sizes=SIZES, **OPTIONS)
    args.update(kwargs)
    with pytest.raises(fallow.ParameterError) as e:
        fallow.tune(**args)
    if name is not None:
        assert e.value.name == name
