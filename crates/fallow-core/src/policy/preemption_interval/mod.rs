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
//! **Bursts in simulation.** Told by the simulator that it runs simulated
//! ([`Policy::simulated`]) with endless BG work and deterministic service
//! (constant or size-based), the machine asks for the
//! whole idle interval's BG work in one `Start` instead: after the interval,
//! requests back to back (`burst-*`) or `p` apart (`request-*`) until FG
//! arrives. Every request then takes the model's service time `s`, so the
//! `k`-th starts at `S + k·(s + spacing)` and the machine works out which
//! requests completed before the FG arrival and replays their events in bulk
//! (`ran_repeat`), exactly as one call per request would have found them:
//! the same run and the same counters (tested against the one-request
//! protocol in `tests/it/policies_et.rs`), with one call per idle interval
//! instead of one per BG request — what makes `tune` and `recommend` of
//! this family take seconds rather than minutes on a week-long trace.
//! Under exponential service the machine asks for the same burst and the
//! engine draws it ([`BgService::burst`]: a Poisson count back to back,
//! Gamma blocks with spacing) and tells how many of its requests completed
//! before the FG arrival ([`Policy::on_burst_cut`]); the machine replays
//! their events as above. The run is then the one-request protocol's in
//! distribution, not draw for draw (the draws differ), and an idle interval
//! costs O(log(length / service)) however long it is (tested against the
//! one-request protocol in `tests/it/long_gaps.rs`).
//!
//! With `batch=N` the burst's gaps repeat every batch ([`Start::batch`],
//! [`BatchGaps`]): after a request inside a batch the gap is `p` for the
//! `request-*` variants, else 0; after a batch's last request it is `p` for
//! the `*-preempt` variants, else 0 (the table above); the first batch of
//! the burst holds what the last interval left of its batch
//! (`batch_started` carries over). The engine draws it in closed form
//! ([`BgService::batched_burst`]: an exact search over the completion times
//! under deterministic service, Gamma doubling and Beta bisection under
//! exponential service, exact in distribution in O(log n) draws); the
//! machine finds the count by the same search (`batched_burst_cut`) or is
//! told it, and replays the requests as whole cycles from B to B: those
//! after a batch end (`ran_events` with `batch_end`) and the rest
//! (`ran_repeat`). Tested to the bit against the one-request protocol
//! (`tests/it/policies_et.rs`, batch 1, 2, 5) and in distribution
//! (`tests/it/long_gaps.rs`). Finite BG work and the live driver keep one
//! request at a time.
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
//!
mod machine;

pub use machine::{next_state, IntervalCounters, IntervalEvent, IntervalState, IntervalVariant};

use super::{Ctx, Decision, Entry, IntervalRule, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};
use crate::service::{BatchGaps, BgService, BgWork};
use serde::Serialize;

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "preemption-interval",
    aliases: &[],
    summary: "Eggert & Touch's I/F/B/P machine: no BG request starts within p of FG work; four Appendix-A variants; per state×event counters",
    keys: &[
        // the paper's disk experiments span 0 to a few hundred ms (§4)
        Param::new("p", ParamKind::Duration, "100ms"),
        VARIANT,
        START,
        BATCH,
        SIZE,
    ],
    clairvoyant: false,
    build: PreemptionInterval::build,
    knob: Some(Knob::wait("p")),
    size_param: None,
    // at its defaults (burst-idle, fg-end, no batch) the machine
    // waits p after FG work and then runs BG until FG arrives
    interval_rule: Some(IntervalRule::WaitThenRun),
};

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

/// The machine's keys after `p=`, one row each for the key tables of every
/// policy built on it (this one, adaptive-preemption-interval,
/// credit-skip), whose `p=` defaults differ.
pub(crate) const VARIANT: Param = Param::new("variant", ParamKind::Choice(&["burst-idle", "burst-preempt", "request-idle", "request-preempt"]), "burst-idle").note("or tl|tr|bl|br").example("request-preempt");
/// Where an interval after FG work starts (see [`VARIANT`]).
pub(crate) const START: Param = Param::new("start", ParamKind::Choice(&["fg-end", "fg-start"]), "fg-end").example("fg-start");
/// BG requests queued at a time (see [`VARIANT`]).
pub(crate) const BATCH: Param = Param::new("batch", ParamKind::Other("N|inf"), "unbounded").note("BG requests queued at a time").example("4");
/// BG request size (see [`VARIANT`]).
pub(crate) const SIZE: Param = Param::new("size", ParamKind::Bytes, "").example("64KiB");

impl Default for PreemptionIntervalConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(|p| PreemptionIntervalConfig::take(p, ENTRY.name))
    }
}

impl PreemptionIntervalConfig {
    /// Take `p=`, `variant=`, `start=`, `batch=`, `size=` (shared with the
    /// policies built on this machine), each not given from the key table
    /// of the policy being built.
    pub(crate) fn take(p: &mut Params, policy: &str) -> Result<Self> {
        let interval_ns = p.duration_ns("p")?;
        let v = p.value("variant")?;
        let variant = IntervalVariant::parse(&v).ok_or_else(|| {
            Error::invalid(
                format!("{policy}:variant"),
                format!("`{v}` (burst-idle, burst-preempt, request-idle, request-preempt; or tl, tr, bl, br)"),
            )
        })?;
        let start = match p.value("start")?.as_str() {
            "fg-end" => IntervalStart::FgEnd,
            "fg-start" => IntervalStart::FgStart,
            v => {
                return Err(Error::invalid(
                    format!("{policy}:start"),
                    format!("`{v}` (fg-end or fg-start)"),
                ))
            }
        };
        let batch = match p.value("batch")? {
            v if v == "inf" || v == "unbounded" => None,
            v => match v.parse::<u64>() {
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
            size_bytes: p.bytes("size")?,
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
    /// Ask for whole bursts (module docs, "Bursts in simulation"): set by
    /// [`Policy::simulated`] for endless BG work and deterministic service.
    bursts: bool,
    /// The burst asked at the start of this idle interval, while under way:
    /// its service time and the time from one request's start to the next, ns.
    burst: Option<(u64, u64)>,
    /// The burst asked at the start of this idle interval under random
    /// (exponential) service, while under way; the engine tells how many
    /// of its requests completed before the FG arrival ([`Policy::on_burst_cut`]).
    random_burst: bool,
    /// That count, once told.
    cut_completed: Option<u64>,
    /// The batches of the burst under way (`batch=N`): its gaps.
    burst_gaps: Option<BatchGaps>,
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
            bursts: false,
            burst: None,
            random_burst: false,
            cut_completed: None,
            burst_gaps: None,
        }
    }

    /// Build from `p=`, `variant=`, `start=`, `batch=`, `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = PreemptionIntervalConfig::take(&mut p, "preemption-interval")?;
        p.finish_keys()?;
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

    /// The run is simulated ([`Policy::simulated`]): ask for bursts where
    /// that is the same run (module docs, "Bursts in simulation").
    pub(crate) fn simulated_run(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        self.bursts = *bg_work == BgWork::Endless
            && (bg_service.is_deterministic()
                || matches!(bg_service, BgService::Exponential { .. }));
    }

    /// The engine's count of a random-service burst's requests completed
    /// before the FG arrival ([`Policy::on_burst_cut`]).
    pub(crate) fn burst_cut_count(&mut self, completed: u64) {
        if self.random_burst {
            self.cut_completed = Some(completed);
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
        // the engine's own rounding of a deterministic service time
        self.fixed_service_ns = ctx
            .bg_service
            .is_deterministic()
            .then(|| (ctx.bg_service.mean_ns(size).round() as u64).max(1));
        let after_ns = pending.start_ns - ctx.now_ns;
        self.pending = Some(pending);
        self.burst = None;
        self.random_burst = false;
        self.cut_completed = None;
        self.burst_gaps = None;
        let whole = self.bursts && pending.from == IntervalState::Fg;
        if whole {
            // the rest of the interval in one burst: what one request at a
            // time would ask after each completion, B→B at once or B→P→I→B
            // after p
            let spacing_ns = if self.config.variant.interval_per_request() {
                self.config.interval_ns
            } else {
                0
            };
            match self.fixed_service_ns {
                Some(service_ns) => {
                    self.burst = Some((service_ns, service_ns.saturating_add(spacing_ns)))
                }
                // exponential: the engine draws the burst and tells the count
                None => self.random_burst = true,
            }
            // with batches, the gap after a batch's last request is the
            // batch end's: B→I→B at once, or B→P→I→B after p
            let batch = self.config.batch.map(|n| BatchGaps {
                size: n,
                started: self.batch_started,
                end_gap_ns: if self.config.variant.interval_after_burst() {
                    self.config.interval_ns
                } else {
                    0
                },
            });
            self.burst_gaps = batch;
            return Decision::Start(Start {
                spacing_ns,
                batch,
                ..Start::until_fg(after_ns, size)
            });
        }
        Decision::Start(Start {
            after_ns,
            size_bytes: size,
            max_requests: 1,
            spacing_ns: 0,
            consult_each: true,
            schedule: None,
            batch: None,
        })
    }

    /// `n` more BG requests ran, each asked right after the one before
    /// completed (from B, not at a batch end): their events in bulk. Each
    /// request's events lead from B back to B, so `n` of them add `n` to
    /// every counter on that cycle.
    ///
    /// With `batch=N` the request after a batch's last sees that batch end
    /// (`ran_events` with `batch_end`), a different cycle from B to B: of
    /// the `n` requests, those following the completions that filled a
    /// batch, counted from `batch_started` (the current batch's requests so
    /// far, the last one included), take that cycle, the rest the usual.
    fn ran_repeat(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        debug_assert_eq!(self.state, IntervalState::Bg);
        let Some(size) = self.config.batch else {
            self.add_cycles(false, n);
            self.batch_started += n;
            return;
        };
        // the completions before the n requests are the current batch's
        // `c`-th to `(c + n − 1)`-th, counted on across batches
        let c = u128::from(self.batch_started.clamp(1, size));
        let last = c + u128::from(n) - 1;
        let ends = (last / u128::from(size)) as u64;
        self.add_cycles(true, ends);
        self.add_cycles(false, n - ends);
        self.batch_started = (last % u128::from(size)) as u64 + 1;
    }

    /// `k` requests' events, each after a completion that did (`batch_end`)
    /// or did not end a batch: a cycle from B to B, so `k` of them add `k`
    /// to every counter on it.
    fn add_cycles(&mut self, batch_end: bool, k: u64) {
        if k == 0 {
            return;
        }
        let step = Pending {
            from: IntervalState::Bg,
            batch_end,
            decided_ns: 0,
            start_ns: 0,
            empty_timer_ns: None,
        };
        let mut at = self.state;
        for &e in self.ran_events(&step) {
            self.counters.add(at, e, k);
            at = next_state(self.config.variant, at, e);
        }
        debug_assert_eq!(at, IntervalState::Bg, "one request's events are a cycle");
    }

    /// The burst asked at the interval's start ended after `done` requests
    /// with the device idle (the spacing of a `request-*` burst outlasted
    /// the interval): the events one request at a time would have seen up
    /// to the last completion; the pending request is taken.
    fn burst_done(&mut self, done: u64) {
        self.burst_gaps = None;
        let asked = self.burst.take().is_some() || std::mem::take(&mut self.random_burst);
        if let (true, Some(first)) = (asked, self.pending.take()) {
            if done > 0 {
                self.ran(&first);
                self.ran_repeat(done - 1);
            }
        }
    }

    /// The burst asked at the interval's start was under way when FG
    /// arrived at `end_ns`: replay the requests that completed before it
    /// (each would have been followed by a decision) and leave pending the
    /// request one at a time would have had pending then.
    fn burst_cut(&mut self, end_ns: u64) {
        if std::mem::take(&mut self.random_burst) {
            self.random_burst_cut(end_ns);
            return;
        }
        let gaps = self.burst_gaps.take();
        let (Some((service_ns, cycle_ns)), Some(first)) = (self.burst.take(), self.pending) else {
            return;
        };
        if let Some(gaps) = gaps {
            self.batched_burst_cut(end_ns, service_ns, first, gaps);
            return;
        }
        // requests that completed strictly before the arrival: the k-th
        // (from 0) completes at S + k·cycle + s
        let first_end = first.start_ns.saturating_add(service_ns);
        if end_ns <= first_end {
            return; // the first request is the pending one
        }
        let completed = (end_ns - first_end - 1) / cycle_ns + 1;
        self.ran(&first);
        self.ran_repeat(completed - 1);
        // as bg_done would have asked after the last of them
        let now = first_end + (completed - 1) * cycle_ns;
        let p = self.config.interval_ns;
        let v = self.config.variant;
        self.pending = Some(Pending {
            from: IntervalState::Bg,
            batch_end: false,
            decided_ns: now,
            start_ns: if v.interval_per_request() {
                now.saturating_add(p)
            } else {
                now
            },
            empty_timer_ns: v.interval_after_burst().then(|| now.saturating_add(p)),
        });
    }

    /// [`Self::burst_cut`] of a burst in batches: request `k` (from 1)
    /// completes at `S + k·s + H(k−1)`, `H` the gaps of `gaps` (exact u128
    /// arithmetic), and the count completed strictly before the arrival is
    /// found by bisection.
    fn batched_burst_cut(&mut self, end_ns: u64, service_ns: u64, first: Pending, gaps: BatchGaps) {
        let spacing_ns = if self.config.variant.interval_per_request() {
            self.config.interval_ns
        } else {
            0
        };
        let s = u128::from(service_ns);
        let done_at = |k: u64| {
            u128::from(first.start_ns) + u128::from(k) * s + gaps.gaps_ns(spacing_ns, k - 1)
        };
        let end = u128::from(end_ns);
        if end <= done_at(1) {
            return; // the first request is the pending one
        }
        // completions come at least 1 ns apart and all before end_ns < 2^64
        let mut hi = 2u64;
        while done_at(hi) < end {
            hi = hi.saturating_mul(2);
        }
        let mut lo = 1u64;
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if done_at(mid) < end {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let completed = lo;
        self.ran(&first);
        self.ran_repeat(completed - 1);
        // as bg_done would have asked after the last of them
        let now = done_at(completed) as u64;
        self.pending = Some(self.after_bg(now));
    }

    /// The random-service burst asked at the interval's start was under way
    /// when FG arrived at `end_ns`, after the engine's count of completed
    /// requests (none told: the burst had not started). As `burst_cut`,
    /// with the count from the engine instead of the model's times. The
    /// pending request's times are those of the arrival: the one-request
    /// protocol reads them only at a tie (an FG arrival at the very ns a
    /// random service ends), where the `*-preempt` variants' Timeout then
    /// counts as not expired.
    fn random_burst_cut(&mut self, end_ns: u64) {
        let Some(first) = self.pending else {
            return;
        };
        let completed = self.cut_completed.take().unwrap_or(0);
        if completed == 0 {
            return; // the first request is the pending one
        }
        self.ran(&first);
        self.ran_repeat(completed - 1);
        let v = self.config.variant;
        // whether the last completion ended a batch (batch=N), as bg_done finds it
        let batch_end = self.after_bg(end_ns).batch_end;
        self.pending = Some(Pending {
            from: IntervalState::Bg,
            batch_end,
            decided_ns: end_ns,
            start_ns: end_ns,
            empty_timer_ns: v.interval_after_burst().then_some(end_ns),
        });
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

    fn bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        if self.burst.is_some() || self.random_burst {
            self.burst_done(done);
        } else if let Some(p) = self.pending.take() {
            self.ran(&p);
        }
        let next = self.after_bg(ctx.now_ns);
        self.ask(ctx, next)
    }

    /// The decision after a BG completion at `now`, as the machine takes it
    /// (a full batch ends: i, then b; `batch_started` starts over).
    fn after_bg(&mut self, now: u64) -> Pending {
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
        Pending {
            from: IntervalState::Bg,
            batch_end,
            decided_ns: now,
            start_ns: if wait { now.saturating_add(p) } else { now },
            empty_timer_ns: v.interval_after_burst().then(|| now.saturating_add(p)),
        }
    }

    fn idle_end(&mut self, idle_ns: u64, collided: bool) {
        let end = self.idle_start_ns.saturating_add(idle_ns);
        self.burst_cut(end);
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

    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        self.bg_done(ctx, done)
    }

    fn on_burst_cut(&mut self, completed: u64) {
        self.burst_cut_count(completed);
    }

    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        self.idle_end(idle_ns, collided);
    }

    fn on_busy_end(&mut self, _busy_ns: u64, requests: u32) {
        self.busy_end(requests);
    }

    fn simulated(&mut self, bg_service: &BgService, bg_work: &BgWork) {
        self.simulated_run(bg_service, bg_work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;
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
