//! `md:/dev/mdX`: an md RAID check (or repair) by windows, one
//! `[sync_min, sync_max)` window of the request size per BG request:
//! Practical Scrubbing's scrub request exactly (Practical Scrubbing
//! §III: the scrubber issues one verify request of the chosen size at a
//! time, and the policy decides when the next goes).
//!
//! **Not run live here**: this kernel has no md. The executor is tested
//! against a sysfs tree laid out as `/sys/block/md0/md/` and a fake kernel
//! thread that behaves as the files below are documented to
//! (`tests/data/md`, the tests at the end of this file), not against a
//! real array.
//!
//! The interface, from the kernel's Documentation/admin-guide/md.rst and
//! drivers/md/md.c (`*_show`/`*_store` of each attribute):
//! - `sync_action`: one word, `idle`, `resync`, `recover`, `check`,
//!   `repair` (also `frozen`, `reshape`). Writing `check` or `repair`
//!   starts one "providing the current state is idle"; writing `idle`
//!   stops it.
//! - `sync_min`, `sync_max`: sectors (512 B) bounding where check/repair
//!   operate; `sync_max` reads `max` when unbounded. "When it reaches
//!   sync_max it will pause, rather than complete"; raising `sync_max`
//!   continues it. Both must be multiples of the chunk size; `sync_min`
//!   can only be written while nothing runs (`EBUSY`), and `sync_max` only
//!   raised while something does.
//! - `sync_completed`: `none` when nothing runs, `delayed` while waiting
//!   for another array on the same disks, else `DONE / TOTAL` in sectors
//!   (md.c `sync_completed_show`: `"%llu / %llu\n"`).
//! - `mismatch_cnt`: sectors a check found inconsistent (a repair
//!   rewrote), reset when a check starts.
//! - `chunk_size` (bytes), `component_size` (KiB: md.c `size_show` prints
//!   `dev_sectors / 2`).
//! - `dev-XXX/block`: a symlink to the member's block device.
//!
//! So: the first request writes `sync_min` = the window's start,
//! `sync_max` = its end, `sync_action` = `check`, and polls
//! `sync_completed` until it reaches the end; the kernel then holds the
//! check there by itself, reading nothing (the pause md.rst describes).
//! Each next request raises `sync_max` by one window. At the end of the
//! run, or if fallow dies (the guardian's release actions), `idle` stops a
//! held check and `sync_min`/`sync_max` go back to what the user had
//! (normally `0` and `max`), as `mdcheck` leaves an array between its
//! time-boxed runs. fallow keeps the next sector in an atomically written,
//! checksummed checkpoint ([`OffsetCheckpoint`], checked against the array's
//! size and chunk before it is trusted), so `--resume` starts the next
//! window there: a window cut short by a crash is done again, none is
//! skipped.
//!
//! **The brake** (docs/native.md, `md:/dev/mdX`): a window need not run blind to its end.
//! While it runs, the array's own counters (`/sys/block/mdX/stat`: I/O to
//! the array, never the check's, which goes to the members) are polled;
//! on the first I/O `sync_speed_min` = `sync_speed_max` =
//! [`BRAKE_SPEED_KIB_PER_S`] holds the check within md's next speed test,
//! and the next request lifts it and goes on with the same window. The
//! user's limits are restored at the end and by the guardian.

use super::checkpoint::{check_paths, Bad, Detail, OffsetCheckpoint};
use super::control::Control;
use super::gate::Gate;
use super::{Kind, NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::stat::DiskStat;
use crate::monitor::StatSource;
use crate::run::guardian::ReleaseAction;
use crate::scrub::checkpoint::Lock;
use crate::scrub::{TokenBucket, Windows};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The registry entry.
pub const KIND: Kind = Kind {
    prefix: "md",
    summary: "md RAID check (or repair) by [sync_min, sync_max) windows of the request size, one per BG request, braked mid-window by sync_speed_min/max on I/O to the array, resumable by sector (tested against a recorded sysfs interface: no md in this kernel)",
    open,
};

/// Bytes of an md sector (`sync_*` files count 512-byte sectors).
pub const SECTOR_BYTES: u64 = 512;

/// How often `sync_completed` is read while a window runs.
const POLL: Duration = Duration::from_millis(5);

/// A window that makes no progress this long is an error (another array
/// on the same disks holds it `delayed`, or the array stopped), ns.
const STALL_NS: u64 = 60_000_000_000;

/// The brake: `sync_speed_min` and `sync_speed_max`, KiB/s, while the
/// array has I/O of its own mid-window. md.c `md_do_sync` checks the speed
/// once every `window` sectors it submits (32 pages: 128 KiB with 4 KiB
/// pages): when `currspeed` (KiB/s since a mark up to 30 s old, plus 1)
/// is above `speed_min` and above `speed_max`, it `msleep(500)`s and looks
/// again, submitting nothing. 1 is the least either file takes (`0` is
/// `-EINVAL`; `system` means the sysctl's 1000/200000), and both must be
/// low: below `speed_min` md never throttles. So the check stops within
/// one 128 KiB window of submissions (plus what is in flight), and leaks
/// one window only when nothing was done in the ~30 s its marks span;
/// lifted, it goes on within the 500 ms sleep.
pub const BRAKE_SPEED_KIB_PER_S: u64 = 1;

/// How often a window polls `sync_completed` and the array's counters
/// where the brake is used, ns: the brake goes on this soon after the
/// array's first I/O.
const BRAKE_POLL: Duration = Duration::from_millis(1);

/// `sync_speed_min`/`sync_speed_max` as the user had them (the form to
/// write back: `system` or KiB/s) and as a lifted brake writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Speeds {
    user_min: Option<String>,
    user_max: String,
    lift_min: Option<String>,
    lift_max: String,
}

/// `N (local)` or `N (system)` (md.c `sync_min_show`/`sync_max_show`):
/// the value and what writing it back takes (`system` restores the
/// sysctl's, a number a local one).
fn parse_speed(text: &str) -> std::result::Result<(u64, String), String> {
    let t = text.trim();
    let mut w = t.split_ascii_whitespace();
    let n: u64 = w
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("`{t}` is not `N (local)` or `N (system)`"))?;
    match w.next() {
        Some("(system)") => Ok((n, "system".into())),
        Some("(local)") | None => Ok((n, n.to_string())),
        Some(o) => Err(format!("`{t}`: `{o}` is not (local) or (system)")),
    }
}

impl Speeds {
    /// From the files' texts and `--max-rate` (bytes/s): lifted, the max
    /// is the rate and the min no higher (below `speed_min` md ignores
    /// `speed_max`), else the user's own.
    fn new(
        min: Option<&str>,
        max: &str,
        rate_bytes_per_s: Option<f64>,
    ) -> std::result::Result<Speeds, (&'static str, String)> {
        let min = min
            .map(parse_speed)
            .transpose()
            .map_err(|m| ("sync_speed_min", m))?;
        let (_, user_max) = parse_speed(max).map_err(|m| ("sync_speed_max", m))?;
        let mut s = Speeds {
            user_min: min.as_ref().map(|m| m.1.clone()),
            lift_min: min.as_ref().map(|m| m.1.clone()),
            lift_max: user_max.clone(),
            user_max,
        };
        if let Some(rate) = rate_bytes_per_s {
            let kib = ((rate / 1024.0).round() as u64).max(2);
            s.lift_max = kib.to_string();
            if min.as_ref().is_some_and(|m| m.0 > kib) {
                s.lift_min = Some(kib.to_string());
            }
        }
        Ok(s)
    }
}

fn open(
    t: &NativeTarget,
    cfg: &NativeConfig,
    ctl: Arc<dyn Control>,
) -> Result<Box<dyn NativeExecutor>> {
    Ok(Box::new(Md::open(t, cfg, ctl)?))
}

/// `sync_completed`'s text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncCompleted {
    /// Nothing runs.
    None,
    /// Waiting for another array that shares a disk.
    Delayed,
    /// Sectors done of the total.
    Progress {
        /// Sectors done.
        done: u64,
        /// Sectors in all.
        total: u64,
    },
}

impl SyncCompleted {
    /// Parse `none`, `delayed` or `DONE / TOTAL`.
    pub fn parse(text: &str) -> std::result::Result<SyncCompleted, String> {
        let t = text.trim();
        match t {
            "none" => return Ok(SyncCompleted::None),
            "delayed" => return Ok(SyncCompleted::Delayed),
            _ => {}
        }
        let (a, b) = t
            .split_once('/')
            .ok_or_else(|| format!("`{t}` is not `none`, `delayed` or `DONE / TOTAL`"))?;
        let num = |s: &str, what: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{t}`: {what} `{}` is not a sector count", s.trim()))
        };
        let (done, total) = (num(a, "done")?, num(b, "total")?);
        if done > total {
            return Err(format!("`{t}`: done is past the total"));
        }
        Ok(SyncCompleted::Progress { done, total })
    }
}

/// `sync_max`'s text: `max` or a sector.
fn parse_sync_max(text: &str) -> std::result::Result<Option<u64>, String> {
    match text.trim() {
        "max" => Ok(None),
        t => t
            .parse()
            .map(Some)
            .map_err(|_| format!("`{t}` is not `max` or a sector")),
    }
}

/// The md fields of its checkpoint ([`OffsetCheckpoint`]; positions
/// there are bytes, sectors × 512).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdDetail {
    /// `check` or `repair`.
    pub action: String,
    /// The array's chunk when the pass began, sectors: windows end on
    /// chunk boundaries, so a resumed offset must be on one.
    pub chunk_sectors: u64,
    /// `mismatch_cnt` of the checks of this pass that have ended (the
    /// kernel resets it when a check starts).
    pub mismatch_sectors: u64,
}

impl Detail for MdDetail {
    const KIND: &'static Kind = &KIND;

    fn job(&self) -> String {
        self.action.clone()
    }

    fn min_step_bytes(&self) -> u64 {
        self.chunk_sectors.saturating_mul(SECTOR_BYTES)
    }

    fn validate(&self, ck: &OffsetCheckpoint<Self>) -> std::result::Result<(), Bad> {
        if self.action != "check" && self.action != "repair" {
            return Err((
                "action",
                format!("{:?} is not check or repair", self.action),
            ));
        }
        if self.chunk_sectors == 0 {
            return Err(("chunk_sectors", "0".into()));
        }
        if ck.size_bytes % SECTOR_BYTES != 0 {
            return Err((
                "size_bytes",
                format!("{} is not whole sectors", ck.size_bytes),
            ));
        }
        let chunk_bytes = self.min_step_bytes();
        if !ck.complete && ck.next_offset_bytes % chunk_bytes != 0 {
            return Err((
                "next_offset_bytes",
                format!(
                    "{} is not on a chunk boundary ({} sectors): windows end on one",
                    ck.next_offset_bytes, self.chunk_sectors
                ),
            ));
        }
        Ok(())
    }
}

/// fallow's progress of a check, in its checkpoint file.
pub type MdCheckpoint = OffsetCheckpoint<MdDetail>;

/// An md array's check, run window by window.
pub struct Md {
    label: String,
    ctl: Arc<dyn Control>,
    /// `/sys/block/mdX/md`.
    dir: PathBuf,
    chunk_sectors: u64,
    devices: Vec<String>,
    gate: Arc<Gate>,
    ck: MdCheckpoint,
    ck_path: PathBuf,
    _lock: Lock,
    /// The user's `sync_min` and `sync_max`, restored at the end.
    user_min: String,
    user_max: String,
    /// The array's `sync_speed_min`/`sync_speed_max` as the user had them
    /// and as a lifted brake writes them; `None` where either file is
    /// missing and no `--max-rate` was given (nothing of them is touched).
    speeds: Option<Speeds>,
    /// The array's own counters (`/sys/block/mdX/stat`): I/O to the array,
    /// never the check's (see [`BRAKE_SPEED_KIB_PER_S`]); `None`: no brake.
    array_stat: Option<PathBuf>,
    /// The window the check was last let run to, sectors, while it has
    /// not reached it (a request the brake stopped).
    pending_end: Option<u64>,
    /// The brake is on (`sync_speed_min` = `sync_speed_max` = 1 KiB/s).
    braked: bool,
    /// Requests the brake stopped because the array had I/O of its own.
    brake_yields: u64,
    /// A check of ours is held at the checkpoint's next sector (its `sync_max`).
    held: bool,
    /// `mismatch_cnt` of the check now running.
    running_mismatches: u64,
    windows: Windows,
    bucket: Option<TokenBucket>,
    max_bytes: Option<u64>,
    resumed_from: u64,
    requests: u64,
    active_ns: u64,
    t0_ns: u64,
}

impl std::fmt::Debug for Md {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Md")
            .field("label", &self.label)
            .field("checkpoint", &self.ck)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl Md {
    /// Open `md:/dev/mdX` (or `md:mdX`), loading or starting its checkpoint.
    pub fn open(t: &NativeTarget, cfg: &NativeConfig, ctl: Arc<dyn Control>) -> Result<Md> {
        cfg.check_options("md", &["action"])?;
        let label = t.to_string();
        let name = t.arg.trim_start_matches("/dev/").to_string();
        if name.is_empty() || name.contains('/') {
            return Err(Error::invalid(
                "target",
                format!("{label}: give the array's device, like md:/dev/md0"),
            ));
        }
        let action = action_of(cfg)?;
        // the checkpoint path is checked before anything is read or written
        let ck_path = cfg.checkpoint_path.clone().ok_or_else(|| {
            Error::invalid(
                "--checkpoint",
                format!("{label}: a checkpoint file is needed"),
            )
        })?;
        check_paths(&ck_path, &cfg.outputs)?;
        let dir = PathBuf::from(format!("/sys/block/{name}/md"));
        let files = MdFiles {
            ctl: ctl.as_ref(),
            dir: &dir,
        };
        files.check_idle(&label, &action)?;
        let chunk_sectors = files.chunk_sectors(&label, cfg.max_bytes)?;
        let total_sectors = files.total_sectors(&name)?;
        let (user_min, user_max) = files.user_bounds()?;

        let fresh = MdCheckpoint::new(
            &label,
            total_sectors * SECTOR_BYTES,
            MdDetail {
                action,
                chunk_sectors,
                mismatch_sectors: 0,
            },
        );
        let (ck, lock) =
            OffsetCheckpoint::open(&ck_path, &cfg.outputs, cfg.resume, fresh, |old, new| {
                old.action = new.action.clone()
            })?;
        if ck.detail.chunk_sectors != chunk_sectors {
            return Err(Error::CheckpointMismatch {
                path: ck_path,
                message: format!(
                    "{label} had chunks of {} sectors when the checkpoint was made and has {chunk_sectors} now: --restart to start over",
                    ck.detail.chunk_sectors
                ),
            });
        }

        let devices = members(ctl.as_ref(), &dir, &name)?;
        let sources = devices
            .iter()
            .map(|d| {
                StatSource::file(ctl.resolve(Path::new(&format!("/sys/class/block/{d}/stat"))))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut md = Md {
            label,
            dir,
            chunk_sectors,
            devices,
            gate: Gate::new(&sources)?,
            resumed_from: ck.next_offset_bytes / SECTOR_BYTES,
            ck,
            ck_path,
            _lock: lock,
            user_min,
            user_max,
            speeds: None,
            array_stat: None,
            pending_end: None,
            braked: false,
            brake_yields: 0,
            held: false,
            running_mismatches: 0,
            windows: cfg.windows.clone(),
            bucket: None,
            max_bytes: cfg.max_bytes,
            requests: 0,
            active_ns: 0,
            t0_ns: monotonic_ns(),
            ctl,
        };
        md.set_up_speeds(cfg, &name)?;
        Ok(md)
    }

    /// The brake (where the array has `sync_speed_min`/`_max` and its own
    /// counters) and `--max-rate` (md's per-array limit, and fallow's
    /// pacing between windows), with the speeds to restore at the end.
    fn set_up_speeds(&mut self, cfg: &NativeConfig, name: &str) -> Result<()> {
        let speed_min = self.read("sync_speed_min").ok();
        let speed_max = self.read("sync_speed_max").ok();
        let stat = PathBuf::from(format!("/sys/block/{name}/stat"));
        let brakes = speed_min.is_some()
            && speed_max.is_some()
            && self
                .ctl
                .read(&stat)
                .ok()
                .is_some_and(|t| DiskStat::parse(&t).is_ok());
        if let Some(rate) = cfg.max_rate_bytes_per_s {
            if speed_max.is_none() {
                return Err(Error::Unsupported(format!(
                    "{}: {} is missing: --max-rate needs md's own per-array limit",
                    self.label,
                    self.ctl.resolve(&self.path("sync_speed_max")).display()
                )));
            }
            // and fallow's pacing between windows, so the policy sees it
            self.bucket = Some(TokenBucket::new(rate, SECTOR_BYTES * self.chunk_sectors)?);
        }
        if brakes || cfg.max_rate_bytes_per_s.is_some() {
            let speeds = Speeds::new(
                speed_min.as_deref(),
                speed_max.as_deref().unwrap_or("system"),
                cfg.max_rate_bytes_per_s,
            )
            .map_err(|(f, m)| Error::Parse {
                path: self.ctl.resolve(&self.path(f)),
                message: m,
            })?;
            self.speeds = Some(speeds);
            if cfg.max_rate_bytes_per_s.is_some() {
                self.lift()?;
            }
        }
        if brakes {
            self.array_stat = Some(stat);
        }
        Ok(())
    }

    /// The checkpoint as it stands.
    pub fn checkpoint(&self) -> &MdCheckpoint {
        &self.ck
    }

    /// The next window starts here, sectors.
    fn next_sector(&self) -> u64 {
        self.ck.next_offset_bytes / SECTOR_BYTES
    }

    /// Sectors of the check.
    fn total_sectors(&self) -> u64 {
        self.ck.size_bytes / SECTOR_BYTES
    }

    fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    fn read(&self, f: &str) -> Result<String> {
        self.ctl.read(&self.path(f))
    }

    fn write(&self, f: &str, text: &str) -> Result<()> {
        self.ctl.write(&self.path(f), &format!("{text}\n"))
    }

    fn completed(&self) -> Result<SyncCompleted> {
        SyncCompleted::parse(&self.read("sync_completed")?).map_err(|m| Error::Parse {
            path: self.ctl.resolve(&self.path("sync_completed")),
            message: m,
        })
    }

    fn mismatch_cnt(&self) -> Result<u64> {
        let t = self.read("mismatch_cnt")?;
        t.trim().parse().map_err(|_| Error::Parse {
            path: self.ctl.resolve(&self.path("mismatch_cnt")),
            message: format!("`{}` is not a count", t.trim()),
        })
    }

    fn run_bytes(&self) -> u64 {
        self.next_sector().saturating_sub(self.resumed_from) * SECTOR_BYTES
    }

    /// The window after `start` for a request of `size_bytes`: whole
    /// chunks (md refuses other bounds), at least one.
    ///
    /// With `--max-bytes`, no window ends past the cap: the check's own
    /// bound (`sync_max`) makes it a hard one, rounded down to whole chunks
    /// (this run starts on a chunk boundary, the checkpoint's).
    fn window_end(&self, start: u64, size_bytes: u64) -> u64 {
        let sectors = size_bytes.div_ceil(SECTOR_BYTES).max(1);
        let chunks = sectors.div_ceil(self.chunk_sectors);
        let end = start
            .saturating_add(chunks * self.chunk_sectors)
            .min(self.total_sectors());
        match self.cap_end() {
            Some(cap) if cap < end => cap,
            _ => end,
        }
    }

    /// Where `--max-bytes` ends this run, sectors: whole chunks from where
    /// it began.
    fn cap_end(&self) -> Option<u64> {
        self.max_bytes.map(|m| {
            let chunks = m / SECTOR_BYTES / self.chunk_sectors;
            self.resumed_from
                .saturating_add(chunks.saturating_mul(self.chunk_sectors))
        })
    }

    /// This run has done what `--max-bytes` allows.
    fn capped(&self) -> bool {
        self.cap_end().is_some_and(|c| self.next_sector() >= c)
    }

    /// Write the lifted speeds: the user's (or `--max-rate`'s).
    fn lift(&mut self) -> Result<()> {
        let Some(s) = self.speeds.clone() else {
            return Ok(());
        };
        // max first: with min still at 1 the check runs up to it at once
        self.write("sync_speed_max", &s.lift_max)?;
        if let Some(m) = &s.lift_min {
            self.write("sync_speed_min", m)?;
        }
        self.braked = false;
        Ok(())
    }

    /// Put the brake on ([`BRAKE_SPEED_KIB_PER_S`]).
    fn brake(&mut self) -> Result<()> {
        let v = BRAKE_SPEED_KIB_PER_S.to_string();
        self.write("sync_speed_max", &v)?;
        self.write("sync_speed_min", &v)?;
        self.braked = true;
        Ok(())
    }

    /// The array's own I/O counters: reads, writes, discards, flushes
    /// completed, and requests in flight. md accounts the array's I/O on
    /// mdX (md.c `md_submit_bio`); the check's reads go to the members
    /// only, as md's own idle test assumes (md.c `is_mddev_idle` counts
    /// the members' sectors minus `sync_io`).
    fn array_io(&self) -> Result<Option<(u64, u64)>> {
        let Some(p) = &self.array_stat else {
            return Ok(None);
        };
        let t = self.ctl.read(p)?;
        let d = DiskStat::parse(&t).map_err(|m| Error::Parse {
            path: self.ctl.resolve(p),
            message: m,
        })?;
        Ok(Some((
            d.read_ios.wrapping_add(d.modifying_ios()),
            d.in_flight,
        )))
    }

    /// Stop a held check (`idle`) and put `sync_min`/`sync_max` back.
    fn release(&mut self) -> Result<()> {
        if self.held {
            self.running_mismatches = self.mismatch_cnt()?;
            self.write("sync_action", "idle")?;
            let t0 = monotonic_ns();
            // the sync thread goes away asynchronously
            while self.completed()? != SyncCompleted::None {
                if monotonic_ns() - t0 > 5_000_000_000 {
                    return Err(Error::Unsupported(format!(
                        "{}: the check did not stop within 5 s of `idle`",
                        self.label
                    )));
                }
                std::thread::sleep(POLL);
            }
            self.held = false;
            self.ck.detail.mismatch_sectors += std::mem::take(&mut self.running_mismatches);
        }
        // sync_min first: it may not exceed sync_max
        self.write("sync_min", &self.user_min.clone())?;
        self.write("sync_max", &self.user_max.clone())?;
        self.pending_end = None;
        if let Some(s) = self.speeds.take() {
            self.write("sync_speed_max", &s.user_max)?;
            if let Some(m) = &s.user_min {
                self.write("sync_speed_min", m)?;
            }
            self.braked = false;
        }
        self.ck.save(&self.ck_path)
    }
}

/// The `action` option: `check` (the default) or `repair`.
fn action_of(cfg: &NativeConfig) -> Result<String> {
    let action = cfg
        .options
        .get("action")
        .map(String::as_str)
        .unwrap_or("check")
        .to_string();
    if action != "check" && action != "repair" {
        return Err(Error::invalid(
            "--option action",
            format!("`{action}`: use check or repair"),
        ));
    }
    Ok(action)
}

/// An array's md files (`/sys/block/mdX/md`), read while it is opened.
struct MdFiles<'a> {
    ctl: &'a dyn Control,
    dir: &'a Path,
}

impl MdFiles<'_> {
    fn read(&self, f: &str) -> Result<String> {
        self.ctl.read(&self.dir.join(f))
    }

    fn parse_err(&self, f: &str, message: String) -> Error {
        Error::Parse {
            path: self.ctl.resolve(&self.dir.join(f)),
            message,
        }
    }

    fn number(&self, f: &str) -> Result<u64> {
        let t = self.read(f)?;
        t.trim()
            .parse::<u64>()
            .map_err(|_| self.parse_err(f, format!("`{}` is not a number", t.trim())))
    }

    /// fallow starts an `action` only on an idle array with redundancy.
    fn check_idle(&self, label: &str, action: &str) -> Result<()> {
        let state = self.read("sync_action").map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::Unsupported(format!(
                    "{label}: {} does not exist: not an md array with redundancy (raid1/4/5/6/10), or md is not in this kernel",
                    self.ctl.resolve(&self.dir.join("sync_action")).display()
                ))
            }
            e => e,
        })?;
        let state = state.trim().to_string();
        if state != "idle" {
            return Err(Error::Unsupported(format!(
                "{label}: the array is busy (sync_action is `{state}`): fallow starts a {action} only on an idle array"
            )));
        }
        Ok(())
    }

    /// The array's chunk, sectors, which `max_bytes` must hold at least once.
    fn chunk_sectors(&self, label: &str, max_bytes: Option<u64>) -> Result<u64> {
        let chunk_bytes = self.number("chunk_size")?;
        // raid1 has no chunks: any sector will do
        let chunk_sectors = (chunk_bytes / SECTOR_BYTES).max(1);
        if let Some(m) = max_bytes {
            let chunk_bytes = chunk_sectors * SECTOR_BYTES;
            if m < chunk_bytes {
                return Err(Error::invalid(
                    "--max-bytes",
                    format!(
                        "{m} bytes is less than one chunk of {label} ({chunk_bytes} bytes): md bounds a check only on chunk boundaries"
                    ),
                ));
            }
        }
        Ok(chunk_sectors)
    }

    /// The check's total, sectors, in the units of sync_min/sync_max and of
    /// sync_completed (md.c `sync_completed_show` prints
    /// `resync_max_sectors` for a sync or check; `md_do_sync` runs from
    /// 0 to it): the member size for raid1/4/5/6 (raid1.c, raid5.c run:
    /// `resync_max_sectors = dev_sectors`), but the array's size for
    /// raid10, whose resync walks the array's address space (raid10.c
    /// `raid10_run`: `size = raid10_size(mddev, 0, 0);
    /// md_set_array_sectors(mddev, size); mddev->resync_max_sectors =
    /// size`), which `/sys/block/mdX/size` shows in sectors. Member
    /// size × 2 there made a 4-disk raid10 stop at its first window
    /// ("the array now has N sectors to check").
    fn total_sectors(&self, name: &str) -> Result<u64> {
        let level = self.read("level")?.trim().to_string();
        let (total_file, total_sectors) = if level == "raid10" {
            let f = format!("/sys/block/{name}/size");
            let t = self.ctl.read(Path::new(&f))?;
            let n = t.trim().parse::<u64>().map_err(|_| Error::Parse {
                path: self.ctl.resolve(Path::new(&f)),
                message: format!("`{}` is not a number of sectors", t.trim()),
            })?;
            ("size", n)
        } else {
            let n = self
                .number("component_size")?
                .checked_mul(2)
                .ok_or_else(|| self.parse_err("component_size", "too large".into()))?;
            ("component_size", n)
        };
        if total_sectors == 0 {
            return Err(self.parse_err(total_file, "the array has no size".into()));
        }
        Ok(total_sectors)
    }

    /// The user's `sync_min` and `sync_max`, checked, to restore at the end.
    fn user_bounds(&self) -> Result<(String, String)> {
        let user_min = self.read("sync_min")?.trim().to_string();
        let user_max = self.read("sync_max")?.trim().to_string();
        user_min
            .parse::<u64>()
            .map_err(|_| self.parse_err("sync_min", format!("`{user_min}` is not a sector")))?;
        parse_sync_max(&user_max).map_err(|m| self.parse_err("sync_max", m))?;
        Ok((user_min, user_max))
    }
}

/// The kernel names of the disks under md array `name` (from
/// `dev-*/block`, else `slaves/`); a partition stands for its disk.
fn members(ctl: &dyn Control, dir: &Path, name: &str) -> Result<Vec<String>> {
    let mut parts: Vec<String> = Vec::new();
    for e in ctl.list(dir)? {
        let Some(short) = e.strip_prefix("dev-") else {
            continue;
        };
        let link = ctl.resolve(&dir.join(&e).join("block"));
        let kernel = std::fs::read_link(&link)
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| short.to_string());
        parts.push(kernel);
    }
    if parts.is_empty() {
        let slaves = PathBuf::from(format!("/sys/block/{name}/slaves"));
        parts = ctl.list(&slaves).unwrap_or_default();
    }
    let mut disks: Vec<String> = parts
        .into_iter()
        .map(|p| {
            let class = ctl.resolve(Path::new(&format!("/sys/class/block/{p}")));
            if class.join("partition").exists() {
                // /sys/class/block/sdb1 -> …/block/sdb/sdb1: the parent is the disk
                std::fs::canonicalize(&class)
                    .ok()
                    .and_then(|c| {
                        c.parent()?
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                    })
                    .unwrap_or(p)
            } else {
                p
            }
        })
        .collect();
    disks.sort();
    disks.dedup();
    Ok(disks)
}

impl BgExecutor for Md {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        let w = u64::from(self.windows.wait_now_s()) * 1_000_000_000;
        if w > 0 {
            return Ok(w);
        }
        Ok(match &mut self.bucket {
            Some(b) => b.ready_in_ns(size_bytes, now_ns),
            None => 0,
        })
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.ck.complete || self.capped() {
            return Ok(Step::Finished);
        }
        let start = self.next_sector();
        // a window the brake stopped goes on to its end; sync_max stays
        let end = self
            .pending_end
            .take()
            .unwrap_or_else(|| self.window_end(start, size_bytes));
        let last = end >= self.total_sectors();
        // the last window runs to the array's end, whatever its alignment
        let max = if last {
            "max".to_string()
        } else {
            end.to_string()
        };
        let t0 = monotonic_ns();
        self.gate.open();
        let result = (|| -> Result<bool> {
            if self.held {
                // the check waits at sync_max (or mid-window, braked)
                if self.braked {
                    self.lift()?;
                } else {
                    // raising sync_max goes on
                    self.write("sync_max", &max)?;
                }
            } else {
                // sync_min can only be written while nothing runs
                self.write("sync_min", &start.to_string())?;
                self.write("sync_max", &max)?;
                if self.braked {
                    self.lift()?;
                }
                self.write("sync_action", &self.ck.detail.action.clone())?;
                self.held = true;
            }
            let base_io = self.array_io()?;
            let poll = if base_io.is_some() { BRAKE_POLL } else { POLL };
            let mut last_done = start;
            let mut moved_ns = monotonic_ns();
            loop {
                match self.completed()? {
                    SyncCompleted::Progress { done, total } => {
                        if total != self.total_sectors() {
                            return Err(Error::Unsupported(format!(
                                "{}: the array now has {total} sectors to check, not {}: it changed under the check",
                                self.label,
                                self.total_sectors()
                            )));
                        }
                        self.running_mismatches = self.mismatch_cnt()?;
                        if done >= end {
                            return Ok(true);
                        }
                        if done > last_done {
                            (last_done, moved_ns) = (done, monotonic_ns());
                        }
                    }
                    SyncCompleted::None => {
                        let action = self.read("sync_action")?;
                        if last && action.trim() == "idle" {
                            // the kernel ended the check at the array's end
                            // (and reset sync_min/sync_max itself)
                            self.held = false;
                            return Ok(true);
                        }
                        if action.trim() == "idle" {
                            self.held = false;
                            return Err(Error::Unsupported(format!(
                                "{}: the {} stopped before sector {end} (sync_action is idle): another program or an error stopped it; --resume redoes this window",
                                self.label, self.ck.detail.action
                            )));
                        }
                    }
                    SyncCompleted::Delayed => {}
                }
                if let (Some((ios0, flight0)), Some((ios, flight))) = (base_io, self.array_io()?) {
                    if ios != ios0 || flight > flight0 {
                        // I/O to the array: hold the check where it is
                        self.brake()?;
                        self.brake_yields += 1;
                        self.pending_end = Some(end);
                        return Ok(false);
                    }
                }
                if monotonic_ns() - moved_ns > STALL_NS {
                    return Err(Error::Unsupported(format!(
                        "{}: no progress past sector {last_done} for {} s (sync_completed stays below {end}): is another array on the same disks being synced?",
                        self.label,
                        STALL_NS / 1_000_000_000
                    )));
                }
                std::thread::sleep(poll);
            }
        })();
        self.gate.close();
        self.active_ns += monotonic_ns() - t0;
        self.requests += 1;
        if !result? {
            // braked mid-window: the checkpoint stays at its start
            return Ok(Step::More);
        }
        if let Some(b) = &mut self.bucket {
            b.take((end - start) * SECTOR_BYTES, monotonic_ns());
        }
        self.ck.requests += 1;
        self.ck.next_offset_bytes = end * SECTOR_BYTES;
        if last {
            self.ck.complete = true;
            // the finished check's count stays readable until the next starts
            self.ck.detail.mismatch_sectors += self.mismatch_cnt()?;
            self.running_mismatches = 0;
            self.held = false;
        }
        self.ck.save(&self.ck_path)?;
        Ok(if self.ck.complete || self.capped() {
            Step::Finished
        } else {
            Step::More
        })
    }
}

impl NativeExecutor for Md {
    fn devices(&self) -> Vec<String> {
        self.devices.clone()
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    fn release_actions(&self) -> Vec<ReleaseAction> {
        // a held check would wait at sync_max for ever, a braked one leak
        // on: stop it, wait for the sync thread to go (older kernels stop
        // it asynchronously, and refuse sync_min with EBUSY until then, and
        // set sync_min to where it got as it goes), then put the bounds and
        // the speed limits back as the user had them; one shell command so
        // the order holds
        let script = r#"cd "$1" || exit 1
echo idle > sync_action
i=0
while [ "$(cat sync_completed)" != none ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "$2" > sync_min && echo "$3" > sync_max || exit 1
[ -z "$4" ] || echo "$4" > sync_speed_max || exit 1
[ -z "$5" ] || echo "$5" > sync_speed_min"#;
        let (max, min) = match &self.speeds {
            Some(s) => (s.user_max.clone(), s.user_min.clone().unwrap_or_default()),
            None => (String::new(), String::new()),
        };
        vec![ReleaseAction::Exec {
            argv: vec![
                "sh".into(),
                "-c".into(),
                script.into(),
                "fallow-md-release".into(),
                self.ctl.resolve(&self.dir).display().to_string(),
                self.user_min.clone(),
                self.user_max.clone(),
                max,
                min,
            ],
            ok_codes: vec![],
        }]
    }

    fn report(&mut self) -> Result<NativeReport> {
        let mismatches = self.ck.detail.mismatch_sectors + self.running_mismatches;
        let mut native = BTreeMap::new();
        native.insert("mismatch_cnt".to_string(), mismatches);
        native.insert("windows".to_string(), self.ck.requests);
        native.insert("next_sector".to_string(), self.next_sector());
        native.insert("chunk_sectors".to_string(), self.chunk_sectors);
        native.insert("pass".to_string(), self.ck.pass);
        native.insert("fallow_brake_yields".to_string(), self.brake_yields);
        let repair = self.ck.detail.action == "repair";
        Ok(NativeReport {
            target: self.label.clone(),
            kind: "md".into(),
            tool: format!("md sysfs sync_action={}", self.ck.detail.action),
            target_bytes: Some(self.ck.size_bytes),
            scrubbed_bytes: self.ck.next_offset_bytes,
            position_bytes: self.ck.next_offset_bytes,
            run_bytes: self.run_bytes(),
            run_requests: self.requests,
            run_active_s: self.active_ns as f64 / 1e9,
            run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
            complete: self.ck.complete,
            // a repair rewrote what it found; a check only counts it
            errors_corrected: repair.then_some(mismatches),
            errors_uncorrectable: None,
            native,
            rate_limit: self.bucket.as_ref().map(|b| {
                format!(
                    "md sync_speed_max {:.0} KiB/s",
                    b.rate_bytes_per_s() / 1024.0
                )
            }),
            checkpoint: Some(self.ck_path.display().to_string()),
        })
    }

    fn finish(&mut self) -> Result<()> {
        self.release()
    }
}

#[cfg(test)]
mod tests;
