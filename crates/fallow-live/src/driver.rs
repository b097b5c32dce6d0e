//! The driver: one [`Policy`] from the registry, run in real time against
//! a [`Monitor`]'s events, issuing BG work through a [`BgExecutor`].
//!
//! It is the simulator's idle-interval loop (`fallow_core::sim`) with the
//! trace replaced by the device:
//!
//! - the device falls idle → [`Policy::on_busy_end`], then
//!   [`Policy::on_idle`] with `now_ns` = the idle interval's start;
//! - a [`Decision::Start`] waits `after_ns` (while watching the monitor:
//!   an FG arrival cancels the wait, and the policy hears
//!   [`Policy::on_idle_end`] with `collided = false`), then runs requests
//!   one at a time, `spacing_ns` apart, up to `max_requests`, asking
//!   [`Policy::on_bg_done`] after the burst (or after each request with
//!   `consult_each`);
//! - an FG arrival while a request is in service does not stop it (disk
//!   requests are not preemptible): the request completes, and the policy
//!   hears `on_idle_end(idle_ns, collided = true)`;
//! - after each request the driver asks the monitor for a look with
//!   nothing of its own in flight ([`Monitor::look`]) before deciding on
//!   the next: an FG request that queued behind one of ours is invisible
//!   while ours is in flight, and stays so if the next follows at once.
//!
//! The executor may also ask to wait ([`BgExecutor::ready_in_ns`]: a rate
//! ceiling, a time window); the driver waits the same way, watching the
//! monitor. No policy is named here: what a policy does is its own
//! business, down to its request size.

use crate::budget::{BudgetReport, Control, LatencyWatch, LiveBudget};
use crate::clock::monotonic_ns;
use crate::error::{Error, Result};
use crate::monitor::{Event, Monitor};
use crate::service_fit::ServiceFit;
use fallow_core::policy::{Ctx, Decision, Policy};
use fallow_core::sim::BgService;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// What an executor did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The request ran and more work remains.
    More,
    /// No work remains (this request was the last, or there was none).
    Finished,
}

/// Something that does BG work one request at a time: a scrubber reads
/// `size_bytes`; `fallow run` lets its command run for one slice.
pub trait BgExecutor {
    /// How long before the executor may run a request of `size_bytes`,
    /// ns from `now_ns` (0: now). A rate ceiling or a closed time window
    /// says so here rather than sleeping inside [`BgExecutor::run_one`], so
    /// the driver keeps watching for FG work meanwhile.
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        let _ = (size_bytes, now_ns);
        Ok(0)
    }

    /// Run one request of `size_bytes` to completion.
    fn run_one(&mut self, size_bytes: u64) -> Result<Step>;

    /// The driver is about to wait (for idle time, a policy's delay, the
    /// executor's readiness) instead of running the next request: stop any
    /// work left going after [`BgExecutor::run_one`]. `fallow run` freezes
    /// its command here, so back-to-back slices run it without a pause
    /// between them. Called before every wait; must be cheap when there is
    /// nothing to stop. Default: nothing to stop.
    fn pause(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Where the driver gets its events and its time: a [`Monitor`] on the
/// monotonic clock, or a device replayed in virtual time (a test that
/// compares the driver with the simulator exactly). The driver reads the
/// time only from here, so one run on a virtual clock is the same code as
/// a live one.
pub trait EventSource {
    /// Now, ns (`CLOCK_MONOTONIC` for a monitor).
    fn now_ns(&self) -> u64;
    /// The next event, waiting at most `timeout_ns`; `Ok(None)` on timeout
    /// ([`Monitor::recv_timeout`]).
    fn recv_timeout(&mut self, timeout_ns: u64) -> Result<Option<Event>>;
    /// The next event if one is waiting ([`Monitor::try_recv`]).
    fn try_recv(&mut self) -> Result<Option<Event>>;
    /// A look with nothing of fallow's in flight ([`Monitor::look`]).
    fn look(&self, timeout_ns: u64) -> bool;
}

impl EventSource for Monitor {
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
    fn recv_timeout(&mut self, timeout_ns: u64) -> Result<Option<Event>> {
        Monitor::recv_timeout(self, timeout_ns)
    }
    fn try_recv(&mut self) -> Result<Option<Event>> {
        Monitor::try_recv(self)
    }
    fn look(&self, timeout_ns: u64) -> bool {
        Monitor::look(self, timeout_ns)
    }
}

/// Longest wait for the monitor's look between two requests: it normally
/// takes one sample (tens of µs); on a machine too loaded to schedule the
/// monitor in time, the next request goes ahead rather than stall.
const LOOK_TIMEOUT_NS: u64 = 10_000_000;

/// Settings of a driver besides its policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverConfig {
    /// BG request size when the policy does not choose one, bytes.
    pub bg_size_bytes: u64,
    /// BG service model the policy sees until requests have been
    /// measured; then the measured mean replaces it.
    pub initial_bg_service: BgService,
    /// Seed of the policy's random stream.
    pub seed: u64,
    /// Hold an FG budget: run the policy inside the online tuner, measure
    /// the FG and back off ([`crate::budget`]). The policy's spec then
    /// leaves out its knob.
    pub budget: Option<LiveBudget>,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            bg_size_bytes: 1 << 20,
            // Practical Scrubbing Fig. 4's shape, the simulator's `size` default
            initial_bg_service: BgService::SizeBased {
                base_ns: 8_000_000,
                knee_bytes: 65_536,
                rate_bytes_per_s: 100e6,
            },
            seed: fallow_core::sim::DEFAULT_SEED,
            budget: None,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The executor has no work left.
    Finished,
    /// The stop flag was raised (a signal).
    Stopped,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriveReport {
    /// Why it ended.
    pub outcome: Outcome,
    /// The policy's registry name.
    pub policy: String,
    /// BG requests run.
    pub bg_requests: u64,
    /// Time spent in BG requests, s.
    pub bg_service_s: f64,
    /// Mean service time of a BG request, s.
    pub bg_mean_service_s: f64,
    /// BG requests an FG arrival found in service.
    pub collisions: u64,
    /// Idle intervals the policy was asked about.
    pub idle_intervals: u64,
    /// Busy periods reported to the policy.
    pub busy_periods: u64,
    /// Time the policy wanted to run BG work but the executor was not
    /// ready (rate ceiling, time window), s.
    pub throttled_s: f64,
    /// Wall time of the run, s.
    pub wall_s: f64,
    /// The budget held, what was measured and the refits (a `--budget` run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
}

/// What the driver is doing, for observers (metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriveState {
    /// FG work is being served (or the device is not yet known idle).
    Busy,
    /// The device is idle; the policy waits or holds BG work back.
    IdleWaiting,
    /// A BG request is in service.
    BgRunning,
}

/// Told what the driver does as it runs (the Prometheus exporter is one).
/// Every method has a default that does nothing.
pub trait DriveObserver: Send {
    /// The driver entered `state`.
    fn state(&mut self, _state: DriveState) {}
    /// A BG request of `bytes` finished after `service_ns`.
    fn bg_request(&mut self, _bytes: u64, _service_ns: u64) {}
    /// An FG arrival found a BG request in service.
    fn collision(&mut self) {}
    /// A budgeted run's state, at each decision.
    fn budget(&mut self, _report: &BudgetReport) {}
}

/// Runs one policy live.
pub struct Driver {
    policy: Box<dyn Policy>,
    cfg: DriverConfig,
    rng: Pcg64Mcg,
    measured_ns: Option<f64>,
    /// With a refitted size: the initial model fitted to the service
    /// times measured per size ([`ServiceFit`]).
    service_fit: Option<ServiceFit>,
    report: DriveReport,
    observer: Option<Box<dyn DriveObserver>>,
    budget: Option<Control>,
    /// When the observer was last told the budget's state, ns.
    budget_told_ns: Option<u64>,
}

/// How often a wait looks at the stop flag, ns.
const STOP_POLL_NS: u64 = 50_000_000;

/// Weight of the newest request in the service-time estimate.
const SERVICE_EWMA: f64 = 0.1;

enum Wake {
    Deadline,
    Event(Event),
    Stop,
}

impl Driver {
    /// A driver for `policy`. Clairvoyant references (they see the
    /// future) cannot run live and are refused.
    pub fn new(policy: Box<dyn Policy>, cfg: DriverConfig) -> Result<Driver> {
        if policy.clairvoyant() {
            return Err(Error::Unsupported(format!(
                "policy {} is a clairvoyant reference (it needs to know how long each idle interval will be) and cannot run on a real device",
                policy.name()
            )));
        }
        if cfg.bg_size_bytes == 0 {
            return Err(Error::invalid("bg size", "must be positive"));
        }
        let report = DriveReport {
            outcome: Outcome::Stopped,
            policy: policy.name().to_string(),
            bg_requests: 0,
            bg_service_s: 0.0,
            bg_mean_service_s: 0.0,
            collisions: 0,
            idle_intervals: 0,
            busy_periods: 0,
            throttled_s: 0.0,
            wall_s: 0.0,
            budget: None,
        };
        let service_fit = ServiceFit::new(cfg.initial_bg_service);
        Ok(Driver {
            policy,
            rng: Pcg64Mcg::seed_from_u64(cfg.seed),
            cfg,
            measured_ns: None,
            service_fit,
            report,
            observer: None,
            budget: None,
            budget_told_ns: None,
        })
    }

    /// Tell `observer` what the driver does from now on.
    pub fn set_observer(&mut self, observer: Box<dyn DriveObserver>) {
        self.observer = Some(observer);
    }

    fn observe(&mut self, f: impl FnOnce(&mut dyn DriveObserver)) {
        if let Some(o) = self.observer.as_deref_mut() {
            f(o);
        }
    }

    /// Build the policy from a registry spec (`fixed-wait:t=50ms`), as the
    /// simulator does.
    ///
    /// With [`DriverConfig::budget`], `spec` is wrapped in the online
    /// tuner (it must then leave out its knob: `fixed-wait`, not
    /// `fixed-wait:t=1s`).
    pub fn from_spec(spec: &str, cfg: DriverConfig) -> Result<Driver> {
        let mut cfg = cfg;
        // a size refit needs a model whose service grows with the size: a
        // constant one would always pick the largest
        if let Some(b) = &mut cfg.budget {
            if !matches!(cfg.initial_bg_service, BgService::SizeBased { .. }) {
                b.sizes = None;
            }
        }
        match cfg.budget {
            None => Driver::new(fallow_core::policy::build(spec)?, cfg),
            Some(b) => {
                let control = Control::new(spec, b, cfg.seed)?;
                let mut d = Driver::new(control.policy(), cfg)?;
                d.report.budget = Some(control.report());
                d.budget = Some(control);
                Ok(d)
            }
        }
    }

    /// With a budget: keep the learned window in `path` across runs (read
    /// now if it exists, a bad file an error naming it; written at the end
    /// of [`Driver::run`]). Without one, nothing.
    pub fn keep_window_in(&mut self, path: &std::path::Path) -> Result<()> {
        match &mut self.budget {
            Some(c) => c.keep_window_in(path),
            None => Ok(()),
        }
    }

    /// The budget's state now (`None` without one).
    pub fn budget_report(&self) -> Option<BudgetReport> {
        self.budget.as_ref().map(Control::report)
    }

    /// The BG service model the policy (and the tuner's window runs) see.
    /// With a refitted size, the initial size-based model fitted to the
    /// times measured per size ([`ServiceFit`]: each size's time the
    /// device's once two sizes are measured, the model scaled by the
    /// measured over modelled time before). Otherwise the measured mean,
    /// whatever the size.
    fn service(&self) -> BgService {
        if self.refits_size() {
            if let Some(svc) = self.service_fit.as_ref().and_then(ServiceFit::service) {
                return svc;
            }
        }
        match self.measured_ns {
            Some(ns) => BgService::Constant {
                ns: (ns.round() as u64).max(1),
            },
            None => self.cfg.initial_bg_service,
        }
    }

    fn refits_size(&self) -> bool {
        self.budget.as_ref().is_some_and(|c| c.cfg.sizes.is_some())
    }

    fn decide_idle(&mut self, idle_start_ns: u64, last_fg_arrival_ns: u64) -> Decision {
        let svc = self.service();
        let mut ctx = Ctx {
            now_ns: idle_start_ns,
            idle_start_ns,
            last_fg_arrival_ns,
            rng: &mut self.rng,
            bg_service: &svc,
            bg_size_bytes: self.cfg.bg_size_bytes,
            future_idle_ns: None,
        };
        self.policy.on_idle(&mut ctx)
    }

    fn decide_done(
        &mut self,
        now_ns: u64,
        idle_start_ns: u64,
        last_fg_arrival_ns: u64,
        done: u64,
    ) -> Decision {
        let svc = self.service();
        let mut ctx = Ctx {
            now_ns,
            idle_start_ns,
            last_fg_arrival_ns,
            rng: &mut self.rng,
            bg_service: &svc,
            bg_size_bytes: self.cfg.bg_size_bytes,
            future_idle_ns: None,
        };
        self.policy.on_bg_done(&mut ctx, done)
    }

    /// Wait until `deadline_ns` (forever if `None`), an event, or the stop
    /// flag, with the executor paused.
    fn wait(
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        deadline_ns: Option<u64>,
        stop: &AtomicBool,
    ) -> Result<Wake> {
        exec.pause()?;
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(Wake::Stop);
            }
            let now = monitor.now_ns();
            let slice = match deadline_ns {
                Some(d) if now >= d => return Ok(Wake::Deadline),
                Some(d) => (d - now).min(STOP_POLL_NS),
                None => STOP_POLL_NS,
            };
            if let Some(ev) = monitor.recv_timeout(slice)? {
                return Ok(Wake::Event(ev));
            }
        }
    }

    fn finish(&mut self, outcome: Outcome, t0: u64, now_ns: u64) -> DriveReport {
        self.report.outcome = outcome;
        self.report.budget = self.budget.as_ref().map(Control::report);
        self.report.wall_s = now_ns.saturating_sub(t0) as f64 / 1e9;
        self.report.bg_mean_service_s = if self.report.bg_requests > 0 {
            self.report.bg_service_s / self.report.bg_requests as f64
        } else {
            0.0
        };
        self.report.clone()
    }

    /// Run until the executor has no work left or `stop` is raised.
    pub fn run(
        &mut self,
        monitor: &mut Monitor,
        exec: &mut dyn BgExecutor,
        stop: &AtomicBool,
    ) -> Result<DriveReport> {
        // a budget measures the FG on the device's block tracepoints
        let watch = match &mut self.budget {
            Some(c) if monitor.devices().is_empty() => {
                c.measure = "not measured: no block device to trace (a file source or none); the budget is held by the model alone".into();
                None
            }
            Some(c) => match LatencyWatch::start(
                monitor.devices(),
                monitor.command_cgroup_id(),
                c.meter.clone(),
            ) {
                Ok(w) => {
                    c.measure = "events".into();
                    Some(w)
                }
                Err(e) => {
                    c.measure = format!("not measured: {e}; the budget is held by the model alone");
                    None
                }
            },
            None => None,
        };
        let r = self.run_on(monitor, exec, stop);
        drop(watch);
        let mut r = r?;
        if let Some(c) = &self.budget {
            c.save()?;
            r.budget = Some(c.report());
        }
        Ok(r)
    }

    /// [`Driver::run`] on any source of events and time: busy periods and
    /// idle intervals in turn, until the work or the stop flag ends it.
    pub fn run_on(
        &mut self,
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        stop: &AtomicBool,
    ) -> Result<DriveReport> {
        let t_start = monitor.now_ns();
        let outcome = loop {
            self.observe(|o| o.state(DriveState::Busy));
            let Some((idle_start, last_arrival)) = self.wait_for_idle(monitor, exec, stop)? else {
                break Outcome::Stopped;
            };
            match self.run_idle_interval(monitor, exec, stop, idle_start, last_arrival)? {
                IntervalEnd::FgArrived => continue,
                IntervalEnd::Run(outcome) => break outcome,
            }
        };
        Ok(self.finish(outcome, t_start, monitor.now_ns()))
    }

    /// Busy (or not yet known idle): wait for the device to fall idle,
    /// telling the policy how the busy period went. `None`: stop raised.
    fn wait_for_idle(
        &mut self,
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        stop: &AtomicBool,
    ) -> Result<Option<(u64, u64)>> {
        loop {
            match Self::wait(monitor, exec, None, stop)? {
                Wake::Stop => return Ok(None),
                Wake::Deadline | Wake::Event(Event::Busy { .. }) => continue,
                Wake::Event(Event::Idle {
                    idle_start_ns,
                    busy_ns,
                    fg_requests,
                    last_arrival_ns,
                    first,
                    ..
                }) => {
                    if !first {
                        self.report.busy_periods += 1;
                        self.policy.on_busy_end(busy_ns, fg_requests.max(1));
                    }
                    return Ok(Some((idle_start_ns, last_arrival_ns)));
                }
            }
        }
    }

    /// One idle interval: the policy's decisions and the requests they
    /// start, until an FG arrival ends it (or the work, or the stop flag,
    /// ends the run).
    fn run_idle_interval(
        &mut self,
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        stop: &AtomicBool,
        idle_start: u64,
        last_arrival: u64,
    ) -> Result<IntervalEnd> {
        self.count_idle_interval(monitor.now_ns());
        let mut done = 0u64;
        self.observe(|o| o.state(DriveState::IdleWaiting));
        let mut decision = self.decide_idle(idle_start, last_arrival);
        let mut base = idle_start;
        loop {
            let s = match decision {
                Decision::Start(s) if s.max_requests > 0 => s,
                _ => {
                    // quiet until the next FG arrival
                    let wake = Self::wait(monitor, exec, None, stop)?;
                    match Interrupted::by(wake) {
                        Some(end) => return Ok(self.interrupted(end, idle_start)),
                        None => continue,
                    }
                }
            };
            let size = s.size_bytes.max(1);
            let mut deadline = base.saturating_add(s.after_ns);
            let mut left = s.max_requests;
            loop {
                if let Some(end) = self.wait_until_ready(monitor, exec, stop, size, deadline)? {
                    return Ok(self.interrupted(end, idle_start));
                }
                let (step, t1) = self.run_request(monitor, exec, size)?;
                if step == Step::Finished {
                    return Ok(IntervalEnd::Run(Outcome::Finished));
                }
                monitor.look(LOOK_TIMEOUT_NS);
                // in an idle interval only an FG arrival can come
                if let Some(Event::Busy { at_ns, after_ns }) = monitor.try_recv()? {
                    // the arrival came before the request ended: it waited for it
                    let collided = after_ns < t1;
                    self.report.collisions += u64::from(collided);
                    if collided {
                        self.observe(|o| o.collision());
                    }
                    let end = Interrupted::FgArrived {
                        at_ns,
                        after_ns,
                        collided,
                    };
                    return Ok(self.interrupted(end, idle_start));
                }
                if stop.load(Ordering::SeqCst) {
                    return Ok(IntervalEnd::Run(Outcome::Stopped));
                }
                done += 1;
                left = left.saturating_sub(1);
                if !s.consult_each && left > 0 {
                    deadline = t1.saturating_add(s.spacing_ns);
                    continue;
                }
                decision = self.decide_done(t1, idle_start, last_arrival, done);
                base = t1;
                break;
            }
        }
    }

    /// An idle interval begins: count it, and let the budget check what
    /// it measured (the observer hears of it at most once a second).
    fn count_idle_interval(&mut self, now_ns: u64) {
        self.report.idle_intervals += 1;
        let Some(c) = &mut self.budget else {
            return;
        };
        c.check(now_ns);
        if self.observer.is_some()
            && self
                .budget_told_ns
                .is_none_or(|t| now_ns.saturating_sub(t) >= 1_000_000_000)
        {
            self.budget_told_ns = Some(now_ns);
            let r = c.report();
            self.observe(|o| o.budget(&r));
        }
    }

    /// Wait for the policy's time (`deadline_ns`) and the executor's
    /// readiness, counting a wait the executor asked for as throttled;
    /// then take a last look before a request that cannot be preempted.
    /// `Some`: what ended the wait instead.
    fn wait_until_ready(
        &mut self,
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        stop: &AtomicBool,
        size: u64,
        deadline_ns: u64,
    ) -> Result<Option<Interrupted>> {
        loop {
            let now = monitor.now_ns();
            let ready = exec.ready_in_ns(size, now)?;
            let target = deadline_ns.max(now.saturating_add(ready));
            if now >= target {
                break;
            }
            let throttle_from = now.max(deadline_ns);
            let wake = Self::wait(monitor, exec, Some(target), stop)?;
            let waited_to = monitor.now_ns().min(target);
            if ready > 0 && waited_to > throttle_from {
                self.report.throttled_s += (waited_to - throttle_from) as f64 / 1e9;
            }
            if let Some(end) = Interrupted::by(wake) {
                return Ok(Some(end));
            }
        }
        Ok(monitor
            .try_recv()?
            .and_then(|ev| Interrupted::by(Wake::Event(ev))))
    }

    /// Run one request of `size` bytes, timed (for the budget's meter, the
    /// observer and the measured service model). Returns what the executor
    /// said and when the request ended.
    fn run_request(
        &mut self,
        monitor: &mut dyn EventSource,
        exec: &mut dyn BgExecutor,
        size: u64,
    ) -> Result<(Step, u64)> {
        let t0 = monitor.now_ns();
        self.observe(|o| o.state(DriveState::BgRunning));
        if let Some(c) = &self.budget {
            c.meter
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .bg_start(t0);
        }
        let step = exec.run_one(size);
        let t1 = monitor.now_ns();
        if let Some(c) = &self.budget {
            c.meter.lock().unwrap_or_else(|p| p.into_inner()).bg_end(t1);
        }
        let step = step?;
        self.observe(|o| {
            o.bg_request(size, t1 - t0);
            o.state(DriveState::IdleWaiting);
        });
        let took = (t1 - t0) as f64;
        self.report.bg_requests += 1;
        self.report.bg_service_s += took / 1e9;
        self.measured_ns = Some(match self.measured_ns {
            Some(m) => m + SERVICE_EWMA * (took - m),
            None => took,
        });
        if self.refits_size() {
            if let Some(fit) = &mut self.service_fit {
                fit.record(size, took);
            }
        }
        Ok((step, t1))
    }

    /// What a wait or a request in an idle interval was ended by.
    fn interrupted(&mut self, end: Interrupted, idle_start_ns: u64) -> IntervalEnd {
        match end {
            Interrupted::Stop => IntervalEnd::Run(Outcome::Stopped),
            Interrupted::FgArrived {
                at_ns,
                after_ns,
                collided,
            } => {
                self.end_idle(idle_start_ns, after_ns, at_ns, collided);
                IntervalEnd::FgArrived
            }
        }
    }

    /// An FG arrival ends the interval: tell the policy how long it was
    /// (the arrival taken halfway between the last look without it,
    /// `after_ns`, and the first with it, `at_ns`).
    fn end_idle(&mut self, idle_start_ns: u64, after_ns: u64, at_ns: u64, collided: bool) {
        let arrival = after_ns + at_ns.saturating_sub(after_ns) / 2;
        self.policy
            .on_idle_end(arrival.saturating_sub(idle_start_ns), collided);
    }
}

/// How an idle interval ended.
enum IntervalEnd {
    /// An FG arrival: the device is busy again.
    FgArrived,
    /// The run ends.
    Run(Outcome),
}

/// What ended a wait, or followed a request, inside an idle interval.
enum Interrupted {
    Stop,
    /// An FG arrival, seen between `after_ns` and `at_ns`; `collided`: it
    /// came while one of our requests was in service, and waited for it.
    FgArrived {
        at_ns: u64,
        after_ns: u64,
        collided: bool,
    },
}

impl Interrupted {
    /// What a wake with nothing of ours in service ends, if anything: the
    /// stop flag, or an FG arrival (which then waited for nothing of ours).
    fn by(wake: Wake) -> Option<Interrupted> {
        match wake {
            Wake::Stop => Some(Interrupted::Stop),
            Wake::Event(Event::Busy { at_ns, after_ns }) => Some(Interrupted::FgArrived {
                at_ns,
                after_ns,
                collided: false,
            }),
            Wake::Deadline | Wake::Event(Event::Idle { .. }) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{MonitorConfig, OwnCounters, StatSource};
    use std::sync::{Arc, Mutex};

    /// Counts requests; finishes after `n`.
    struct Count {
        n: u64,
        sizes: Vec<u64>,
        ready_at_ns: u64,
    }

    impl BgExecutor for Count {
        fn ready_in_ns(&mut self, _size: u64, now_ns: u64) -> Result<u64> {
            Ok(self.ready_at_ns.saturating_sub(now_ns))
        }
        fn run_one(&mut self, size: u64) -> Result<Step> {
            self.sizes.push(size);
            Ok(if self.sizes.len() as u64 >= self.n {
                Step::Finished
            } else {
                Step::More
            })
        }
    }

    #[test]
    fn aggressive_on_an_idle_device_runs_to_the_end_with_the_policys_size() {
        let mut m = Monitor::without_device();
        let mut d = Driver::from_spec("aggressive:size=4KiB", DriverConfig::default()).unwrap();
        let mut e = Count {
            n: 100,
            sizes: vec![],
            ready_at_ns: 0,
        };
        let r = d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.outcome, Outcome::Finished);
        assert_eq!(r.bg_requests, 100);
        assert!(e.sizes.iter().all(|&s| s == 4096));
        assert_eq!((r.idle_intervals, r.collisions), (1, 0));
    }

    #[test]
    fn fixed_wait_waits_its_time_before_the_first_request() {
        let mut m = Monitor::without_device();
        let mut d = Driver::from_spec("fixed-wait:t=80ms", DriverConfig::default()).unwrap();
        let mut e = Count {
            n: 3,
            sizes: vec![],
            ready_at_ns: 0,
        };
        let t0 = monotonic_ns();
        d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
        let took = monotonic_ns() - t0;
        // the wait counts from the idle start, which is when the monitor began
        assert!(took >= 70_000_000, "{took}");
        assert_eq!(e.sizes, vec![1 << 20; 3]);
    }

    #[test]
    fn an_executor_that_is_not_ready_throttles_the_run() {
        let mut m = Monitor::without_device();
        let mut d = Driver::from_spec("aggressive", DriverConfig::default()).unwrap();
        let mut e = Count {
            n: 2,
            sizes: vec![],
            ready_at_ns: monotonic_ns() + 60_000_000,
        };
        let r = d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
        assert!(r.throttled_s >= 0.05, "{r:?}");
    }

    #[test]
    fn stop_flag_ends_a_quiet_wait() {
        let mut m = Monitor::without_device();
        // a policy that waits an hour
        let mut d = Driver::from_spec("fixed-wait:t=1h", DriverConfig::default()).unwrap();
        let mut e = Count {
            n: 1,
            sizes: vec![],
            ready_at_ns: 0,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            s2.store(true, Ordering::SeqCst);
        });
        let r = d.run(&mut m, &mut e, &stop).unwrap();
        h.join().unwrap();
        assert_eq!(r.outcome, Outcome::Stopped);
        assert_eq!(r.bg_requests, 0);
    }

    /// Records runs (`R`) and pauses (`P`).
    struct Trail {
        n: usize,
        log: String,
    }

    impl BgExecutor for Trail {
        fn run_one(&mut self, _size: u64) -> Result<Step> {
            self.log.push('R');
            Ok(if self.log.matches('R').count() >= self.n {
                Step::Finished
            } else {
                Step::More
            })
        }
        fn pause(&mut self) -> Result<()> {
            self.log.push('P');
            Ok(())
        }
    }

    #[test]
    fn pause_comes_before_waits_and_not_between_back_to_back_requests() {
        let run = |spec: &str| {
            let mut m = Monitor::without_device();
            let mut d = Driver::from_spec(spec, DriverConfig::default()).unwrap();
            let mut e = Trail {
                n: 3,
                log: String::new(),
            };
            d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
            e.log
        };
        // until FG arrives: waits (for idle, for the 5 ms) only before the first
        let log = run("fixed-wait:t=5ms");
        assert!(log.starts_with('P') && log.ends_with("RRR"), "{log}");
        // one request every 5 ms: paused between them
        let log = run("fixed-rate:r=5ms");
        assert!(log.contains("RP") && log.ends_with('R'), "{log}");
    }

    #[test]
    fn a_budget_starts_at_the_least_aggressive_value_and_says_so() {
        let cfg = DriverConfig {
            budget: Some(LiveBudget::new("5%".parse().unwrap())),
            ..DriverConfig::default()
        };
        // the knob is the tuner's to set
        let e = Driver::from_spec("fixed-wait:t=1s", cfg)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`t` is the parameter re-tuning sets"), "{e}");
        let mut d = Driver::from_spec("fixed-wait", cfg).unwrap();
        let mut m = Monitor::without_device();
        let mut e = Count {
            n: 1,
            sizes: vec![],
            ready_at_ns: 0,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            s2.store(true, Ordering::SeqCst);
        });
        let r = d.run(&mut m, &mut e, &stop).unwrap();
        h.join().unwrap();
        // a wait of 100 s: nothing read in 50 ms
        assert_eq!(r.bg_requests, 0);
        let b = r.budget.unwrap();
        assert_eq!(b.setting, "fixed-wait:t=100s");
        assert!(
            b.start.starts_with("least aggressive (t=100s, no history)"),
            "{}",
            b.start
        );
        assert!(
            b.measure.starts_with("not measured: no block device"),
            "{}",
            b.measure
        );
        assert_eq!((b.refits, b.backoffs), (0, 0));
        assert_eq!(b.history.len(), 1);
    }

    #[test]
    fn refuses_clairvoyant_policies() {
        let e = Driver::from_spec("oracle", DriverConfig::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("clairvoyant"), "{e}");
        assert!(Driver::from_spec("no-such-policy", DriverConfig::default()).is_err());
    }

    /// An executor that, while "serving" a request, makes FG activity
    /// appear in a stat file, as a foreground reader would.
    struct Collider {
        stat: std::path::PathBuf,
        sectors: u64,
        runs: u64,
    }

    impl BgExecutor for Collider {
        fn run_one(&mut self, _size: u64) -> Result<Step> {
            self.runs += 1;
            if self.runs == 2 {
                // FG arrives during the second request, which takes 100 ms
                // (long enough for the monitor to see it on a loaded machine)
                self.sectors += 8;
                let tmp = self.stat.with_extension("tmp");
                std::fs::write(
                    &tmp,
                    format!("1 0 {} 0 0 0 0 0 1 0 0 0 0 0 0 0 0\n", self.sectors),
                )
                .unwrap();
                std::fs::rename(&tmp, &self.stat).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                // and finishes
                std::fs::write(
                    &tmp,
                    format!("1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", self.sectors),
                )
                .unwrap();
                std::fs::rename(&tmp, &self.stat).unwrap();
            }
            Ok(if self.runs >= 4 {
                Step::Finished
            } else {
                Step::More
            })
        }
    }

    #[test]
    fn fg_arriving_during_a_request_is_a_collision_and_work_resumes_after() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let own = Arc::new(OwnCounters::new(None));
        let mut m = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![own],
            MonitorConfig::default(),
        )
        .unwrap();
        let mut d = Driver::from_spec("aggressive", DriverConfig::default()).unwrap();
        let mut e = Collider {
            stat: stat.clone(),
            sectors: 0,
            runs: 0,
        };
        let r = d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.outcome, Outcome::Finished);
        assert_eq!(r.collisions, 1, "{r:?}");
        assert_eq!(r.busy_periods, 1, "{r:?}");
        assert_eq!(r.idle_intervals, 2, "{r:?}");
        assert_eq!(e.runs, 4);
    }

    /// A device behind a stat file: sectors read (counted at completion,
    /// as the kernel does) and requests in flight.
    struct FakeDisk {
        stat: std::path::PathBuf,
        sectors: u64,
        in_flight: u64,
    }

    impl FakeDisk {
        fn publish(&self) {
            let tmp = self.stat.with_extension("tmp");
            let line = format!(
                "1 0 {} 0 0 0 0 0 {} 0 0 0 0 0 0 0 0\n",
                self.sectors, self.in_flight
            );
            std::fs::write(&tmp, line).unwrap();
            std::fs::rename(&tmp, &self.stat).unwrap();
        }
    }

    /// Reads back to back as the scrubber does (own sectors counted at
    /// issue); during its second read an FG read queues behind it and is
    /// served for 60 ms after it. Until then the FG read is in flight only
    /// while one of ours is too, or in the moment between two of ours.
    struct Streamer {
        disk: Arc<Mutex<FakeDisk>>,
        own: Arc<OwnCounters>,
        runs: u64,
        starts_ns: Vec<u64>,
        second_end_ns: u64,
        fg: Option<std::thread::JoinHandle<()>>,
    }

    impl BgExecutor for Streamer {
        fn run_one(&mut self, size: u64) -> Result<Step> {
            self.starts_ns.push(monotonic_ns());
            self.runs += 1;
            let read = self.own.begin_read(size);
            {
                let mut d = self.disk.lock().unwrap();
                d.in_flight += 1 + u64::from(self.runs == 2); // ours (+ the FG read)
                d.publish();
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            {
                let mut d = self.disk.lock().unwrap();
                d.sectors += size / 512;
                d.in_flight -= 1;
                d.publish();
            }
            read.done();
            if self.runs == 2 {
                self.second_end_ns = monotonic_ns();
                let disk = self.disk.clone();
                self.fg = Some(std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(60));
                    let mut d = disk.lock().unwrap();
                    d.sectors += 8;
                    d.in_flight -= 1;
                    d.publish();
                }));
            }
            Ok(if self.runs >= 60 {
                Step::Finished
            } else {
                Step::More
            })
        }
    }

    // Regression (live benchmark, emulated HDD): FG reads queued behind
    // back-to-back scrub reads went unseen until a sample happened to fall
    // between two reads, so a used idle interval ran on ~230 ms past the
    // FG arrival. The look between requests sees the FG read in flight.
    #[test]
    fn an_fg_read_queued_behind_back_to_back_own_reads_ends_the_burst() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Arc::new(Mutex::new(FakeDisk {
            stat: dir.path().join("stat"),
            sectors: 0,
            in_flight: 0,
        }));
        disk.lock().unwrap().publish();
        let own = Arc::new(OwnCounters::new(None));
        let stat = disk.lock().unwrap().stat.clone();
        let mut m = Monitor::start(
            &StatSource::file(&stat).unwrap(),
            vec![own.clone()],
            MonitorConfig::default(),
        )
        .unwrap();
        let mut d = Driver::from_spec("aggressive:size=64KiB", DriverConfig::default()).unwrap();
        let mut e = Streamer {
            disk,
            own,
            runs: 0,
            starts_ns: vec![],
            second_end_ns: 0,
            fg: None,
        };
        let r = d.run(&mut m, &mut e, &AtomicBool::new(false)).unwrap();
        e.fg.take().unwrap().join().unwrap();
        assert_eq!(r.outcome, Outcome::Finished);
        assert_eq!(r.collisions, 1, "{r:?}");
        assert_eq!(r.busy_periods, 1, "{r:?}");
        // the third read waited for the FG read to be served (60 ms)
        let gap_ns = e.starts_ns[2] - e.second_end_ns;
        assert!(
            gap_ns >= 50_000_000,
            "third read {gap_ns} ns after the second"
        );
    }
}
