//! `fallow.live.scrub_plan`: the mean latent error time and the pass time
//! of sequential and staggered scrub orders (`fallow_core::scrubplan`,
//! docs/scrub-plan.md), as `fallow scrub-plan --json`. Every argument
//! left out is [`PlanRequest::default`]'s, the CLI's defaults.

use crate::conversion::Value;
use crate::errors::Result;
use crate::json::to_python;
use fallow_core::scrubplan::{Disk, PlanRequest};
use pyo3::prelude::*;

/// The scrub plans of `fallow scrub-plan --json` as plain data (without
/// its `schema_version`). See `fallow.live.scrub_plan`.
#[pyfunction]
#[pyo3(signature = (
    *, capacity=None, segments=None, regions=None, burst_span=None, rpm=None,
    rate=None, full_stroke=None, duty=None, check=None, seed=None
))]
#[allow(clippy::too_many_arguments)] // one per flag of `fallow scrub-plan`
pub fn scrub_plan<'py>(
    py: Python<'py>,
    capacity: Option<Value>,
    segments: Option<Vec<Value>>,
    regions: Option<Vec<u64>>,
    burst_span: Option<Value>,
    rpm: Option<f64>,
    rate: Option<Value>,
    full_stroke: Option<Value>,
    duty: Option<f64>,
    check: Option<u64>,
    seed: Option<u64>,
) -> Result<Bound<'py, PyAny>> {
    let mut req = PlanRequest::default();
    let disk = &mut req.disk;
    if let Some(v) = capacity {
        disk.capacity_bytes = v.0.bytes("capacity")?;
    }
    if let Some(r) = rpm {
        disk.revolution_ns = Disk::revolution_ns_at(r)?;
    }
    if let Some(v) = rate {
        disk.rate_bytes_per_s = v.0.bytes("rate")? as f64;
    }
    if let Some(v) = full_stroke {
        disk.full_stroke_ns = v.0.duration_ns("full_stroke")? as f64;
    }
    if let Some(d) = duty {
        disk.duty = d;
    }
    if let Some(v) = burst_span {
        req.span_bytes = v.0.bytes("burst_span")?;
    }
    if let Some(list) = segments {
        req.segments = list
            .iter()
            .map(|v| v.0.bytes("segments"))
            .collect::<fallow_core::Result<_>>()?;
    }
    if let Some(list) = regions {
        req.regions = list;
    }
    req.check = check.or(req.check);
    req.seed = seed.unwrap_or(req.seed);
    let report = py.allow_threads(|| req.run(&mut |_| {}))?;
    to_python(py, &report)
}
