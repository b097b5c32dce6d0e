//! The spin-up budget, `--max-spinups N/day`: a drive is rated for a
//! number of load/unload (start/stop) cycles — 300,000 or 600,000, which
//! over a 3-year life is ~275 or ~550 a day (hd-idle issue 55) — and WD
//! asks for idle timers of at least 10 minutes. Each spin-down the daemon
//! commands is followed by at most one spin-up, so the budget is spent on
//! spin-downs.
//!
//! Two rules, both kept: a token bucket refilled at `N` a day that holds
//! an hour's share (`max(1, N/24)` tokens), which spreads spin-downs over
//! the day instead of spending the budget in the first busy hour; and a
//! hard cap of `N` in any 24 h window. When neither lets a spin-down
//! happen now, the daemon lengthens the policy's timeout to the moment
//! one will (`earliest_ns`), and reports it.

use crate::error::{Error, Result};
use std::collections::VecDeque;

/// One day, ns.
pub const DAY_NS: u64 = 86_400_000_000_000;

/// Most spin-ups a day a budget may allow (the window keeps one timestamp each).
pub const MAX_PER_DAY: u32 = 100_000;

/// A spin-up budget.
#[derive(Debug, Clone)]
pub struct Budget {
    per_day: u32,
    capacity: f64,
    tokens: f64,
    /// When `tokens` was last brought up to date, ns.
    at_ns: u64,
    /// Spin-downs in the last 24 h, oldest first, ns.
    recent: VecDeque<u64>,
}

impl Budget {
    /// A full budget of `per_day` spin-ups a day, starting at `now_ns`.
    pub fn new(per_day: u32, now_ns: u64) -> Result<Budget> {
        if !(1..=MAX_PER_DAY).contains(&per_day) {
            return Err(Error::invalid(
                "max-spinups",
                format!("{per_day}/day: must be 1 to {MAX_PER_DAY} a day"),
            ));
        }
        let capacity = (f64::from(per_day) / 24.0).floor().max(1.0);
        Ok(Budget {
            per_day,
            capacity,
            tokens: capacity,
            at_ns: now_ns,
            recent: VecDeque::new(),
        })
    }

    /// Parse `N/day` (also `N/d`, `N/week`, `N/w`, `N/h` scaled to a day, or a bare `N`).
    pub fn parse_rate(spec: &str) -> Result<u32> {
        let bad = |m: &str| Error::invalid("max-spinups", format!("`{spec}`: {m}"));
        let (n, unit) = spec.trim().split_once('/').unwrap_or((spec.trim(), "day"));
        let n: f64 = n
            .trim()
            .parse()
            .map_err(|_| bad("expected N/day, e.g. 50/day"))?;
        let per_day = match unit.trim() {
            "day" | "d" => n,
            "week" | "w" => n / 7.0,
            "hour" | "h" => n * 24.0,
            other => return Err(bad(&format!("unknown unit `{other}` (day, week, hour)"))),
        };
        if !(per_day.is_finite() && per_day >= 1.0 && per_day <= f64::from(MAX_PER_DAY)) {
            return Err(bad(&format!("must be 1 to {MAX_PER_DAY} a day")));
        }
        Ok(per_day.floor() as u32)
    }

    /// Spin-ups allowed a day.
    pub fn per_day(&self) -> u32 {
        self.per_day
    }

    fn rate_per_ns(&self) -> f64 {
        f64::from(self.per_day) / DAY_NS as f64
    }

    fn tokens_at(&self, now_ns: u64) -> f64 {
        let dt = now_ns.saturating_sub(self.at_ns) as f64;
        (self.tokens + dt * self.rate_per_ns()).min(self.capacity)
    }

    /// Spin-downs in the 24 h before `now_ns`.
    pub fn used_24h(&self, now_ns: u64) -> usize {
        self.recent
            .iter()
            .filter(|&&t| t.saturating_add(DAY_NS) > now_ns)
            .count()
    }

    /// The earliest time, not before `now_ns`, at which a spin-down is allowed.
    pub fn earliest_ns(&self, now_ns: u64) -> u64 {
        let tokens = self.tokens_at(now_ns);
        let bucket = if tokens >= 1.0 {
            now_ns
        } else {
            now_ns + ((1.0 - tokens) / self.rate_per_ns()).ceil() as u64
        };
        // (t + DAY > now, not t > now − DAY: that saturates in the first day)
        let live: Vec<u64> = self
            .recent
            .iter()
            .copied()
            .filter(|&t| t.saturating_add(DAY_NS) > now_ns)
            .collect();
        let window = if live.len() >= self.per_day as usize {
            // the oldest of the last N must leave the window first
            live[live.len() - self.per_day as usize] + DAY_NS
        } else {
            now_ns
        };
        bucket.max(window)
    }

    /// A spin-down happened at `now_ns` (call only when `earliest_ns(now) <= now`).
    pub fn spend(&mut self, now_ns: u64) {
        self.tokens = (self.tokens_at(now_ns) - 1.0).max(0.0);
        self.at_ns = now_ns;
        self.recent.push_back(now_ns);
        while self
            .recent
            .front()
            .is_some_and(|&t| t.saturating_add(DAY_NS) <= now_ns)
        {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000_000_000;

    #[test]
    fn rates_parse_and_bad_ones_are_named() {
        assert_eq!(Budget::parse_rate("50/day").unwrap(), 50);
        assert_eq!(Budget::parse_rate("70/week").unwrap(), 10);
        assert_eq!(Budget::parse_rate("2/h").unwrap(), 48);
        assert_eq!(Budget::parse_rate("12").unwrap(), 12);
        for bad in ["0/day", "x/day", "5/year", "1000000/day"] {
            let e = Budget::parse_rate(bad).unwrap_err().to_string();
            assert!(e.contains("max-spinups") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn twenty_four_a_day_is_one_an_hour() {
        // capacity max(1, 24/24) = 1 token, refilled at one per hour
        let mut b = Budget::new(24, 0).unwrap();
        assert_eq!(b.earliest_ns(0), 0);
        b.spend(0);
        assert_eq!(b.earliest_ns(10), H);
        b.spend(H);
        // a quiet stretch does not bank more than one hour's share
        assert_eq!(b.earliest_ns(10 * H), 10 * H);
        b.spend(10 * H);
        assert_eq!(b.earliest_ns(10 * H), 11 * H);
    }

    #[test]
    fn never_more_than_n_in_any_day() {
        // 48/day: 2 tokens, one per 30 min. Spend greedily for 3 days and
        // count every 24 h window by hand-independent brute force.
        let mut b = Budget::new(48, 0).unwrap();
        let mut t = 0;
        let mut times = Vec::new();
        while t < 72 * H {
            let e = b.earliest_ns(t);
            assert!(e >= t);
            t = e;
            b.spend(t);
            times.push(t);
            t += 1;
        }
        for &s in &times {
            let n = times.iter().filter(|&&x| x >= s && x < s + DAY_NS).count();
            assert!(n <= 48, "{n} spin-downs in the day from {s}");
        }
        // the long-run rate is the budget: about 48 a day (+ the 2 banked at start)
        assert!((times.len() as i64 - 3 * 48).abs() <= 2, "{}", times.len());
    }
}
