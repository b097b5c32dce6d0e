"""`fallow.simulate`, `fallow.compare` and `fallow.policies` against theory
and hand calculations.

Theory (derived in crates/fallow-core/tests/it/sim.rs): Poisson FG arrivals
at rate λ, exponential FG service, endless BG work with exponential service
of mean m. Every FG arrival that ends an idle interval in which BG work ran
finds a BG request in service and waits for its residual, again Exp(m).
That is an M/G/1 queue whose busy periods start with an extra setup time D,
and the mean delay BG work adds per FG request is (Welch 1964)

    (2E[D] + λE[D²]) / (2(1 + λE[D])).

Under `aggressive` D ~ Exp(m) always: E[D] = m, E[D²] = 2m². Under
`fixed-wait(t)` BG runs only in idle intervals longer than t, which are
Exp(λ): D ~ Exp(m) with probability e^{−λt}, else 0.

Tolerance: each check runs K independent seeds; the runs are i.i.d., so
the standard error of their mean is their sample standard deviation / √K,
and we allow 4 of them (a correct engine fails with probability ~6e-5).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

import fallow
from fallow.sim import COLUMNS

LAM = 50.0  # FG arrivals per second
M_BG = 0.005  # mean BG service, s
K = 10  # seeds per check


def setup_delay(lam: float, p: float, m: float) -> float:
    ed = p * m
    ed2 = p * 2 * m * m
    return (2 * ed + lam * ed2) / (2 * (1 + lam * ed))


def added_delays(policy: str) -> list[float]:
    out = []
    for seed in range(K):
        r = fallow.simulate(
            workload="poisson",
            arrival_rate=LAM,
            service="exp:10ms",
            requests=50_000,
            bg=f"exp:{M_BG * 1e3}ms",
            policy=policy,
            seed=100 + seed,
        )
        out.append(r.mean_added_delay_s)
    return out


@pytest.mark.parametrize(
    "policy,p_setup",
    [("aggressive", 1.0), ("fixed-wait:t=20ms", math.exp(-LAM * 0.020))],
)
def test_mm1_added_delay_matches_mg1_with_setup_times(policy, p_setup):
    x = added_delays(policy)
    got = statistics.fmean(x)
    se = statistics.stdev(x) / math.sqrt(K)
    want = setup_delay(LAM, p_setup, M_BG)
    assert abs(got - want) <= 4 * se, (policy, got, want, se)


def test_baseline_is_mm1():
    # M/M/1 response times are Exp(μ − λ): mean 1/(100 − 50) = 20 ms, p99
    # ln(100)/50 = 92.1 ms. Each run's figure is an estimate: the same
    # seed-to-seed tolerance. (Regression: percentiles and CCDFs
    # were all 2 ns, recorded with saturating_record into a histogram that
    # never grew past its initial bounds.)
    runs = [
        fallow.simulate(
            workload="poisson",
            arrival_rate=LAM,
            requests=50_000,
            policy="aggressive",
            seed=s,
        )["fg"]
        for s in range(K)
    ]
    for key, want in [
        ("baseline_mean_response_s", 0.020),
        ("baseline_p99_response_s", math.log(100) / 50),
    ]:
        x = [r[key] for r in runs]
        se = statistics.stdev(x) / math.sqrt(K)
        assert abs(statistics.fmean(x) - want) <= 4 * se, (key, x, want)


def tiny_trace() -> fallow.Trace:
    # tests/data/cli/tiny.csv in ms: (arrival, response) = (0,10) (5,10)
    # (40,10) (100,20) (110,5) (120,30): busy periods [0,15], [40,50],
    # [100,150], idle 25 ms and 50 ms.
    ms = 1_000_000
    arrival = np.array([0, 5, 40, 100, 110, 120]) * ms
    completion = arrival + np.array([10, 10, 10, 20, 5, 30]) * ms
    return fallow.from_columns(arrival, completion)


def test_hand_calculation_on_a_tiny_trace():
    # fixed-wait(10 ms), BG 20 ms each: BG 25→45 collides with the arrival
    # at 40 (5 ms left): busy period 2 shifts 5 ms and idle 2 becomes
    # 55→100; BG 65→85, 85→105 collides (5 ms left): busy period 3 (3
    # requests) shifts 5 ms. Added 4·5 ms over 6 requests; 3 BG requests.
    r = fallow.simulate(tiny_trace(), "fixed-wait:t=10ms", bg="const:20ms", bg_size="64KiB")
    assert r.mean_added_delay_s == pytest.approx(0.020 / 6, abs=1e-12)
    assert r.slowdown == pytest.approx(20 / 85, abs=1e-12)
    assert r["fg"]["collision_rate"] == pytest.approx(4 / 6)
    assert r["bg"]["completed"] == 3
    assert r["bg"]["bytes"] == 3 * 65536
    assert r["bg"]["mean_response_s"] is None
    # sizes and durations as numbers work the same; a switch penalty of
    # 2 ms makes the shifts 7 and 9 ms: (7 + 3·9)/6 ms
    r2 = fallow.simulate(
        tiny_trace(), "fixed-wait:t=10ms", bg="const:20ms", bg_size=65536, switch_penalty=0.002
    )
    assert r2.mean_added_delay_s == pytest.approx(0.034 / 6, abs=1e-12)
    assert list(r.ccdf.columns) == ["response_s", "p_greater"]


def test_then_plays_a_second_trace_by_hand_and_as_the_cli(cli_json):
    # the tiny trace then itself 1 s later (crates/fallow-cli/tests/
    # integration/retune.rs has it by hand): the first part is the trace
    # alone (20 ms added over 6 requests, 4 delayed, 2 collisions, 3 BG
    # requests in 150 ms); in the second, 30 ms over 6, 2 delayed, 1
    # collision, 52 BG requests in 1.15 s
    root = Path(__file__).resolve().parents[2]
    tiny = str(root / "tests" / "data" / "cli" / "tiny.csv")
    t = fallow.read_trace(tiny)
    args = {"bg": "const:20ms", "bg_size": "64KiB"}
    r = fallow.simulate(t, "fixed-wait:t=10ms", then=t, gap="1s", **args)
    parts = r.parts
    assert list(parts["requests"]) == [6, 6]
    assert parts["mean_added_delay_s"].tolist() == pytest.approx([0.020 / 6, 0.030 / 6], abs=1e-12)
    assert list(parts["delayed_requests"]) == [4, 2]
    assert list(parts["collisions"]) == [2, 1]
    assert list(parts["bg_bytes"]) == [3 * 65536, 52 * 65536]
    assert parts["span_s"].tolist() == pytest.approx([0.150, 1.150], abs=1e-9)
    assert list(parts["source"]) == [tiny, tiny]
    # the CLI's document, figure for figure (the same core run)
    cli = cli_json(
        "simulate",
        tiny,
        "--then",
        tiny,
        "--gap",
        "1s",
        "--policy",
        "fixed-wait:t=10ms",
        "--bg",
        "const:20ms",
        "--bg-size",
        "64KiB",
    )
    assert r["parts"] == cli["parts"]
    assert r["fg"] == cli["fg"] and r["bg"] == cli["bg"]
    # the gap's default is the CLI's (1 s), and re-tuning goes with it
    assert fallow.simulate(t, "fixed-wait:t=10ms", then=t, **args)["parts"] == r["parts"]
    tuned = fallow.simulate(t, "fixed-wait", then=t, retune="1ms", retune_window=4, **args)
    cli = cli_json(
        "simulate",
        tiny,
        "--then",
        tiny,
        "--policy",
        "fixed-wait",
        "--retune",
        "1ms",
        "--window",
        "4",
        "--bg",
        "const:20ms",
        "--bg-size",
        "64KiB",
    )
    assert tuned["parts"] == cli["parts"] and tuned["retune"] == cli["retune"]
    # no parts without then=; then= needs a trace; gap= needs then=
    assert fallow.simulate(t, "fixed-wait:t=10ms", **args).parts.empty
    with pytest.raises(fallow.ParameterError, match="then"):
        fallow.simulate(
            workload="poisson", arrival_rate=10, policy="aggressive", requests=10, then=t
        )
    with pytest.raises(fallow.ParameterError, match="gap"):
        fallow.simulate(t, "aggressive", gap="1s")
    with pytest.raises(fallow.ParameterError, match="gap"):
        fallow.simulate(t, "aggressive", then=t, gap=0)


def test_compare_frame():
    frame = fallow.compare(
        workload="lognormal:cv=3",
        utilization=0.3,
        requests=20_000,
        policies=["aggressive", "fixed-wait:t=50ms", "fixed-wait:t=500ms"],
        bg="const:5ms",
    )
    assert frame.shape == (3, len(COLUMNS))
    assert list(frame.columns) == [c for c, _ in COLUMNS]
    assert list(frame["policy"]) == ["aggressive", "fixed-wait:t=50ms", "fixed-wait:t=500ms"]
    # one input, prepared once: the same baseline for every row
    assert frame["baseline_mean_response_s"].nunique() == 1
    # waiting longer never delays FG more on the same trace (constant BG service)
    d = frame["mean_added_delay_s"].to_numpy()
    assert d[0] >= d[1] >= d[2]
    # each row is what simulate gives
    one = fallow.simulate(
        workload="lognormal:cv=3",
        utilization=0.3,
        requests=20_000,
        policy="fixed-wait:t=50ms",
        bg="const:5ms",
    )
    assert frame.loc[1, "slowdown"] == one.slowdown


def test_compare_defaults_to_every_policy():
    # under a BG model that charges for size, every policy runs
    frame = fallow.compare(
        workload="poisson",
        arrival_rate=20,
        requests=5_000,
        bg="size:base=8ms,knee=64KiB,rate=100MB",
    )
    reg = fallow.policies()
    assert len(frame) == len(reg)
    deployable = list(reg.loc[~reg["clairvoyant"], "name"])
    assert list(frame["policy"][: len(deployable)]) == deployable


def test_compare_defaults_leave_out_size_choosers_under_a_size_blind_model():
    # the default BG model takes as long for every size: adaptive-size,
    # which chooses its sizes, is left out with a warning saying why
    with pytest.warns(UserWarning, match="skipping adaptive-size"):
        frame = fallow.compare(workload="poisson", arrival_rate=20, requests=5_000)
    reg = fallow.policies()
    assert "adaptive-size" not in set(frame["policy"])
    assert len(frame) == len(reg) - 1
    assert frame["clairvoyant"].sum() == reg["clairvoyant"].sum()
    assert (frame["idle_used_fraction"] <= 1 + 1e-12).all()


def test_policies_lists_the_registry():
    p = fallow.policies()
    assert list(p.columns) == ["name", "summary", "params", "clairvoyant"]
    assert p["name"].is_unique and len(p) >= 2
    assert (p["summary"].str.len() > 0).all()


def test_same_seed_same_result():
    kw = dict(workload="mmpp:cv=3,burst=100", arrival_rate=20, requests=20_000, seed=9)
    a = fallow.simulate(policy="aggressive", **kw)
    b = fallow.simulate(policy="aggressive", **kw)
    assert a.to_json() == b.to_json()


def test_synthetic_shares_the_arrival_grammar():
    t = fallow.synthetic(arrival="mmpp", cv=3, burst=100, rate=10, requests=50_000, seed=2)
    gaps = np.diff(t.arrival_ns) / 1e9
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    t2 = fallow.synthetic(arrival="erlang:k=4,rate=10", requests=50_000, service="const:1ms")
    gaps = np.diff(t2.arrival_ns) / 1e9
    assert gaps.std() / gaps.mean() == pytest.approx(0.5, rel=0.03)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(workload="poisson:rate=1", policy="no-such-policy"), "policy"),
        (dict(workload="poisson:rate=1", policy="fixed-wait:t=soon"), "fixed-wait:t"),
        (dict(workload="poisson:rate=1", policy="fixed-wait:bogus=1"), "policy fixed-wait"),
        (dict(workload="poisson", policy="aggressive"), "arrival rate"),
        (dict(workload="bursty:rate=1", policy="aggressive"), "arrival process"),
        (dict(workload="mmpp:cv=9,burst=10,rate=1", policy="aggressive"), "mmpp burst"),
        (dict(workload="poisson:rate=1", policy="aggressive", bg="warp"), "bg service"),
        (dict(workload="poisson:rate=1", policy="aggressive", switch_penalty="3 parsecs"), None),
        (dict(policy="aggressive"), "workload"),
        (dict(workload="poisson:rate=1", policy=""), "policy"),
    ],
)
def test_bad_arguments_raise_parameter_error(kwargs, name):
    with pytest.raises(fallow.ParameterError) as info:
        fallow.simulate(**kwargs)
    if name is not None:
        assert info.value.name == name, str(info.value)


def test_compare_with_a_bad_spec_raises_before_running():
    with pytest.raises(fallow.ParameterError):
        fallow.compare(workload="poisson:rate=1", policies=["aggressive", "nope"])


def test_retune_settles_near_the_theoretical_wait():
    # fixed-wait(t) adds setup_delay(λ, e^{−λt}, m) per FG request: solve
    # for a 1 ms budget; the online wait must settle within a factor of 2
    m, budget = 0.010, 0.001
    lo, hi = 1e-4, 10.0
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if setup_delay(LAM, math.exp(-LAM * mid), m) > budget:
            lo = mid
        else:
            hi = mid
    r = fallow.simulate(
        workload="poisson",
        arrival_rate=LAM,
        service="exp:5ms",
        requests=8000,
        bg="exp:10ms",
        policy="fixed-wait",
        retune="1ms",
        retune_window=1000,
        retune_every=250,
    )
    h = r.knob_history
    assert h.loc[0, "knob"] == "100s"
    assert len(h) >= 15
    late = h["value"].iloc[len(h) // 2 :] / 1e9
    assert (np.abs(np.log2(late / hi)) < 1).all(), (late.tolist(), hi)
    assert r["retune"]["final_spec"] == f"fixed-wait:t={h['knob'].iloc[-1]}"
    assert 0.0005 < r.mean_added_delay_s < 0.00125
    # without retune: no history
    plain = fallow.simulate(
        workload="poisson", arrival_rate=LAM, requests=1000, policy="aggressive"
    )
    assert plain.knob_history.empty


def test_retune_refuses_a_given_knob():
    with pytest.raises(fallow.ParameterError, match="re-tuning sets"):
        fallow.simulate(
            workload="poisson",
            arrival_rate=LAM,
            requests=100,
            policy="fixed-wait:t=1s",
            retune="1ms",
        )
