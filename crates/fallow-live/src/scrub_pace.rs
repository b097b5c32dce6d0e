//! Limits on when and how fast a scrub reads, whatever the policy says: a
//! rate ceiling ([`TokenBucket`]) and daily time windows ([`Windows`]).

use crate::error::{Error, Result};
use chrono::Timelike;
use fallow_core::human::{bytes, num, secs};
use std::fmt;
use std::str::FromStr;

/// A token bucket: at most `rate` bytes per second in the long run, and
/// at most `capacity` bytes (never less than one request) at once.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    rate_bytes_per_s: f64,
    capacity_bytes: f64,
    tokens: f64,
    last_ns: Option<u64>,
}

impl TokenBucket {
    /// A full bucket refilled at `rate_bytes_per_s` (> 0) up to `capacity_bytes`.
    pub fn new(rate_bytes_per_s: f64, capacity_bytes: u64) -> Result<TokenBucket> {
        if !(rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0) {
            return Err(Error::invalid(
                "--max-rate",
                format!("{rate_bytes_per_s} bytes/s: must be positive"),
            ));
        }
        Ok(TokenBucket {
            rate_bytes_per_s,
            capacity_bytes: capacity_bytes as f64,
            tokens: capacity_bytes as f64,
            last_ns: None,
        })
    }

    /// The ceiling, bytes per second.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.rate_bytes_per_s
    }

    fn refill(&mut self, size: u64, now_ns: u64) {
        let cap = self.capacity_bytes.max(size as f64);
        if let Some(last) = self.last_ns {
            let dt = now_ns.saturating_sub(last) as f64 / 1e9;
            self.tokens = (self.tokens + dt * self.rate_bytes_per_s).min(cap);
        } else {
            self.tokens = self.tokens.max(size as f64).min(cap);
        }
        self.last_ns = Some(now_ns);
    }

    /// ns from `now_ns` until a request of `size` bytes fits (0: now).
    pub fn ready_in_ns(&mut self, size: u64, now_ns: u64) -> u64 {
        self.refill(size, now_ns);
        let missing = size as f64 - self.tokens;
        if missing <= 0.0 {
            0
        } else {
            (missing / self.rate_bytes_per_s * 1e9).ceil() as u64
        }
    }

    /// Spend `size` bytes at `now_ns` (the balance may go negative if the
    /// caller did not wait: the next requests then wait longer).
    pub fn take(&mut self, size: u64, now_ns: u64) {
        self.refill(size, now_ns);
        self.tokens -= size as f64;
    }
}

/// Parse a rate: `64MiB/s`, `100MB/s`, `64MiB` (per second implied).
pub fn parse_rate(s: &str) -> Result<f64> {
    let t = s.trim();
    let bytes = t.strip_suffix("/s").unwrap_or(t);
    let b = fallow_core::units::parse_bytes(bytes).map_err(|e| {
        Error::invalid(
            "--max-rate",
            format!("`{s}`: {e} (write it like 64MiB/s or 100MB/s)"),
        )
    })?;
    if b == 0 {
        return Err(Error::invalid(
            "--max-rate",
            format!("`{s}`: must be positive"),
        ));
    }
    Ok(b as f64)
}

/// One daily window, local time, `[start, end)` in minutes after
/// midnight; `end ≤ start` wraps past midnight (`22:00-06:00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Opens, minutes after midnight.
    pub start_min: u32,
    /// Closes, minutes after midnight (1440 for `24:00`).
    pub end_min: u32,
}

impl Window {
    fn contains(&self, sec_of_day: u32) -> bool {
        let (s, e) = (self.start_min * 60, self.end_min * 60);
        if s < e {
            (s..e).contains(&sec_of_day)
        } else {
            sec_of_day >= s || sec_of_day < e
        }
    }

    /// Seconds from `sec_of_day` until the window opens (0 if open).
    fn until_open_s(&self, sec_of_day: u32) -> u32 {
        if self.contains(sec_of_day) {
            0
        } else {
            let s = self.start_min * 60;
            (s + 86_400 - sec_of_day) % 86_400
        }
    }
}

impl FromStr for Window {
    type Err = Error;
    /// `HH:MM-HH:MM`.
    fn from_str(text: &str) -> Result<Window> {
        let bad = |m: &str| {
            Error::invalid(
                "--window",
                format!("`{text}`: {m} (write it like 01:00-06:00, local time)"),
            )
        };
        let (a, b) = text.trim().split_once('-').ok_or_else(|| bad("no `-`"))?;
        let hm = |t: &str, end: bool| -> Result<u32> {
            let (h, m) = t
                .trim()
                .split_once(':')
                .ok_or_else(|| bad("a time needs HH:MM"))?;
            let h: u32 = h.parse().map_err(|_| bad("the hour is not a number"))?;
            let m: u32 = m.parse().map_err(|_| bad("the minutes are not a number"))?;
            if m > 59 || h > 24 || (h == 24 && (m != 0 || !end)) {
                return Err(bad("no such time of day"));
            }
            Ok(h * 60 + m)
        };
        let w = Window {
            start_min: hm(a, false)?,
            end_min: hm(b, true)?,
        };
        if w.start_min == w.end_min {
            return Err(bad("the window is empty (use 00:00-24:00 for all day)"));
        }
        Ok(w)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start_min / 60,
            self.start_min % 60,
            self.end_min / 60,
            self.end_min % 60
        )
    }
}

/// The daily windows in which a scrub may read; none = always.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Windows(pub Vec<Window>);

/// Longest single wait for a window, s: the time is looked at again after
/// it, so a clock change or a DST switch costs at most this much.
const WINDOW_RECHECK_S: u32 = 60;

impl Windows {
    /// Seconds from `sec_of_day` (local) until a window is open (0: one
    /// is), at most a minute, so that the clock is read again.
    pub fn wait_s(&self, sec_of_day: u32) -> u32 {
        self.0
            .iter()
            .map(|w| w.until_open_s(sec_of_day))
            .min()
            .unwrap_or(0)
            .min(WINDOW_RECHECK_S)
    }

    /// Seconds until a window opens, local time now.
    pub fn wait_now_s(&self) -> u32 {
        if self.0.is_empty() {
            return 0;
        }
        self.wait_s(chrono::Local::now().num_seconds_from_midnight())
    }

    /// Seconds from `sec_of_day` until the next window opens, without the cap.
    pub fn until_open_s(&self, sec_of_day: u32) -> Option<u32> {
        self.0.iter().map(|w| w.until_open_s(sec_of_day)).min()
    }
}

const YEAR_S: f64 = 365.0 * 86_400.0;

/// A warning with the least time a scrub of `to_read` bytes can take when
/// that is over a year: the fixed wait of `fixed-wait:t=…` before its first
/// request, the rate ceiling, and the share of the day its windows are
/// open (`--window 23:59-00:00` is one minute a day). A lower bound: idle
/// time and the device's speed only lengthen it.
pub fn cannot_finish_within_a_year(
    to_read: u64,
    policy: &str,
    max_rate: Option<f64>,
    windows: &Windows,
) -> Option<String> {
    if to_read == 0 {
        return None;
    }
    let open_min: u32 = windows
        .0
        .iter()
        .map(|w| (w.end_min + 1440 - w.start_min) % 1440)
        .sum();
    let open = if windows.0.is_empty() {
        1.0
    } else {
        (f64::from(open_min) / 1440.0).min(1.0)
    };
    let mut why = Vec::new();
    let mut least_s = 0.0f64;
    if let Some(rate) = max_rate.filter(|&r| r > 0.0) {
        let t = to_read as f64 / rate / open;
        least_s = least_s.max(t);
        why.push(format!(
            "{} at --max-rate {}/s",
            bytes(to_read),
            bytes(rate as u64)
        ));
    } else if open < 1.0 {
        why.push(format!("--window open {} a day", secs(open * 86_400.0)));
    }
    if let Ok((name, mut params)) = fallow_core::policy::Params::parse(policy) {
        let fixed = fallow_core::policy::entry(&name).is_ok_and(|e| e.name == "fixed-wait");
        if let Some(t) = params.take("t").filter(|_| fixed) {
            if let Ok(ns) = fallow_core::units::parse_duration_ns(&t) {
                let t_s = ns as f64 / 1e9;
                if t_s > least_s {
                    least_s = t_s;
                    why.push(format!("the first request waits {t} of idleness"));
                }
            }
        }
    }
    if open < 1.0 {
        why.push(format!("reading only {:.3} % of the day", open * 100.0));
    }
    (least_s > YEAR_S).then(|| {
        format!(
            "at these settings the scrub cannot finish within a year: it takes at least {:.3e} s (about {} years; {})",
            least_s,
            num(least_s / YEAR_S),
            why.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_paces_requests_at_the_rate() {
        // 1 MiB requests at 4 MiB/s: the first now, then one every 250 ms
        let mut b = TokenBucket::new(4.0 * 1048576.0, 1 << 20).unwrap();
        let mut t = 0u64;
        let mut starts = vec![];
        for _ in 0..5 {
            t += b.ready_in_ns(1 << 20, t);
            starts.push(t);
            b.take(1 << 20, t);
        }
        assert_eq!(
            starts,
            vec![0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
        );
    }

    #[test]
    fn bucket_does_not_bank_more_than_its_capacity() {
        let mut b = TokenBucket::new(1e6, 100_000).unwrap();
        b.take(100_000, 0);
        // after 10 s idle, only one capacity's worth is available at once
        assert_eq!(b.ready_in_ns(100_000, 10_000_000_000), 0);
        b.take(100_000, 10_000_000_000);
        assert_eq!(b.ready_in_ns(100_000, 10_000_000_000), 100_000_000);
        // a request larger than the capacity still fits after waiting
        let mut b = TokenBucket::new(1e6, 1000).unwrap();
        b.take(1000, 0);
        assert_eq!(b.ready_in_ns(500_000, 0), 500_000_000);
    }

    #[test]
    fn long_run_rate_never_exceeds_the_ceiling() {
        // independent check: bytes taken by time T ≤ capacity + rate·T
        let (rate, cap) = (3e6, 256 * 1024);
        let mut b = TokenBucket::new(rate, cap).unwrap();
        let mut t = 0u64;
        let mut total = 0u64;
        let sizes = [4096u64, 65536, 1 << 20, 12345, 262144];
        for i in 0..200 {
            let s = sizes[i % sizes.len()];
            t += b.ready_in_ns(s, t) + (i as u64 % 3) * 1_000_000;
            b.take(s, t);
            total += s;
            let bound = cap.max(1 << 20) as f64 + rate * t as f64 / 1e9 + 1.0;
            assert!((total as f64) <= bound, "{total} > {bound} at {t}");
        }
    }

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("64MiB/s").unwrap(), 64.0 * 1048576.0);
        assert_eq!(parse_rate("100MB/s").unwrap(), 1e8);
        assert_eq!(parse_rate("1GiB").unwrap(), 1073741824.0);
        assert!(parse_rate("0/s").is_err());
        assert!(parse_rate("fast")
            .unwrap_err()
            .to_string()
            .contains("--max-rate"));
        assert!(TokenBucket::new(0.0, 1).is_err());
    }

    #[test]
    fn windows_parse_and_wrap() {
        let w: Window = "01:00-06:00".parse().unwrap();
        assert_eq!((w.start_min, w.end_min), (60, 360));
        assert_eq!(w.to_string(), "01:00-06:00");
        let night: Window = "22:30-06:00".parse().unwrap();
        assert!(night.contains(23 * 3600));
        assert!(night.contains(3600));
        assert!(!night.contains(12 * 3600));
        let all: Window = "00:00-24:00".parse().unwrap();
        assert!(all.contains(0) && all.contains(86_399));
        for bad in [
            "1-6",
            "01:00",
            "25:00-06:00",
            "01:60-02:00",
            "24:00-01:00",
            "03:00-03:00",
            "a:b-c:d",
        ] {
            let e = bad.parse::<Window>().unwrap_err().to_string();
            assert!(e.contains("--window") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn waits_until_the_nearest_window_capped() {
        let ws = Windows(vec![
            "01:00-06:00".parse().unwrap(),
            "13:00-14:00".parse().unwrap(),
        ]);
        assert_eq!(ws.wait_s(2 * 3600), 0);
        assert_eq!(ws.until_open_s(7 * 3600), Some(6 * 3600));
        assert_eq!(ws.until_open_s(23 * 3600), Some(2 * 3600));
        assert_eq!(ws.until_open_s(12 * 3600 + 59 * 60 + 30), Some(30));
        // the wait is capped so that the clock is read again
        assert_eq!(ws.wait_s(7 * 3600), 60);
        assert_eq!(ws.wait_s(12 * 3600 + 59 * 60 + 30), 30);
        assert_eq!(Windows::default().wait_s(0), 0);
        assert_eq!(Windows::default().wait_now_s(), 0);
    }

    #[test]
    fn settings_that_cannot_finish_within_a_year_are_named() {
        let none = Windows::default();
        let w = |s: &str| Windows(vec![s.parse().unwrap()]);
        let tib = 1u64 << 40;
        // 1 TiB at 1 B/s: 1.1e12 s, about 34,865 years
        let e = cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1.0), &none).unwrap();
        assert!(e.contains("1.100e12 s"), "{e}");
        // one minute a day at 100 KB/s: 1 TiB in 1.1e7 s of open time, 1440 times that
        let e =
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1e5), &w("23:59-00:00"))
                .unwrap();
        assert!(
            e.contains(&format!("{:.3e} s", tib as f64 / 1e5 * 1440.0)),
            "{e}"
        );
        // a wait of 1e19 ns before the first request: 317 years
        let e = cannot_finish_within_a_year(4096, "fixed-wait:t=1e19ns", None, &none).unwrap();
        assert!(
            e.contains("1.000e10 s") && e.contains("waits 1e19ns"),
            "{e}"
        );
        // a day's scrub is no warning
        assert_eq!(
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", Some(1e8), &w("01:00-06:00")),
            None
        );
        assert_eq!(
            cannot_finish_within_a_year(tib, "fixed-wait:t=100ms", None, &none),
            None
        );
    }
}
