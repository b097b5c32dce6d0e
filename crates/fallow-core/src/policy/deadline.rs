//! `deadline(work, by, t)`: a finite amount of BG work (a backup, a RAID
//! rebuild, one full scrub pass) that must be done `by` a deadline, run as
//! Waiting (`fixed-wait(t)`, Practical Scrubbing §V-B2) whose idle wait
//! shrinks as the deadline nears. This goes beyond the papers (one of
//! fallow's design goals: "finite BG work and deadlines: get more aggressive as a
//! deadline nears").
//!
//! The rule, evaluated at the start of every idle interval:
//!
//! ```text
//!   needed      = margin × remaining requests × mean BG service time
//!   capacity(w) = idle fraction × time left × U(w)
//!   wait        = the largest w ≤ t with capacity(w) ≥ needed
//!                 (t when the work is done; 0 when even capacity(0) falls short)
//! ```
//!
//! U(w) is the fraction of idle time still usable after waiting w in every
//! interval (Practical Scrubbing §V-A, Fig. 13), measured on the last
//! `history` idle intervals; the idle fraction comes from the idle
//! intervals and busy periods seen. So the policy is Waiting with the full
//! `t` while the work is on track, and shortens the wait only as far as the
//! work left requires: as the deadline nears with work left, the wait falls
//! towards 0 (aggressive); past the deadline it is 0. A plain proportional
//! rule (wait = t·(1 − needed/capacity)) was tried first: it ignores which
//! waits still catch the long intervals, drops to near-zero waits (one
//! collision per short interval) while a moderate wait would do, and has no
//! margin, so it finished late. `by` is measured from the first decision
//! (the end of the first busy period).
//!
//! Progress: the trait reports completed BG requests only when a burst ends
//! with the device still idle ([`Policy::on_bg_done`]), not when an FG
//! arrival cuts it. For a cut burst the policy counts the requests that
//! *started* before the arrival, ⌈(idle − start) / mean service⌉ — exact for
//! constant and size-based service (the engine completes the interrupted
//! request too), an estimate for exponential service. The policy never
//! stops on its own estimate: the finite supply is the run's
//! (`BgWork::Requests` / `BgWork::Bytes`); when the estimate says the work
//! is done it falls back to the full wait `t`.

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "deadline",
    aliases: &[],
    summary: "finite BG work by a deadline: Waiting whose wait shrinks as remaining work nears the idle time left",
    keys: &[
        Param::new("work", ParamKind::Other("N|BYTES"), "1GiB").note("requests or bytes"),
        Param::new("by", ParamKind::Duration, "1h").note("from the first decision"),
        Param::new("t", ParamKind::Duration, "100ms").note("wait without urgency"),
        Param::new("margin", ParamKind::Number("FACTOR"), "1.25").note("on the time the work left needs"),
        Param::new("history", ParamKind::Count, "4096").note("idle intervals measured"),
        Param::new("size", ParamKind::Bytes, "").example("64KiB"),
    ],
    clairvoyant: false,
    build: Deadline::build,
    knob: Some(Knob::wait("t")),
    size_param: None,
    interval_rule: None,
};

/// How much BG work there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A number of requests (`work=5000`).
    Requests(u64),
    /// A number of bytes (`work=10GiB`).
    Bytes(u64),
}

/// Parameters of [`Deadline`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeadlineConfig {
    /// The BG work to finish.
    pub work: Work,
    /// Deadline, ns after the first decision.
    pub by_ns: u64,
    /// Idle wait with no urgency (the base Waiting policy), ns.
    pub wait_ns: u64,
    /// Spare capacity to plan for (1.25: finish with a quarter to spare).
    pub margin: f64,
    /// Idle intervals U(w) is measured on (the most recent ones).
    pub history: usize,
    /// BG request size, bytes (`None`: the run's size).
    pub size_bytes: Option<u64>,
}

impl Default for DeadlineConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(DeadlineConfig::take)
    }
}

impl DeadlineConfig {
    /// Take every key of the table, each not given from it, and check them.
    fn take(p: &mut Params) -> Result<Self> {
        let v = p.value("work")?;
        let work = match v.trim().parse::<u64>() {
            Ok(n) => Work::Requests(n),
            Err(_) => Work::Bytes(
                crate::units::parse_bytes(&v)
                    .map_err(|e| Error::invalid("deadline:work", e.to_string()))?,
            ),
        };
        let history = p.number("history")?;
        if !(1.0..=1e8).contains(&history) || history.fract() != 0.0 {
            return Err(Error::invalid(
                "deadline:history",
                "must be a whole number ≥ 1",
            ));
        }
        let config = DeadlineConfig {
            work,
            by_ns: p.duration_ns("by")?,
            wait_ns: p.duration_ns("t")?,
            margin: p.number("margin")?,
            history: history as usize,
            size_bytes: p.bytes("size")?,
        };
        if config.by_ns == 0 {
            return Err(Error::invalid("deadline:by", "must be positive"));
        }
        if config.margin < 1.0 {
            return Err(Error::invalid("deadline:margin", "must be at least 1"));
        }
        Ok(config)
    }
}

/// The last idle intervals, sorted now and then, with suffix sums: U(w) in
/// O(log n).
#[derive(Debug, Clone, Default)]
struct Usable {
    recent: std::collections::VecDeque<u64>,
    sorted: Vec<u64>,
    /// `suffix[k]` = Σ sorted[k..].
    suffix: Vec<u128>,
    since_sort: usize,
}

impl Usable {
    fn observe(&mut self, idle_ns: u64, cap: usize) {
        self.recent.push_back(idle_ns);
        if self.recent.len() > cap {
            self.recent.pop_front();
        }
        self.since_sort += 1;
        // re-sort every 64 intervals (always while the history is short)
        if self.since_sort >= 64 || self.recent.len() <= 64 {
            self.sorted = self.recent.iter().copied().collect();
            self.sorted.sort_unstable();
            self.suffix = vec![0; self.sorted.len() + 1];
            for k in (0..self.sorted.len()).rev() {
                self.suffix[k] = self.suffix[k + 1] + self.sorted[k] as u128;
            }
            self.since_sort = 0;
        }
    }

    /// Fraction of idle time usable after waiting `w` ns (1 with no history).
    fn fraction(&self, w: u64) -> f64 {
        let total = self.suffix.first().copied().unwrap_or(0);
        if total == 0 {
            return 1.0;
        }
        let k = self.sorted.partition_point(|&x| x <= w);
        let usable = self.suffix[k] - w as u128 * (self.sorted.len() - k) as u128;
        usable as f64 / total as f64
    }
}

/// Waiting whose wait shrinks as a deadline for finite BG work nears.
#[derive(Debug, Clone, Default)]
pub struct Deadline {
    /// Its parameters.
    pub config: DeadlineConfig,
    /// First decision, ns (the clock's origin for `by`).
    start_ns: Option<u64>,
    /// BG requests completed so far (estimated for cut bursts).
    done: u64,
    idle_sum_ns: u128,
    busy_sum_ns: u128,
    usable: Usable,
    /// In the current interval: when the running burst began (ns after the
    /// interval's start) and its mean service time; `None`: no burst.
    burst: Option<(u64, f64)>,
    /// Wait chosen at the last decision, ns.
    last_wait_ns: u64,
}

impl Deadline {
    /// A policy with these parameters.
    pub fn new(config: DeadlineConfig) -> Self {
        Deadline {
            config,
            ..Deadline::default()
        }
    }

    /// Build from `work=` (a count of requests, or a size such as `10GiB`),
    /// `by=`, `t=`, `margin=`, `history=` and `size=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = DeadlineConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(Deadline::new(config)))
    }

    /// BG requests completed so far, as the policy counts them.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The wait chosen at the last decision, ns.
    pub fn last_wait_ns(&self) -> u64 {
        self.last_wait_ns
    }

    fn total_requests(&self, size: u64) -> u64 {
        match self.config.work {
            Work::Requests(n) => n,
            Work::Bytes(b) => b.div_ceil(size.max(1)),
        }
    }

    /// The wait for an interval starting at `now_ns` (see the module doc).
    fn wait_ns(&self, now_ns: u64, size: u64, mean_service_ns: f64) -> u64 {
        let t = self.config.wait_ns;
        let left = self.total_requests(size).saturating_sub(self.done);
        if left == 0 {
            return t;
        }
        let start = self.start_ns.unwrap_or(now_ns);
        let deadline = start.saturating_add(self.config.by_ns);
        if now_ns >= deadline {
            return 0;
        }
        // before any idle interval ended there is nothing to go on: assume
        // all of the time left is idle (the least urgent reading)
        let idle_fraction = if self.idle_sum_ns == 0 {
            1.0
        } else {
            self.idle_sum_ns as f64 / (self.idle_sum_ns + self.busy_sum_ns) as f64
        };
        let room = idle_fraction * (deadline - now_ns) as f64;
        let needed = self.config.margin * left as f64 * mean_service_ns;
        let enough = |w: u64| room * self.usable.fraction(w) >= needed;
        if enough(t) {
            return t;
        }
        if !enough(0) {
            return 0;
        }
        // U is non-increasing in w: bisect for the largest w that suffices
        let (mut lo, mut hi) = (0u64, t);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if enough(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl Policy for Deadline {
    fn name(&self) -> &str {
        "deadline"
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        self.start_ns.get_or_insert(ctx.now_ns);
        let size = self.config.size_bytes.unwrap_or(ctx.bg_size_bytes);
        let mean = ctx.bg_service.mean_ns(size).max(1.0);
        let wait = self.wait_ns(ctx.now_ns, size, mean);
        self.last_wait_ns = wait;
        self.burst = Some((wait, mean));
        Decision::Start(Start::until_fg(wait, size))
    }

    fn on_bg_done(&mut self, _ctx: &mut Ctx<'_>, done: u64) -> Decision {
        // An until-FG burst that ends with the device idle ran out of
        // supply: the work is done; `done` is exact for this interval.
        self.done += done;
        self.burst = None;
        Decision::Quiet
    }

    fn on_idle_end(&mut self, idle_ns: u64, _collided: bool) {
        self.idle_sum_ns += idle_ns as u128;
        self.usable.observe(idle_ns, self.config.history);
        if let Some((begin, mean)) = self.burst.take() {
            if idle_ns > begin {
                // requests that started before the FG arrival (all complete)
                self.done += ((idle_ns - begin) as f64 / mean).ceil() as u64;
            }
        }
    }

    fn on_busy_end(&mut self, busy_ns: u64, _requests: u32) {
        self.busy_sum_ns += busy_ns as u128;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::BgService;
    use rand::SeedableRng;

    const MS: u64 = 1_000_000;

    fn decide(p: &mut Deadline, now_ns: u64) -> u64 {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 10 * MS };
        let mut ctx = Ctx {
            now_ns,
            idle_start_ns: now_ns,
            last_fg_arrival_ns: now_ns,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 65_536,
            future_idle_ns: None,
        };
        match p.on_idle(&mut ctx) {
            Decision::Start(s) => s.after_ns,
            Decision::Quiet => panic!("deadline always offers BG work"),
        }
    }

    fn config(work: Work, by_ns: u64, wait_ns: u64) -> DeadlineConfig {
        DeadlineConfig {
            work,
            by_ns,
            wait_ns,
            ..DeadlineConfig::default()
        }
    }

    #[test]
    fn wait_is_the_longest_that_still_makes_the_deadline_by_hand() {
        // 100 requests of 10 ms (1 s; with margin 1.25, 1.25 s needed), by
        // 100 s, t = 200 ms. History: idle 100, 100, 300, 500 ms and 1 s of
        // busy time: idle fraction ½; U(w) = Σ max(0, I − w) / 1000 ms.
        let mut p = Deadline::new(config(Work::Requests(100), 100_000 * MS, 200 * MS));
        for idle in [100, 100, 300, 500] {
            p.on_busy_end(250 * MS, 2);
            p.on_idle_end(idle * MS, false);
        }
        // at 0: room ½ × 100 s = 50 s, U(200 ms) = 0.4: 20 s ≥ 1.25 s: full t
        assert_eq!(decide(&mut p, 0), 200 * MS);
        // at 97 s: room 1.5 s; need U(w) ≥ 1.25/1.5 = 0.8333; below 100 ms
        // U(w) = (1000 − 4w)/1000: w ≤ 41.666… ms
        let w = decide(&mut p, 97_000 * MS);
        assert!(w.abs_diff(41_666_666) <= 1, "{w}");
        // that interval lasts 241.666 ms: 20 requests start after the wait
        p.on_idle_end(w + 200 * MS, true);
        assert_eq!(p.done(), 20);
        // at 99 s: room ≈ 0.55 s < 80 × 10 ms × 1.25 = 1 s even with no
        // wait: aggressive
        p.on_busy_end(MS, 1);
        assert_eq!(decide(&mut p, 99_000 * MS), 0);
        p.on_idle_end(5 * MS, true); // one request started at 0
        assert_eq!(p.done(), 21);
        // past the deadline: aggressive
        p.on_busy_end(MS, 1);
        assert_eq!(decide(&mut p, 200_000 * MS), 0);
        // the run's supply ends (a burst ends with the device idle): done
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        let svc = BgService::Constant { ns: 10 * MS };
        let mut ctx = Ctx {
            now_ns: 200_790 * MS,
            idle_start_ns: 200_000 * MS,
            last_fg_arrival_ns: 0,
            rng: &mut rng,
            bg_service: &svc,
            bg_size_bytes: 65_536,
            future_idle_ns: None,
        };
        assert_eq!(p.on_bg_done(&mut ctx, 79), Decision::Quiet);
        p.on_idle_end(1_000 * MS, false);
        assert_eq!(p.done(), 100);
        // nothing left: back to the full wait
        p.on_busy_end(MS, 1);
        assert_eq!(decide(&mut p, 300_000 * MS), 200 * MS);
    }

    #[test]
    fn usable_fraction_by_hand() {
        let mut u = Usable::default();
        assert_eq!(u.fraction(5), 1.0);
        for i in [10u64, 20, 30, 40] {
            u.observe(i, 3);
        }
        // the last 3: 20, 30, 40 (total 90); after 25: 5 + 15 = 20
        assert_eq!(u.fraction(25), 20.0 / 90.0);
        assert_eq!(u.fraction(0), 1.0);
        assert_eq!(u.fraction(40), 0.0);
    }

    #[test]
    fn work_in_bytes_and_params() {
        // 1 MiB in 64 KiB requests = 16 requests = 160 ms, 200 ms with the
        // margin; no history: all of the time left counts as usable
        let mut p = Deadline::new(config(Work::Bytes(1 << 20), 150 * MS, 10 * MS));
        assert_eq!(decide(&mut p, 0), 0);
        let mut p = Deadline::new(config(Work::Bytes(1 << 20), 250 * MS, 10 * MS));
        assert_eq!(decide(&mut p, 0), 10 * MS);
        assert!(crate::policy::build("deadline:work=5000,by=2h,t=50ms").is_ok());
        assert!(crate::policy::build("deadline:work=10GiB,by=30min,margin=1.5").is_ok());
        assert!(crate::policy::build("deadline:work=lots").is_err());
        assert!(crate::policy::build("deadline:by=0s").is_err());
        assert!(crate::policy::build("deadline:margin=0.5").is_err());
    }
}
