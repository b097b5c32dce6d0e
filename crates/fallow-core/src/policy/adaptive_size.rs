//! `adaptive-size(mode, t, s, a, b, max, swap-after)`: Practical Scrubbing's
//! adaptive request sizes (Amvrosiadis, Oprea, Schroeder, DSN 2012, §V-C,
//! "Sizing up throughput opportunities", summarised in §V-D). On top of
//! Waiting (idle wait `t`, §V-B2), the scrubber starts each idle interval at
//! size `s` and grows the size while FG stays away, because with decreasing
//! hazard rates a collision gets less likely the longer the device has been
//! idle (§V-A, Fig. 11–12):
//! - `exponential`: "multiplies the request size by a factor a every time a
//!   scrub request is completed without a collision occurring";
//! - `linear`: "each new request is multiplied by a and further increased
//!   by b";
//! - `swapping`: "starts firing with the optimal request size s … and then
//!   at some later point t′ switches over to the maximum request size".
//!   We measure t′ (`swap-after`) from the first BG request of the interval,
//!   i.e. after the wait; `swap-after=inf` is fixed-size Waiting.
//!
//! Sizes are capped at `max` (the paper's maximum request size whose service
//! time stays within the maximum allowed slowdown). Every new idle interval
//! starts again at `s`. Growth needs a decision after every request
//! (`consult_each`); once the size stops changing (the cap, or a = 1, b = 0),
//! the rest of the interval is one burst the engine computes in O(1).
//! Swapping runs the `s` phase as one burst of as many requests as start
//! before t′ at the model's mean service time. The paper found none of these
//! beats the best fixed size at equal slowdown (§V-C, Fig. 15).

use super::{Ctx, Decision, Entry, Knob, Param, ParamKind, Params, Policy, Start};
use crate::error::{Error, Result};

/// Registry entry: what `fallow policies`, `tune` and the builders read.
pub const ENTRY: Entry = Entry {
    name: "adaptive-size",
    aliases: &[],
    summary: "Waiting with a request size that grows within each idle interval (exponential, linear, swapping)",
    keys: &[
        Param::new("mode", ParamKind::Choice(&["exponential", "linear", "swapping"]), "exponential").example("linear"),
        Param::new("t", ParamKind::Duration, "100ms").note("wait"),
        Param::new("s", ParamKind::Bytes, "64KiB").note("start"),
        Param::new("a", ParamKind::Number("FACTOR"), "2"),
        Param::new("b", ParamKind::Bytes, "0"),
        Param::new("max", ParamKind::Bytes, "4MiB"),
        Param::new("swap-after", ParamKind::Other("DURATION|inf"), "1s"),
    ],
    clairvoyant: false,
    build: AdaptiveSize::build,
    knob: Some(Knob::wait("t")),
    size_param: Some("s"),
    interval_rule: None,
};

/// How the request size grows within an idle interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeMode {
    /// size ← size·a after each completed request.
    Exponential,
    /// size ← size·a + b after each completed request.
    Linear,
    /// size s until t′ after the first request, then the maximum.
    Swapping,
}

/// Parameters of [`AdaptiveSize`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveSizeConfig {
    /// Growth rule.
    pub mode: SizeMode,
    /// Idle wait before the first BG request, ns.
    pub wait_ns: u64,
    /// First request size of each interval, bytes.
    pub start_bytes: u64,
    /// Growth factor a (≥ 1).
    pub factor: f64,
    /// Linear increment b, bytes.
    pub add_bytes: u64,
    /// Largest request size, bytes.
    pub max_bytes: u64,
    /// Swapping: time from the first BG request to the switch to `max`, ns
    /// (`u64::MAX`: never).
    pub swap_after_ns: u64,
}

impl Default for AdaptiveSizeConfig {
    /// The key table's defaults.
    fn default() -> Self {
        ENTRY.read_defaults(AdaptiveSizeConfig::take)
    }
}

impl AdaptiveSizeConfig {
    /// Take every key of the table, each not given from it, and check that
    /// the sizes and the factor make sense.
    fn take(p: &mut Params) -> Result<Self> {
        let mode = match p.value("mode")?.as_str() {
            "exponential" | "exp" => SizeMode::Exponential,
            "linear" => SizeMode::Linear,
            "swapping" | "swap" => SizeMode::Swapping,
            other => {
                return Err(Error::invalid(
                    "adaptive-size:mode",
                    format!("`{other}`: use exponential, linear or swapping"),
                ))
            }
        };
        let swap_after_ns = match p.value("swap-after")?.as_str() {
            "inf" | "never" => u64::MAX,
            v => crate::units::parse_duration_ns(v)
                .map_err(|e| Error::invalid("adaptive-size:swap-after", e.to_string()))?,
        };
        let config = AdaptiveSizeConfig {
            mode,
            wait_ns: p.duration_ns("t")?,
            start_bytes: p.bytes_value("s")?,
            factor: p.number("a")?,
            add_bytes: p.bytes_value("b")?,
            max_bytes: p.bytes_value("max")?,
            swap_after_ns,
        };
        if config.factor < 1.0 {
            return Err(Error::invalid("adaptive-size:a", "must be at least 1"));
        }
        if config.start_bytes == 0 || config.max_bytes < config.start_bytes {
            return Err(Error::invalid(
                "adaptive-size",
                "need 0 < s ≤ max (start and maximum request sizes)",
            ));
        }
        Ok(config)
    }
}

/// Waiting with a request size that grows within each idle interval.
#[derive(Debug, Clone, Default)]
pub struct AdaptiveSize {
    /// Its parameters.
    pub config: AdaptiveSizeConfig,
    /// Size of the request (or burst) just issued, bytes.
    size: u64,
}

impl AdaptiveSize {
    /// A policy with these parameters.
    pub fn new(config: AdaptiveSizeConfig) -> Self {
        AdaptiveSize { config, size: 0 }
    }

    /// Build from `mode=`, `t=`, `s=`, `a=`, `b=`, `max=` and `swap-after=`.
    pub fn build(mut p: Params) -> Result<Box<dyn Policy>> {
        let config = AdaptiveSizeConfig::take(&mut p)?;
        p.finish_keys()?;
        Ok(Box::new(AdaptiveSize::new(config)))
    }

    /// The size after one more undisturbed request of `size`.
    fn grow(&self, size: u64) -> u64 {
        let c = &self.config;
        let next = match c.mode {
            SizeMode::Exponential => size as f64 * c.factor,
            SizeMode::Linear => size as f64 * c.factor + c.add_bytes as f64,
            SizeMode::Swapping => size as f64,
        };
        (next.round() as u64).clamp(size, c.max_bytes)
    }

    /// One request of `size` after `after_ns`, then ask again — or, when
    /// the size will not change any more, a burst until FG arrives.
    fn issue(&mut self, after_ns: u64, size: u64) -> Decision {
        self.size = size;
        if self.grow(size) == size {
            return Decision::Start(Start::until_fg(after_ns, size));
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
}

impl Policy for AdaptiveSize {
    fn name(&self) -> &str {
        "adaptive-size"
    }

    fn chooses_size(&self) -> bool {
        true
    }

    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        let c = self.config;
        match c.mode {
            SizeMode::Swapping => {
                self.size = c.start_bytes;
                if c.swap_after_ns == u64::MAX || c.start_bytes == c.max_bytes {
                    return Decision::Start(Start::until_fg(c.wait_ns, c.start_bytes));
                }
                if c.swap_after_ns == 0 {
                    self.size = c.max_bytes;
                    return Decision::Start(Start::until_fg(c.wait_ns, c.max_bytes));
                }
                // requests of s start at 0, m, 2m, …: those starting before t′
                let m = ctx.bg_service.mean_ns(c.start_bytes).max(1.0);
                let before = (c.swap_after_ns as f64 / m).ceil().max(1.0) as u64;
                Decision::Start(Start {
                    after_ns: c.wait_ns,
                    size_bytes: c.start_bytes,
                    max_requests: before,
                    spacing_ns: 0,
                    consult_each: false,
                    schedule: None,
                    batch: None,
                })
            }
            _ => self.issue(c.wait_ns, c.start_bytes),
        }
    }

    fn on_bg_done(&mut self, _ctx: &mut Ctx<'_>, _done: u64) -> Decision {
        match self.config.mode {
            SizeMode::Swapping => {
                self.size = self.config.max_bytes;
                Decision::Start(Start::until_fg(0, self.config.max_bytes))
            }
            _ => {
                let next = self.grow(self.size);
                self.issue(0, next)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{simulate, BgService, Prepared, SimConfig};
    use crate::trace::{Op, Trace};

    const MS: u64 = 1_000_000;
    const KIB: u64 = 1024;

    /// Two one-request busy periods of 1 ms around one idle gap of `gap_ms`.
    fn one_gap(gap_ms: u64) -> Prepared {
        let arrival = vec![0, (1 + gap_ms) * MS];
        let completion = vec![MS, (2 + gap_ms) * MS];
        let t = Trace::from_columns(
            arrival,
            Some(completion),
            vec![0; 2],
            vec![4096; 2],
            vec![Op::Read; 2],
            vec![0; 2],
        )
        .unwrap();
        Prepared::new(&t, None, 0).unwrap()
    }

    /// Service of 1 ms up to 64 KiB, then 1 ms per further 64 KiB
    /// (65 536 000 B/s): a request of k·64 KiB takes k ms.
    fn cfg() -> SimConfig {
        SimConfig {
            bg_service: BgService::SizeBased {
                base_ns: MS,
                knee_bytes: 64 * KIB,
                rate_bytes_per_s: 65_536_000.0,
            },
            ..SimConfig::default()
        }
    }

    fn policy(spec: &str) -> Box<dyn Policy> {
        crate::policy::build(spec).unwrap()
    }

    #[test]
    fn exponential_doubles_until_the_cap() {
        // t = 10 ms, sizes 64, 128, 256, 512 KiB (1, 2, 4, 8 ms), then the
        // cap 512 KiB back to back. Gap 10 + 1+2+4+8 = 25 ms, then 8 ms each:
        // a gap of 49 ms holds 4 + 3 = 7 requests exactly, no collision.
        let p = one_gap(49);
        let mut pol = policy("adaptive-size:mode=exponential,t=10ms,s=64KiB,a=2,max=512KiB");
        let r = simulate(&p, pol.as_mut(), &cfg()).unwrap();
        assert_eq!(r.bg.completed, 7);
        assert_eq!(r.bg.bytes, (64 + 128 + 256 + 512 + 3 * 512) * KIB);
        assert_eq!(r.fg.collisions, 0);
        // 50 ms: the 8th (512 KiB, starts at 49 ms) runs into the FG arrival
        // at 50 ms and delays it by 7 ms
        let p = one_gap(50);
        let mut pol = policy("adaptive-size:mode=exponential,t=10ms,s=64KiB,a=2,max=512KiB");
        let r = simulate(&p, pol.as_mut(), &cfg()).unwrap();
        assert_eq!((r.bg.completed, r.fg.collisions), (8, 1));
        assert!((r.fg.mean_added_delay_s - 0.007 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn linear_adds_b() {
        // a = 1, b = 64 KiB: 64, 128, 192, 256 (cap) KiB = 1, 2, 3, 4 ms.
        // Gap 5 + 1 + 2 + 3 + 4 + 4 = 19 ms: five requests.
        let p = one_gap(19);
        let mut pol = policy("adaptive-size:mode=linear,t=5ms,s=64KiB,a=1,b=64KiB,max=256KiB");
        let r = simulate(&p, pol.as_mut(), &cfg()).unwrap();
        assert_eq!(r.bg.completed, 5);
        assert_eq!(r.bg.bytes, (64 + 128 + 192 + 256 + 256) * KIB);
        assert_eq!(r.fg.collisions, 0);
    }

    #[test]
    fn swapping_switches_to_max_after_t_prime() {
        // 64 KiB (1 ms) until t′ = 3 ms after the first request, then 1 MiB
        // (16 ms). t = 2 ms: small requests at 2, 3, 4 ms; big ones from 5 ms.
        // Gap 37 ms: two big ones (5–21, 21–37), no collision.
        let p = one_gap(37);
        let mut pol = policy("adaptive-size:mode=swapping,t=2ms,s=64KiB,max=1MiB,swap-after=3ms");
        let r = simulate(&p, pol.as_mut(), &cfg()).unwrap();
        assert_eq!(r.bg.completed, 5);
        assert_eq!(r.bg.bytes, 3 * 64 * KIB + 2 * 1024 * KIB);
        assert_eq!(r.fg.collisions, 0);
        // never swapping = fixed 64 KiB Waiting: 35 requests in 35 ms
        let mut pol = policy("adaptive-size:mode=swapping,t=2ms,s=64KiB,max=1MiB,swap-after=inf");
        assert_eq!(simulate(&p, pol.as_mut(), &cfg()).unwrap().bg.completed, 35);
    }

    #[test]
    fn a_gap_shorter_than_the_wait_is_not_used_and_params_are_checked() {
        let p = one_gap(9);
        let mut pol = policy("adaptive-size:t=10ms");
        let r = simulate(&p, pol.as_mut(), &cfg()).unwrap();
        assert_eq!(r.bg.completed, 0);
        assert!(crate::policy::build("adaptive-size:a=0.5").is_err());
        assert!(crate::policy::build("adaptive-size:s=8MiB,max=4MiB").is_err());
        assert!(crate::policy::build("adaptive-size:mode=random").is_err());
    }
}
