//! The BG work and its device model: the BG flags of the trace-driven
//! commands, and how they read in words.

use super::{parse_duration, parse_size};
use crate::human::{bytes, count, num, pct, secs};
use clap::Args;
use fallow_core::sim::{BgService, BgWork, SimConfig};
use std::fmt::Write as _;

/// The BG work and its device model.
#[derive(Debug, Clone, Args)]
pub struct BgArgs {
    /// BG service-time model: `exp:MEAN` (exponential), `const:T`, or
    /// `size[:base=8ms,knee=64KiB,rate=100MB]` (flat up to the knee, then
    /// linear in size, as in Practical Scrubbing Fig. 4).
    #[arg(long, value_name = "MODEL", default_value = "exp:10ms")]
    pub bg: BgService,

    /// BG request size when the policy does not choose one.
    #[arg(long, value_name = "SIZE", default_value = "64KiB", value_parser = parse_size)]
    pub bg_size: u64,

    /// How much BG work there is: `endless` (scrubbing), `requests:N`,
    /// `bytes:SIZE`, or `writes:R` (every FG write spawns BG work, in all R
    /// times the FG work, e.g. writes:100%; BG response time is measured).
    #[arg(long, value_name = "WORK", default_value = "endless")]
    pub bg_work: BgWork,

    /// Extra delay of an FG request that finds BG work in service
    /// (repositioning): ns, us, ms, s; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    pub switch_penalty: u64,
}

impl BgArgs {
    /// The run's settings.
    pub fn config(&self, seed: u64) -> SimConfig {
        SimConfig {
            bg_service: self.bg,
            bg_work: self.bg_work,
            bg_size_bytes: self.bg_size,
            switch_penalty_ns: self.switch_penalty,
            seed,
        }
    }

    /// One line: `exp:10ms BG service, 64 KiB requests, endless`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "BG service {}, {} requests, {}",
            describe_bg(&self.bg),
            bytes(self.bg_size),
            describe_work(&self.bg_work)
        );
        if self.switch_penalty > 0 {
            let _ = write!(
                s,
                ", switch penalty {}",
                secs(self.switch_penalty as f64 / 1e9)
            );
        }
        s
    }
}

/// A BG service model in words.
pub fn describe_bg(m: &BgService) -> String {
    match *m {
        BgService::Exponential { mean_ns } => {
            format!("exponential, mean {}", secs(mean_ns as f64 / 1e9))
        }
        BgService::Constant { ns } => format!("constant {}", secs(ns as f64 / 1e9)),
        BgService::SizeBased {
            base_ns,
            knee_bytes,
            rate_bytes_per_s,
        } => format!(
            "{} up to {}, then {} MB/s",
            secs(base_ns as f64 / 1e9),
            bytes(knee_bytes),
            num(rate_bytes_per_s / 1e6)
        ),
    }
}

/// How much BG work, in words.
pub fn describe_work(w: &BgWork) -> String {
    match *w {
        BgWork::Endless => "endless work".into(),
        BgWork::Requests(n) => format!("{} requests of work", count(n)),
        BgWork::Bytes(b) => format!("{} of work", bytes(b)),
        BgWork::PerFgWrite { ratio } => {
            format!("work spawned by FG writes ({} of FG work)", pct(ratio))
        }
    }
}
