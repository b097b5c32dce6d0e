//! The arguments of an energy study as a front end takes them, each
//! optional and named as Python's keywords (`fallow.energy`), turned into
//! a [`Request`]: the defaults, the ranges and the rules between arguments
//! (`peer_prob` needs `peers`, `bg_size` needs `bg_work`: an argument that
//! would be ignored is an error, not a silent no-op) live here once, and
//! every error names the argument at fault.

use super::{default_bg, read_file_trace, spindown, Availability, EnergyReport, InputInfo};
use super::{InputKind, PowerFile, PowerModel, RemoteWhen, Request, UserData};
use super::{DEFAULT_PEER_PROB, SEED_LOCAL_FRACTIONS};
use crate::error::{Error, Result};
use crate::quantity::{renamed, Quantity};
use crate::service::BgService;
use crate::trace::Trace;
use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Every argument of an energy study but the input and the power model
/// (which needs the device: [`power_overrides`], [`PowerFile`]); `None`
/// keeps the default of [`Request`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Spin-down policy specs (default: every policy).
    pub policy: Option<Vec<String>>,
    /// Shares of requests kept local, one row each (default: the SARD paper's).
    pub local_fraction: Option<Vec<f64>>,
    /// Number of peers that may hold a file (instead of `local_fraction`).
    pub peers: Option<u32>,
    /// Probability that one peer holds a file (needs `peers`).
    pub peer_prob: Option<f64>,
    /// That probability per path prefix (needs `peers`).
    pub peer_prob_for: Option<Vec<(String, f64)>>,
    /// `asleep` or `always`: when peer-held requests go to the peer.
    pub remote: Option<String>,
    /// The input is a file-level trace.
    pub files: bool,
    /// `local` or `server`: where a file-level trace's user data lives.
    pub user_data: Option<String>,
    /// Network latency per request (seconds or a duration).
    pub net_latency: Option<Quantity>,
    /// Network bandwidth, bytes per second (or a size).
    pub net_bandwidth: Option<Quantity>,
    /// Network contention, a non-negative fraction.
    pub net_contention: Option<f64>,
    /// BG work to fit in (a size); the other `bg` arguments need it.
    pub bg_work: Option<Quantity>,
    /// Size of one BG request.
    pub bg_size: Option<Quantity>,
    /// BG service model.
    pub bg: Option<String>,
    /// Idle time before BG work starts in an interval.
    pub bg_wait: Option<Quantity>,
    /// Seed of every draw.
    pub seed: Option<u64>,
}

/// A share in [0, 1] or a probability, named by `name`.
fn probability(name: &str, what: &str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(Error::invalid(name, format!("{what}, got {p}")))
    }
}

impl Options {
    /// The request these arguments ask for, checked (the power model is
    /// the default; the service model is set by the caller, who keeps its
    /// text for the report).
    pub fn request(&self) -> Result<Request> {
        let mut req = Request::default();
        if let Some(specs) = &self.policy {
            if specs.is_empty() {
                return Err(Error::invalid(
                    "policy",
                    "give at least one policy (None runs every one)",
                ));
            }
            for s in specs {
                spindown::build(s).map_err(|e| renamed("policy", e))?;
            }
            req.policies = specs.clone();
        }
        req.availability = self.availability()?;
        req.remote_when = match self.remote.as_deref() {
            None | Some("asleep") => RemoteWhen::Asleep,
            Some("always") => RemoteWhen::Always,
            Some(other) => {
                return Err(Error::invalid(
                    "remote",
                    format!(
                        "`{other}`: must be \"asleep\" (only while the disk is off) or \"always\""
                    ),
                ))
            }
        };
        req.user_data = match (self.user_data.as_deref(), self.files) {
            (None, _) | (Some("local"), true) => UserData::Local,
            (Some("server"), true) => UserData::Server,
            (Some(_), false) => {
                return Err(Error::invalid(
                    "user_data",
                    "applies to file-level traces (files=True) only",
                ))
            }
            (Some(other), true) => {
                return Err(Error::invalid(
                    "user_data",
                    format!("`{other}`: must be \"local\" or \"server\""),
                ))
            }
        };
        if let Some(v) = &self.net_latency {
            req.network.latency_ns = v.duration_ns("net_latency")?;
        }
        if let Some(v) = &self.net_bandwidth {
            req.network.bandwidth_bytes_per_s = v.bytes("net_bandwidth")? as f64;
        }
        if let Some(c) = self.net_contention {
            if !(c.is_finite() && c >= 0.0) {
                return Err(Error::invalid(
                    "net_contention",
                    format!("must be a non-negative fraction, got {c}"),
                ));
            }
            req.network.contention = c;
        }
        req.bg = self.bg()?;
        req.seed = self.seed.unwrap_or(req.seed);
        req.validate()?;
        Ok(req)
    }

    /// The availability rows: one per local share, or the peers.
    fn availability(&self) -> Result<Vec<Availability>> {
        let Some(peers) = self.peers else {
            for (given, name) in [
                (self.peer_prob.is_some(), "peer_prob"),
                (self.peer_prob_for.is_some(), "peer_prob_for"),
            ] {
                if given {
                    return Err(Error::invalid(name, "needs peers= (the number of peers)"));
                }
            }
            let fractions = self
                .local_fraction
                .clone()
                .unwrap_or_else(|| SEED_LOCAL_FRACTIONS.to_vec());
            if fractions.is_empty() {
                return Err(Error::invalid("local_fraction", "give at least one share"));
            }
            for &f in &fractions {
                let what = format!("{f}: a share must be between 0 and 1");
                if !(0.0..=1.0).contains(&f) {
                    return Err(Error::invalid("local_fraction", what));
                }
            }
            return Ok(fractions
                .into_iter()
                .map(|fraction| Availability::LocalFraction { fraction })
                .collect());
        };
        if self.local_fraction.is_some() {
            return Err(Error::invalid(
                "local_fraction",
                "give local_fraction or peers, not both",
            ));
        }
        let p = self.peer_prob.unwrap_or(DEFAULT_PEER_PROB);
        probability("peer_prob", "must be a probability in [0, 1]", p)?;
        let per_prefix = self.peer_prob_for.clone().unwrap_or_default();
        for (prefix, p) in &per_prefix {
            let what = format!("`{prefix}`: must be a probability in [0, 1]");
            probability("peer_prob_for", &what, *p)?;
        }
        Ok(vec![Availability::Peers {
            peers,
            p,
            per_prefix,
        }])
    }

    /// The BG plan, when `bg_work` is given.
    fn bg(&self) -> Result<Option<super::BgPlan>> {
        let Some(work) = &self.bg_work else {
            for (given, name) in [
                (self.bg_size.is_some(), "bg_size"),
                (self.bg.is_some(), "bg"),
                (self.bg_wait.is_some(), "bg_wait"),
            ] {
                if given {
                    return Err(Error::invalid(
                        name,
                        "needs bg_work= (the BG work to fit in)",
                    ));
                }
            }
            return Ok(None);
        };
        let mut plan = default_bg(work.bytes("bg_work")?);
        if let Some(v) = &self.bg_size {
            plan.size_bytes = v.bytes("bg_size")?;
        }
        if let Some(b) = &self.bg {
            plan.service = b.parse::<BgService>()?;
        }
        if let Some(v) = &self.bg_wait {
            plan.wait_ns = v.duration_ns("bg_wait")?;
        }
        Ok(Some(plan))
    }
}

/// The device `fallow energy` studies when none is named: the one with the
/// most requests, the lowest id on a tie.
pub fn busiest_device(trace: &Trace) -> Option<u32> {
    trace
        .devices()
        .iter()
        .max_by(|a, b| a.requests.cmp(&b.requests).then(b.id.cmp(&a.id)))
        .map(|d| d.id)
}

impl Request {
    /// The study of device `id` of a block trace, its input described by
    /// the trace's path and `service` (the service model as given, `None`:
    /// recorded completions). It stops with [`Error::Interrupted`] soon
    /// after `cancel` is set (a front end's Ctrl-C): the flag is
    /// read between the steps and within every run.
    pub fn run_block(
        &self,
        trace: &Trace,
        id: u32,
        service: Option<&str>,
        cancel: Option<&AtomicBool>,
    ) -> Result<EnergyReport> {
        interrupted(cancel)?;
        let devices = trace.devices();
        let one = if devices.len() == 1 && devices[0].id == id {
            Cow::Borrowed(trace)
        } else {
            Cow::Owned(trace.select_device(id)?)
        };
        interrupted(cancel)?;
        let input = self.prepare_block_until(&one, cancel)?;
        let path = trace.report().path.display().to_string();
        let path = if path.is_empty() {
            "(in memory)".into()
        } else {
            path
        };
        let completions = service.map_or("recorded".into(), |s| format!("modelled: {s}"));
        let info = InputInfo::new(
            &input,
            path,
            InputKind::Block,
            Some(id),
            completions,
            self.seed,
        );
        self.run_until(&input, info, cancel)
    }

    /// The study of the file-level trace at `path`, its input described by
    /// `service` (the service model as given, `None`: the default `disk`);
    /// `cancel` as for [`Request::run_block`].
    pub fn run_files(
        &self,
        path: &Path,
        service: Option<&str>,
        cancel: Option<&AtomicBool>,
    ) -> Result<EnergyReport> {
        let ft = read_file_trace(path)?;
        interrupted(cancel)?;
        let input = self.prepare_files(&ft)?;
        let completions = format!("modelled: {}", service.unwrap_or("disk"));
        let path = path.display().to_string();
        let info = InputInfo::new(&input, path, InputKind::File, None, completions, self.seed);
        self.run_until(&input, info, cancel)
    }
}

/// `Err(Interrupted)` once `cancel` is set.
fn interrupted(cancel: Option<&AtomicBool>) -> Result<()> {
    if crate::polled::cancelled(cancel) {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// What the power file reader calls a set of overrides in its errors.
const OVERRIDES: &str = "the power dict";

/// The WD2500JD with `overrides` of its power file keys (`idle_w`,
/// `spinup_s`, `name`, …), read by the power file reader so both take the
/// same keys under the same rules; errors name the parameter `power`.
pub fn power_overrides(overrides: &[(String, Quantity)]) -> Result<PowerModel> {
    let quoted = |s: &str| serde_json::to_string(s).expect("a string serialises");
    let mut text = String::new();
    for (key, value) in overrides {
        // JSON string escapes are valid TOML basic-string escapes
        let value = match value {
            Quantity::Text(s) => quoted(s),
            Quantity::Int(n) => format!("{:?}", *n as f64),
            Quantity::Float(x) if x.is_finite() => format!("{x:?}"),
            Quantity::Float(_) | Quantity::Other(_) => {
                return Err(Error::invalid(
                    "power",
                    format!("`{key}` must be a finite number (or a string for `name`)"),
                ))
            }
        };
        text.push_str(&format!("{} = {value}\n", quoted(key)));
    }
    PowerFile::parse(&text, Path::new(OVERRIDES))
        .and_then(|f| f.model(None))
        .map_err(|e| match e {
            // a key the model does not know, or a value of the wrong type
            Error::Record { message, .. } => Error::invalid("power", message),
            // a value out of range: the reader names the key
            Error::InvalidParameter { name, message } => Error::invalid(
                "power",
                format!(
                    "{}: {message}",
                    name.trim_end_matches(&format!(" in {OVERRIDES}"))
                ),
            ),
            other => other,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(o: Options) -> String {
        match o.request() {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected an invalid parameter, got {other:?}"),
        }
    }

    #[test]
    fn nothing_given_is_the_default_request() {
        let r = Options::default().request().unwrap();
        let d = Request::default();
        assert_eq!(r.policies, d.policies);
        assert_eq!(r.availability.len(), SEED_LOCAL_FRACTIONS.len());
        assert_eq!(r.network.latency_ns, 200_000);
        assert!(r.bg.is_none());
    }

    #[test]
    fn arguments_convert_with_their_units() {
        let r = Options {
            peers: Some(3),
            net_latency: Some(Quantity::Text("1ms".into())),
            net_bandwidth: Some(Quantity::Int(1000)),
            bg_work: Some(Quantity::Text("1MiB".into())),
            bg_wait: Some(Quantity::Float(0.5)),
            ..Options::default()
        }
        .request()
        .unwrap();
        assert_eq!(r.network.latency_ns, 1_000_000);
        assert_eq!(r.network.bandwidth_bytes_per_s, 1000.0);
        let bg = r.bg.unwrap();
        assert_eq!((bg.work_bytes, bg.wait_ns), (1 << 20, 500_000_000));
        assert!(
            matches!(r.availability[..], [Availability::Peers { peers: 3, p, .. }] if p == DEFAULT_PEER_PROB)
        );
    }

    #[test]
    fn errors_name_the_argument() {
        let cases = [
            (
                Options {
                    policy: Some(vec!["nap".into()]),
                    ..Default::default()
                },
                "policy",
            ),
            (
                Options {
                    local_fraction: Some(vec![1.5]),
                    ..Default::default()
                },
                "local_fraction",
            ),
            (
                Options {
                    peers: Some(1),
                    peer_prob: Some(2.0),
                    ..Default::default()
                },
                "peer_prob",
            ),
            (
                Options {
                    peer_prob: Some(0.5),
                    ..Default::default()
                },
                "peer_prob",
            ),
            (
                Options {
                    remote: Some("never".into()),
                    ..Default::default()
                },
                "remote",
            ),
            (
                Options {
                    user_data: Some("server".into()),
                    ..Default::default()
                },
                "user_data",
            ),
            (
                Options {
                    bg_size: Some(Quantity::Int(1)),
                    ..Default::default()
                },
                "bg_size",
            ),
            (
                Options {
                    net_contention: Some(-1.0),
                    ..Default::default()
                },
                "net_contention",
            ),
        ];
        for (o, name) in cases {
            assert_eq!(name_of(o), name);
        }
    }

    #[test]
    fn power_overrides_use_the_file_keys() {
        let m = power_overrides(&[("idle_w".into(), Quantity::Int(12))]).unwrap();
        assert_eq!(m.idle_w, 12.0);
        for bad in [
            ("idle_watts", Quantity::Int(3)),
            ("idle_w", Quantity::Float(f64::NAN)),
        ] {
            match power_overrides(&[(bad.0.into(), bad.1)]) {
                Err(Error::InvalidParameter { name, .. }) => assert_eq!(name, "power"),
                other => panic!("{other:?}"),
            }
        }
    }
}
