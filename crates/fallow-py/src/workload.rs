//! `synthetic`: seeded synthetic FG workloads (arrival process + service
//! model through a FCFS queue), as a `Trace` with completion times.

use crate::errors::{without_gil, Result};
use crate::trace::PyTrace;
use fallow_core::workload::{ArrivalArgs, SyntheticWorkload};
use fallow_core::ServiceModel;
use pyo3::prelude::*;

/// Generate a synthetic trace.
///
/// `arrival` is an arrival process in the grammar of `fallow simulate
/// --workload` (`poisson`, `erlang:k=4`, `lognormal:cv=3`, `hyperexp:cv=4`,
/// `mmpp:cv=9,burst=1000`, `mmpp:rates=40/1,sojourn=20s/60s`); `k`, `cv` and
/// `burst` may be given as arguments instead, and `rate` (mean requests/s)
/// sets or overrides the spec's rate. `mmpp_rates=(r0, r1)` with
/// `mmpp_switch=(s01, s10)` (rates of leaving state 0 and 1, 1/s) give a
/// two-state MMPP explicitly. `service` is a service model (`exp:5ms`,
/// `const:1ms`, `lognormal:5ms,cv=2`, `disk`).
#[pyfunction]
#[pyo3(signature = (arrival="poisson", rate=None, requests=100_000, service="exp:5ms", seed=fallow_core::sim::DEFAULT_SEED, k=None, cv=None, mmpp_rates=None, mmpp_switch=None, request_size_bytes=4096, capacity_bytes=1_000_000_000_000, write_fraction=0.5, burst=None))]
#[allow(clippy::too_many_arguments)]
pub fn synthetic(
    py: Python<'_>,
    arrival: &str,
    rate: Option<f64>,
    requests: usize,
    service: &str,
    seed: u64,
    k: Option<u32>,
    cv: Option<f64>,
    mmpp_rates: Option<[f64; 2]>,
    mmpp_switch: Option<[f64; 2]>,
    request_size_bytes: u32,
    capacity_bytes: u64,
    write_fraction: f64,
    burst: Option<f64>,
) -> Result<PyTrace> {
    let arrivals = ArrivalArgs {
        spec: arrival,
        rate_per_s: rate,
        k,
        cv,
        burst,
        mmpp_rates,
        mmpp_switch,
    }
    .process()?;
    let workload = SyntheticWorkload {
        arrivals,
        requests,
        service: service.parse::<ServiceModel>()?,
        request_size_bytes,
        capacity_bytes,
        write_fraction,
        seed,
    };
    without_gil(py, || workload.generate()).map(PyTrace::from)
}
