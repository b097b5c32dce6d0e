//! The BG work and its device model: the BG flags of the trace-driven
//! commands, and how they read in words.

use super::{parse_duration, parse_size};
use clap::Args;
use fallow_core::sim::{BgService, BgWork, SimConfig};

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

    /// One line: `BG service exponential, mean 10.0 ms, 64 KiB requests,
    /// endless work` ([`fallow_report::describe::bg_settings`]).
    pub fn describe(&self) -> String {
        fallow_report::describe::bg_settings(&self.config(0))
    }
}
