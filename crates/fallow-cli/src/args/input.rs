//! Where the FG requests come from: a trace (with the read flags) or a
//! synthetic workload, with its service model and seed. Flattened by
//! `simulate`, `compare`, `tune`, `recommend` and `pareto`.

use super::parse_size;
use super::read::ReadArgs;
use clap::Args;
use fallow_core::sim;
use fallow_core::trace::DeviceSel;
use fallow_core::ServiceModel;
use std::path::PathBuf;

/// Where the FG requests come from: a trace, or a synthetic workload.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// The trace file (gzip is read transparently); or give --workload instead.
    #[arg(value_name = "TRACE", required_unless_present = "workload")]
    pub trace: Option<PathBuf>,

    /// Device to simulate, by its id in the trace (blkparse: MAJOR,MINOR; MSR of several hosts: HOST:DISK). [default: the device with the most requests]
    #[arg(long, short = 'd', value_name = "ID", conflicts_with = "workload")]
    pub device: Option<DeviceSel>,

    /// A synthetic FG workload instead of a trace, by its arrival process:
    /// `poisson`, `erlang:k=4` (or `erlang:cv=0.5`), `lognormal:cv=3`,
    /// `hyperexp:cv=4`, `mmpp:cv=9,burst=1000` (two-state MMPP fitted to the
    /// CV of inter-arrival times and the mean number of arrivals per burst)
    /// or `mmpp:rates=40/1,sojourn=20s/60s`. The mean rate comes from
    /// --arrival-rate, --utilization or `rate=R` in the spec.
    #[arg(long, value_name = "ARRIVALS", conflicts_with = "trace")]
    pub workload: Option<String>,

    /// Mean arrival rate of the synthetic workload, requests per second.
    #[arg(
        long,
        value_name = "PER_S",
        requires = "workload",
        conflicts_with = "utilization"
    )]
    pub arrival_rate: Option<f64>,

    /// FG utilisation of the synthetic workload (0.3 = 30 %): sets the
    /// arrival rate to FRACTION / mean service time.
    #[arg(long, value_name = "FRACTION", requires = "workload", value_parser = crate::args::parse_fraction)]
    pub utilization: Option<f64>,

    /// Number of synthetic FG requests.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub requests: usize,

    /// Size of every synthetic FG request (B, KiB, MiB, …).
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = parse_size)]
    pub request_size: u64,

    /// Fraction of synthetic FG requests that are writes (they spawn BG
    /// work with --bg-work writes:R).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5, value_parser = crate::args::parse_fraction)]
    pub write_fraction: f64,

    /// FG service-time model. For a trace: turns arrivals into completions
    /// through a FCFS queue (needed when the trace has no completion times;
    /// replaces recorded ones if given). For a synthetic workload: its
    /// service times [default: exp:10ms]. `const:5ms`, `exp:5ms`,
    /// `lognormal:5ms,cv=2`, `hyperexp:5ms,cv=4` or
    /// `disk[:rpm=7200,seek=0.6ms..16ms,rate=150MB,capacity=1TB]`.
    #[arg(long, value_name = "MODEL")]
    pub service: Option<ServiceModel>,

    /// Seed of every random stream (workload, service model, BG service):
    /// the same seed gives the same result, byte for byte.
    #[arg(long, value_name = "N", default_value_t = fallow_core::sim::DEFAULT_SEED)]
    pub seed: u64,

    #[command(flatten)]
    pub read: ReadArgs,
}

impl InputArgs {
    /// The core's request for `input` with these flags: service model and
    /// seed; the BG settings stay at the core's defaults (the preparation
    /// does not use them; [`BgArgs::config`] gives a run's).
    pub fn request<'a>(&self, input: sim::Input<'a>) -> sim::Request<'a> {
        let mut req = sim::Request::new(input);
        req.service = self.service.clone();
        req.seed = self.seed;
        req
    }
}
