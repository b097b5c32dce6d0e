//! What a `DEV` argument means: where its I/O is read and what spins it
//! down.
//!
//! - An emulated disk (`fallow emulate-disk`): its mount point, or
//!   `MOUNTPOINT/disk`: I/O from `MOUNTPOINT/stat`, spun down through
//!   `MOUNTPOINT/power`.
//! - A loop device over an emulated disk: I/O from the loop device's
//!   sysfs counters (what reaches the block layer), spun down through the
//!   emulator's `power` file beside the backing file.
//! - Any other block device (`/dev/sdb`, `sdb`, a partition: its whole
//!   disk): sysfs counters, and ATA STANDBY IMMEDIATE through SG_IO, or
//!   for a SCSI/SAS disk START STOP UNIT with the STANDBY power condition.

use super::activity::{ActivitySource, StatPoll};
use super::actuator::Actuator;
use super::ata::AtaActuator;
use super::emu::{EmuActuator, EmuSource};
use super::scsi::ScsiActuator;
use super::traced::TracedSource;
use crate::error::{Error, Result};
use crate::monitor::stat::{resolve_device, StatSource};
use crate::monitor::{DevId, EventMonitor};
use std::path::{Path, PathBuf};

/// A resolved `DEV`.
pub struct Target {
    /// Its name in events and the status.
    pub name: String,
    /// Where its I/O is read.
    pub source: Box<dyn ActivitySource>,
    /// What spins it down (`None` only in a dry run, when none works).
    pub actuator: Option<Box<dyn Actuator>>,
    /// Why there is no actuator.
    pub actuator_error: Option<String>,
    /// Why the block-tracepoint source is not used (the counters are
    /// polled instead and no process is named), when it is not.
    pub events_unavailable: Option<String>,
    /// tracefs was not mounted and this process mounted it.
    pub mounted_tracefs: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The emulator's directory when `path` is one, or its `disk` file.
fn emulated_dir(path: &Path) -> Option<PathBuf> {
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else if path.file_name().is_some_and(|n| n == "disk") {
        path.parent()?.to_path_buf()
    } else {
        return None;
    };
    (dir.join("power").is_file() && dir.join("stat").is_file()).then_some(dir)
}

pub use crate::monitor::tracepoint::TRACEFS_MOUNT;

/// Make the block tracepoints reachable (see
/// [`crate::monitor::tracepoint::tracefs_root_mounted`]); `Ok(true)` when
/// this call mounted tracefs.
pub fn ensure_tracefs() -> std::result::Result<bool, String> {
    crate::monitor::tracepoint::tracefs_root_mounted().map(|(_, mounted)| mounted)
}

/// The block-tracepoint source where the monitor can run here (it names
/// who woke the disk; tracefs is mounted for it if need be), else the
/// counters polled, with why.
fn activity_of(
    source: &StatSource,
    disk: &str,
) -> Result<(Box<dyn ActivitySource>, Option<String>, bool)> {
    let mut mounted = false;
    let polling_asked =
        std::env::var(crate::monitor::MONITOR_ENV).is_ok_and(|v| v.trim() == "poll");
    let why = match DevId::of_sysfs_dir(&Path::new("/sys/class/block").join(disk)) {
        None => format!("{disk} has no device number in sysfs"),
        // asked to poll: tracefs is not mounted for events that are not wanted
        Some(_) if polling_asked => format!("{}=poll", crate::monitor::MONITOR_ENV),
        Some(devs) => match ensure_tracefs() {
            Err(e) => e,
            Ok(m) => {
                mounted = m;
                match EventMonitor::available() {
                    Err(e) => e,
                    Ok(()) => match TracedSource::open(source, &devs) {
                        Ok(t) => return Ok((Box::new(t), None, mounted)),
                        Err(e) => e.to_string(),
                    },
                }
            }
        },
    };
    Ok((
        Box::new(StatPoll::new(source)?),
        Some(format!("{why}; no waker named")),
        mounted,
    ))
}

/// Resolve `spec`; in a `dry_run` a disk whose actuator cannot be opened
/// is still watched.
pub fn open(spec: &str, dry_run: bool) -> Result<Target> {
    let path = Path::new(spec.trim());
    if let Some(dir) = emulated_dir(path) {
        let dir = dir.canonicalize().unwrap_or(dir);
        // its counters polled (a FUSE file has no events), its requesters
        // named by the emulator's issuers file where it serves one
        let (source, unavailable): (Box<dyn ActivitySource>, &str) = match EmuSource::open(&dir)? {
            Some(s) => (
                Box::new(s),
                "an emulated disk's FUSE files have no events; its issuers file names the requesters",
            ),
            None => (
                Box::new(StatPoll::new(&StatSource::file(dir.join("stat"))?)?),
                "an emulated disk's counters file names no process and this emulator serves no issuers file; give the loop device over its disk for events",
            ),
        };
        return Ok(Target {
            name: dir.display().to_string(),
            source,
            actuator: Some(Box::new(EmuActuator::open(dir.join("power"))?)),
            actuator_error: None,
            events_unavailable: Some(unavailable.into()),
            mounted_tracefs: false,
        });
    }
    // a block device, by path or kernel name
    let dev_path = if spec.contains('/') {
        path.to_path_buf()
    } else {
        Path::new("/dev").join(spec.trim())
    };
    let resolved = resolve_device(&dev_path)?.ok_or_else(|| {
        Error::invalid(
            "DEV",
            format!(
                "{}: not a block device, an emulated disk's mount point or its `disk` file",
                dev_path.display()
            ),
        )
    })?;
    if !std::fs::metadata(&dev_path)
        .map(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
        .unwrap_or(false)
    {
        return Err(Error::invalid(
            "DEV",
            format!(
                "{}: a file, not a disk (give the device, e.g. /dev/{})",
                dev_path.display(),
                resolved.disk
            ),
        ));
    }
    let source = resolved.stat_source()?;
    let (poll, events_unavailable, mounted_tracefs) = activity_of(&source, &resolved.disk)?;
    let name = format!("/dev/{}", resolved.disk);
    // a loop device over an emulated disk: the emulator's control file
    let backing =
        std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", resolved.disk))
            .ok()
            .map(|s| PathBuf::from(s.trim_end()));
    if let Some(dir) = backing.as_deref().and_then(emulated_dir) {
        return Ok(Target {
            name,
            source: poll,
            actuator: Some(Box::new(EmuActuator::open(dir.join("power"))?)),
            actuator_error: None,
            events_unavailable,
            mounted_tracefs,
        });
    }
    // ATA first (SATA behind libata, USB bridges), then SCSI/SAS: a SAS
    // disk rejects ATA PASS-THROUGH with ILLEGAL REQUEST
    let actuator: Result<Box<dyn Actuator>> = match AtaActuator::open(Path::new(&name)) {
        Ok(a) => Ok(Box::new(a)),
        Err(ata) if ata.to_string().contains("does not take SG_IO") => Err(ata),
        Err(ata) => match ScsiActuator::open(Path::new(&name)) {
            Ok(s) => Ok(Box::new(s)),
            Err(scsi) => Err(Error::Unsupported(format!("{ata}; as a SCSI disk: {scsi}"))),
        },
    };
    match actuator {
        Ok(a) => Ok(Target {
            name,
            source: poll,
            actuator: Some(a),
            actuator_error: None,
            events_unavailable,
            mounted_tracefs,
        }),
        Err(e) if dry_run => Ok(Target {
            name,
            source: poll,
            actuator: None,
            actuator_error: Some(e.to_string()),
            events_unavailable,
            mounted_tracefs,
        }),
        Err(e) => Err(e),
    }
}
