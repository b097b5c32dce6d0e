//! The spin-up budget, `--max-spinups N/UNIT`: a drive is rated for a
//! number of load/unload (start/stop) cycles — 300,000 or 600,000, which
//! over a 3-year life is ~275 or ~550 a day (from hd-idle's tracker, as
//! docs/spindown.md cites it) — and WD asks for idle timers of at least 10
//! minutes. Each spin-down the daemon commands is followed by at most one
//! spin-up, so the budget is spent on spin-downs.
//!
//! `N/UNIT` means what it says: at most `N` spin-downs in ANY window of
//! that length, a sliding window over the spin-downs' times. (It was a
//! token bucket with a day's rate that held an hour's share, so `30/h`
//! became 720 a day and allowed 34 in 10 minutes.) When the
//! window is full the daemon lengthens the policy's timeout to the moment
//! the oldest of the last `N` leaves it (`earliest_ns`), and says so.

use crate::error::{Error, Result};
use std::collections::VecDeque;

/// One hour, ns.
pub const HOUR_NS: u64 = 3_600_000_000_000;
/// One day, ns.
pub const DAY_NS: u64 = 24 * HOUR_NS;
/// One week, ns.
pub const WEEK_NS: u64 = 7 * DAY_NS;

/// Most spin-downs a day a limit may allow: the budget keeps one
/// timestamp each for a day (the status counts the last 24 h), so this
/// bounds its memory.
pub const MAX_PER_DAY: u32 = 100_000;

/// `--max-spinups N/UNIT`: at most `count` in any `window_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinupLimit {
    /// Spin-downs allowed in a window.
    pub count: u32,
    /// The window's length, ns.
    pub window_ns: u64,
}

impl SpinupLimit {
    /// Parse `N/day` (`N/d`), `N/week` (`N/w`), `N/hour` (`N/h`), `N/DURATION`
    /// (`N/30min`, `N/12h`) or a bare `N` (a day).
    pub fn parse(spec: &str) -> Result<SpinupLimit> {
        let bad = |m: &str| Error::invalid("max-spinups", format!("`{spec}`: {m}"));
        let (n, unit) = spec.trim().split_once('/').unwrap_or((spec.trim(), "day"));
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("expected N/UNIT with a whole N, e.g. 50/day, 30/h, 2/30min"))?;
        let window_ns = match unit.trim() {
            "day" | "d" => DAY_NS,
            "week" | "w" => WEEK_NS,
            "hour" | "h" => HOUR_NS,
            other => fallow_core::units::parse_duration_ns(other).map_err(|_| {
                bad(&format!(
                    "unknown unit `{other}` (day, week, hour, or a duration such as 30min)"
                ))
            })?,
        };
        SpinupLimit { count, window_ns }
            .validate()
            .map_err(|e| bad(&e))
    }

    fn validate(self) -> std::result::Result<SpinupLimit, String> {
        if !(1_000_000_000..=366 * DAY_NS).contains(&self.window_ns) {
            return Err("the window must be 1 s to 366 days".into());
        }
        if self.count == 0 || self.per_day() > f64::from(MAX_PER_DAY) {
            return Err(format!(
                "must be at least 1 and at most {MAX_PER_DAY} a day"
            ));
        }
        Ok(self)
    }

    /// The same rate a day (for the metrics' `budget_per_day`).
    pub fn per_day(self) -> f64 {
        f64::from(self.count) * DAY_NS as f64 / self.window_ns as f64
    }
}

impl std::fmt::Display for SpinupLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.window_ns {
            DAY_NS => write!(f, "{}/day", self.count),
            WEEK_NS => write!(f, "{}/week", self.count),
            HOUR_NS => write!(f, "{}/h", self.count),
            w => write!(f, "{}/{}s", self.count, w as f64 / 1e9),
        }
    }
}

/// A spin-up budget.
#[derive(Debug, Clone)]
pub struct Budget {
    limit: SpinupLimit,
    /// Spin-downs of the last `max(window, day)`, oldest first, ns.
    recent: VecDeque<u64>,
}

impl Budget {
    /// An unspent budget.
    pub fn new(limit: SpinupLimit) -> Result<Budget> {
        let limit = limit
            .validate()
            .map_err(|e| Error::invalid("max-spinups", format!("{limit}: {e}")))?;
        Ok(Budget {
            limit,
            recent: VecDeque::new(),
        })
    }

    /// The limit.
    pub fn limit(&self) -> SpinupLimit {
        self.limit
    }

    /// Spin-downs in the `span_ns` before `now_ns` (`t + span > now`).
    fn used_in(&self, now_ns: u64, span_ns: u64) -> usize {
        self.recent
            .iter()
            .filter(|&&t| t.saturating_add(span_ns) > now_ns)
            .count()
    }

    /// Spin-downs in the window before `now_ns`.
    pub fn used_in_window(&self, now_ns: u64) -> usize {
        self.used_in(now_ns, self.limit.window_ns)
    }

    /// Spin-downs in the 24 h before `now_ns` (the status shows it).
    pub fn used_24h(&self, now_ns: u64) -> usize {
        self.used_in(now_ns, DAY_NS)
    }

    /// The earliest time, not before `now_ns`, at which a spin-down keeps
    /// every window within the limit: `now` unless the last `N` are all in
    /// the window, else when the oldest of them leaves it.
    pub fn earliest_ns(&self, now_ns: u64) -> u64 {
        let n = self.limit.count as usize;
        let live: Vec<u64> = self
            .recent
            .iter()
            .copied()
            // (t + W > now, not t > now − W: that saturates in the first window)
            .filter(|&t| t.saturating_add(self.limit.window_ns) > now_ns)
            .collect();
        if live.len() >= n {
            live[live.len() - n] + self.limit.window_ns
        } else {
            now_ns
        }
    }

    /// A spin-down happened at `now_ns` (call only when `earliest_ns(now) <= now`).
    pub fn spend(&mut self, now_ns: u64) {
        self.recent.push_back(now_ns);
        let keep_ns = self.limit.window_ns.max(DAY_NS);
        while self
            .recent
            .front()
            .is_some_and(|&t| t.saturating_add(keep_ns) <= now_ns)
        {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const H: u64 = HOUR_NS;

    fn lim(count: u32, window_ns: u64) -> SpinupLimit {
        SpinupLimit { count, window_ns }
    }

    #[test]
    fn limits_parse_and_bad_ones_are_named() {
        assert_eq!(SpinupLimit::parse("50/day").unwrap(), lim(50, DAY_NS));
        assert_eq!(SpinupLimit::parse("30/h").unwrap(), lim(30, H));
        assert_eq!(SpinupLimit::parse("70/week").unwrap(), lim(70, WEEK_NS));
        assert_eq!(SpinupLimit::parse("2/30min").unwrap(), lim(2, H / 2));
        assert_eq!(SpinupLimit::parse("12").unwrap(), lim(12, DAY_NS));
        assert_eq!(SpinupLimit::parse("30/h").unwrap().to_string(), "30/h");
        for bad in [
            "0/day",
            "x/day",
            "1.5/h",
            "5/year",
            "1000000/day",
            "10000/h",
            "1/0s",
        ] {
            let e = SpinupLimit::parse(bad).unwrap_err().to_string();
            assert!(e.contains("max-spinups") && e.contains(bad), "{e}");
        }
    }

    /// Spend greedily from 0 (every time the budget allows, 1 ns after the
    /// last), returning the spin-down times until `end_ns`.
    fn greedy(limit: SpinupLimit, end_ns: u64) -> Vec<u64> {
        let mut b = Budget::new(limit).unwrap();
        let (mut t, mut times) = (0, Vec::new());
        while t < end_ns {
            let e = b.earliest_ns(t);
            assert!(e >= t);
            if e >= end_ns {
                break;
            }
            b.spend(e);
            times.push(e);
            t = e + 1;
        }
        times
    }

    #[test]
    fn thirty_an_hour_is_thirty_in_any_hour() {
        // `30/h` once allowed 34 spin-downs in 10 minutes. By hand,
        // a greedy spender at 1 ns steps: 30 at 0..29 ns, then the 31st
        // only when the first leaves the window, at 1 h, and so on: 30
        // at the start of each hour, 90 in 3 hours.
        let times = greedy(lim(30, H), 3 * H);
        assert_eq!(times.len(), 90);
        assert_eq!(times[29], 29);
        assert_eq!(times[30], H);
        assert_eq!(times[60], 2 * H);
        // and no window of an hour, wherever it starts, holds more than 30
        // (brute force over every spin-down as a window's start)
        for &s in &times {
            let n = times.iter().filter(|&&x| x >= s && x < s + H).count();
            assert!(n <= 30, "{n} spin-downs in the hour from {s}");
        }
    }

    #[test]
    fn a_timeline_by_hand() {
        // 2/h: spin-downs at 0 and 10 min fill the window; at 20 min the
        // next is allowed at 60 min (when the one at 0 leaves); after one
        // at 60 min, the hour before 65 min holds 10 and 60, so the next
        // is at 70 min (when the one at 10 leaves).
        let min = 60 * S;
        let mut b = Budget::new(lim(2, H)).unwrap();
        assert_eq!(b.earliest_ns(0), 0);
        b.spend(0);
        assert_eq!(b.earliest_ns(10 * min), 10 * min);
        b.spend(10 * min);
        assert_eq!(b.used_in_window(20 * min), 2);
        assert_eq!(b.earliest_ns(20 * min), 60 * min);
        b.spend(60 * min);
        assert_eq!(b.used_in_window(60 * min), 2, "0 left, 10 and 60 in");
        assert_eq!(b.earliest_ns(65 * min), 70 * min);
        // a quiet stretch banks nothing: after 5 idle hours, 2 at once, not 10
        assert_eq!(b.earliest_ns(6 * H), 6 * H);
        b.spend(6 * H);
        b.spend(6 * H + 1);
        assert_eq!(b.earliest_ns(6 * H + 2), 7 * H);
        assert_eq!(b.used_24h(6 * H + 2), 5);
    }

    #[test]
    fn a_day_budget_is_a_day_window() {
        // 48/day: all 48 may come in the first busy hour (the limit says
        // nothing finer), then none until the first leaves the day
        let times = greedy(lim(48, DAY_NS), 3 * DAY_NS);
        assert_eq!(times.len(), 3 * 48);
        assert_eq!(times[48], DAY_NS);
        for &s in &times {
            let n = times.iter().filter(|&&x| x >= s && x < s + DAY_NS).count();
            assert!(n <= 48, "{n} spin-downs in the day from {s}");
        }
    }
}
