//! Prometheus metrics for fallow's live runtime.
//!
//! A [`Metrics`] registry holds what an operator watches while background
//! work runs on a live device: foreground and background requests and
//! bytes, collisions (a foreground request arriving while background work
//! holds the device, the cost every policy trades against throughput), and
//! the time spent in each [`PolicyState`]. [`Metrics::serve`] exposes it
//! over HTTP at `/metrics`, encoded by the `prometheus-client` crate, from
//! one small server thread: in the OpenMetrics text format when the
//! scraper's `Accept` header prefers it (Prometheus does), in the
//! Prometheus text format 0.0.4 otherwise (`curl`, `promtool check
//! metrics`); see [`Format::negotiate`]. The live runtime updates the
//! counters; this crate only counts and serves.
//!
//! ```
//! use fallow_metrics::{Metrics, PolicyState};
//! use std::time::Duration;
//! let m = Metrics::new();
//! m.bg_request(65_536);
//! m.add_state_time(PolicyState::IdleWaiting, Duration::from_millis(1500));
//! let text = m.encode();
//! assert!(text.contains("fallow_bg_bytes_total 65536"));
//! assert!(text.contains(r#"fallow_policy_state_seconds_total{state="idle-waiting"} 1.5"#));
//! let server = m.serve("127.0.0.1:0")?;   // scrape http://{server.addr()}/metrics
//! server.stop();
//! # Ok::<(), fallow_metrics::Error>(())
//! ```

#![deny(missing_docs)]

mod spindown;
pub use spindown::{DiskFigures, SpindownMetrics};
mod exposition;

pub use exposition::Format;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Errors of `fallow-metrics`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP server could not listen on the address.
    #[error("metrics endpoint {addr}: cannot listen: {message}")]
    Listen {
        /// The address asked for.
        addr: String,
        /// Why.
        message: String,
    },
}

/// What the policy driver is doing, for the time-in-state counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyState {
    /// The device is idle and the policy is waiting before starting BG work.
    IdleWaiting,
    /// BG work is running.
    BgRunning,
    /// FG requests are being served; BG work is held back.
    Busy,
}

impl PolicyState {
    /// Every state, in a fixed order.
    pub const ALL: [PolicyState; 3] = [
        PolicyState::IdleWaiting,
        PolicyState::BgRunning,
        PolicyState::Busy,
    ];

    /// The label value: `idle-waiting`, `bg-running`, `busy`.
    pub fn name(self) -> &'static str {
        match self {
            PolicyState::IdleWaiting => "idle-waiting",
            PolicyState::BgRunning => "bg-running",
            PolicyState::Busy => "busy",
        }
    }
}

impl EncodeLabelValue for PolicyState {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabels {
    state: PolicyState,
}

/// The registry and its counters. Cheap to clone: clones share the counters.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    fg_requests: Counter,
    fg_bytes: Counter,
    bg_requests: Counter,
    bg_bytes: Counter,
    collisions: Counter,
    frozen_io_bytes: Counter,
    frozen_io_seconds: Counter<f64, AtomicU64>,
    state_seconds: Family<StateLabels, Counter<f64, AtomicU64>>,
    state: Family<StateLabels, Gauge>,
    scrub: Option<ScrubGauges>,
    budget: Option<BudgetGauges>,
}

/// A budgeted run's gauges ([`Metrics::with_budget`]).
#[derive(Clone)]
struct BudgetGauges {
    slowdown_limit: Gauge<f64, AtomicU64>,
    added_delay_limit: Gauge<f64, AtomicU64>,
    slowdown: Gauge<f64, AtomicU64>,
    slowdown_ci95: Gauge<f64, AtomicU64>,
    p99_slowdown: Gauge<f64, AtomicU64>,
    added_delay: Gauge<f64, AtomicU64>,
    knob_value: Gauge<f64, AtomicU64>,
    refits: Gauge,
    backoffs: Gauge,
    unmet: Gauge,
}

impl BudgetGauges {
    /// A budgeted run's gauges, registered in `registry`; the limits and
    /// the measurements start unknown (NaN).
    fn registered(registry: &mut Registry) -> BudgetGauges {
        let g = BudgetGauges {
            slowdown_limit: Gauge::default(),
            added_delay_limit: Gauge::default(),
            slowdown: Gauge::default(),
            slowdown_ci95: Gauge::default(),
            p99_slowdown: Gauge::default(),
            added_delay: Gauge::default(),
            knob_value: Gauge::default(),
            refits: Gauge::default(),
            backoffs: Gauge::default(),
            unmet: Gauge::default(),
        };
        registry.register(
            "budget_slowdown_limit",
            "The FG mean slowdown the budget allows (NaN: the budget is a delay)",
            g.slowdown_limit.clone(),
        );
        registry.register(
            "budget_added_delay_limit_seconds",
            "The mean delay per FG request the budget allows, seconds (NaN: the budget is a slowdown)",
            g.added_delay_limit.clone(),
        );
        registry.register(
            "budget_measured_slowdown",
            "FG mean slowdown measured at the current setting (NaN: too few reads yet)",
            g.slowdown.clone(),
        );
        registry.register(
            "budget_measured_slowdown_ci95",
            "Half-width of the measured slowdown's 95% confidence interval",
            g.slowdown_ci95.clone(),
        );
        registry.register(
            "budget_measured_p99_slowdown",
            "FG p99 slowdown measured at the current setting",
            g.p99_slowdown.clone(),
        );
        registry.register(
            "budget_measured_added_delay_seconds",
            "Mean delay added to an FG read at the current setting, seconds",
            g.added_delay.clone(),
        );
        registry.register(
            "budget_knob_value",
            "The refitted knob's value in use (ns for a wait)",
            g.knob_value.clone(),
        );
        registry.register(
            "budget_refits",
            "Refits of the knob so far",
            g.refits.clone(),
        );
        registry.register(
            "budget_backoffs",
            "Back-offs after a measured overrun so far",
            g.backoffs.clone(),
        );
        registry.register(
            "budget_unmet",
            "1 when the budget is not being met on this device",
            g.unmet.clone(),
        );
        for x in [
            &g.slowdown_limit,
            &g.added_delay_limit,
            &g.slowdown,
            &g.slowdown_ci95,
            &g.p99_slowdown,
            &g.added_delay,
        ] {
            x.set(f64::NAN);
        }
        g
    }
}

/// A budgeted run's state, as [`Metrics::budget`] takes it. Unknowns are
/// `None` (exported as NaN).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetFigures {
    /// The relative slowdown allowed (a `5%` budget: 0.05).
    pub slowdown_limit: Option<f64>,
    /// The mean added delay allowed, s (a `1ms` budget).
    pub added_delay_limit_s: Option<f64>,
    /// The FG mean slowdown measured at the current setting.
    pub slowdown: Option<f64>,
    /// Half-width of its 95 % confidence interval.
    pub slowdown_ci95: Option<f64>,
    /// The FG p99 slowdown measured at the current setting.
    pub p99_slowdown: Option<f64>,
    /// The mean delay added to an FG read, s.
    pub added_delay_s: Option<f64>,
    /// The knob's value in use (ns for a wait).
    pub knob_value: f64,
    /// Refits so far.
    pub refits: u64,
    /// Back-offs so far.
    pub backoffs: u64,
    /// The budget is not being met.
    pub unmet: bool,
}

/// A scrub's progress gauges ([`Metrics::for_scrub`]).
#[derive(Clone)]
struct ScrubGauges {
    done_bytes: Gauge,
    target_bytes: Gauge,
    pass: Gauge,
    rate: Gauge<f64, AtomicU64>,
    eta_seconds: Gauge<f64, AtomicU64>,
    bad_ranges: Gauge,
    bad_bytes: Gauge,
    errors: Family<ErrorLabels, Gauge>,
    complete: Gauge,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
}

impl ScrubGauges {
    /// The scrub's gauges, registered in `registry`; the rate and the
    /// time left start unknown (NaN).
    fn registered(registry: &mut Registry) -> ScrubGauges {
        let g = ScrubGauges {
            done_bytes: Gauge::default(),
            target_bytes: Gauge::default(),
            pass: Gauge::default(),
            rate: Gauge::default(),
            eta_seconds: Gauge::default(),
            bad_ranges: Gauge::default(),
            bad_bytes: Gauge::default(),
            errors: Family::default(),
            complete: Gauge::default(),
        };
        registry.register(
            "scrub_done_bytes",
            "Bytes the scrub has done in this pass (scrubbed, or ranges trimmed)",
            g.done_bytes.clone(),
        );
        registry.register(
            "scrub_target_bytes",
            "Bytes the pass covers (0: not known)",
            g.target_bytes.clone(),
        );
        registry.register(
            "scrub_pass",
            "The pass, from 1 (0: the tool keeps no pass count)",
            g.pass.clone(),
        );
        registry.register(
            "scrub_rate_bytes_per_second",
            "This run's scrub rate over its wall time, idle waits included (NaN before the first byte)",
            g.rate.clone(),
        );
        registry.register(
            "scrub_eta_seconds",
            "Time left at this run's rate (NaN: not known)",
            g.eta_seconds.clone(),
        );
        registry.register(
            "scrub_bad_ranges",
            "Unreadable ranges found in this pass",
            g.bad_ranges.clone(),
        );
        registry.register(
            "scrub_bad_bytes",
            "Bytes in the unreadable ranges found in this pass",
            g.bad_bytes.clone(),
        );
        registry.register(
            "scrub_errors",
            "Errors the native tool reports, corrected or uncorrectable",
            g.errors.clone(),
        );
        registry.register(
            "scrub_complete",
            "1 once the pass is complete",
            g.complete.clone(),
        );
        g.rate.set(f64::NAN);
        g.eta_seconds.set(f64::NAN);
        g
    }
}

/// Where a scrub is, as [`Metrics::scrub_progress`] takes it. Unknowns
/// are `None` (exported as NaN, or left at 0 for counts a tool does not
/// report).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScrubProgress {
    /// Bytes done in this pass.
    pub done_bytes: u64,
    /// Bytes the pass covers.
    pub target_bytes: Option<u64>,
    /// The pass, from 1.
    pub pass: Option<u64>,
    /// This run's rate, bytes/s.
    pub rate_bytes_per_s: Option<f64>,
    /// Time left at that rate, s.
    pub eta_s: Option<f64>,
    /// Unreadable ranges found in this pass.
    pub bad_ranges: u64,
    /// Bytes in them.
    pub bad_bytes: u64,
    /// Errors the tool corrected.
    pub errors_corrected: Option<u64>,
    /// Errors the tool could not correct.
    pub errors_uncorrectable: Option<u64>,
    /// The pass is complete.
    pub complete: bool,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every counter at zero; all three states are listed
    /// from the start, so a dashboard sees a zero rather than a gap.
    pub fn new() -> Self {
        Self::build(false)
    }

    /// [`Metrics::new`] and a scrub's progress: `fallow_scrub_done_bytes`,
    /// `_target_bytes`, `_pass`, `_rate_bytes_per_second`,
    /// `_eta_seconds`, `_bad_ranges`, `_bad_bytes`,
    /// `_errors{kind="corrected"|"uncorrectable"}` and `_complete`, set by
    /// [`Metrics::scrub_progress`].
    pub fn for_scrub() -> Self {
        Self::build(true)
    }

    /// These metrics and a budgeted run's (`fallow_budget_*`: the limit,
    /// the measured slowdown and its interval, the knob's value, refits,
    /// back-offs, whether it is unmet), set by [`Metrics::budget`].
    pub fn with_budget(scrub: bool) -> Self {
        Self::build_with(scrub, true)
    }

    /// Set a budgeted run's gauges (nothing unless made by
    /// [`Metrics::with_budget`]).
    pub fn budget(&self, f: &BudgetFigures) {
        let Some(g) = &self.budget else { return };
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        g.slowdown_limit.set(nan(f.slowdown_limit));
        g.added_delay_limit.set(nan(f.added_delay_limit_s));
        g.slowdown.set(nan(f.slowdown));
        g.slowdown_ci95.set(nan(f.slowdown_ci95));
        g.p99_slowdown.set(nan(f.p99_slowdown));
        g.added_delay.set(nan(f.added_delay_s));
        g.knob_value.set(f.knob_value);
        g.refits.set(int(f.refits));
        g.backoffs.set(int(f.backoffs));
        g.unmet.set(i64::from(f.unmet));
    }

    fn build(scrub: bool) -> Self {
        Self::build_with(scrub, false)
    }

    fn build_with(scrub: bool, budget: bool) -> Self {
        let mut registry = Registry::with_prefix("fallow");
        let fg_requests = Counter::default();
        let fg_bytes = Counter::default();
        let bg_requests = Counter::default();
        let bg_bytes = Counter::default();
        let collisions = Counter::default();
        let frozen_io_bytes = Counter::default();
        let frozen_io_seconds = Counter::<f64, AtomicU64>::default();
        let state_seconds = Family::<StateLabels, Counter<f64, AtomicU64>>::default();
        let state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "fg_requests",
            "Foreground requests seen on the device",
            fg_requests.clone(),
        );
        registry.register(
            "fg_bytes",
            "Bytes moved by foreground requests",
            fg_bytes.clone(),
        );
        registry.register(
            "bg_requests",
            "Background requests issued by fallow",
            bg_requests.clone(),
        );
        registry.register(
            "bg_bytes",
            "Bytes moved by background requests",
            bg_bytes.clone(),
        );
        registry.register(
            "collisions",
            "Foreground requests that arrived while a background request held the device",
            collisions.clone(),
        );
        registry.register(
            "frozen_io_bytes",
            "Bytes a frozen command (fallow run) still read: work in the kernel that freezing does not pause",
            frozen_io_bytes.clone(),
        );
        registry.register(
            "frozen_io_seconds",
            "Time a command (fallow run) was frozen but still reading, seconds; not counted as frozen",
            frozen_io_seconds.clone(),
        );
        registry.register(
            "policy_state_seconds",
            "Time the policy driver spent in each state, seconds",
            state_seconds.clone(),
        );
        registry.register(
            "policy_state",
            "1 for the policy driver's current state, 0 for the others",
            state.clone(),
        );
        for s in PolicyState::ALL {
            let labels = StateLabels { state: s };
            let _ = state_seconds.get_or_create(&labels);
            let _ = state.get_or_create(&labels);
        }
        let scrub = scrub.then(|| ScrubGauges::registered(&mut registry));
        let budget = budget.then(|| BudgetGauges::registered(&mut registry));
        Metrics {
            registry: Arc::new(registry),
            fg_requests,
            fg_bytes,
            bg_requests,
            bg_bytes,
            collisions,
            frozen_io_bytes,
            frozen_io_seconds,
            state_seconds,
            state,
            scrub,
            budget,
        }
    }

    /// Set the scrub's progress gauges (nothing unless made by
    /// [`Metrics::for_scrub`]).
    pub fn scrub_progress(&self, p: &ScrubProgress) {
        let Some(g) = &self.scrub else { return };
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        g.done_bytes.set(int(p.done_bytes));
        g.target_bytes.set(int(p.target_bytes.unwrap_or(0)));
        g.pass.set(int(p.pass.unwrap_or(0)));
        g.rate.set(p.rate_bytes_per_s.unwrap_or(f64::NAN));
        g.eta_seconds.set(p.eta_s.unwrap_or(f64::NAN));
        g.bad_ranges.set(int(p.bad_ranges));
        g.bad_bytes.set(int(p.bad_bytes));
        for (kind, n) in [
            ("corrected", p.errors_corrected),
            ("uncorrectable", p.errors_uncorrectable),
        ] {
            if let Some(n) = n {
                g.errors.get_or_create(&ErrorLabels { kind }).set(int(n));
            }
        }
        g.complete.set(i64::from(p.complete));
    }

    /// Count one foreground request of `bytes`.
    pub fn fg_request(&self, bytes: u64) {
        self.fg_requests.inc();
        self.fg_bytes.inc_by(bytes);
    }

    /// Count `requests` foreground requests totalling `bytes` (a monitor
    /// that reports totals rather than single requests).
    pub fn fg_requests(&self, requests: u64, bytes: u64) {
        self.fg_requests.inc_by(requests);
        self.fg_bytes.inc_by(bytes);
    }

    /// Count one background request of `bytes`.
    pub fn bg_request(&self, bytes: u64) {
        self.bg_requests.inc();
        self.bg_bytes.inc_by(bytes);
    }

    /// Count one collision.
    pub fn collision(&self) {
        self.collisions.inc();
    }

    /// Count `bytes` and `seconds` a frozen command still read for.
    pub fn frozen_io(&self, bytes: u64, seconds: f64) {
        self.frozen_io_bytes.inc_by(bytes);
        if seconds > 0.0 {
            self.frozen_io_seconds.inc_by(seconds);
        }
    }

    /// Add `time` spent in `state`.
    pub fn add_state_time(&self, state: PolicyState, time: Duration) {
        self.state_seconds
            .get_or_create(&StateLabels { state })
            .inc_by(time.as_secs_f64());
    }

    /// Mark `state` as the current one.
    pub fn set_state(&self, state: PolicyState) {
        for s in PolicyState::ALL {
            self.state
                .get_or_create(&StateLabels { state: s })
                .set(i64::from(s == state));
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The metrics in `format`.
    pub fn encode_as(&self, format: Format) -> String {
        match format {
            Format::OpenMetrics => self.encode(),
            Format::Text004 => exposition::openmetrics_to_text004(&self.encode()),
        }
    }

    /// Serve `/metrics` on `addr` (e.g. `127.0.0.1:9464`; port 0 picks a
    /// free one) from a background thread until the handle is stopped or
    /// dropped.
    pub fn serve(&self, addr: &str) -> Result<MetricsServer, Error> {
        let metrics = self.clone();
        serve_text(addr, move || metrics.encode())
    }
}

/// Serve the text `encode` returns at `/metrics` on `addr`.
pub(crate) fn serve_text(
    addr: &str,
    encode: impl Fn() -> String + Send + 'static,
) -> Result<MetricsServer, Error> {
    let server = tiny_http::Server::http(addr).map_err(|e| Error::Listen {
        addr: addr.to_string(),
        message: e.to_string(),
    })?;
    let bound = server.server_addr().to_ip().ok_or_else(|| Error::Listen {
        addr: addr.to_string(),
        message: "not an IP address".into(),
    })?;
    let server = Arc::new(server);
    let s = Arc::clone(&server);
    let thread = std::thread::Builder::new()
        .name("fallow-metrics".into())
        .spawn(move || answer(&s, &encode))
        .map_err(|e| Error::Listen {
            addr: addr.to_string(),
            message: e.to_string(),
        })?;
    Ok(MetricsServer {
        server,
        thread: Some(thread),
        addr: bound,
    })
}

/// Answer scrapes with what `encode` returns (OpenMetrics text), in the
/// format the scraper's `Accept` header asks for.
fn answer(server: &tiny_http::Server, encode: &dyn Fn() -> String) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        let response = match (req.method(), path) {
            (tiny_http::Method::Get | tiny_http::Method::Head, "/metrics") => {
                let accept = req
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Accept"))
                    .map(|h| h.value.as_str());
                let format = Format::negotiate(accept);
                let header = tiny_http::Header::from_bytes("Content-Type", format.content_type())
                    .expect("a valid static header");
                let body = match format {
                    Format::OpenMetrics => encode(),
                    Format::Text004 => exposition::openmetrics_to_text004(&encode()),
                };
                tiny_http::Response::from_string(body).with_header(header)
            }
            (_, "/") => tiny_http::Response::from_string("fallow metrics: see /metrics\n"),
            _ => {
                tiny_http::Response::from_string("not found: try /metrics\n").with_status_code(404)
            }
        };
        // a scraper that hung up is its own problem
        let _ = req.respond(response);
    }
}

/// A running metrics endpoint; stops when dropped.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// The address it listens on (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop listening and wait for the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
