//! `fixed-rate(r)`: a BG request every `r`, whatever the FG workload does —
//! what commercial scrubbers do, and the "Default priority with a delay
//! between scrub requests" baseline of Practical Scrubbing (§IV-B, Fig. 6:
//! delays of 0–256 ms).
//!
//! The engine runs BG work only in idle intervals and never preempts FG, so
//! the rate is a schedule of *due times*: request k is due at `t0 + k·r`,
//! `t0` being the start of the first idle interval the policy sees. A
//! request that falls due while FG work is in service waits (FG first, no
//! preemption) and starts as soon as the device falls idle; requests that
//! are overdue (backlogged behind FG work, or behind BG requests longer
//! than `r`) are issued back to back; otherwise the next request starts at
//! its due time. The policy asks for one request at a time
//! (`max_requests = 1`, `consult_each`) and learns from `on_bg_done` and
//! `on_idle_end` whether the request it asked for started: a due time is
//! used up once its request starts (or, with finite BG work run dry, once
//! the device was idle at that time and had nothing to do).
//!
//! **Bursts in simulation.** Told by the simulator that it runs simulated
//! ([`Policy::simulated`]) with endless BG work and deterministic service
//! `s`, the policy asks for runs of requests instead: with `s ≥ r` every
//! request is due by the time the one before it completes, so they run
//! back to back until FG arrives; with `s < r` a backlog of due requests
//! runs back to back while request `j` is due by its start, `d + j·r ≤
//! now + j·s`, and from then on each request starts at its due time, `r −
//! s` after the one before it completed (`spacing_ns`). The policy counts
//! the due times used from the engine's `done` and from the model's times
//! at the FG arrival: the same run as one request at a time, with one call
//! per run instead of one per BG request (tested against it in
//! `tests/it/policies_et.rs`).
//!
//! Under exponential service the same simulated run asks, at each idle
//! interval's start, for the whole interval on its schedule of due times
//! ([`Start::schedule`]): the engine draws it in closed form
//! ([`BgService::scheduled_burst`], Lindley's recursion drawn top-down in
//! Gamma and Beta variates, O(log) draws for a load away from 1) and tells
//! how many of its requests completed before the FG arrival
//! ([`Policy::on_burst_cut`]); the due times used are those plus the one
//! the arrival found in service. The run is the one-request protocol's in
//! distribution, not draw for draw (tested against it in
//! `tests/it/long_gaps.rs`), and a 584-year idle interval costs
//! milliseconds instead of one engine call per due time.
//!
//! On a lightly loaded device every due time is served, close to it, so
//! BG requests completed ≈ span / `r`. When `r` asks for more than the idle
//! time can hold the backlog grows without bound and the policy degenerates
//! into `aggressive`.

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};
use crate::service::{BgService, BgWork, Schedule};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "fixed-rate",
    aliases: &[],
    summary: "a BG request due every r whatever FG does; due requests wait for idle time (FG first) and run back to back when backlogged (commercial scrubbers)",
    keys: &[
        Param::new("r", ParamKind::Duration, "100ms"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: FixedRate::build,
    knob: Some(Knob::wait("r")),
    size_param: None,
    interval_rule: None,
};

/// Parameters of [`FixedRate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedRateConfig {
    /// Time between due times of successive BG requests, ns (> 0).
    pub period_ns: u64,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for FixedRateConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(FixedRateConfig::take)
    }
}

impl FixedRateConfig {
    /// Take `r=` and `size=`, each not given from the key table.
    fn take(p: &mut Params) -> Result<Self> {
        Ok(FixedRateConfig {
            period_ns: p.duration_ns("r")?,
            size_bytes: p.bytes("size")?,
        })
    }
}

/// The fixed-rate policy.
#[derive(Debug, Clone, Default)]
pub struct FixedRate {
    config: FixedRateConfig,
    /// Due time of the next request not yet started, ns (`None` before the
    /// first idle interval fixes `t0`).
    next_due_ns: Option<u64>,
    /// Start time of the request asked of the engine, ns.
    pending_start_ns: Option<u64>,
    idle_start_ns: u64,
    /// Requests started (due times used up).
    issued: u64,
    /// Ask for runs of requests (module docs, "Bursts in simulation").
    bursts: bool,
    /// The run asked of the engine, while under way.
    run: Option<Run>,
    /// Ask for whole scheduled intervals (exponential service in simulation).
    scheduled: bool,
    /// A schedule was asked of the engine for this interval.
    schedule_asked: bool,
    /// Its completed count, once the engine told it.
    schedule_completed: Option<u64>,
}

/// A run of requests asked at once (bursts in simulation).
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Start of its first request, ns.
    start_ns: u64,
    /// From one request's start to the next, ns (service + spacing).
    cycle_ns: u64,
    /// Most requests in the run.
    max: u64,
    /// BG requests completed in the idle interval when it was asked.
    done_before: u64,
}

impl FixedRate {
    /// A schedule that starts at the first idle interval.
    pub fn new(config: FixedRateConfig) -> Self {
        FixedRate {
            config,
            ..FixedRate::default()
        }
    }

    /// Build from `r=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = FixedRateConfig::take(&mut p)?;
        p.finish_keys()?;
        if config.period_ns == 0 {
            return Err(Error::invalid("fixed-rate:r", "must be positive"));
        }
        Ok(Box::new(FixedRate::new(config)))
    }

    /// Its parameters.
    pub fn config(&self) -> &FixedRateConfig {
        &self.config
    }

    /// Due times used up so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Due time of the next request, ns (`None` before the first idle interval).
    pub fn next_due_ns(&self) -> Option<u64> {
        self.next_due_ns
    }

    fn used(&mut self, n: u64) {
        self.issued += n;
        if let Some(d) = self.next_due_ns.as_mut() {
            *d = d.saturating_add(self.config.period_ns.saturating_mul(n));
        }
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        let now = ctx.now_ns;
        let due = self.next_due_ns.unwrap_or(now);
        let start = due.max(now);
        let size = self.config.size_bytes.unwrap_or(ctx.bg_size_bytes);
        self.run = None;
        if self.bursts && ctx.bg_service.is_deterministic() {
            // the engine's own rounding of a deterministic service time
            let s = (ctx.bg_service.mean_ns(size).round() as u64).max(1);
            let r = self.config.period_ns;
            let (max, spacing_ns) = if s >= r {
                // every request is due when the one before it completes
                (u64::MAX, 0)
            } else if due < now {
                // the backlog: request j is due by its start while j ≤ (now − d)/(r − s)
                ((now - due) / (r - s) + 1, 0)
            } else {
                // on schedule: each request at its due time
                (u64::MAX, r - s)
            };
            self.pending_start_ns = None;
            self.run = Some(Run {
                start_ns: start,
                cycle_ns: s + spacing_ns,
                max,
                done_before: done,
            });
            return Decision::Start(Start {
                max_requests: max,
                spacing_ns,
                ..Start::until_fg(start - now, size)
            });
        }
        self.pending_start_ns = Some(start);
        // the rest of the interval on the schedule where the engine draws
        // it; one request, as the live driver runs it, otherwise
        let schedule = (self.scheduled && ctx.bg_service.scheduled_burst_exists()).then(|| {
            Schedule {
                period_ns: self.config.period_ns,
                overdue_ns: now.saturating_sub(due),
            }
        });
        self.schedule_asked = schedule.is_some();
        self.schedule_completed = None;
        Decision::Start(Start {
            max_requests: 1,
            consult_each: true,
            schedule,
            ..Start::until_fg(start - now, size)
        })
    }
}

impl Policy for FixedRate {
    fn name(&self) -> &str {
        "fixed-rate"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.idle_start_ns = ctx.now_ns;
        self.next_due_ns.get_or_insert(ctx.now_ns);
        self.ask(ctx, 0)
    }

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        // the engine ran the schedule's first request alone
        self.schedule_asked = false;
        if let Some(run) = self.run.take() {
            // the run ended with the device idle: each completion used a due time
            self.used(done.saturating_sub(run.done_before));
        } else if self.pending_start_ns.take().is_some() {
            self.used(1);
        }
        self.ask(ctx, done)
    }

    fn on_burst_cut(&mut self, completed: u64) {
        if self.schedule_asked {
            self.schedule_completed = Some(completed);
        }
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        if std::mem::take(&mut self.schedule_asked) {
            if let Some(done) = self.schedule_completed.take() {
                // every request that started before the arrival: those
                // that completed and the one it found in service
                self.pending_start_ns = None;
                self.used(done + u64::from(collided));
                return;
            }
            // the schedule never started (its first due time lay past
            // the arrival): the pending request's rule below
        }
        let end = self.idle_start_ns.saturating_add(idle_ns);
        if let Some(run) = self.run.take() {
            // every request of the run that started before the arrival (the
            // last cut by it, or completing at its very ns)
            if end > run.start_ns {
                self.used(((end - run.start_ns - 1) / run.cycle_ns + 1).min(run.max));
            }
        }
        if let Some(start) = self.pending_start_ns.take() {
            // the engine starts a request whose start lies inside the interval
            if collided || start < end {
                self.used(1);
            }
        }
    }

    fn simulated(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        self.bursts = *bg_work == BgWork::Endless && bg_service.is_deterministic();
        self.scheduled = *bg_work == BgWork::Endless && bg_service.scheduled_burst_exists();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    const MS: u64 = 1_000_000;

    fn after(pol: &mut FixedRate, at: u64, done: Option<u64>) -> u64 {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 2 * MS };
        let mut ctx = Ctx {
            now_ns: at,
            idle_start_ns: at,
            last_fg_arrival_ns: 0,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 65_536,
            future_idle_ns: None,
        };
        let d = match done {
            None => pol.on_idle(&mut ctx),
            Some(n) => pol.on_bg_done(&mut ctx, n),
        };
        match d {
            Decision::Start(s) => {
                assert_eq!((s.max_requests, s.consult_each), (1, true));
                s.after_ns
            }
            Decision::Quiet => panic!("quiet"),
        }
    }

    #[test]
    fn requests_at_due_times_and_backlog_back_to_back() {
        // r = 100 ms, BG 2 ms; idle 0..150, busy 150..400, idle 400..1000
        let mut pol = FixedRate::new(FixedRateConfig {
            period_ns: 100 * MS,
            size_bytes: None,
        });
        assert_eq!(after(&mut pol, 0, None), 0, "due at t0");
        assert_eq!(after(&mut pol, 2 * MS, Some(1)), 98 * MS, "next due at 100");
        assert_eq!(
            after(&mut pol, 102 * MS, Some(2)),
            98 * MS,
            "next due at 200"
        );
        pol.on_idle_end(150 * MS, false); // FG at 150: the request due at 200 did not start
        assert_eq!(pol.issued(), 2);
        // due at 200, 300, 400 by the time the device falls idle at 400
        assert_eq!(after(&mut pol, 400 * MS, None), 0);
        assert_eq!(after(&mut pol, 402 * MS, Some(1)), 0);
        assert_eq!(after(&mut pol, 404 * MS, Some(2)), 0);
        assert_eq!(
            after(&mut pol, 406 * MS, Some(3)),
            94 * MS,
            "caught up: 500"
        );
        assert_eq!(pol.issued(), 5);
        assert_eq!(pol.next_due_ns(), Some(500 * MS));
    }

    #[test]
    fn a_request_cut_by_fg_used_its_due_time() {
        let mut pol = FixedRate::new(FixedRateConfig::default());
        assert_eq!(after(&mut pol, 0, None), 0);
        pol.on_idle_end(MS, true); // FG at 1 ms found it in service
        assert_eq!(pol.issued(), 1);
        assert_eq!(after(&mut pol, 10 * MS, None), 90 * MS);
        pol.on_idle_end(90 * MS, false); // FG exactly at the due time: not started
        assert_eq!(pol.issued(), 1);
    }

    #[test]
    fn builds_from_params() {
        let pol = super::super::build("fixed-rate:r=50ms,size=1MiB").unwrap();
        assert_eq!(pol.name(), "fixed-rate");
        assert!(super::super::build("fixed-rate:r=0").is_err());
        assert!(super::super::build("fixed-rate:rate=1").is_err());
    }
}
