//! `preemption-interval(p, variant, start)`: Eggert & Touch's idletime
//! scheduler (*Idletime Scheduling with Preemption Intervals*, SOSP 2005).
//! After FG work the device stays idle for a *preemption interval* `p`
//! during which no BG request starts (§2); BG work starts only once a full
//! interval passed without an FG arrival, so a burst of FG requests whose
//! gaps are shorter than `p` pays at most one preemption (§2, Fig. 1).
//!
//! ## The Moore machine (§3, Appendix A)
//! States I (idle, the start state), F (serving FG), B (serving BG), P (in a
//! preemption interval); events f (an FG request heads the queue), b (a BG
//! request heads it), t (the interval timer expired), i (the queue is
//! empty). Every variant has I→F, F→F, P→F, B→F on f; F→P on b and on i
//! (every path from F to B goes through P); P→I on t; I→B on b; I, P stay
//! put on i, P on b. The four variants of Appendix A (Fig. 13) differ only
//! in state B:
//!
//! | `variant`                | Fig. 13      | B on b | B on i | engine mapping after a BG completion                          |
//! |--------------------------|--------------|--------|--------|---------------------------------------------------------------|
//! | `burst-idle` (default)   | top left     | B      | I      | next request at once; at a batch end at once (B→I→B)          |
//! | `burst-preempt`          | top right    | B      | P      | next request at once; at a batch end after `p` (B→P→I→B)     |
//! | `request-idle`           | bottom left  | P      | I      | next request after `p` (= `spacing_ns`); at a batch end at once |
//! | `request-preempt`        | bottom right | P      | P      | next request after `p`, batch end or not                      |
//!
//! `burst-idle` is the variant the paper implemented in FreeBSD (§3, Fig. 5):
//! one interval per BG burst, none between BG bursts.
//!
//! **Engine mapping.** Each BG request is one `Start { max_requests: 1,
//! consult_each: true }`: the policy sees every BG completion
//! (`on_bg_done`), as the FreeBSD scheduler does, and answers with the
//! next request `after_ns = 0` (B→B) or `after_ns = p` (B→P, the same as
//! `spacing_ns = p`). The obvious mapping, one `Start` with `max_requests`
//! and `spacing_ns` per burst, lets the engine compute a burst in closed
//! form but tells the policy only that the burst ended, not how many BG
//! requests completed before the FG arrival cut it; the per-state counters
//! (§5.2) need every completion. The cost is one policy call per BG request.
//!
//! **Batches.** In fallow, BG work never *arrives* during an idle interval
//! (endless work is always queued, finite work only shrinks, arrival-driven
//! work arrives with FG writes, i.e. in busy periods), so an i event in B
//! happens only when the BG queue runs dry. `batch=N` models a BG producer
//! that queues N requests at a time and the next N the moment the queue
//! empties (the paper's "idletime use is bursty"): after every N-th BG
//! request the machine sees i, then b. Without it (the default) the BG queue
//! never empties during an idle interval and `burst-idle` ≡ `burst-preempt`,
//! `request-idle` ≡ `request-preempt` (they then differ only in counters, once
//! a finite BG supply runs dry).
//!
//! **Interval start.** `start=fg-end` (§2) starts the interval at the last
//! FG completion; `start=fg-start` starts it when the last FG request started
//! (§3.3, the FreeBSD implementation), taken as `ctx.last_fg_arrival_ns`:
//! the engine reports the last FG arrival, which is that request's start
//! when it found the device free; when it queued, its real start was later
//! and the interval here ends earlier than FreeBSD's. With `fg-start` and
//! `p` shorter than the FG service time the interval is always over when
//! the device falls idle: the scheduler is a priority queue (§4), the same
//! run as `aggressive` — byte for byte with deterministic BG service, in
//! distribution otherwise (the engine draws `aggressive`'s bursts in closed
//! form and this policy's requests one by one). Intervals
//! entered from B (the `request-*` and `*-preempt` variants) start at the
//! BG completion: the timer restarts whenever the scheduler re-enters P (§3);
//! §3.3 moves only the FG-triggered start.
//!
//! **Counters** (§5.2): one per state × event, bumped at each instant the
//! scheduler looks at its queue — an FG or BG completion, a timer expiry, an
//! FG arrival, a BG batch arriving (I idling on i is not counted). Inside a
//! busy period each FG request after the first is an `F[f]`. The engine does
//! not tell a policy whether BG work is queued: the machine assumes it is
//! (b) until a BG request it asked for did not start although the device
//! stayed idle past its start (the queue was empty: i). An FG arrival at
//! the very nanosecond a BG request completes is a `B[f]` without delay; it is
//! recognised when BG service is deterministic and otherwise (probability
//! ~0 with random service) read as an empty queue.

mod machine;

pub use machine::{next_state, IntervalCounters, IntervalEvent, IntervalState, IntervalVariant};

use super::{Ctx, Decision, Params, Policy, Start};
use crate::error::{Error, Result};
use serde::Serialize;

/// Where a preemption interval after FG work starts (§2 vs §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalStart {
    /// At the last FG completion (§2).
    FgEnd,
    /// When the last FG request started, as FreeBSD does (§3.3).
    FgStart,
}

/// Parameters of [`PreemptionInterval`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionIntervalConfig {
    /// Preemption interval length, ns.
    pub interval_ns: u64,
    /// Which Appendix-A machine.
    pub variant: IntervalVariant,
    /// Where an interval after FG work starts.
    pub start: IntervalStart,
    /// BG requests the BG producer queues at a time (`None`: the queue
    /// never runs dry during an idle interval).
    pub batch: Option<u64>,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for PreemptionIntervalConfig {
    fn default() -> Self {
        PreemptionIntervalConfig {
            // the paper's disk experiments span 0 to a few hundred ms (§4)
            interval_ns: 100_000_000,
            variant: IntervalVariant::BurstIdle,
            start: IntervalStart::FgEnd,
            batch: None,
            size_bytes: None,
        }
    }
}

impl PreemptionIntervalConfig {
    /// Parameter names taken by [`PreemptionIntervalConfig::take`].
    pub(crate) const KEYS: [&'static str; 5] = ["p", "variant", "start", "batch", "size"];

    /// Take `p=`, `variant=`, `start=`, `batch=`, `size=` (shared with the
    /// policies built on this machine); `interval_ns` defaults to `default_ns`.
    pub(crate) fn take(p: &mut Params, policy: &str, default_ns: u64) -> Result<Self> {
        let interval_ns = p.duration_ns("p", default_ns)?;
        let variant = match p.take("variant") {
            None => IntervalVariant::BurstIdle,
            Some(v) => IntervalVariant::parse(&v).ok_or_else(|| {
                Error::invalid(
                    format!("{policy}:variant"),
                    format!("`{v}` (burst-idle, burst-preempt, request-idle, request-preempt; or tl, tr, bl, br)"),
                )
            })?,
        };
        let start = match p.take("start").as_deref() {
            None | Some("fg-end") => IntervalStart::FgEnd,
            Some("fg-start") => IntervalStart::FgStart,
            Some(v) => {
                return Err(Error::invalid(
                    format!("{policy}:start"),
                    format!("`{v}` (fg-end or fg-start)"),
                ))
            }
        };
        let batch = match p.take("batch") {
            None => None,
            Some(v) if v == "inf" || v == "unbounded" => None,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    return Err(Error::invalid(
                        format!("{policy}:batch"),
                        format!("`{v}` is not a positive whole number (or inf)"),
                    ))
                }
            },
        };
        Ok(PreemptionIntervalConfig {
            interval_ns,
            variant,
            start,
            batch,
            size_bytes: p.bytes("size", None)?,
        })
    }
}

/// A BG request asked of the engine, and how the machine got there.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// State the decision was taken in: F (idle start) or B (BG completion).
    from: IntervalState,
    /// The BG request that just completed ended its batch (i, then b).
    batch_end: bool,
    /// When the decision was taken, ns.
    decided_ns: u64,
    /// When the requested BG request starts, ns.
    start_ns: u64,
    /// When the interval an empty BG queue leads to expires, ns (`None`: no
    /// interval on that path).
    empty_timer_ns: Option<u64>,
}

/// The preemption-interval policy.
#[derive(Debug, Clone)]
pub struct PreemptionInterval {
    config: PreemptionIntervalConfig,
    state: IntervalState,
    counters: IntervalCounters,
    pending: Option<Pending>,
    idle_start_ns: u64,
    /// The FG arrival that began the current busy period was counted.
    busy_entered: bool,
    /// BG requests started from the current batch.
    batch_started: u64,
    /// BG service time when the model is deterministic (tie detection), ns.
    fixed_service_ns: Option<u64>,
}

impl PreemptionInterval {
    /// A machine in state I with zero counters.
    pub fn new(config: PreemptionIntervalConfig) -> Self {
        PreemptionInterval {
            config,
            state: IntervalState::Idle,
            counters: IntervalCounters::default(),
            pending: None,
            idle_start_ns: 0,
            busy_entered: false,
            batch_started: 0,
            fixed_service_ns: None,
        }
    }

    /// Build from `p=`, `variant=`, `start=`, `batch=`, `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let d = PreemptionIntervalConfig::default();
        let config = PreemptionIntervalConfig::take(&mut p, "preemption-interval", d.interval_ns)?;
        p.finish(&PreemptionIntervalConfig::KEYS)?;
        Ok(Box::new(PreemptionInterval::new(config)))
    }

    /// Its parameters.
    pub fn config(&self) -> &PreemptionIntervalConfig {
        &self.config
    }

    /// The state × event counters so far.
    pub fn counters(&self) -> &IntervalCounters {
        &self.counters
    }

    /// The state right after the last decision: P while a BG request waits
    /// for its interval to expire, B when it starts at once. Counters, in
    /// contrast, are committed when the engine reveals what happened
    /// (whether the BG queue held work is known only then).
    pub fn state(&self) -> IntervalState {
        match self.pending {
            Some(p) if p.start_ns > p.decided_ns => IntervalState::Preempt,
            Some(_) => IntervalState::Bg,
            None => self.state,
        }
    }

    /// Change the interval length from the next decision on (adaptive policy).
    pub(crate) fn set_interval_ns(&mut self, ns: u64) {
        self.config.interval_ns = ns;
    }

    fn emit(&mut self, e: IntervalEvent) {
        self.counters.add(self.state, e, 1);
        self.state = next_state(self.config.variant, self.state, e);
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>, pending: Pending) -> Decision {
        let size = self.config.size_bytes.unwrap_or(ctx.bg_size_bytes);
        self.fixed_service_ns = ctx
            .bg_service
            .is_deterministic()
            .then(|| (ctx.bg_service.mean_ns(size).round() as u64).max(1));
        let after_ns = pending.start_ns - ctx.now_ns;
        self.pending = Some(pending);
        Decision::Start(Start {
            after_ns,
            size_bytes: size,
            max_requests: 1,
            spacing_ns: 0,
            consult_each: true,
        })
    }

    /// The device fell idle (F→P); `skip` ends the interval at once
    /// (credit-based skipping).
    pub(crate) fn idle_start(&mut self, ctx: &mut Ctx<'_>, skip: bool) -> Decision {
        if self.state != IntervalState::Fg {
            // no busy period was reported: the FG request that ended arrived now
            self.emit(IntervalEvent::Fg);
        }
        let now = ctx.now_ns;
        self.idle_start_ns = now;
        if self.config.batch.is_some_and(|n| self.batch_started >= n) {
            self.batch_started = 0;
        }
        let expiry = if skip {
            now
        } else {
            match self.config.start {
                IntervalStart::FgEnd => now.saturating_add(self.config.interval_ns),
                IntervalStart::FgStart => ctx
                    .last_fg_arrival_ns
                    .saturating_add(self.config.interval_ns)
                    .max(now),
            }
        };
        self.ask(
            ctx,
            Pending {
                from: IntervalState::Fg,
                batch_end: false,
                decided_ns: now,
                start_ns: expiry,
                empty_timer_ns: Some(expiry),
            },
        )
    }

    /// Events from the decision to the requested BG request's start.
    fn ran_events(&self, p: &Pending) -> &'static [IntervalEvent] {
        use IntervalEvent::{Bg, Empty, Timeout};
        let v = self.config.variant;
        match (p.from, p.batch_end) {
            (IntervalState::Bg, false) if !v.interval_per_request() => &[Bg],
            (IntervalState::Bg, true) if !v.interval_after_burst() => &[Empty, Bg],
            // the next batch arrives while P runs
            (IntervalState::Bg, true) => &[Empty, Bg, Timeout, Bg],
            // F→P (b not consumed), P→I, I→B; or B→P, P→I, I→B
            _ => &[Bg, Timeout, Bg],
        }
    }

    fn ran(&mut self, p: &Pending) {
        for &e in self.ran_events(p) {
            self.emit(e);
        }
        self.batch_started += 1;
    }

    fn bg_done(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        if let Some(p) = self.pending.take() {
            self.ran(&p);
        }
        let now = ctx.now_ns;
        let p = self.config.interval_ns;
        let v = self.config.variant;
        let batch_end = self.config.batch.is_some_and(|n| self.batch_started >= n);
        if batch_end {
            self.batch_started = 0;
        }
        let wait = if batch_end {
            v.interval_after_burst()
        } else {
            v.interval_per_request()
        };
        self.ask(
            ctx,
            Pending {
                from: IntervalState::Bg,
                batch_end,
                decided_ns: now,
                start_ns: if wait { now.saturating_add(p) } else { now },
                empty_timer_ns: v.interval_after_burst().then(|| now.saturating_add(p)),
            },
        )
    }

    fn idle_end(&mut self, idle_ns: u64, collided: bool) {
        let end = self.idle_start_ns.saturating_add(idle_ns);
        match self.pending.take() {
            None => self.emit(IntervalEvent::Fg),
            Some(p) if collided => {
                self.ran(&p);
                self.emit(IntervalEvent::Fg);
            }
            Some(p) if end <= p.start_ns => {
                // FG first (at a tie with t, f wins: t "can occur only when there is no f")
                for &e in self.ran_events(&p) {
                    if e == IntervalEvent::Timeout {
                        break;
                    }
                    self.emit(e);
                }
                self.emit(IntervalEvent::Fg);
            }
            Some(p)
                if self
                    .fixed_service_ns
                    .is_some_and(|s| p.start_ns.saturating_add(s) == end) =>
            {
                // it ran and completed the very nanosecond FG arrived
                self.ran(&p);
                self.emit(IntervalEvent::Fg);
            }
            Some(p) => {
                // the device stayed idle past the start, yet nothing ran: no BG work
                self.emit(IntervalEvent::Empty);
                if self.state == IntervalState::Preempt
                    && end > p.empty_timer_ns.unwrap_or(p.start_ns)
                {
                    self.emit(IntervalEvent::Timeout);
                }
                self.emit(IntervalEvent::Fg);
            }
        }
        self.busy_entered = true;
    }

    fn busy_end(&mut self, requests: u32) {
        if !self.busy_entered {
            // the first busy period (I[f]), or one the previous ran into (F[f])
            self.emit(IntervalEvent::Fg);
        }
        self.busy_entered = false;
        // each further FG request headed the queue when the one before completed
        self.counters.add(
            IntervalState::Fg,
            IntervalEvent::Fg,
            u64::from(requests.saturating_sub(1)),
        );
    }
}

impl Policy for PreemptionInterval {
    fn name(&self) -> &str {
        "preemption-interval"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.idle_start(ctx, false)
    }

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, _done: u64) -> Decision {
        self.bg_done(ctx)
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.idle_end(idle_ns, collided);
    }

    fn on_busy_end(&mut self, _busy_ns: u64, requests: u32) {
        self.busy_end(requests);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::BgService;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;
    use IntervalEvent::{Bg as b, Empty as i, Fg as f, Timeout as t};
    use IntervalState::{Bg as B, Fg as F, Idle as I, Preempt as P};

    const MS: u64 = 1_000_000;

    /// Drives a policy the way the engine does, with constant 5 ms BG service
    /// unless told otherwise.
    struct Drive {
        rng: Pcg64Mcg,
        svc: BgService,
        idle_start: u64,
    }

    impl Drive {
        fn new() -> Self {
            Drive {
                rng: Pcg64Mcg::seed_from_u64(1),
                svc: BgService::Constant { ns: 5 * MS },
                idle_start: 0,
            }
        }
        fn ctx(&mut self, now: u64, last_arrival: u64) -> Ctx<'_> {
            Ctx {
                now_ns: now,
                idle_start_ns: self.idle_start,
                last_fg_arrival_ns: last_arrival,
                rng: &mut self.rng,
                bg_service: &self.svc,
                bg_size_bytes: 65_536,
                future_idle_ns: None,
            }
        }
        fn idle(&mut self, pol: &mut dyn Policy, at: u64, last_arrival: u64) -> Decision {
            self.idle_start = at;
            pol.on_idle(&mut self.ctx(at, last_arrival))
        }
        fn done(&mut self, pol: &mut dyn Policy, at: u64, n: u64) -> Decision {
            pol.on_bg_done(&mut self.ctx(at, 0), n)
        }
    }

    fn after(d: Decision) -> u64 {
        match d {
            Decision::Start(s) => {
                assert_eq!((s.max_requests, s.consult_each), (1, true));
                s.after_ns
            }
            Decision::Quiet => panic!("quiet"),
        }
    }

    fn pi(p_ms: u64, variant: IntervalVariant, start: IntervalStart) -> PreemptionInterval {
        PreemptionInterval::new(PreemptionIntervalConfig {
            interval_ns: p_ms * MS,
            variant,
            start,
            ..Default::default()
        })
    }

    /// Expected counters from a list of (state, event, count).
    fn counts(list: &[(IntervalState, IntervalEvent, u64)]) -> IntervalCounters {
        let mut c = IntervalCounters::default();
        for &(s, e, k) in list {
            c.add(s, e, k);
        }
        c
    }

    #[test]
    fn gap_just_shorter_than_the_interval_runs_no_bg() {
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(30 * MS, 3);
        assert_eq!(after(d.idle(&mut pol, 100 * MS, 90 * MS)), 10 * MS);
        assert_eq!(pol.state(), P);
        // FG arrives 1 ns before the timer
        pol.on_idle_end(10 * MS - 1, false);
        assert_eq!(
            *pol.counters(),
            counts(&[(I, f, 1), (F, f, 2), (F, b, 1), (P, f, 1)])
        );
        assert_eq!(pol.state(), F);
    }

    #[test]
    fn fg_at_the_timer_instant_wins() {
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 1);
        d.idle(&mut pol, 0, 0);
        pol.on_idle_end(10 * MS, false); // the engine starts nothing at begin == idle
        assert_eq!(pol.counters().get(P, f), 1);
        assert_eq!(pol.counters().get(P, t), 0);
    }

    #[test]
    fn gap_longer_runs_a_burst_cut_by_fg() {
        // p = 10 ms, BG 5 ms: BG at 10..15, 15..20, 20..25; FG arrives at 22
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 1);
        assert_eq!(after(d.idle(&mut pol, 0, 0)), 10 * MS);
        assert_eq!(after(d.done(&mut pol, 15 * MS, 1)), 0);
        assert_eq!(pol.state(), B);
        assert_eq!(after(d.done(&mut pol, 20 * MS, 2)), 0);
        pol.on_idle_end(22 * MS, true);
        assert_eq!(
            *pol.counters(),
            counts(&[
                (I, f, 1),
                (F, b, 1),
                (P, t, 1),
                (I, b, 1),
                (B, b, 2),
                (B, f, 1)
            ])
        );
        assert_eq!(pol.state(), F);
    }

    #[test]
    fn per_request_variant_waits_the_interval_between_bg_requests() {
        // BG 10..15, then P until 25; FG at 22 finds P
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::RequestIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 1);
        assert_eq!(after(d.idle(&mut pol, 0, 0)), 10 * MS);
        assert_eq!(after(d.done(&mut pol, 15 * MS, 1)), 10 * MS);
        pol.on_idle_end(22 * MS, false);
        assert_eq!(
            *pol.counters(),
            counts(&[
                (I, f, 1),
                (F, b, 1),
                (P, t, 1),
                (I, b, 1),
                (B, b, 1),
                (P, f, 1)
            ])
        );
        // next interval: a second BG request after the interval, then FG during it
        assert_eq!(after(d.idle(&mut pol, 100 * MS, 90 * MS)), 10 * MS);
        assert_eq!(after(d.done(&mut pol, 115 * MS, 1)), 10 * MS);
        pol.on_idle_end(28 * MS, true); // BG 125..130 in service at 128
        assert_eq!(pol.counters().get(B, b), 2);
        assert_eq!(pol.counters().get(P, t), 3);
        assert_eq!(pol.counters().get(B, f), 1);
    }

    #[test]
    fn fg_start_measures_from_the_last_arrival() {
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgStart);
        pol.on_busy_end(5 * MS, 1);
        // last FG arrived at 95, finished at 100: 5 ms of the interval are left
        assert_eq!(after(d.idle(&mut pol, 100 * MS, 95 * MS)), 5 * MS);
        pol.on_idle_end(50 * MS, true);
        // an interval shorter than the service time is over at once: priority queue
        let mut pol = pi(3, IntervalVariant::BurstIdle, IntervalStart::FgStart);
        pol.on_busy_end(5 * MS, 1);
        assert_eq!(after(d.idle(&mut pol, 100 * MS, 95 * MS)), 0);
    }

    #[test]
    fn batches_separate_the_left_and_right_variants() {
        // batch of 2: after the 2nd request the queue empties (i) and refills (b)
        for (variant, wait, events) in [
            (
                IntervalVariant::BurstIdle,
                0,
                counts(&[(B, i, 1), (I, b, 2)]),
            ),
            (
                IntervalVariant::BurstPreempt,
                10 * MS,
                counts(&[(B, i, 1), (P, b, 1), (P, t, 2), (I, b, 2)]),
            ),
        ] {
            let mut d = Drive::new();
            let mut pol = PreemptionInterval::new(PreemptionIntervalConfig {
                interval_ns: 10 * MS,
                variant,
                batch: Some(2),
                ..Default::default()
            });
            pol.on_busy_end(MS, 1);
            assert_eq!(after(d.idle(&mut pol, 0, 0)), 10 * MS);
            assert_eq!(after(d.done(&mut pol, 15 * MS, 1)), 0, "{variant:?}");
            assert_eq!(after(d.done(&mut pol, 20 * MS, 2)), wait, "{variant:?}");
            // the third request (first of batch 2) runs and completes
            let at = 20 * MS + wait + 5 * MS;
            assert_eq!(after(d.done(&mut pol, at, 3)), 0, "{variant:?}");
            for s in IntervalState::ALL {
                for e in [b, i] {
                    if s != B || e != b {
                        assert_eq!(
                            pol.counters().get(s, e),
                            events.get(s, e) + u64::from(s == F && e == b),
                            "{variant:?} {}[{}]",
                            s.letter(),
                            e.letter()
                        );
                    }
                }
            }
            assert_eq!(pol.counters().get(B, b), 1, "{variant:?}");
        }
    }

    #[test]
    fn an_empty_bg_queue_is_seen_as_i() {
        // exponential service: no tie detection; the timer fired at 10 ms but
        // nothing ran before FG arrived at 50 ms
        let mut d = Drive::new();
        d.svc = BgService::Exponential { mean_ns: 5 * MS };
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 1);
        d.idle(&mut pol, 0, 0);
        pol.on_idle_end(50 * MS, false);
        assert_eq!(
            *pol.counters(),
            counts(&[(I, f, 1), (F, i, 1), (P, t, 1), (I, f, 1)])
        );
    }

    #[test]
    fn a_bg_completion_at_the_fg_arrival_is_a_delay_free_b_f() {
        // constant 5 ms: BG 10..15 and FG at 15 exactly; the engine reports no collision
        let mut d = Drive::new();
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 1);
        d.idle(&mut pol, 0, 0);
        pol.on_idle_end(15 * MS, false);
        assert_eq!(
            *pol.counters(),
            counts(&[(I, f, 1), (F, b, 1), (P, t, 1), (I, b, 1), (B, f, 1)])
        );
    }

    #[test]
    fn busy_periods_that_run_together_count_f_in_f() {
        let mut pol = pi(10, IntervalVariant::BurstIdle, IntervalStart::FgEnd);
        pol.on_busy_end(MS, 2);
        pol.on_busy_end(MS, 3); // no idle interval in between
        assert_eq!(*pol.counters(), counts(&[(I, f, 1), (F, f, 4)]));
    }

    #[test]
    fn builds_from_params() {
        let mut pol = super::super::build(
            "preemption-interval:p=5ms,variant=br,start=fg-start,batch=4,size=4KiB",
        )
        .unwrap();
        assert_eq!(pol.name(), "preemption-interval");
        let mut d = Drive::new();
        match d.idle(pol.as_mut(), 100 * MS, 99 * MS) {
            Decision::Start(s) => assert_eq!((s.after_ns, s.size_bytes), (4 * MS, 4096)),
            Decision::Quiet => panic!(),
        }
        for bad in [
            "preemption-interval:variant=middle",
            "preemption-interval:start=soon",
            "preemption-interval:batch=0",
            "preemption-interval:q=1",
        ] {
            assert!(super::super::build(bad).is_err(), "{bad}");
        }
    }
}
