//! What a run's settings choose: how the command is paused and how long
//! a slice may be. The settings hold these values and the run session acts
//! on them, so they sit below both.

use crate::error::{Error, Result};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Shortest and longest slice, ns.
pub const SLICE_RANGE_NS: (u64, u64) = (1_000_000, 60_000_000_000);

/// How a command is paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FreezerKind {
    /// cgroup v2: `cgroup.freeze` (Linux 5.2+).
    Cgroup2,
    /// cgroup v1 freezer controller: `freezer.state`.
    Cgroup1,
    /// `SIGSTOP` / `SIGCONT` to the command's process group.
    Signal,
}

impl FreezerKind {
    /// Every kind, in order of preference.
    pub const ALL: [FreezerKind; 3] = [
        FreezerKind::Cgroup2,
        FreezerKind::Cgroup1,
        FreezerKind::Signal,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FreezerKind::Cgroup2 => "cgroup2",
            FreezerKind::Cgroup1 => "cgroup1",
            FreezerKind::Signal => "signal",
        }
    }
}

impl fmt::Display for FreezerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FreezerKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        FreezerKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                Error::invalid(
                    "--freezer",
                    format!("`{s}`: use cgroup2, cgroup1 or signal"),
                )
            })
    }
}
