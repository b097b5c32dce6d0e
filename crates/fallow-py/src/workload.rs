//! `synthetic`: seeded synthetic FG workloads (arrival process + service
//! model through a FCFS queue), as a `Trace` with completion times.

use crate::errors::{parameter, without_gil};
use crate::trace::{service_model, PyTrace};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use pyo3::prelude::*;

/// Generate a synthetic trace.
///
/// `arrival` is `poisson`, `erlang` (needs `k`), `lognormal` or
/// `hyperexponential` (need `cv` of inter-arrival times) with mean `rate`
/// requests/s, or `mmpp2` with `mmpp_rates=(r0, r1)` and
/// `mmpp_switch=(s01, s10)` (rates of leaving state 0 and 1, 1/s).
/// `service` is a service model (`exp:5ms`, `const:1ms`, `disk`).
#[pyfunction]
#[pyo3(signature = (arrival="poisson", rate=None, requests=100_000, service="exp:5ms", seed=1, k=None, cv=None, mmpp_rates=None, mmpp_switch=None, request_size_bytes=4096, capacity_bytes=1_000_000_000_000, write_fraction=0.5))]
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
) -> PyResult<PyTrace> {
    let need = |name: &str, v: Option<f64>| {
        v.ok_or_else(|| parameter(name, format!("arrival `{arrival}` needs {name}=")))
    };
    let arrivals = match arrival {
        "poisson" => ArrivalProcess::Poisson { rate_per_s: need("rate", rate)? },
        "erlang" => ArrivalProcess::Erlang {
            rate_per_s: need("rate", rate)?,
            k: k.ok_or_else(|| parameter("k", "arrival `erlang` needs k= (number of phases)"))?,
        },
        "lognormal" => ArrivalProcess::Lognormal { rate_per_s: need("rate", rate)?, cv: need("cv", cv)? },
        "hyperexponential" | "hyperexp" => {
            ArrivalProcess::Hyperexponential { rate_per_s: need("rate", rate)?, cv: need("cv", cv)? }
        }
        "mmpp2" | "mmpp" => ArrivalProcess::Mmpp2 {
            rate_per_s: mmpp_rates.ok_or_else(|| parameter("mmpp_rates", "arrival `mmpp2` needs mmpp_rates=(r0, r1)"))?,
            switch_per_s: mmpp_switch
                .ok_or_else(|| parameter("mmpp_switch", "arrival `mmpp2` needs mmpp_switch=(s01, s10)"))?,
        },
        other => {
            return Err(parameter(
                "arrival",
                format!("unknown arrival process `{other}` (poisson, erlang, lognormal, hyperexponential, mmpp2)"),
            ))
        }
    };
    let workload = SyntheticWorkload {
        arrivals,
        requests,
        service: service_model(Some(service))?.expect("given"),
        request_size_bytes,
        capacity_bytes,
        write_fraction,
        seed,
    };
    without_gil(py, || workload.generate()).map(PyTrace::from)
}
