//! One simulation request: the FG input (a trace, or a synthetic workload),
//! the device's service model and the BG settings, with the defaults every
//! front end shares.
//!
//! The CLI (`fallow simulate`, `compare`, `tune`, `recommend`, `pareto`)
//! and the Python bindings (`fallow.simulate`, `compare`, `tune`) convert
//! their arguments into a [`Request`] and call [`Request::prepare`]; the
//! validation and the defaults live here once, so the same call gives the
//! same numbers from either front end. Errors name the *parameter*
//! (`bg_size`, `write_fraction`, …, Python's keyword spelling); each front
//! end maps it to its own (the CLI to `--bg-size`).

use super::{BgService, BgWork, Prepared, SimConfig};
use crate::error::{Error, Result};
use crate::trace::Trace;
use crate::workload::{ArrivalProcess, SyntheticWorkload};
use crate::ServiceModel;
use std::borrow::Cow;
use std::sync::atomic::AtomicBool;

/// Synthetic FG requests when the caller gives no count (the CLI's
/// `--requests` default; Python used 100,000 before both read this).
pub const DEFAULT_REQUESTS: usize = 1_000_000;
/// Size of every synthetic FG request, bytes.
pub const DEFAULT_REQUEST_SIZE_BYTES: u64 = 4096;
/// Share of synthetic FG requests that are writes.
pub const DEFAULT_WRITE_FRACTION: f64 = 0.5;
/// FG service of a synthetic workload when none is given.
pub const DEFAULT_WORKLOAD_SERVICE: &str = "exp:10ms";
/// BG service model when none is given.
pub const DEFAULT_BG_SERVICE: &str = "exp:10ms";
/// BG request size when neither the caller nor the policy chooses one, bytes.
pub const DEFAULT_BG_SIZE_BYTES: u64 = 65_536;
/// How much BG work there is when not given: endless (scrubbing).
pub const DEFAULT_BG_WORK: &str = "endless";
/// Extra delay of a collision when not given, ns.
pub const DEFAULT_SWITCH_PENALTY_NS: u64 = 0;
/// Seed of every random stream when not given (defined with the
/// distributions, so modules below the simulator use the same one).
pub use crate::dist::DEFAULT_SEED;
/// Disk capacity synthetic offsets are spread over, bytes (offsets only
/// matter to the `disk` service model's seek distances).
pub const SYNTHETIC_CAPACITY_BYTES: u64 = 1_000_000_000_000;

/// Idle intervals the online re-tuner (`tune::online`, `--retune`) looks
/// back over. Defined here, below the tuner, so the keyword defaults need
/// not import it (`tests/layers.rs`: tune uses sim, never the reverse).
pub const DEFAULT_RETUNE_WINDOW: usize = 2000;

/// The defaults above by the keyword names the front ends share
/// (Python's `fallow.simulate`, `compare` and `tune`; the CLI's flags are
/// the same names with dashes), the switch penalty in seconds as the
/// keyword takes it: what `fallow._fallow.defaults()` lists.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Defaults {
    /// [`DEFAULT_REQUESTS`].
    pub requests: usize,
    /// [`DEFAULT_REQUEST_SIZE_BYTES`].
    pub request_size: u64,
    /// [`DEFAULT_WRITE_FRACTION`].
    pub write_fraction: f64,
    /// [`DEFAULT_WORKLOAD_SERVICE`].
    pub workload_service: &'static str,
    /// [`DEFAULT_BG_SERVICE`].
    pub bg: &'static str,
    /// [`DEFAULT_BG_SIZE_BYTES`].
    pub bg_size: u64,
    /// [`DEFAULT_BG_WORK`].
    pub bg_work: &'static str,
    /// [`DEFAULT_SWITCH_PENALTY_NS`], s.
    pub switch_penalty: f64,
    /// [`DEFAULT_SEED`].
    pub seed: u64,
    /// [`DEFAULT_RETUNE_WINDOW`].
    pub retune_window: usize,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            requests: DEFAULT_REQUESTS,
            request_size: DEFAULT_REQUEST_SIZE_BYTES,
            write_fraction: DEFAULT_WRITE_FRACTION,
            workload_service: DEFAULT_WORKLOAD_SERVICE,
            bg: DEFAULT_BG_SERVICE,
            bg_size: DEFAULT_BG_SIZE_BYTES,
            bg_work: DEFAULT_BG_WORK,
            switch_penalty: DEFAULT_SWITCH_PENALTY_NS as f64 / 1e9,
            seed: DEFAULT_SEED,
            retune_window: DEFAULT_RETUNE_WINDOW,
        }
    }
}

/// A synthetic FG workload, as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The arrival process spec (`poisson`, `mmpp:cv=9,burst=1000`, …).
    pub arrivals: String,
    /// Mean arrival rate, requests per second (or `utilization`, or `rate=` in the spec).
    pub arrival_rate_per_s: Option<f64>,
    /// FG utilisation: sets the rate to it over the mean service time.
    pub utilization: Option<f64>,
    /// Number of FG requests.
    pub requests: usize,
    /// Size of every FG request, bytes.
    pub request_size_bytes: u64,
    /// Share of FG requests that are writes, 0..=1.
    pub write_fraction: f64,
}

impl Workload {
    /// `arrivals` with the default count, size and write share, and no rate.
    pub fn new(arrivals: impl Into<String>) -> Workload {
        Workload {
            arrivals: arrivals.into(),
            arrival_rate_per_s: None,
            utilization: None,
            requests: DEFAULT_REQUESTS,
            request_size_bytes: DEFAULT_REQUEST_SIZE_BYTES,
            write_fraction: DEFAULT_WRITE_FRACTION,
        }
    }
}

/// Where the FG requests come from.
// One `Input` per run, usually borrowing its trace: boxing the larger
// variant would save nothing worth an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A trace of one device (borrowed, or a device selected out of one).
    Trace(Cow<'a, Trace>),
    /// A synthetic workload.
    Workload(Workload),
}

/// Everything a run needs besides the policy.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The FG requests.
    pub input: Input<'a>,
    /// FG service model: for a trace, turns arrivals into completions
    /// (None: the recorded ones); for a workload, its service times (None:
    /// [`DEFAULT_WORKLOAD_SERVICE`]).
    pub service: Option<ServiceModel>,
    /// BG service-time model.
    pub bg_service: BgService,
    /// BG request size when the policy does not choose one, bytes.
    pub bg_size_bytes: u64,
    /// How much BG work there is.
    pub bg_work: BgWork,
    /// Extra delay of an FG request that finds BG work in service, ns.
    pub switch_penalty_ns: u64,
    /// Seed of every random stream (workload, service model, BG service).
    pub seed: u64,
}

impl<'a> Request<'a> {
    /// `input` with every other setting at its default.
    pub fn new(input: Input<'a>) -> Request<'a> {
        Request {
            input,
            service: None,
            bg_service: DEFAULT_BG_SERVICE
                .parse()
                .expect("the default BG service parses"),
            bg_size_bytes: DEFAULT_BG_SIZE_BYTES,
            bg_work: DEFAULT_BG_WORK.parse().expect("the default BG work parses"),
            switch_penalty_ns: DEFAULT_SWITCH_PENALTY_NS,
            seed: DEFAULT_SEED,
        }
    }

    /// Check every setting, so a bad one fails before any work.
    pub fn validate(&self) -> Result<()> {
        if self.bg_size_bytes == 0 {
            return Err(Error::invalid("bg_size", "must be at least 1 byte"));
        }
        self.synthetic().map(|_| ())
    }

    /// The settings of a run.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            bg_service: self.bg_service,
            bg_work: self.bg_work,
            bg_size_bytes: self.bg_size_bytes,
            switch_penalty_ns: self.switch_penalty_ns,
            seed: self.seed,
        }
    }

    /// The synthetic workload, checked and with its arrival process fitted
    /// (None for a trace).
    pub fn synthetic(&self) -> Result<Option<SyntheticWorkload>> {
        let Input::Workload(w) = &self.input else {
            return Ok(None);
        };
        if !(0.0..=1.0).contains(&w.write_fraction) {
            return Err(Error::invalid(
                "write_fraction",
                format!("must be between 0 and 1, got {}", w.write_fraction),
            ));
        }
        if w.requests == 0 {
            return Err(Error::invalid("requests", "must be at least 1"));
        }
        // more than `workload::MAX_SYNTHETIC_REQUESTS` fails in `generate`,
        // before it allocates
        if w.request_size_bytes == 0 {
            return Err(Error::invalid("request_size", "must be at least 1 byte"));
        }
        let size = u32::try_from(w.request_size_bytes).map_err(|_| {
            Error::invalid(
                "request_size",
                format!(
                    "{} bytes is too large (at most {} bytes)",
                    w.request_size_bytes,
                    u32::MAX
                ),
            )
        })?;
        let service = self.workload_service()?;
        let arrivals = ArrivalProcess::from_spec(
            &w.arrivals,
            w.arrival_rate_per_s,
            w.utilization,
            &service,
            w.request_size_bytes,
        )?;
        Ok(Some(SyntheticWorkload {
            arrivals,
            requests: w.requests,
            service,
            request_size_bytes: size,
            capacity_bytes: SYNTHETIC_CAPACITY_BYTES,
            write_fraction: w.write_fraction,
            seed: self.seed,
        }))
    }

    /// The service model of a synthetic workload: as given, or the default.
    fn workload_service(&self) -> Result<ServiceModel> {
        match &self.service {
            Some(m) => Ok(m.clone()),
            None => DEFAULT_WORKLOAD_SERVICE.parse(),
        }
    }

    /// Generate (or model the completions of) the FG requests and prepare
    /// them for any number of runs: busy periods and baseline response times.
    pub fn prepare(&self) -> Result<Prepared> {
        self.prepare_until(None)
    }

    /// [`Request::prepare`] that stops with [`crate::Error::Interrupted`]
    /// soon after `cancel` is set (see [`Prepared::new_cancellable`]); a
    /// synthetic workload is generated whole first.
    pub fn prepare_cancellable(&self, cancel: &AtomicBool) -> Result<Prepared> {
        self.prepare_until(Some(cancel))
    }

    fn prepare_until(&self, cancel: Option<&AtomicBool>) -> Result<Prepared> {
        self.validate()?;
        let prepare = |t: &Trace, service| match cancel {
            Some(c) => Prepared::new_cancellable(t, service, self.seed, c),
            None => Prepared::new(t, service, self.seed),
        };
        match (&self.input, self.synthetic()?) {
            (Input::Trace(t), _) => prepare(t, self.service.as_ref()),
            (Input::Workload(_), Some(w)) => prepare(&w.generate()?, None),
            (Input::Workload(_), None) => unreachable!("synthetic() builds a workload input"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poisson(rate: f64, requests: usize) -> Request<'static> {
        let mut w = Workload::new("poisson");
        w.arrival_rate_per_s = Some(rate);
        w.requests = requests;
        Request::new(Input::Workload(w))
    }

    #[test]
    fn keyword_defaults_by_name_in_seconds() {
        let d = serde_json::to_value(Defaults::default()).unwrap();
        let names: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = [
            "requests",
            "request_size",
            "write_fraction",
            "workload_service",
            "bg",
            "bg_size",
            "bg_work",
            "switch_penalty",
            "seed",
            "retune_window",
        ];
        want.sort_unstable();
        let mut names = names;
        names.sort_unstable();
        assert_eq!(names, want);
        // the documented values: 64 KiB BG requests, no switch penalty (in s)
        assert_eq!(d["bg_size"], 65_536);
        assert_eq!(d["switch_penalty"], serde_json::json!(0.0));
        assert_eq!(d["request_size"], 4096);
        assert_eq!(d["bg_work"], "endless");
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let r = poisson(1.0, 10);
        let cfg = r.config();
        assert_eq!(
            cfg.bg_service,
            BgService::Exponential {
                mean_ns: 10_000_000
            }
        );
        assert_eq!(cfg.bg_work, BgWork::Endless);
        assert_eq!(
            (cfg.bg_size_bytes, cfg.switch_penalty_ns, cfg.seed),
            (65_536, 0, 1)
        );
        // the simulator's own default agrees
        assert_eq!(cfg, SimConfig::default());
        let w = Workload::new("poisson");
        assert_eq!((w.requests, w.request_size_bytes), (1_000_000, 4096));
        assert_eq!(w.write_fraction, 0.5);
    }

    #[test]
    fn errors_name_the_parameter() {
        let name = |r: &Request<'_>| match r.validate() {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected an invalid parameter, got {other:?}"),
        };
        let mut r = poisson(1.0, 10);
        r.bg_size_bytes = 0;
        assert_eq!(name(&r), "bg_size");
        let mut r = poisson(1.0, 10);
        if let Input::Workload(w) = &mut r.input {
            w.write_fraction = 1.5;
        }
        assert_eq!(name(&r), "write_fraction");
        let mut r = poisson(1.0, 10);
        if let Input::Workload(w) = &mut r.input {
            w.request_size_bytes = u64::from(u32::MAX) + 1;
        }
        assert_eq!(name(&r), "request_size");
        assert_eq!(name(&poisson(1.0, 0)), "requests");
    }

    #[test]
    fn a_workload_uses_the_default_service_and_the_seed() {
        let r = poisson(20.0, 2000);
        let w = r.synthetic().unwrap().unwrap();
        assert_eq!(w.service, DEFAULT_WORKLOAD_SERVICE.parse().unwrap());
        assert_eq!(w.seed, DEFAULT_SEED);
        assert_eq!(w.request_size_bytes, 4096);
        // prepare() is the workload generated with the seed, then prepared
        let direct = Prepared::new(&w.generate().unwrap(), None, r.seed).unwrap();
        let prep = r.prepare().unwrap();
        assert_eq!(prep.requests(), 2000);
        assert_eq!(prep.span_ns(), direct.span_ns());
        assert_eq!(
            prep.periods().busy_total_ns(),
            direct.periods().busy_total_ns()
        );
    }

    #[test]
    fn a_trace_without_completions_needs_a_service_model() {
        let w = poisson(5.0, 100).synthetic().unwrap().unwrap();
        let t = w.generate().unwrap();
        // the generated trace has completions: prepared as recorded
        let r = Request::new(Input::Trace(Cow::Borrowed(&t)));
        assert_eq!(r.prepare().unwrap().requests(), 100);
        assert!(r.synthetic().unwrap().is_none());
    }
}
