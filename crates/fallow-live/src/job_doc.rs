//! The JSON document of a finished live job (`fallow scrub --json`, a
//! native job's, and Python's `fallow.live.scrub`): the job's own report
//! keys first, then the keys every job has. One type, so the CLI and
//! Python give the same document.

use crate::driver::{DriveReport, Outcome};
use crate::monitor::MonitorStats;
use serde::Serialize;

/// The JSON report: the job's own keys, then the keys every scrub has.
#[derive(Debug, Serialize)]
pub struct JobDoc<'a, R: Serialize> {
    /// The job's report (progress, bad ranges, checkpoint), flattened.
    #[serde(flatten)]
    pub report: &'a R,
    /// The devices watched (native jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<&'a [String]>,
    /// The policy spec it ran.
    pub policy: &'a str,
    /// Where the policy came from (`--policy`, `config`, `budget`, …).
    pub policy_from: &'a str,
    /// How the run ended.
    pub outcome: Outcome,
    /// The monitor's counts and cost.
    pub monitor: &'a MonitorStats,
    /// The monitor's CPU time over the run's wall time.
    pub monitor_cpu_fraction: f64,
    /// The driver's counts (and a budget's measurements).
    pub driver: &'a DriveReport,
    /// What the front end warned about before the run.
    pub warnings: &'a [String],
}
