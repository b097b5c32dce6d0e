"""M/M/1 theory against `fallow.synthetic` (Poisson arrivals, exponential service).

For arrival rate λ, service rate μ and ρ = λ/μ < 1 (Kleinrock, Queueing
Systems I, §5.6–5.8):

- idle intervals are Exp(λ) (memoryless arrivals): mean 1/λ, CV 1,
  P(I > 1/λ) = e⁻¹; var 1/λ²;
- busy periods: mean E[B] = (1/μ)/(1−ρ), var (1+ρ) / (μ²(1−ρ)³);
- requests per busy period: mean 1/(1−ρ), var ρ(1+ρ)/(1−ρ)³;
- utilisation ρ.

Busy/idle cycles are i.i.d. (regeneration at each arrival to an empty
system), and there are about n_c = N(1−ρ) of them in N requests, so each
sample mean has standard error sqrt(var/n_c). Tolerances are 4 standard
errors (a false alarm has probability ~6e-5 per check; the seeds are fixed
anyway, so the test is deterministic).

Derived standard errors:
- number of cycles: N/E[R] with variance N·Var R/E[R]³ = Nρ(1+ρ) (renewal CLT).
- CV of idle intervals: the sample sd of an exponential has relative SE
  sqrt(2/n) (Var s² = (μ₄ − σ⁴)/n = 8/(λ⁴n)), the mean 1/sqrt(n); the CV's
  relative SE is at most their sum.
- utilisation ρ̂ = ΣB / Σ(B+I): by the delta method
  Var ρ̂ ≈ ((1−ρ)² Var B + ρ² Var I) / (n_c E[C]²), with E[C] = 1/(λ(1−ρ)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fallow

N = 200_000
MEAN_SERVICE_S = 0.005  # exp:5ms
MU = 1 / MEAN_SERVICE_S
Z = 4.0


@pytest.fixture(scope="module", params=[0.3, 0.6], ids=["rho0.3", "rho0.6"])
def mm1(request):
    rho = request.param
    lam = rho * MU
    trace = fallow.synthetic(arrival="poisson", rate=lam, requests=N, service="exp:5ms", seed=42)
    return rho, lam, trace


def test_idle_intervals_are_exponential(mm1):
    rho, lam, trace = mm1
    idle = trace.idle_intervals()
    n = len(idle)
    # cycles in N requests (renewal CLT with R requests per cycle):
    # mean N/E[R] = N(1−ρ), var N·Var R/E[R]³ = Nρ(1+ρ)
    assert abs((n + 1) - N * (1 - rho)) < Z * math.sqrt(N * rho * (1 + rho)), n
    mean, cv = idle.mean(), idle.std() / idle.mean()
    assert abs(mean - 1 / lam) < Z * (1 / lam) / math.sqrt(n), (mean, 1 / lam)
    assert abs(cv - 1.0) < Z * (math.sqrt(2 / n) + 1 / math.sqrt(n)), cv
    p = math.exp(-1)
    frac = (idle > 1 / lam).mean()
    assert abs(frac - p) < Z * math.sqrt(p * (1 - p) / n), frac


def test_busy_periods(mm1):
    rho, lam, trace = mm1
    b = trace.busy_periods()
    n_c = len(b["length_s"])
    mean_b = MEAN_SERVICE_S / (1 - rho)
    var_b = (1 + rho) / (MU**2 * (1 - rho) ** 3)
    got = b["length_s"].mean()
    assert abs(got - mean_b) < Z * math.sqrt(var_b / n_c), (got, mean_b)

    mean_r = 1 / (1 - rho)
    var_r = rho * (1 + rho) / (1 - rho) ** 3
    got_r = b["requests"].mean()
    assert abs(got_r - mean_r) < Z * math.sqrt(var_r / n_c), (got_r, mean_r)


def test_utilization(mm1):
    rho, lam, trace = mm1
    c = fallow.characterize(trace)
    n_c = c.data["busy"]["count"]
    var_b = (1 + rho) / (MU**2 * (1 - rho) ** 3)
    var_i = 1 / lam**2
    mean_c = 1 / (lam * (1 - rho))
    se = math.sqrt(((1 - rho) ** 2 * var_b + rho**2 * var_i) / (n_c * mean_c**2))
    assert abs(c.data["utilization"] - rho) < Z * se, (c.data["utilization"], rho, se)
    # characterize agrees with the arrays it is computed from
    idle = trace.idle_intervals()
    assert c.data["idle"]["mean_s"] == pytest.approx(idle.mean(), rel=1e-12)
    assert c.data["busy"]["mean_requests"] == pytest.approx(N / n_c, rel=1e-12)


def test_same_seed_same_trace():
    a = fallow.synthetic(rate=100, requests=1000, seed=3)
    b = fallow.synthetic(rate=100, requests=1000, seed=3)
    c = fallow.synthetic(rate=100, requests=1000, seed=4)
    np.testing.assert_array_equal(a.arrival_ns, b.arrival_ns)
    np.testing.assert_array_equal(a.completion_ns, b.completion_ns)
    assert not np.array_equal(a.arrival_ns, c.arrival_ns)


def test_other_arrival_processes():
    # Erlang-k inter-arrival times have CV 1/sqrt(k)
    t = fallow.synthetic(arrival="erlang", rate=10, k=4, requests=50_000, service="const:1ms")
    gaps = np.diff(t.arrival_ns) / 1e9
    assert gaps.std() / gaps.mean() == pytest.approx(0.5, rel=0.03)
    t = fallow.synthetic(
        arrival="mmpp2", mmpp_rates=(100.0, 1.0), mmpp_switch=(1.0, 0.25), requests=20_000
    )
    assert len(t) == 20_000
