//! Native maintenance executors: maintenance that runs in the kernel (a
//! btrfs scrub, FITRIM, an md check, a ZFS scrub), driven through its own
//! stop/resume control instead of by freezing a process.
//!
//! Freezing the process that started a btrfs scrub pauses nothing: the
//! scrub runs in the ioctl's kernel context and btrfs workers (measured
//! here: 1,769 MiB read in 3 s while the process's cgroup said `frozen
//! 1`). Each target kind is one file here with a [`NativeExecutor`] (a
//! [`BgExecutor`] that also names the devices to watch, how its own I/O is
//! told apart and what the guardian must undo if fallow dies) and one
//! line in [`KINDS`]:
//!
//! | target | one BG request | pause | progress |
//! |---|---|---|---|
//! | `btrfs:MOUNT` ([`btrfs`]) | a slice of time, then on to the next chunk boundary | `btrfs scrub cancel` | `btrfs scrub status -R` |
//! | `fstrim:MOUNT` ([`fstrim`]) | one FITRIM range | — (ranges end by themselves) | the next offset, in a checkpoint |
//! | `md:/dev/mdX` ([`md`]) | one `[sync_min, sync_max)` window | the kernel holds the check at `sync_max`; mid-window, `sync_speed_min`/`_max` = 1 KiB/s (the brake) | `sync_completed`, `mismatch_cnt`, the next sector in a checkpoint |
//! | `zfs:POOL` ([`zfs`]) | a slice of time | `zpool scrub -p` | `zpool status -j -p` (≥ 2.3) or its text |
//!
//! - [`control`]: [`Control`], how an executor runs the native tool's
//!   commands and reads or writes sysfs-like files (for real, or against
//!   a recorded tree in tests).
//! - [`checkpoint`]: [`OffsetCheckpoint`], the checkpoint of the kinds
//!   whose tool keeps no position (fstrim, md): guarded, atomic,
//!   checksummed, checked against the target before it is resumed.
//! - [`gate`]: [`gate::Gate`], the executor's own I/O as the monitor sees
//!   it: everything a watched device does while the native job runs.
//! - [`session`]: plan → executor → driver loop → report, so a front end
//!   only converts flags and prints.
//!
//! Adding a kind is its file plus one line in [`KINDS`] (and its `mod`
//! line); nothing else names a kind.

pub mod btrfs;
pub mod checkpoint;
pub mod control;
pub mod fstrim;
pub mod gate;
pub mod md;
pub mod session;
pub mod zfs;

pub use checkpoint::OffsetCheckpoint;
pub use control::{Control, Output, RecordedControl, SystemControl};
pub use gate::{Gate, GateIo};
pub use session::{NativeOutcome, NativeSession, SessionConfig, Watch};

use crate::driver::BgExecutor;
use crate::error::{Error, Result};
use crate::run::guardian::ReleaseAction;
use crate::scrub::{Resume, Windows};
use fallow_core::outpath::OutputGuard;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A kind's constructor: the target, the settings, the control to use.
pub type OpenFn =
    fn(&NativeTarget, &NativeConfig, Arc<dyn Control>) -> Result<Box<dyn NativeExecutor>>;

/// One kind of native target: its prefix, a constructor and a summary.
#[derive(Clone, Copy)]
pub struct Kind {
    /// The prefix before `:` (`btrfs`).
    pub prefix: &'static str,
    /// One line for `--help` and errors.
    pub summary: &'static str,
    /// Open the target named by the text after `prefix:`.
    pub open: OpenFn,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kind")
            .field("prefix", &self.prefix)
            .field("summary", &self.summary)
            .finish_non_exhaustive()
    }
}

/// Every native kind, one line each (alphabetical).
pub const KINDS: &[Kind] = &[btrfs::KIND, fstrim::KIND, md::KIND, zfs::KIND];

/// The kind registered under `prefix`.
pub fn kind(prefix: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.prefix == prefix)
}

/// A native target as given (`btrfs:/mnt/data`, `fstrim:/srv`, `md:/dev/md0`, `zfs:tank`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeTarget {
    /// The kind's prefix (`btrfs`).
    pub prefix: String,
    /// What follows the `:` (a mount point, a device, a pool name).
    pub arg: String,
}

impl NativeTarget {
    /// Parse `PREFIX:ARG`. `Ok(None)` when `text` has no known prefix (a
    /// plain device or file path, for the block scrubber); an error when
    /// it has a prefix-like shape but the argument is empty.
    pub fn parse(text: &str) -> Result<Option<NativeTarget>> {
        let Some((prefix, arg)) = text.split_once(':') else {
            return Ok(None);
        };
        if kind(prefix).is_none() {
            // `./a:b` or `/dev/disk/by-path/pci-0000:00` are paths
            return Ok(None);
        }
        if arg.is_empty() {
            return Err(Error::invalid(
                "target",
                format!(
                    "`{text}`: nothing after `{prefix}:` (e.g. {prefix}:{})",
                    example(prefix)
                ),
            ));
        }
        Ok(Some(NativeTarget {
            prefix: prefix.to_string(),
            arg: arg.to_string(),
        }))
    }

    /// The kind this target is of.
    pub fn kind(&self) -> &'static Kind {
        kind(&self.prefix).expect("parse only accepts registered prefixes")
    }

    /// Open it: the kind's executor, using `control` for the tool.
    pub fn open(
        &self,
        cfg: &NativeConfig,
        control: Arc<dyn Control>,
    ) -> Result<Box<dyn NativeExecutor>> {
        (self.kind().open)(self, cfg, control)
    }
}

impl std::fmt::Display for NativeTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.prefix, self.arg)
    }
}

/// Where a native run keeps its state: its checkpoint (`checkpoint` if
/// given; else the default path for kinds whose tool keeps no position of
/// its own, fstrim and md; else none, the tool keeping its own) and, when
/// `budgeted`, its learned window beside the checkpoint or where the
/// checkpoint would be by default. A default path is the block
/// scrubber's directory, named after the target (`fstrim:/srv` →
/// `fstrim_srv.json`); its directory is made.
pub fn state_paths(
    t: &NativeTarget,
    checkpoint: Option<PathBuf>,
    budgeted: bool,
) -> Result<(Option<PathBuf>, Option<PathBuf>)> {
    let name = format!("/{}/{}", t.prefix, t.arg.trim_start_matches('/'));
    let name = std::path::Path::new(&name);
    let made = crate::scrub::checkpoint::default_path_made;
    let checkpoint = match checkpoint {
        Some(p) => Some(p),
        None if t.prefix == "fstrim" || t.prefix == "md" => Some(made(name, "the checkpoint")?),
        None => None,
    };
    let window = match (budgeted, &checkpoint) {
        (false, _) => None,
        (true, Some(p)) => Some(crate::scrub::session::budget_window_path(p)),
        (true, None) => Some(crate::scrub::session::budget_window_path(&made(
            name,
            "the budget window",
        )?)),
    };
    Ok((checkpoint, window))
}

fn example(prefix: &str) -> &'static str {
    match prefix {
        "zfs" => "tank",
        "md" => "/dev/md0",
        _ => "/mnt/data",
    }
}

/// Settings every native executor takes; kind-specific ones go in
/// [`NativeConfig::options`].
#[derive(Debug, Clone, PartialEq)]
pub struct NativeConfig {
    /// How long one BG request lets a time-sliced job (btrfs, ZFS) run,
    /// ns; `None`: derived from the request size and the measured rate.
    pub slice_ns: Option<u64>,
    /// Rate ceiling, bytes/s (the tool's own where it has one, else
    /// fallow's pacing).
    pub max_rate_bytes_per_s: Option<f64>,
    /// Daily windows in which to run (none: always).
    pub windows: Windows,
    /// fallow's checkpoint, for kinds whose tool keeps no progress of its
    /// own (FITRIM).
    pub checkpoint_path: Option<PathBuf>,
    /// How to treat an unfinished job found at start.
    pub resume: Resume,
    /// Stop this run after this many bytes of progress (`--max-bytes`).
    pub max_bytes: Option<u64>,
    /// Kind-specific `key=value` options (`minlen` for fstrim).
    pub options: BTreeMap<String, String>,
    /// The guard `checkpoint_path` (and the files beside it) must pass:
    /// the command's inputs and whether `--overwrite` was given.
    pub outputs: OutputGuard,
}

impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            slice_ns: None,
            max_rate_bytes_per_s: None,
            windows: Windows::default(),
            checkpoint_path: None,
            resume: Resume::No,
            max_bytes: None,
            options: BTreeMap::new(),
            outputs: OutputGuard::default(),
        }
    }
}

impl NativeConfig {
    /// Refuse options the kind does not know (`known`), naming them.
    pub fn check_options(&self, prefix: &str, known: &[&str]) -> Result<()> {
        match self.options.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(Error::invalid(
                "option",
                format!(
                    "`{k}` is not an option of {prefix}: targets (known: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            )),
            None => Ok(()),
        }
    }
}

/// What a native job reports, the same keys for every kind where they
/// apply (the block scrubber's names: `target_bytes`, `scrubbed_bytes`,
/// `requests`, `complete`, `elapsed_s`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NativeReport {
    /// The target as given (`btrfs:/mnt`).
    pub target: String,
    /// The kind's prefix.
    pub kind: String,
    /// The native tool and its version, where known (`btrfs-progs v6.2`).
    pub tool: String,
    /// Bytes the job covers, where known.
    pub target_bytes: Option<u64>,
    /// Progress, bytes: scrubbed (as the tool counts them) or trimmed
    /// ranges covered, over all runs of this job.
    pub scrubbed_bytes: u64,
    /// Where the job is, bytes (btrfs `last_physical`, the next FITRIM offset).
    pub position_bytes: u64,
    /// This run's progress, bytes.
    pub run_bytes: u64,
    /// BG requests (slices, ranges) this run.
    pub run_requests: u64,
    /// Time the job was let run this run, s.
    pub run_active_s: f64,
    /// Wall time of this run, s.
    pub run_elapsed_s: f64,
    /// The job is complete.
    pub complete: bool,
    /// Errors found that the tool corrected, where it reports them.
    pub errors_corrected: Option<u64>,
    /// Errors found that the tool could not correct, where it reports them.
    pub errors_uncorrectable: Option<u64>,
    /// The tool's own counters, by its names (`csum_errors`, `trimmed_bytes`).
    pub native: BTreeMap<String, u64>,
    /// How the rate ceiling was applied (`btrfs scrub_speed_max`,
    /// `fallow pacing`), if there is one.
    pub rate_limit: Option<String>,
    /// fallow's checkpoint, for kinds that keep one.
    pub checkpoint: Option<String>,
}

/// A native job as the driver runs it.
pub trait NativeExecutor: BgExecutor + Send {
    /// Kernel names of the block devices the job reads or writes (every
    /// member device of the file system or array), for the monitor.
    fn devices(&self) -> Vec<String>;

    /// The gate that counts everything the watched devices do while the
    /// job runs as the job's own I/O (see [`gate`]); the session builds one
    /// [`GateIo`] per device from it.
    fn gate(&self) -> Arc<Gate>;

    /// The job's bios as the event-driven monitor can tell them apart (by
    /// the process that queues them: a btrfs scrub's `btrfs scrub start`),
    /// for a job on one device; with it the monitor sees FG bios while the
    /// job runs, and the gate stays closed. `None`: the gate only.
    fn bio_attribution(&self) -> Option<Arc<crate::monitor::cgroup_bios::BioAttribution>> {
        None
    }

    /// What the guardian must do if fallow dies before
    /// [`NativeExecutor::finish`] (resume a cancelled scrub, restore a
    /// speed limit).
    fn release_actions(&self) -> Vec<ReleaseAction>;

    /// Progress and errors now.
    fn report(&mut self) -> Result<NativeReport>;

    /// The run ends (finished, or stopped by a signal): leave the job in a
    /// state the tool can resume from, undo temporary settings, save
    /// progress. Called once, after the driver returns.
    fn finish(&mut self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_prefixes_and_leaves_paths_alone() {
        let t = NativeTarget::parse("btrfs:/mnt/x").unwrap().unwrap();
        assert_eq!((t.prefix.as_str(), t.arg.as_str()), ("btrfs", "/mnt/x"));
        assert_eq!(t.to_string(), "btrfs:/mnt/x");
        assert_eq!(t.kind().prefix, "btrfs");
        let t = NativeTarget::parse("fstrim:/srv").unwrap().unwrap();
        assert_eq!(t.arg, "/srv");
        assert_eq!(NativeTarget::parse("/dev/sda").unwrap(), None);
        assert_eq!(
            NativeTarget::parse("/dev/disk/by-path/pci-0000:00:1f").unwrap(),
            None
        );
        let e = NativeTarget::parse("btrfs:").unwrap_err().to_string();
        assert!(e.contains("nothing after `btrfs:`"), "{e}");
    }

    #[test]
    fn registry_prefixes_are_unique_and_sorted() {
        let p: Vec<&str> = KINDS.iter().map(|k| k.prefix).collect();
        let mut s = p.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(p, s);
    }

    #[test]
    fn unknown_options_are_named() {
        let mut c = NativeConfig::default();
        c.options.insert("minlen".into(), "4KiB".into());
        assert!(c.check_options("fstrim", &["minlen"]).is_ok());
        let e = c.check_options("btrfs", &[]).unwrap_err().to_string();
        assert!(e.contains("`minlen`") && e.contains("btrfs"), "{e}");
    }
}
