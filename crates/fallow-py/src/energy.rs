//! `energy`: disk spin-down and SARD in simulation (`fallow energy`),
//! returning plain data: the core's [`fallow_core::energy::EnergyReport`], serialised as
//! `fallow energy --json` prints it. `fallow.energy` wraps it with a result
//! object and a pandas frame.
//!
//! The arguments mirror the CLI's flags one for one, including which ones
//! need another (`peer_prob` needs `peers`, `bg_size` needs `bg_work`, …):
//! an argument that would be ignored is an error, not a silent no-op.

use crate::errors::{parameter, to_py, without_gil};
use crate::json::to_python;
use crate::sim::{duration_arg, size_arg};
use crate::trace::PyTrace;
use fallow_core::energy::{
    default_bg, default_policies, read_file_trace, spindown, Availability, InputInfo, InputKind,
    Network, PowerFile, PowerModel, RemoteWhen, Request, UserData, DEFAULT_PEER_PROB,
    SEED_LOCAL_FRACTIONS,
};
use fallow_core::sim::BgService;
use fallow_core::trace::ReadOptions;
use fallow_core::units::{parse_bytes, parse_duration_ns};
use fallow_core::{Error, ServiceModel, Trace};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the requests come from.
#[allow(clippy::large_enum_variant)] // one per call, on the stack for its duration
enum Source<'a> {
    /// A block trace (a `Trace`, or a path read with default options).
    Block(Cow<'a, Trace>),
    /// A file-level CSV to read.
    File(PathBuf),
}

/// Policy specs: one, several, or (None) the CLI's default, every policy.
fn policies_arg(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(v) = v else {
        return Ok(default_policies());
    };
    let specs = if let Ok(s) = v.downcast::<PyString>() {
        vec![s.extract::<String>()?]
    } else {
        v.extract::<Vec<String>>().map_err(|_| {
            parameter(
                "policy",
                "must be a spin-down policy such as \"timeout:t=10s\", a list of them, or None",
            )
        })?
    };
    if specs.is_empty() {
        return Err(parameter(
            "policy",
            "give at least one policy (None runs every one)",
        ));
    }
    for s in &specs {
        spindown::build(s).map_err(|e| renamed("policy", e))?;
    }
    Ok(specs)
}

/// A core error about a parameter, named by the Python argument it came
/// from (the core's name, `spin-down policy t`, stays in the message).
fn renamed(name: &str, e: Error) -> PyErr {
    match e {
        Error::InvalidParameter {
            name: inner,
            message,
        } => parameter(name, format!("{inner}: {message}")),
        other => to_py(other),
    }
}

/// A duration argument (seconds or `"2ms"`), errors named by the argument.
fn duration(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    match v.downcast::<PyString>() {
        Ok(s) => parse_duration_ns(&s.extract::<String>()?).map_err(|e| renamed(name, e)),
        Err(_) => duration_arg(name, v),
    }
}

/// A size argument (bytes or `"64KiB"`, at least 1 byte), errors named by
/// the argument.
fn size(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(s) = v.downcast::<PyString>() {
        parse_bytes(&s.extract::<String>()?).map_err(|e| renamed(name, e))?;
    }
    size_arg(name, v)
}

/// The shares of requests kept local: a number or a list of numbers.
fn fractions_arg(v: &Bound<'_, PyAny>) -> PyResult<Vec<f64>> {
    let fractions = match v.extract::<f64>() {
        Ok(f) => vec![f],
        Err(_) => v.extract::<Vec<f64>>().map_err(|_| {
            parameter(
                "local_fraction",
                "must be a share such as 0.01 or a list of shares such as [1, 0.1, 0.01]",
            )
        })?,
    };
    if fractions.is_empty() {
        return Err(parameter("local_fraction", "give at least one share"));
    }
    for &f in &fractions {
        if !(0.0..=1.0).contains(&f) {
            return Err(parameter(
                "local_fraction",
                format!("{f}: a share must be between 0 and 1"),
            ));
        }
    }
    Ok(fractions)
}

/// What the core's TOML reader calls a power dict in its errors.
const DICT: &str = "the power dict";

/// A power model from a TOML file (path) or a dict of overrides of the
/// WD2500JD (the file's keys: `idle_w`, `spinup_s`, `name`, …), checked by
/// the core's TOML reader so both take the same keys with the same rules.
fn power_arg(v: &Bound<'_, PyAny>, device: Option<u32>) -> PyResult<PowerModel> {
    if let Ok(d) = v.downcast::<PyDict>() {
        let mut text = String::new();
        for (k, val) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| parameter("power", "keys must be strings such as \"idle_w\""))?;
            // JSON string escapes are valid TOML basic-string escapes
            let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
            let value = if let Ok(s) = val.downcast::<PyString>() {
                quoted(&s.extract::<String>()?)
            } else {
                match val.extract::<f64>() {
                    Ok(x) if x.is_finite() => format!("{x:?}"),
                    _ => {
                        return Err(parameter(
                            "power",
                            format!("`{key}` must be a finite number (or a string for `name`)"),
                        ))
                    }
                }
            };
            text.push_str(&format!("{} = {value}\n", quoted(&key)));
        }
        return PowerFile::parse(&text, Path::new(DICT))
            .and_then(|f| f.model(None))
            .map_err(|e| match e {
                // a key the model does not know, or a value of the wrong type
                Error::Record { message, .. } => parameter("power", message),
                // a value out of range: the core names the key
                Error::InvalidParameter { name, message } => parameter(
                    "power",
                    format!(
                        "{}: {message}",
                        name.trim_end_matches(&format!(" in {DICT}"))
                    ),
                ),
                other => to_py(other),
            });
    }
    let path: PathBuf = v.extract().map_err(|_| {
        parameter(
            "power",
            "must be the path of a TOML power file or a dict such as {\"idle_w\": 8.0}",
        )
    })?;
    PowerFile::read(&path)
        .and_then(|f| f.model(device))
        .map_err(to_py)
}

/// The busiest device of a trace, as `fallow energy` picks it: the one with
/// the most requests, the lowest id on a tie.
fn busiest(trace: &Trace) -> Option<u32> {
    trace
        .devices()
        .iter()
        .max_by(|a, b| a.requests.cmp(&b.requests).then(b.id.cmp(&a.id)))
        .map(|d| d.id)
}

/// Simulate a disk's power states under spin-down policies, alone and with
/// peers serving requests while it sleeps (SARD). Returns the plain result:
/// the JSON of `fallow energy --json`. See `fallow.energy` for the arguments.
#[pyfunction]
#[pyo3(signature = (trace, *, policy=None, device=None, local_fraction=None, peers=None, peer_prob=None, peer_prob_for=None, remote="asleep", files=false, user_data=None, service=None, power=None, net_latency=None, net_bandwidth=None, net_contention=0.2, bg_work=None, bg_size=None, bg=None, bg_wait=None, seed=1))]
#[allow(clippy::too_many_arguments)]
pub fn energy<'py>(
    py: Python<'py>,
    trace: Bound<'py, PyAny>,
    policy: Option<Bound<'py, PyAny>>,
    device: Option<crate::device::DeviceArg>,
    local_fraction: Option<Bound<'py, PyAny>>,
    peers: Option<u32>,
    peer_prob: Option<f64>,
    peer_prob_for: Option<BTreeMap<String, f64>>,
    remote: &str,
    files: bool,
    user_data: Option<&str>,
    service: Option<&str>,
    power: Option<Bound<'py, PyAny>>,
    net_latency: Option<Bound<'py, PyAny>>,
    net_bandwidth: Option<Bound<'py, PyAny>>,
    net_contention: f64,
    bg_work: Option<Bound<'py, PyAny>>,
    bg_size: Option<Bound<'py, PyAny>>,
    bg: Option<&str>,
    bg_wait: Option<Bound<'py, PyAny>>,
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    // Every argument is read before any work, as the CLI does.
    let policies = policies_arg(policy.as_ref())?;
    let settings = match peers {
        Some(peers) => {
            if local_fraction.is_some() {
                return Err(parameter(
                    "local_fraction",
                    "give local_fraction or peers, not both",
                ));
            }
            let p = peer_prob.unwrap_or(DEFAULT_PEER_PROB);
            if !(0.0..=1.0).contains(&p) {
                return Err(parameter(
                    "peer_prob",
                    format!("must be a probability in [0, 1], got {p}"),
                ));
            }
            let per_prefix: Vec<(String, f64)> =
                peer_prob_for.unwrap_or_default().into_iter().collect();
            for (prefix, p) in &per_prefix {
                if !(0.0..=1.0).contains(p) {
                    return Err(parameter(
                        "peer_prob_for",
                        format!("`{prefix}`: must be a probability in [0, 1], got {p}"),
                    ));
                }
            }
            vec![Availability::Peers {
                peers,
                p,
                per_prefix,
            }]
        }
        None => {
            for (given, name) in [
                (peer_prob.is_some(), "peer_prob"),
                (peer_prob_for.is_some(), "peer_prob_for"),
            ] {
                if given {
                    return Err(parameter(name, "needs peers= (the number of peers)"));
                }
            }
            let fractions = match &local_fraction {
                Some(v) => fractions_arg(v)?,
                None => SEED_LOCAL_FRACTIONS.to_vec(),
            };
            fractions
                .into_iter()
                .map(|fraction| Availability::LocalFraction { fraction })
                .collect()
        }
    };
    let remote_when = match remote {
        "asleep" => RemoteWhen::Asleep,
        "always" => RemoteWhen::Always,
        other => {
            return Err(parameter(
                "remote",
                format!("`{other}`: must be \"asleep\" (only while the disk is off) or \"always\""),
            ))
        }
    };
    let user = match (user_data, files) {
        (None, _) | (Some("local"), true) => UserData::Local,
        (Some("server"), true) => UserData::Server,
        (Some(_), false) => {
            return Err(parameter(
                "user_data",
                "applies to file-level traces (files=True) only",
            ))
        }
        (Some(other), true) => {
            return Err(parameter(
                "user_data",
                format!("`{other}`: must be \"local\" or \"server\""),
            ))
        }
    };
    // the spec as given, for `input.completions`
    let service_text = service.map(str::trim);
    let service: Option<ServiceModel> = service.map(|s| s.parse().map_err(to_py)).transpose()?;
    // what is not given keeps the core's default (`fallow_core::energy::Request`)
    let mut network = Network::default();
    if let Some(v) = &net_latency {
        network.latency_ns = duration("net_latency", v)?;
    }
    if let Some(v) = &net_bandwidth {
        network.bandwidth_bytes_per_s = size("net_bandwidth", v)? as f64;
    }
    network.contention = net_contention;
    if !(net_contention.is_finite() && net_contention >= 0.0) {
        return Err(parameter(
            "net_contention",
            format!("must be a non-negative fraction, got {net_contention}"),
        ));
    }
    let bg = match &bg_work {
        Some(work) => {
            let mut plan = default_bg(size("bg_work", work)?);
            if let Some(v) = &bg_size {
                plan.size_bytes = size("bg_size", v)?;
            }
            if let Some(b) = bg {
                plan.service = b.parse::<BgService>().map_err(to_py)?;
            }
            if let Some(v) = &bg_wait {
                plan.wait_ns = duration("bg_wait", v)?;
            }
            Some(plan)
        }
        None => {
            for (given, name) in [
                (bg_size.is_some(), "bg_size"),
                (bg.is_some(), "bg"),
                (bg_wait.is_some(), "bg_wait"),
            ] {
                if given {
                    return Err(parameter(name, "needs bg_work= (the BG work to fit in)"));
                }
            }
            None
        }
    };

    // The input: a Trace, or a path (a block trace, or with files=True a
    // file-level CSV).
    let trace_ref = trace.extract::<PyRef<'py, PyTrace>>().ok();
    let source = match (&trace_ref, files) {
        (Some(_), true) => {
            return Err(parameter(
                "trace",
                "files=True reads a file-level CSV: give its path, not a Trace",
            ))
        }
        (Some(t), false) => Source::Block(Cow::Borrowed(&t.inner)),
        (None, _) => {
            let path: PathBuf = trace.extract().map_err(|_| {
                parameter(
                    "trace",
                    "must be a fallow.Trace or the path of a trace file",
                )
            })?;
            if files {
                Source::File(path)
            } else {
                let t = without_gil(py, || {
                    fallow_core::read_trace(&path, &ReadOptions::default())
                })?;
                Source::Block(Cow::Owned(t))
            }
        }
    };
    if files && device.is_some() {
        return Err(parameter(
            "device",
            "applies to block traces; a file-level trace is one disk",
        ));
    }
    let device = match &source {
        Source::Block(t) => crate::device::resolve(t, device.as_ref())?.or_else(|| busiest(t)),
        Source::File(_) => None,
    };
    let power = match &power {
        Some(v) => power_arg(v, device)?,
        None => PowerModel::default(),
    };
    let req = Request {
        policies,
        availability: settings,
        remote_when,
        user_data: user,
        service,
        power,
        network,
        bg,
        seed,
    };
    let report = without_gil(py, || {
        let (input, info) = match &source {
            Source::File(path) => {
                let ft = read_file_trace(path)?;
                let spec = service_text.unwrap_or("disk");
                let input = req.prepare_files(&ft)?;
                let info = InputInfo::new(
                    &input,
                    path.display().to_string(),
                    InputKind::File,
                    None,
                    format!("modelled: {spec}"),
                    seed,
                );
                (input, info)
            }
            Source::Block(t) => {
                let id = device.unwrap_or(0);
                let one = if t.devices().len() == 1 && t.devices()[0].id == id {
                    Cow::Borrowed(&**t)
                } else {
                    Cow::Owned(t.select_device(id)?)
                };
                let input = req.prepare_block(&one)?;
                let path = t.report().path.display().to_string();
                let info = InputInfo::new(
                    &input,
                    if path.is_empty() {
                        "(in memory)".into()
                    } else {
                        path
                    },
                    InputKind::Block,
                    Some(id),
                    match service_text {
                        Some(spec) => format!("modelled: {spec}"),
                        None => "recorded".into(),
                    },
                    seed,
                );
                (input, info)
            }
        };
        req.run(&input, info)
    })?;
    to_python(py, &report)
}
