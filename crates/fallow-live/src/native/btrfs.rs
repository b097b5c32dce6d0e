//! `btrfs:MOUNT`: a btrfs scrub driven through its own control.
//!
//! The scrub runs in the kernel, so freezing the process that started it
//! pauses nothing. Instead one BG request lets it run for a *slice* of
//! time and on to the next chunk boundary, where it is cancelled (`btrfs
//! scrub cancel`, ~30 ms; btrfs keeps its position in
//! `/var/lib/btrfs/scrub.status.<fsid>`); the next request is `btrfs scrub
//! resume`. [`BgExecutor::pause`] cancels a run still going (when the
//! boundary is unknown).
//!
//! - **Start**: `btrfs scrub start -B MOUNT` (or `resume -B`) as a child in
//!   its own process group, output discarded. `-B` rather than the
//!   background mode: the child's exit says exactly when the scrub stopped
//!   (finished, or cancelled and its status file written), so a resume
//!   never races the previous run's status update and a scrub that
//!   finishes mid-slice is noticed within [`control`](super::control)'s
//!   2 ms poll instead of at the slice's end.
//! - **Slice**: `--slice` if given, else the request size over the
//!   measured scrub rate (bytes btrfs reports scrubbed over the time it
//!   was let run, weighted 0.3 to the newest slice; 100 MB/s until a slice
//!   has been measured), within [`SLICE_MIN_NS`]..[`SLICE_MAX_NS`] (below
//!   50 ms the fork, the scrub's setup and its cancel would cost more than
//!   it reads).
//! - **No wasted runs**: btrfs's durable position is the start of the
//!   chunk (device extent) in progress: a cancel mid-chunk loses that
//!   chunk's work, and the resume scrubs it again from its start (measured
//!   here: six 0.3 s runs at 20 MiB/s, each cancelled, left `last_physical`
//!   where it was while `data_bytes_scrubbed` grew by 21 MB each). Runs
//!   shorter than a chunk's scrub time would never finish it. So when a
//!   cancel finds `last_physical` where the previous one left it, the next
//!   run after a resume is held to at least twice as long as that one (up
//!   to [`MIN_RUN_MAX_NS`]) before it may be paused; each cancel that finds
//!   progress halves that hold. An FG arrival then waits for at most
//!   that run, as for any non-preemptible request; the report counts such
//!   runs (`fallow_runs_without_progress` in `native`).
//!   The chunk is thus the scrub's non-preemptible unit of work, the kind
//!   of BG task whose cost to the FG the policies are built to bound (Mi
//!   et al., *Efficient Management of Idleness in Storage Systems*, §1:
//!   background media scans as non-preemptable tasks; Practical
//!   Scrubbing's scrub request, §V-B2).
//! - **Looks at chunk boundaries**: while the scrub runs, the monitor
//!   cannot tell its reads from FG reads (the gate counts all as the
//!   scrub's), so a run that back-to-back requests keep going would be
//!   blind to FG arrivals. Each request therefore ends with a cancel at
//!   the first chunk boundary after its slice: `btrfs inspect-internal
//!   dump-tree -t dev` gives the device extents; after the slice the live
//!   `last_physical` is polled every [`BOUNDARY_POLL_NS`] until it passes
//!   the end of the extent it was in, then the scrub is cancelled there,
//!   where a resume loses nothing. The driver's look between requests then
//!   sees FG work (the request stays paused [`BOUNDARY_LOOK_NS`] first, so
//!   the next FG read of a sparse FG shows); if there is none, the next
//!   request resumes. Blind time
//!   is at most one slice plus one chunk's scrub time. A file system with
//!   several devices has one `last_physical` per device and no common
//!   boundary: there each request ends with a cancel after its slice (held
//!   longer while cancels find no progress, see above), which bounds the
//!   blind time at the price of re-reading partial chunks.
//! - **Progress and errors**: `btrfs scrub status -R MOUNT`
//!   ([`ScrubStatus::parse`]): `data_bytes_scrubbed + tree_bytes_scrubbed`,
//!   `last_physical`, the error counters; finished when it says so.
//! - **Rate ceiling** (`--max-rate`): the kernel's per-device
//!   `/sys/fs/btrfs/<fsid>/devinfo/<id>/scrub_speed_max` (what `btrfs
//!   scrub limit` sets in btrfs-progs ≥ 6.5; written directly, so older
//!   progs work too), restored at the end and by the guardian. Without
//!   that file (kernels before 5.14), fallow's own token bucket paces the
//!   slices instead, and the report says so.
//! - **Own I/O**: a [`Gate`] over every member device (from
//!   `/sys/fs/btrfs/<fsid>/devices/`), open from just before the start or
//!   resume until the child has exited after the cancel.
//! - **The brake** (docs/native.md, "The brake"): where every member has `scrub_speed_max`
//!   and the event monitor tells the scrub's bios (queued by the `btrfs
//!   scrub start` process) from FG ones, nothing of the above: the scrub
//!   runs once, `scrub_speed_max` = [`BRAKE_BYTES_PER_S`] stops it at its
//!   next submission when an FG bio comes or the driver waits, and the
//!   user's value lifts it for a grant (`run_braked`). No cancel,
//!   no re-read; the kernel leaks one submission group a second.
//! - **If fallow dies**: the guardian brakes the scrub, cancels it and
//!   writes back the user's own limits ([`NativeExecutor::release_actions`]);
//!   it never resumes, so a user's cancel stands. A clean stop (Ctrl-C)
//!   leaves it cancelled too: `--resume` continues it.

use super::control::{Control, Job};
use super::gate::Gate;
use super::{Kind, NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::cgroup_bios::BioAttribution;
use crate::monitor::StatSource;
use crate::run::guardian::ReleaseAction;
use crate::scrub::{Resume, TokenBucket};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The registry entry.
pub const KIND: Kind = Kind {
    prefix: "btrfs",
    summary: "btrfs scrub of a mounted file system: paused within one submission by its scrub_speed_max (the brake) where the event monitor runs, else by `btrfs scrub cancel`/`resume` at chunk boundaries",
    open,
};

/// Shortest slice, ns.
pub const SLICE_MIN_NS: u64 = 50_000_000;
/// Longest slice, ns: an FG arrival waits at most this long.
pub const SLICE_MAX_NS: u64 = 10_000_000_000;
/// How often the live position is read while a request waits for a chunk
/// boundary, ns.
pub const BOUNDARY_POLL_NS: u64 = 100_000_000;
/// How long a request stays paused after its cancel at a chunk boundary,
/// so that the monitor sees FG reads that arrive meanwhile, ns.
pub const BOUNDARY_LOOK_NS: u64 = 50_000_000;
/// Longest a request waits for a chunk boundary after its slice, ns.
const BOUNDARY_WAIT_MAX_NS: u64 = 120_000_000_000;

/// The brake: the `scrub_speed_max` written while the device is busy,
/// bytes/s. The kernel's throttle (fs/btrfs/scrub.c,
/// `scrub_throttle_dev_io`) runs before each submission of a group of
/// stripes (`SCRUB_STRIPES_PER_GROUP` × 64 KiB = 512 KiB; one 64 KiB
/// stripe per call before Linux 6.6); a limit below 16 MiB/s gives one
/// 1000 ms slice (`div` = 1) in which `limit` bytes may be sent, so a
/// limit of 1 sends one group and sleeps to the slice's end: the scrub
/// leaks at most one group per second and device. 0 would mean no limit.
pub const BRAKE_BYTES_PER_S: u64 = 1;
/// How often a lifted run looks for an FG bio, ns: the brake goes on
/// within this of the FG's first bio.
pub const BRAKE_POLL_NS: u64 = 1_000_000;
/// How long a lifted run goes on before the driver looks again, when no
/// FG bio comes, ns: the driver then consults the policy, as after any
/// request (a request is a grant of idle time, not an amount of work).
pub const BRAKE_SLICE_NS: u64 = 200_000_000;
/// Longest the brake is held before the scrub is cancelled instead, ns:
/// the brake leaks one submission group a second, 30 MB a minute, and a
/// cancel costs at most the rest of a chunk read again on resume, so a
/// long busy period (or a closed `--window`, at once) ends in a cancel.
pub const BRAKE_HOLD_MAX_NS: u64 = 60_000_000_000;
/// How often a lifted run reads the scrub's status for its rate, ns (each
/// read forks `btrfs scrub status`).
const BRAKE_STATUS_NS: u64 = 1_000_000_000;
/// Least time between two status reads while a run nears `--max-bytes`,
/// ns (a fork of `btrfs scrub status` takes a few ms).
const CAP_LOOK_MIN_NS: u64 = 2_000_000;

/// Device extents `[start, end)` of device `devid` from the text of
/// `btrfs inspect-internal dump-tree -t dev DEVICE` (an item line `key
/// (DEVID DEV_EXTENT START)` followed by one with `length LEN`), sorted.
pub fn parse_dev_extents(text: &str, devid: u64) -> std::result::Result<Vec<(u64, u64)>, String> {
    let mut out = Vec::new();
    let mut pending: Option<u64> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(rest) = t.split("key (").nth(1) {
            pending = None;
            let mut w = rest
                .trim_end_matches(|c| c != ')')
                .trim_end_matches(')')
                .split_whitespace();
            if let (Some(id), Some("DEV_EXTENT"), Some(start)) = (w.next(), w.next(), w.next()) {
                let id: u64 = id
                    .parse()
                    .map_err(|_| format!("line {}: devid `{id}`", i + 1))?;
                let start: u64 = start
                    .parse()
                    .map_err(|_| format!("line {}: offset `{start}`", i + 1))?;
                if id == devid {
                    pending = Some(start);
                }
            }
            continue;
        }
        if let (Some(start), Some(len)) = (pending, t.split(" length ").nth(1)) {
            let len: u64 = len
                .split_whitespace()
                .next()
                .and_then(|l| l.parse().ok())
                .ok_or_else(|| format!("line {}: length in `{t}`", i + 1))?;
            out.push((start, start.saturating_add(len)));
            pending = None;
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Longest a run after a resume is held before it may be paused, ns (a
/// 1 GiB chunk at 10 MB/s).
pub const MIN_RUN_MAX_NS: u64 = 120_000_000_000;
/// Scrub rate assumed until one slice has been measured, bytes/s.
pub const INITIAL_RATE_BYTES_PER_S: f64 = 100e6;
/// Weight of the newest slice in the measured rate.
const RATE_EWMA: f64 = 0.3;
/// Longest a `btrfs` command may take (a cancel waits for the chunk in
/// service to end), ns.
const TOOL_TIMEOUT_NS: u64 = 60_000_000_000;

/// The scrub's state as `btrfs scrub status` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScrubState {
    /// Never scrubbed (`no stats available`).
    None,
    /// In progress.
    Running,
    /// Cancelled: `btrfs scrub resume` continues it.
    Aborted,
    /// Stopped without a cancel (a crash, a reboot): resumable too.
    Interrupted,
    /// Done.
    Finished,
}

/// `btrfs scrub status -R MOUNT`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubStatus {
    /// The file system's UUID (`/sys/fs/btrfs/<uuid>`).
    pub uuid: String,
    /// Its state.
    pub state: ScrubState,
    /// The raw counters by btrfs's names (`data_bytes_scrubbed`, `csum_errors`, …).
    pub counters: BTreeMap<String, u64>,
}

impl ScrubStatus {
    /// Parse the text of `btrfs scrub status -R` (btrfs-progs'
    /// `cmds/scrub.c`: `UUID:` and `Status:` lines, then one indented
    /// `name: value` line per counter of `print_scrub_full`).
    pub fn parse(text: &str) -> std::result::Result<ScrubStatus, String> {
        let mut uuid = None;
        let mut state = None;
        let mut counters = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t == "no stats available" {
                state = Some(ScrubState::None);
                continue;
            }
            let Some((k, v)) = t.split_once(':') else {
                continue;
            };
            let v = v.trim();
            match k.trim() {
                "UUID" => uuid = Some(v.to_string()),
                "Status" => {
                    state = Some(match v {
                        "running" => ScrubState::Running,
                        "aborted" => ScrubState::Aborted,
                        "interrupted" => ScrubState::Interrupted,
                        "finished" => ScrubState::Finished,
                        other => return Err(format!("line {}: unknown status `{other}`", i + 1)),
                    })
                }
                key if line.starts_with('\t')
                    && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') =>
                {
                    let n: u64 = v.parse().map_err(|_| {
                        format!("line {}: {key}: `{v}` is not an unsigned integer", i + 1)
                    })?;
                    counters.insert(key.to_string(), n);
                }
                _ => {}
            }
        }
        let uuid = uuid.ok_or("no `UUID:` line")?;
        let state = state.ok_or("no `Status:` line and no `no stats available`")?;
        if state != ScrubState::None {
            for key in [
                "data_bytes_scrubbed",
                "tree_bytes_scrubbed",
                "last_physical",
            ] {
                if !counters.contains_key(key) {
                    return Err(format!("no `{key}` counter"));
                }
            }
        }
        Ok(ScrubStatus {
            uuid,
            state,
            counters,
        })
    }

    /// Bytes scrubbed, as btrfs counts them (data + metadata).
    pub fn scrubbed_bytes(&self) -> u64 {
        self.get("data_bytes_scrubbed") + self.get("tree_bytes_scrubbed")
    }

    /// A counter, 0 if absent.
    pub fn get(&self, key: &str) -> u64 {
        self.counters.get(key).copied().unwrap_or(0)
    }

    /// Errors btrfs found (read, checksum, verify, super), corrected or not.
    pub fn errors_found(&self) -> u64 {
        [
            "read_errors",
            "csum_errors",
            "verify_errors",
            "super_errors",
        ]
        .iter()
        .map(|k| self.get(k))
        .sum()
    }
}

/// A btrfs scrub under fallow's control.
#[derive(Debug)]
pub struct Btrfs {
    label: String,
    mount: String,
    ctl: Arc<dyn Control>,
    uuid: String,
    devices: Vec<String>,
    gate: Arc<Gate>,
    tool: String,
    /// The running `btrfs scrub start|resume -B` child, if any.
    job: Option<Box<dyn Job>>,
    /// The next run starts a new scrub (else resumes).
    start_next: bool,
    finished: bool,
    slice_ns: Option<u64>,
    rate_bytes_per_s: Option<f64>,
    max_bytes: Option<u64>,
    windows: crate::scrub::Windows,
    bucket: Option<TokenBucket>,
    /// Every member's `scrub_speed_max` and the user's value in it when
    /// fallow opened the file system (restored at the end and by the
    /// guardian).
    speed_files: Vec<(PathBuf, String)>,
    /// What a lifted brake writes to each: the `--max-rate` value, else
    /// the user's own.
    lift_values: Vec<String>,
    /// The brake is on (the scrub sends one submission group per second).
    braked: bool,
    /// The scrub's bios, told apart by the `btrfs scrub start` process
    /// on the event monitor.
    bios: Arc<BioAttribution>,
    /// Runs the brake stopped because an FG bio came.
    brake_yields: u64,
    /// When the brake went on, ns.
    braked_since_ns: u64,
    /// Brakes held so long that the scrub was cancelled instead.
    brake_cancels: u64,
    /// When the status was last read in a lifted run, ns.
    status_read_ns: u64,
    rate_limit: Option<String>,
    status: ScrubStatus,
    base_scrubbed: u64,
    run_since_ns: Option<u64>,
    run_since_bytes: u64,
    /// When the current run (since the start or resume) began, ns.
    resumed_at_ns: Option<u64>,
    /// `last_physical` after the last cancel (btrfs's durable position).
    durable_physical: u64,
    /// Least time a run after a resume goes on before it may be paused, ns.
    min_run_ns: u64,
    /// Runs whose cancel found no durable progress.
    runs_without_progress: u64,
    /// Device extents of the only member device (empty: several devices,
    /// or unknown): where a cancel loses nothing.
    extents: Vec<(u64, u64)>,
    /// Requests that ended with a cancel at a chunk boundary.
    boundary_looks: u64,
    /// Several member devices (one position each, no common boundary):
    /// every request ends with a cancel after its (held) slice instead.
    looks_by_time: bool,
    /// Requests that ended with such a cancel.
    time_looks: u64,
    active_ns: u64,
    requests: u64,
    t0_ns: u64,
}

fn open(
    t: &NativeTarget,
    cfg: &NativeConfig,
    ctl: Arc<dyn Control>,
) -> Result<Box<dyn NativeExecutor>> {
    Ok(Box::new(Btrfs::open(t, cfg, ctl)?))
}

impl Btrfs {
    fn btrfs(&self, args: &[&str]) -> Result<super::Output> {
        self.ctl.run("btrfs", args, TOOL_TIMEOUT_NS)
    }

    fn read_status(ctl: &dyn Control, label: &str, mount: &str) -> Result<ScrubStatus> {
        let out = ctl.run("btrfs", &["scrub", "status", "-R", mount], TOOL_TIMEOUT_NS)?;
        if !out.success() {
            return Err(Error::invalid(
                "target",
                format!(
                    "{label}: `btrfs scrub status -R {mount}` failed: {}",
                    out.message()
                ),
            ));
        }
        ScrubStatus::parse(&out.stdout).map_err(|m| Error::Parse {
            path: PathBuf::from(format!("btrfs scrub status -R {mount}")),
            message: m,
        })
    }

    /// Open `btrfs:MOUNT`: its status, member devices and rate ceiling.
    pub fn open(t: &NativeTarget, cfg: &NativeConfig, ctl: Arc<dyn Control>) -> Result<Btrfs> {
        cfg.check_options("btrfs", &[])?;
        let label = t.to_string();
        let mount = t.arg.clone();
        if !Path::new(&mount).is_absolute() {
            return Err(Error::invalid(
                "target",
                format!("{label}: give the mount point as an absolute path"),
            ));
        }
        let version = ctl
            .run("btrfs", &["--version"], TOOL_TIMEOUT_NS)
            .map_err(|e| {
                Error::Unsupported(format!(
                    "{label}: the `btrfs` tool (btrfs-progs) cannot be run: {e}"
                ))
            })?;
        let tool = version.stdout.trim().to_string();
        let status = Self::read_status(ctl.as_ref(), &label, &mount)?;
        let start_next = match (&status.state, cfg.resume) {
            (ScrubState::Running, _) => {
                return Err(Error::Unsupported(format!(
                    "{label}: a scrub is already running there, not under fallow: `btrfs scrub cancel {mount}`, then `fallow scrub {label} --resume` continues it in idle time"
                )))
            }
            (ScrubState::Aborted | ScrubState::Interrupted, Resume::Yes) => false,
            (ScrubState::Aborted | ScrubState::Interrupted, Resume::No) => {
                return Err(Error::invalid(
                    "target",
                    format!(
                        "{label}: an unfinished scrub is there (status {:?}, {} bytes scrubbed): --resume continues it, --restart starts a new one",
                        status.state,
                        status.scrubbed_bytes()
                    )
                    .to_lowercase(),
                ))
            }
            _ => true,
        };
        let sys = PathBuf::from("/sys/fs/btrfs").join(&status.uuid);
        let mut devices = Vec::new();
        for name in ctl.list(&sys.join("devices")).unwrap_or_default() {
            devices.push(whole_disk(ctl.as_ref(), &name));
        }
        let members = ctl.list(&sys.join("devices")).unwrap_or_default();
        devices.sort();
        devices.dedup();
        let sources = devices
            .iter()
            .map(|d| {
                StatSource::file(
                    ctl.resolve(&PathBuf::from("/sys/class/block").join(d).join("stat")),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let gate = Gate::new(&sources)?;

        let mut b = Btrfs {
            label,
            mount,
            ctl,
            uuid: status.uuid.clone(),
            devices,
            gate,
            tool,
            job: None,
            start_next,
            finished: false,
            slice_ns: cfg.slice_ns,
            rate_bytes_per_s: None,
            max_bytes: cfg.max_bytes,
            windows: cfg.windows.clone(),
            bucket: None,
            speed_files: Vec::new(),
            lift_values: Vec::new(),
            braked: false,
            bios: Arc::new(BioAttribution::of_processes()),
            brake_yields: 0,
            braked_since_ns: 0,
            brake_cancels: 0,
            status_read_ns: 0,
            rate_limit: None,
            base_scrubbed: if start_next {
                0
            } else {
                status.scrubbed_bytes()
            },
            durable_physical: if start_next {
                0
            } else {
                status.get("last_physical")
            },
            status,
            run_since_ns: None,
            run_since_bytes: 0,
            resumed_at_ns: None,
            min_run_ns: 0,
            runs_without_progress: 0,
            extents: Vec::new(),
            boundary_looks: 0,
            looks_by_time: members.len() > 1,
            time_looks: 0,
            active_ns: 0,
            requests: 0,
            t0_ns: monotonic_ns(),
        };
        if let Some(ns) = b.slice_ns {
            if !(SLICE_MIN_NS..=SLICE_MAX_NS).contains(&ns) {
                return Err(Error::invalid(
                    "--slice",
                    format!("{} ms: use 50 ms to 10 s", ns / 1_000_000),
                ));
            }
        }
        if let [only] = members.as_slice() {
            // without the extents a run is only looked at when the driver pauses it
            b.extents = b.dev_extents(&sys, only).unwrap_or_default();
        }
        // the user's limits, before anything is written
        for id in b.ctl.list(&sys.join("devinfo")).unwrap_or_default() {
            let f = sys.join("devinfo").join(id).join("scrub_speed_max");
            if let Ok(v) = b.ctl.read(&f) {
                b.lift_values.push(v.trim().to_string());
                b.speed_files.push((f, v.trim().to_string()));
            }
        }
        if let Some(rate) = cfg.max_rate_bytes_per_s {
            b.set_limit(rate)?;
        }
        Ok(b)
    }

    /// The device extents of the member device `name` (its devid from
    /// `devinfo/*/` … the only one there is).
    fn dev_extents(&self, sys: &Path, name: &str) -> Result<Vec<(u64, u64)>> {
        let ids = self.ctl.list(&sys.join("devinfo"))?;
        let [id] = ids.as_slice() else {
            return Ok(Vec::new());
        };
        let devid: u64 = id.parse().map_err(|_| {
            Error::invalid(
                "target",
                format!("{}: devinfo/{id} is not a devid", self.label),
            )
        })?;
        let dev = format!("/dev/{name}");
        let out = self.btrfs(&["inspect-internal", "dump-tree", "-t", "dev", &dev])?;
        if !out.success() {
            return Ok(Vec::new());
        }
        parse_dev_extents(&out.stdout, devid).map_err(|m| Error::Parse {
            path: PathBuf::from(format!("btrfs inspect-internal dump-tree -t dev {dev}")),
            message: m,
        })
    }

    /// The end of the device extent holding `pos`, if any.
    fn extent_end(&self, pos: u64) -> Option<u64> {
        self.extents
            .iter()
            .find(|&&(a, b)| a <= pos && pos < b)
            .map(|&(_, b)| b)
    }

    /// After a request's slice: wait until the live position passes the
    /// end of the extent it is in, then cancel there. `Ok(true)` if it
    /// did (or the scrub ended meanwhile).
    fn cancel_at_boundary(&mut self) -> Result<bool> {
        if self.extents.is_empty() {
            return Ok(false);
        }
        self.refresh()?;
        let Some(end) = self.extent_end(self.status.get("last_physical")) else {
            return Ok(false);
        };
        let t0 = monotonic_ns();
        loop {
            let wait = self
                .cap_look_in_ns()
                .map_or(BOUNDARY_POLL_NS, |d| d.min(BOUNDARY_POLL_NS));
            let job = self.job.as_mut().expect("a run is going");
            if let Some(out) = job.wait_ns(wait)? {
                self.stopped(out, false)?;
                self.resumed_at_ns = None;
                return Ok(true);
            }
            self.refresh()?;
            if self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
                // --max-bytes before the boundary: stop here (a hard cap)
                self.cancel()?;
                return Ok(true);
            }
            if self.status.get("last_physical") >= end {
                self.boundary_looks += 1;
                self.cancel()?;
                // the driver's look is one 1 ms sample, and FG reads that
                // completed during the run were counted as the scrub's: an
                // FG of 300 short reads/s shows in such a sample with
                // probability ~0.3. Stay paused until its next read shows
                // (without this, one run here missed it at a boundary and
                // read 165 MiB under the FG instead of 29 MiB).
                std::thread::sleep(std::time::Duration::from_nanos(BOUNDARY_LOOK_NS));
                return Ok(true);
            }
            if monotonic_ns() - t0 > BOUNDARY_WAIT_MAX_NS {
                return Ok(false);
            }
        }
    }

    /// The rate ceiling: the kernel's per-device limit where it has one,
    /// else fallow's token bucket over the bytes btrfs reports.
    fn set_limit(&mut self, rate: f64) -> Result<()> {
        if self.speed_files.is_empty() {
            self.bucket = Some(TokenBucket::new(rate, 64 << 20)?);
            self.rate_limit = Some(format!(
                "fallow pacing at {rate:.0} bytes/s (this kernel has no scrub_speed_max)"
            ));
            return Ok(());
        }
        // at least 2: 1 is the brake
        let value = format!("{}", (rate.round() as u64).max(2));
        for (f, _) in &self.speed_files {
            self.ctl.write(f, &value)?;
        }
        self.lift_values = vec![value.clone(); self.speed_files.len()];
        self.rate_limit = Some(format!(
            "btrfs scrub_speed_max = {value} bytes/s on each of {} devices",
            self.speed_files.len()
        ));
        Ok(())
    }

    /// The user's limits back (after the scrub is stopped).
    fn restore_limits(&mut self) -> Result<()> {
        let mut first = None;
        for (f, old) in &self.speed_files {
            if let Err(e) = self.ctl.write(f, old) {
                first.get_or_insert(e);
            }
        }
        self.braked = false;
        first.map_or(Ok(()), Err)
    }

    /// Brake mode: every member has a `scrub_speed_max` and the event
    /// monitor tells the scrub's bios from FG ones (one device; see
    /// [`NativeExecutor::bio_attribution`]). Else cancel and resume.
    fn brakes(&self) -> bool {
        !self.speed_files.is_empty()
            && self.speed_files.len() == self.devices.len()
            && self.bios.attached()
    }

    /// Put the brake on: the scrub's next submission waits out the
    /// kernel's 1 s throttle slice.
    fn brake(&mut self) -> Result<()> {
        for (f, _) in &self.speed_files {
            self.ctl.write(f, &BRAKE_BYTES_PER_S.to_string())?;
        }
        if !self.braked {
            self.braked_since_ns = monotonic_ns();
        }
        self.braked = true;
        Ok(())
    }

    /// Lift it: the scrub goes on at the user's (or `--max-rate`'s)
    /// limit once the throttle slice it sleeps in ends (≤ 1 s).
    fn lift(&mut self) -> Result<()> {
        for ((f, _), v) in self.speed_files.iter().zip(&self.lift_values) {
            self.ctl.write(f, v)?;
        }
        self.braked = false;
        Ok(())
    }

    /// A brake turned into a cancel (a long hold, a closed window): the
    /// scrub stops resumable, and the knob goes back to the user's value
    /// while nothing of fallow's runs (a scrub the user starts meanwhile is
    /// not held at 1 byte/s).
    fn cancel_braked(&mut self) -> Result<()> {
        self.brake_cancels += 1;
        self.cancel()?;
        self.lift()
    }

    /// One BG request in brake mode: the brake lifted for a slice, or
    /// until the first FG bio, when it goes on at once; the scrub is never
    /// cancelled, so nothing is read twice.
    fn run_braked(&mut self, size_bytes: u64) -> Result<Step> {
        let fg0 = self.bios.counts().foreground_bios;
        if self.job.is_none() {
            let verb = if self.start_next { "start" } else { "resume" };
            self.lift()?;
            self.run_since_bytes = self.status.scrubbed_bytes();
            let job = self
                .ctl
                .spawn("btrfs", &["scrub", verb, "-B", &self.mount])?;
            if job.pid() != 0 {
                // (a recorded job has none)
                self.bios.set_pids(&[job.pid()]);
            }
            self.job = Some(job);
            let now = monotonic_ns();
            self.run_since_ns = Some(now);
            self.status_read_ns = now;
            if self.start_next {
                self.start_next = false;
                self.run_since_bytes = 0;
                self.base_scrubbed = 0;
            }
        } else if self.braked {
            self.lift()?;
        }
        let slice = self.slice_ns.unwrap_or(BRAKE_SLICE_NS);
        let _ = size_bytes;
        let t0 = monotonic_ns();
        let mut look_at = self.cap_look_in_ns().map(|d| t0.saturating_add(d));
        loop {
            let job = self.job.as_mut().expect("started above");
            if let Some(out) = job.wait_ns(BRAKE_POLL_NS)? {
                self.stopped(out, false)?;
                break;
            }
            if self.bios.counts().foreground_bios > fg0 {
                self.brake()?;
                self.brake_yields += 1;
                break;
            }
            let now = monotonic_ns();
            if look_at.is_some_and(|t| now >= t) {
                if self.stop_at_cap()? {
                    return Ok(Step::Finished);
                }
                look_at = self
                    .cap_look_in_ns()
                    .map(|d| monotonic_ns().saturating_add(d));
            }
            if now.saturating_sub(t0) >= slice {
                break;
            }
        }
        if self.finished {
            return Ok(Step::Finished);
        }
        let now = monotonic_ns();
        if now.saturating_sub(self.status_read_ns) >= BRAKE_STATUS_NS
            || self.max_bytes.is_some()
            || self.bucket.is_some()
        {
            self.status_read_ns = now;
            if self.stop_at_cap()? {
                return Ok(Step::Finished);
            }
            if self.max_bytes.is_none() {
                self.refresh()?;
                if let Some(t) = self.run_since_ns {
                    self.active_ns += now - t;
                    self.measure(now - t);
                    self.run_since_ns = Some(now);
                }
            }
        }
        Ok(Step::More)
    }

    /// Read the status again. While a scrub starts or stops, btrfs-progs
    /// may fail to reach its progress socket and print `no stats
    /// available` with zero counters (seen here 3 times in 150 reads during
    /// 15 start/cancel cycles): a scrub fallow has started cannot have no
    /// stats, so such a reading (or a failed one) is retried.
    fn refresh(&mut self) -> Result<()> {
        const TRIES: u32 = 10;
        for i in 1..=TRIES {
            let r = Self::read_status(self.ctl.as_ref(), &self.label, &self.mount);
            match r {
                Ok(s) if s.state != ScrubState::None || self.start_next => {
                    self.status = s;
                    return Ok(());
                }
                Err(e) if i == TRIES => return Err(e),
                Ok(s) if i == TRIES => {
                    return Err(Error::Unsupported(format!(
                        "{}: `btrfs scrub status` says `no stats available` for the scrub fallow started (uuid {})",
                        self.label, s.uuid
                    )))
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(30)),
            }
        }
        unreachable!("the last try returns")
    }

    /// With `--max-bytes`: how long until the status must be read again,
    /// ns: half the time the rest would take at the measured rate (at
    /// [`CAP_LOOK_MIN_NS`] least), so a rate up to twice the measured one
    /// is still caught before the cap. `None` without a cap.
    fn cap_look_in_ns(&self) -> Option<u64> {
        let m = self.max_bytes?;
        let left = m.saturating_sub(self.run_bytes()) as f64;
        let rate = self
            .rate_bytes_per_s
            .unwrap_or(INITIAL_RATE_BYTES_PER_S)
            .max(1.0);
        Some(((left / (2.0 * rate) * 1e9) as u64).max(CAP_LOOK_MIN_NS))
    }

    /// Read the status (and account the run's time and rate): has this
    /// run reached `--max-bytes`? Then the scrub is stopped at once, the
    /// brake first where there is one (it holds the scrub at its next
    /// submission while `btrfs scrub cancel` runs), not at a chunk
    /// boundary: a hard cap, up to what the scrub reads between the status
    /// read and the brake (measured in docs/native.md).
    fn stop_at_cap(&mut self) -> Result<bool> {
        let Some(m) = self.max_bytes else {
            return Ok(false);
        };
        self.refresh()?;
        let now = monotonic_ns();
        if let Some(t) = self.run_since_ns {
            self.active_ns += now - t;
            self.measure(now - t);
            self.run_since_ns = Some(now);
        }
        if self.run_bytes() < m {
            return Ok(false);
        }
        if self.brakes() && self.job.is_some() {
            self.brake()?;
        }
        self.cancel()?;
        if self.brakes() {
            // nothing of fallow's runs: the user's value back (see cancel_braked)
            self.lift()?;
        }
        Ok(true)
    }

    fn slice_for(&self, size_bytes: u64) -> u64 {
        if let Some(s) = self.slice_ns {
            return s;
        }
        let rate = self.rate_bytes_per_s.unwrap_or(INITIAL_RATE_BYTES_PER_S);
        ((size_bytes as f64 / rate * 1e9) as u64).clamp(SLICE_MIN_NS, SLICE_MAX_NS)
    }

    fn run_bytes(&self) -> u64 {
        self.status
            .scrubbed_bytes()
            .saturating_sub(self.base_scrubbed)
    }

    /// The child ended (by itself, or after a cancel): close the gate,
    /// read the status, account the time and rate.
    fn stopped(&mut self, out: super::Output, cancelled: bool) -> Result<()> {
        self.job = None;
        self.gate.close();
        let now = monotonic_ns();
        self.refresh()?;
        if let Some(t) = self.run_since_ns.take() {
            let dt = now.saturating_sub(t);
            self.active_ns += dt;
            self.measure(dt);
        }
        match self.status.state {
            ScrubState::Finished => self.finished = true,
            ScrubState::Aborted | ScrubState::Interrupted if cancelled => {}
            // a cancel fallow did not issue: the user's, which stands
            ScrubState::Aborted => {
                return Err(Error::Unsupported(format!(
                    "{}: the scrub was cancelled outside fallow (`btrfs scrub cancel`?); fallow does not resume it: `fallow scrub {} --resume` continues it",
                    self.label, self.label
                )))
            }
            ref s => {
                return Err(Error::Unsupported(format!(
                    "{}: the scrub stopped by itself (status {s:?}, `btrfs scrub` exit {:?}): {}",
                    self.label,
                    out.code,
                    out.message()
                )))
            }
        }
        Ok(())
    }

    fn measure(&mut self, dt_ns: u64) {
        let bytes = self
            .status
            .scrubbed_bytes()
            .saturating_sub(self.run_since_bytes);
        // a slice shorter than 20 ms says more about the fork than the disk
        if dt_ns < 20_000_000 || bytes == 0 {
            return;
        }
        let r = bytes as f64 / (dt_ns as f64 / 1e9);
        self.rate_bytes_per_s = Some(match self.rate_bytes_per_s {
            Some(m) => m + RATE_EWMA * (r - m),
            None => r,
        });
        if let Some(b) = &mut self.bucket {
            b.take(bytes, monotonic_ns());
        }
        self.run_since_bytes = self.status.scrubbed_bytes();
    }

    /// Cancel a running slice and wait for its child.
    fn cancel(&mut self) -> Result<()> {
        if self.job.is_none() {
            return Ok(());
        }
        let out = self.btrfs(&["scrub", "cancel", &self.mount])?;
        let job = self.job.as_mut().expect("checked above");
        let ended = job.wait_ns(TOOL_TIMEOUT_NS)?;
        let Some(ended) = ended else {
            return Err(Error::Unsupported(format!(
                "{}: `btrfs scrub cancel` returned ({}) but the scrub process (pid {}) did not end within 60 s",
                self.label,
                out.message(),
                job.pid()
            )));
        };
        // a cancel that found nothing running (it had just finished) is fine
        self.stopped(ended, true)?;
        let ran_ns = self
            .resumed_at_ns
            .take()
            .map_or(0, |t| monotonic_ns().saturating_sub(t));
        let at = self.status.get("last_physical");
        if self.finished || at > self.durable_physical {
            self.durable_physical = at;
            // halved, not forgotten: with several devices, where requests
            // end by time, runs settle near the length that makes progress
            self.min_run_ns /= 2;
        } else {
            // the run's work is lost: hold the next one longer
            self.runs_without_progress += 1;
            self.min_run_ns = ran_ns
                .max(self.min_run_ns)
                .saturating_mul(2)
                .clamp(SLICE_MIN_NS, MIN_RUN_MAX_NS);
        }
        Ok(())
    }
}

/// The whole disk a member device is on (`sda1` → `sda`), for the monitor:
/// FG work on any partition competes for the same disk.
fn whole_disk(ctl: &dyn Control, name: &str) -> String {
    let class = PathBuf::from("/sys/class/block").join(name);
    if ctl.read(&class.join("partition")).is_ok() {
        if let Ok(link) = std::fs::read_link(ctl.resolve(&class)) {
            if let Some(parent) = link.parent().and_then(|p| p.file_name()) {
                return parent.to_string_lossy().into_owned();
            }
        }
    }
    name.to_string()
}

impl BgExecutor for Btrfs {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        let w = u64::from(self.windows.wait_now_s()) * 1_000_000_000;
        if w > 0 {
            // outside the window: stopped, not braked (the brake leaks)
            if self.job.is_some() && self.brakes() {
                self.cancel_braked()?;
            }
            return Ok(w);
        }
        Ok(match &mut self.bucket {
            // the bucket is charged with what btrfs reports, after the slice
            Some(b) => b.ready_in_ns(size_bytes.min(64 << 20), now_ns),
            None => 0,
        })
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.finished {
            return Ok(Step::Finished);
        }
        self.requests += 1;
        if self.brakes() {
            return self.run_braked(size_bytes);
        }
        if self.job.is_none() {
            let verb = if self.start_next { "start" } else { "resume" };
            self.gate.open();
            self.run_since_bytes = self.status.scrubbed_bytes();
            match self.ctl.spawn("btrfs", &["scrub", verb, "-B", &self.mount]) {
                Ok(j) => self.job = Some(j),
                Err(e) => {
                    self.gate.close();
                    return Err(e);
                }
            }
            self.run_since_ns = Some(monotonic_ns());
            self.resumed_at_ns = self.run_since_ns;
            if self.start_next {
                // a new scrub's counters start at 0
                self.start_next = false;
                self.run_since_bytes = 0;
                self.base_scrubbed = 0;
            }
        }
        let mut slice = self.slice_for(size_bytes);
        if let Some(t) = self.resumed_at_ns {
            // a run that must make durable progress before it may pause
            let held = t.saturating_add(self.min_run_ns);
            slice = slice.max(held.saturating_sub(monotonic_ns()));
        }
        // with --max-bytes the slice is watched: the cap stops it at once
        let t_end = monotonic_ns().saturating_add(slice);
        let ended = loop {
            let Some(look) = self.cap_look_in_ns() else {
                let job = self.job.as_mut().expect("started above");
                break job.wait_ns(slice)?;
            };
            let wait = look.min(t_end.saturating_sub(monotonic_ns()));
            let job = self.job.as_mut().expect("started above");
            if let Some(out) = job.wait_ns(wait)? {
                break Some(out);
            }
            if monotonic_ns() >= t_end {
                break None;
            }
            if self.stop_at_cap()? {
                return Ok(Step::Finished);
            }
        };
        if let Some(out) = ended {
            self.stopped(out, false)?;
        } else if self.max_bytes.is_some() && self.stop_at_cap()? {
            return Ok(Step::Finished);
        } else if self.cancel_at_boundary()? {
            // cancelled where nothing is lost: the driver looks for FG work
        } else if self.looks_by_time {
            // no common boundary: a look now, at the price of re-reading
            // the partial chunks (held runs still make progress)
            self.time_looks += 1;
            self.cancel()?;
            std::thread::sleep(std::time::Duration::from_nanos(BOUNDARY_LOOK_NS));
        } else if self.max_bytes.is_some() || self.bucket.is_some() {
            // progress is needed now to stop at --max-bytes or to pace
            self.refresh()?;
            if let Some(t) = self.run_since_ns {
                let now = monotonic_ns();
                self.active_ns += now - t;
                self.measure(now - t);
                self.run_since_ns = Some(now);
            }
        }
        if self.finished {
            return Ok(Step::Finished);
        }
        if self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
            self.cancel()?;
            return Ok(Step::Finished);
        }
        Ok(Step::More)
    }

    fn pause(&mut self) -> Result<()> {
        if self.brakes() {
            if self.job.is_some() && !self.braked {
                self.brake()?;
            } else if self.job.is_some()
                && monotonic_ns().saturating_sub(self.braked_since_ns) >= BRAKE_HOLD_MAX_NS
            {
                // a long busy period: its leak would outgrow a chunk's re-read
                self.cancel_braked()?;
            }
            return Ok(());
        }
        self.cancel()
    }
}

impl NativeExecutor for Btrfs {
    fn devices(&self) -> Vec<String> {
        self.devices.clone()
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    fn bio_attribution(&self) -> Option<Arc<BioAttribution>> {
        (!self.speed_files.is_empty()).then(|| self.bios.clone())
    }

    /// If fallow dies: brake (the scrub sends at most one more group
    /// before it sleeps), cancel (exit 2, "not running", is done: a scrub
    /// fallow had cancelled, or one the user cancelled), then the user's
    /// limits back. Never a resume: a scrub runs only while fallow
    /// watches it, and a user's cancel stands (`--resume` continues).
    fn release_actions(&self) -> Vec<ReleaseAction> {
        let mut v: Vec<ReleaseAction> = self
            .speed_files
            .iter()
            .map(|(f, _)| ReleaseAction::Write {
                path: self.ctl.resolve(f),
                text: BRAKE_BYTES_PER_S.to_string(),
            })
            .collect();
        v.push(ReleaseAction::Exec {
            argv: ["btrfs", "scrub", "cancel", self.mount.as_str()]
                .map(String::from)
                .to_vec(),
            ok_codes: vec![2],
        });
        for (f, old) in &self.speed_files {
            v.push(ReleaseAction::Write {
                path: self.ctl.resolve(f),
                text: old.clone(),
            });
        }
        v
    }

    fn report(&mut self) -> Result<NativeReport> {
        if self.job.is_some() {
            self.refresh()?;
        }
        if self.start_next {
            // nothing of the scrub to come yet: the status is an old one's
            return Ok(NativeReport {
                target: self.label.clone(),
                kind: "btrfs".into(),
                tool: self.tool.clone(),
                run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
                errors_corrected: Some(0),
                errors_uncorrectable: Some(0),
                rate_limit: self.rate_limit.clone(),
                checkpoint: Some(format!("/var/lib/btrfs/scrub.status.{}", self.uuid)),
                ..NativeReport::default()
            });
        }
        let s = &self.status;
        let mut native = s.counters.clone();
        native.insert(
            "fallow_runs_without_progress".into(),
            self.runs_without_progress,
        );
        native.insert("fallow_boundary_looks".into(), self.boundary_looks);
        native.insert("fallow_time_looks".into(), self.time_looks);
        native.insert("fallow_brake_yields".into(), self.brake_yields);
        native.insert("fallow_brake_cancels".into(), self.brake_cancels);
        let c = self.bios.counts();
        native.insert("fallow_scrub_bios".into(), c.command_bios);
        Ok(NativeReport {
            target: self.label.clone(),
            kind: "btrfs".into(),
            tool: self.tool.clone(),
            target_bytes: None,
            scrubbed_bytes: s.scrubbed_bytes(),
            position_bytes: s.get("last_physical"),
            run_bytes: self.run_bytes(),
            run_requests: self.requests,
            run_active_s: self.active_ns as f64 / 1e9,
            run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
            complete: s.state == ScrubState::Finished,
            errors_corrected: Some(s.get("corrected_errors")),
            errors_uncorrectable: Some(s.get("uncorrectable_errors")),
            native,
            rate_limit: self.rate_limit.clone(),
            checkpoint: Some(format!("/var/lib/btrfs/scrub.status.{}", self.uuid)),
        })
    }

    fn finish(&mut self) -> Result<()> {
        let cancelled = self.cancel();
        let restored = self.restore_limits();
        cancelled?;
        restored?;
        self.refresh()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::control::{Output, RecordedControl, RecordedJob};

    /// `btrfs scrub status -R` of btrfs-progs v6.2, recorded here mid-run.
    pub(crate) const RUNNING: &str = "UUID:             009990be-e7f1-4858-aa27-8edb96551d88
Scrub started:    Wed Nov 25 20:27:26 2026
Status:           running
Duration:         0:00:01
\tdata_extents_scrubbed: 784
\ttree_extents_scrubbed: 60
\tdata_bytes_scrubbed: 51380224
\ttree_bytes_scrubbed: 983040
\tread_errors: 0
\tcsum_errors: 2
\tverify_errors: 0
\tno_csum: 0
\tcsum_discards: 0
\tsuper_errors: 0
\tmalloc_errors: 0
\tuncorrectable_errors: 1
\tunverified_errors: 0
\tcorrected_errors: 1
\tlast_physical: 198049792
";

    fn status(state: &str, data: u64) -> String {
        RUNNING
            .replace("running", state)
            .replace("51380224", &data.to_string())
    }

    #[test]
    fn parses_status_raw() {
        let s = ScrubStatus::parse(RUNNING).unwrap();
        assert_eq!(s.uuid, "009990be-e7f1-4858-aa27-8edb96551d88");
        assert_eq!(s.state, ScrubState::Running);
        assert_eq!(s.scrubbed_bytes(), 51380224 + 983040);
        assert_eq!(s.get("last_physical"), 198049792);
        assert_eq!(s.errors_found(), 2);
        assert_eq!(s.counters.len(), 15);
        for (st, want) in [
            ("aborted", ScrubState::Aborted),
            ("interrupted", ScrubState::Interrupted),
            ("finished", ScrubState::Finished),
        ] {
            assert_eq!(ScrubStatus::parse(&status(st, 1)).unwrap().state, want);
        }
        let none = "UUID:             009990be-e7f1-4858-aa27-8edb96551d88\n\tno stats available\n";
        assert_eq!(ScrubStatus::parse(none).unwrap().state, ScrubState::None);
        let e = ScrubStatus::parse(&RUNNING.replace("0\n\tcsum_errors", "x\n\tcsum_errors"))
            .unwrap_err();
        assert!(e.contains("read_errors") && e.contains("line 9"), "{e}");
        let e = ScrubStatus::parse(&RUNNING.replace("running", "dancing")).unwrap_err();
        assert!(e.contains("dancing"), "{e}");
        assert!(ScrubStatus::parse("").is_err());
        let e =
            ScrubStatus::parse(&RUNNING.replace("\tlast_physical: 198049792\n", "")).unwrap_err();
        assert!(e.contains("last_physical"), "{e}");
    }

    const UUID: &str = "009990be-e7f1-4858-aa27-8edb96551d88";

    /// A recorded system: one member device `loop9` with a stat file.
    fn recorded(first_status: &str) -> (tempfile::TempDir, Arc<RecordedControl>) {
        let d = tempfile::tempdir().unwrap();
        let fs = d.path().join(format!("sys/fs/btrfs/{UUID}"));
        std::fs::create_dir_all(fs.join("devices/loop9")).unwrap();
        std::fs::create_dir_all(fs.join("devinfo/1")).unwrap();
        std::fs::write(fs.join("devinfo/1/scrub_speed_max"), "0\n").unwrap();
        let blk = d.path().join("sys/class/block/loop9");
        std::fs::create_dir_all(&blk).unwrap();
        std::fs::write(blk.join("stat"), "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let c = Arc::new(RecordedControl::new(d.path()));
        c.on_run("btrfs --version", [Output::new(0, "btrfs-progs v6.2\n")]);
        c.on_run("btrfs scrub status -R /mnt", [Output::new(0, first_status)]);
        (d, c)
    }

    fn target() -> NativeTarget {
        NativeTarget::parse("btrfs:/mnt").unwrap().unwrap()
    }

    #[test]
    fn slices_run_back_to_back_and_pause_cancels_then_resume_continues() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c.clone()).unwrap();
        assert_eq!(b.devices(), ["loop9"]);
        // the scrub keeps running over two requests, then is cancelled
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 2,
                output: Output::new(1, ""),
                until: None,
            }],
        );
        c.on_run(
            "btrfs scrub cancel /mnt",
            [Output::new(0, "scrub cancelled\n")],
        );
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("aborted", 40 << 20))],
        );
        assert_eq!(b.run_one(64 << 20).unwrap(), Step::More);
        assert!(b.gate().is_open());
        assert_eq!(b.run_one(64 << 20).unwrap(), Step::More);
        b.pause().unwrap();
        assert!(!b.gate().is_open());
        b.pause().unwrap(); // nothing running: nothing done
                            // resumed; it finishes mid-slice
        c.on_spawn(
            "btrfs scrub resume -B /mnt",
            [RecordedJob {
                waits: 0,
                output: Output::new(0, ""),
                until: None,
            }],
        );
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("finished", 300 << 20))],
        );
        assert_eq!(b.run_one(64 << 20).unwrap(), Step::Finished);
        assert_eq!(b.run_one(64 << 20).unwrap(), Step::Finished);
        let log: Vec<String> = c.log().into_iter().skip(2).collect();
        assert_eq!(
            log,
            [
                // no extents recorded: requests are not cut at chunk boundaries
                "run btrfs inspect-internal dump-tree -t dev /dev/loop9",
                "spawn btrfs scrub start -B /mnt",
                "run btrfs scrub cancel /mnt",
                "run btrfs scrub status -R /mnt",
                "spawn btrfs scrub resume -B /mnt",
                "run btrfs scrub status -R /mnt",
            ]
        );
        let r = b.report().unwrap();
        assert!(r.complete);
        assert_eq!(r.scrubbed_bytes, (300 << 20) + 983040);
        assert_eq!(r.run_bytes, r.scrubbed_bytes);
        assert_eq!(
            (r.errors_corrected, r.errors_uncorrectable),
            (Some(1), Some(1))
        );
        assert_eq!(r.tool, "btrfs-progs v6.2");
    }

    /// `--max-bytes` stops the scrub as soon as a status read
    /// shows the cap reached, mid-slice, not at the slice's end (10 s here)
    /// or the next chunk boundary: the slice is watched at half the time
    /// the rest would take at the measured rate.
    #[test]
    fn max_bytes_cancels_mid_slice_once_the_cap_is_reached() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        let cfg = NativeConfig {
            max_bytes: Some(32 << 20),
            slice_ns: Some(10_000_000_000),
            ..NativeConfig::default()
        };
        let mut b = Btrfs::open(&target(), &cfg, c.clone()).unwrap();
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 1000,
                output: Output::new(0, ""),
                until: Some("btrfs scrub cancel /mnt".into()),
            }],
        );
        c.on_run(
            "btrfs scrub cancel /mnt",
            [Output::new(0, "scrub cancelled\n")],
        );
        let tree = 983_040; // RUNNING's tree_bytes_scrubbed
        c.on_run(
            "btrfs scrub status -R /mnt",
            [
                Output::new(0, &status("running", 8 << 20)),
                Output::new(0, &status("running", 20 << 20)),
                Output::new(0, &status("running", 33 << 20)),
                Output::new(0, &status("aborted", 33 << 20)),
            ],
        );
        let t0 = monotonic_ns();
        assert_eq!(b.run_one(64 << 20).unwrap(), Step::Finished);
        assert!(monotonic_ns() - t0 < 5_000_000_000, "waited for the slice");
        assert_eq!(b.run_bytes(), (33 << 20) + tree);
        let log = c.log();
        let cancels = log
            .iter()
            .filter(|l| l.ends_with("scrub cancel /mnt"))
            .count();
        assert_eq!(cancels, 1, "{log:?}");
        // three reads before the cap was seen, one after the cancel
        let reads = log.iter().filter(|l| l.ends_with("status -R /mnt")).count();
        assert!(reads >= 4, "{log:?}");
    }

    #[test]
    fn a_cancel_without_durable_progress_holds_the_next_run_longer() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c.clone()).unwrap();
        let job = |waits| RecordedJob {
            waits,
            output: Output::new(1, ""),
            until: Some("btrfs scrub cancel /mnt".into()),
        };
        c.on_run("btrfs scrub cancel /mnt", [Output::new(0, "")]);
        // run 1: cancelled with last_physical at 198049792 (progress from 0)
        c.on_spawn("btrfs scrub start -B /mnt", [job(5)]);
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("aborted", 1 << 20))],
        );
        b.run_one(4096).unwrap();
        b.pause().unwrap();
        assert_eq!((b.durable_physical, b.min_run_ns), (198049792, 0));
        // run 2: cancelled at the same place: work lost, hold the next run
        c.on_spawn("btrfs scrub resume -B /mnt", [job(1000)]);
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("aborted", 2 << 20))],
        );
        b.run_one(4096).unwrap();
        b.pause().unwrap();
        assert_eq!(b.runs_without_progress, 1);
        // the run lasted one slice (50 ms): the next is held twice as long
        assert!(b.min_run_ns >= 2 * SLICE_MIN_NS, "{}", b.min_run_ns);
        let held = b.min_run_ns;
        let t0 = monotonic_ns();
        b.run_one(4096).unwrap();
        assert!(monotonic_ns() - t0 >= held, "the held run was cut short");
        // progress: the hold is halved
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(
                0,
                &status("aborted", 3 << 20).replace("198049792", "298049792"),
            )],
        );
        b.pause().unwrap();
        assert_eq!((b.durable_physical, b.min_run_ns), (298049792, held / 2));
        let r = b.report().unwrap();
        assert_eq!(r.native["fallow_runs_without_progress"], 1);
    }

    #[test]
    fn a_transient_no_stats_reading_is_read_again() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c.clone()).unwrap();
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 0,
                output: Output::new(0, ""),
                until: None,
            }],
        );
        c.on_run(
            "btrfs scrub status -R /mnt",
            [
                Output::new(0, &never),
                Output::new(0, &status("finished", 1 << 20)),
            ],
        );
        assert_eq!(b.run_one(4096).unwrap(), Step::Finished);
        let reads = c.log().iter().filter(|l| l.contains("status -R")).count();
        assert_eq!(reads, 3, "{:?}", c.log()); // open, the transient, the real one
    }

    /// `btrfs inspect-internal dump-tree -t dev /dev/loop1`, recorded here (cut).
    const DEV_TREE: &str = "btrfs-progs v6.2
device tree key (DEV_TREE ROOT_ITEM 0)
\titem 0 key (DEV_STATS PERSISTENT_ITEM 1) itemoff 16243 itemsize 40
\t\tpersistent item objectid DEV_STATS offset 1
\titem 1 key (1 DEV_EXTENT 38797312) itemoff 16195 itemsize 48
\t\tdev extent chunk_tree 3
\t\tchunk_objectid 256 chunk_offset 30408704 length 53673984
\titem 3 key (1 DEV_EXTENT 146145280) itemoff 16099 itemsize 48
\t\tdev extent chunk_tree 3
\t\tchunk_objectid 256 chunk_offset 84082688 length 117440512
\titem 4 key (2 DEV_EXTENT 1048576) itemoff 16051 itemsize 48
\t\tdev extent chunk_tree 3
\t\tchunk_objectid 256 chunk_offset 201523200 length 117440512
";

    #[test]
    fn parses_device_extents_of_one_device() {
        let e = parse_dev_extents(DEV_TREE, 1).unwrap();
        assert_eq!(
            e,
            [
                (38797312, 38797312 + 53673984),
                (146145280, 146145280 + 117440512)
            ]
        );
        assert_eq!(
            parse_dev_extents(DEV_TREE, 2).unwrap(),
            [(1048576, 1048576 + 117440512)]
        );
        let bad = DEV_TREE.replace("length 53673984", "length x");
        assert!(parse_dev_extents(&bad, 1).unwrap_err().contains("length"));
    }

    #[test]
    fn a_request_ends_with_a_cancel_at_the_next_chunk_boundary() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        c.on_run(
            "btrfs inspect-internal dump-tree -t dev /dev/loop9",
            [Output::new(0, DEV_TREE)],
        );
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c.clone()).unwrap();
        assert_eq!(b.extents.len(), 2);
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 1000,
                output: Output::new(1, ""),
                until: Some("btrfs scrub cancel /mnt".into()),
            }],
        );
        c.on_run("btrfs scrub cancel /mnt", [Output::new(0, "")]);
        let at = |state: &str, pos: u64| {
            Output::new(
                0,
                &status(state, pos).replace("198049792", &pos.to_string()),
            )
        };
        // inside the second extent after the slice; then past its end
        let end = 146145280 + 117440512;
        c.on_run(
            "btrfs scrub status -R /mnt",
            [
                at("running", 150_000_000),
                at("running", 200_000_000),
                at("running", end + 4096),
                at("aborted", end),
            ],
        );
        assert_eq!(b.run_one(4096).unwrap(), Step::More);
        // cancelled, gate closed: the driver can look for FG work
        assert!(b.job.is_none() && !b.gate().is_open());
        assert_eq!((b.boundary_looks, b.durable_physical), (1, end));
        assert_eq!(b.runs_without_progress, 0);
    }

    #[test]
    fn with_several_devices_each_request_ends_with_a_cancel() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (d, c) = recorded(&never);
        let sys = d.path().join(format!("sys/fs/btrfs/{UUID}"));
        std::fs::create_dir_all(sys.join("devices/loop8")).unwrap();
        let blk = d.path().join("sys/class/block/loop8");
        std::fs::create_dir_all(&blk).unwrap();
        std::fs::write(blk.join("stat"), "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c.clone()).unwrap();
        assert_eq!(b.devices(), ["loop8", "loop9"]);
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: 1000,
                output: Output::new(1, ""),
                until: Some("btrfs scrub cancel /mnt".into()),
            }],
        );
        c.on_run("btrfs scrub cancel /mnt", [Output::new(0, "")]);
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("aborted", 1 << 20))],
        );
        assert_eq!(b.run_one(4096).unwrap(), Step::More);
        assert!(b.job.is_none() && !b.gate().is_open());
        assert_eq!(b.report().unwrap().native["fallow_time_looks"], 1);
    }

    #[test]
    fn slice_follows_size_over_measured_rate() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (_d, c) = recorded(&never);
        let mut b = Btrfs::open(&target(), &NativeConfig::default(), c).unwrap();
        // 100 MB/s assumed: 64 MiB → 671 ms; tiny sizes → the 50 ms floor
        assert_eq!(b.slice_for(64 << 20), (64u64 << 20) * 10);
        assert_eq!(b.slice_for(4096), SLICE_MIN_NS);
        assert_eq!(b.slice_for(u64::MAX / 4), SLICE_MAX_NS);
        // measured: 300 MB in 1 s
        b.status = ScrubStatus::parse(&status("running", 300_000_000 - 983_040)).unwrap();
        b.run_since_bytes = 0;
        b.measure(1_000_000_000);
        assert!((b.rate_bytes_per_s.unwrap() - 300e6).abs() < 1.0);
        assert_eq!(b.slice_for(30_000_000), 100_000_000);
    }

    #[test]
    fn refuses_running_and_unfinished_scrubs_without_resume() {
        let (_d, c) = recorded(RUNNING);
        let e = Btrfs::open(&target(), &NativeConfig::default(), c)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("already running") && e.contains("btrfs scrub cancel /mnt"),
            "{e}"
        );
        let (_d, c) = recorded(&status("aborted", 5));
        let e = Btrfs::open(&target(), &NativeConfig::default(), c).unwrap_err();
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("--resume continues it"), "{e}");
        let (_d, c) = recorded(&status("interrupted", 5));
        let cfg = NativeConfig {
            resume: Resume::Yes,
            ..NativeConfig::default()
        };
        let b = Btrfs::open(&target(), &cfg, c).unwrap();
        assert!(!b.start_next);
        assert_eq!(b.base_scrubbed, 5 + 983040);
        let e = NativeTarget::parse("btrfs:mnt").unwrap().unwrap();
        let (_d, c) = recorded(RUNNING);
        let e = Btrfs::open(&e, &NativeConfig::default(), c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("absolute"), "{e}");
    }

    /// The brake (docs/native.md): with the scrub's bios told apart (the event
    /// monitor attached), a request lifts `scrub_speed_max` to the user's
    /// value, an FG bio puts it to 1 at once and ends the request,
    /// `pause` keeps it braked without a cancel, the next request lifts it
    /// again; the scrub is started once and cancelled only
    /// at the end, when the user's value is back.
    #[test]
    fn the_brake_holds_the_scrub_on_an_fg_bio_without_a_cancel() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (d, c) = recorded(&never);
        let f = d
            .path()
            .join(format!("sys/fs/btrfs/{UUID}/devinfo/1/scrub_speed_max"));
        std::fs::write(&f, "25000000\n").unwrap(); // the user's own limit
        let cfg = NativeConfig {
            slice_ns: Some(SLICE_MIN_NS),
            ..NativeConfig::default()
        };
        let mut b = Btrfs::open(&target(), &cfg, c.clone()).unwrap();
        assert!(!b.brakes(), "no brake before the monitor attributes bios");
        b.bios.attach();
        assert!(b.brakes());
        c.on_spawn(
            "btrfs scrub start -B /mnt",
            [RecordedJob {
                waits: u32::MAX,
                output: Output::new(0, ""),
                until: Some("btrfs scrub cancel /mnt".into()),
            }],
        );
        c.on_run("btrfs scrub cancel /mnt", [Output::new(0, "")]);
        let speed = || std::fs::read_to_string(&f).unwrap().trim().to_string();
        // a request with no FG: lifted for its slice
        assert_eq!(b.run_one(1 << 20).unwrap(), Step::More);
        assert_eq!(speed(), "25000000");
        // an FG bio (another process) during a long request: braked at once
        b.slice_ns = Some(SLICE_MAX_NS);
        let bios = b.bios.clone();
        let fg = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            bios.count(0, 4242, false, false, 8, monotonic_ns());
        });
        let t0 = monotonic_ns();
        assert_eq!(b.run_one(1 << 20).unwrap(), Step::More);
        fg.join().unwrap();
        assert!(
            monotonic_ns() - t0 < SLICE_MAX_NS / 2,
            "the FG bio did not end it"
        );
        assert_eq!(speed(), "1");
        assert_eq!(b.brake_yields, 1);
        // the driver waits: still braked, no cancel
        b.pause().unwrap();
        assert_eq!(speed(), "1");
        b.slice_ns = Some(SLICE_MIN_NS);
        b.run_one(1 << 20).unwrap();
        assert_eq!(speed(), "25000000");
        let log = c.log();
        assert_eq!(
            log.iter().filter(|l| l.starts_with("spawn")).count(),
            1,
            "{log:?}"
        );
        assert!(!log.iter().any(|l| l.contains("scrub cancel")), "{log:?}");
        // the end: cancelled, the user's value back
        c.on_run(
            "btrfs scrub status -R /mnt",
            [Output::new(0, &status("aborted", 2 << 20))],
        );
        b.finish().unwrap();
        assert_eq!(speed(), "25000000");
        assert!(c.log().iter().any(|l| l == "run btrfs scrub cancel /mnt"));
    }

    #[test]
    fn max_rate_sets_the_kernel_limit_and_the_guardian_restores_it() {
        let never = format!("UUID: {UUID}\n\tno stats available\n");
        let (d, c) = recorded(&never);
        let cfg = NativeConfig {
            max_rate_bytes_per_s: Some(50e6),
            ..NativeConfig::default()
        };
        let mut b = Btrfs::open(&target(), &cfg, c.clone()).unwrap();
        let f = d
            .path()
            .join(format!("sys/fs/btrfs/{UUID}/devinfo/1/scrub_speed_max"));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "50000000");
        assert!(b.rate_limit.as_deref().unwrap().contains("scrub_speed_max"));
        // if fallow dies: brake, cancel ("not running" is done), the
        // user's limit back; never a resume (docs/native.md)
        let rel = b.release_actions();
        assert_eq!(
            rel,
            vec![
                ReleaseAction::Write {
                    path: f.clone(),
                    text: "1".into()
                },
                ReleaseAction::Exec {
                    argv: vec![
                        "btrfs".into(),
                        "scrub".into(),
                        "cancel".into(),
                        "/mnt".into()
                    ],
                    ok_codes: vec![2],
                },
                ReleaseAction::Write {
                    path: f.clone(),
                    text: "0".into()
                },
            ]
        );
        b.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "0");
        // no scrub_speed_max: fallow paces
        let (d, c) = recorded(&never);
        std::fs::remove_file(
            d.path()
                .join(format!("sys/fs/btrfs/{UUID}/devinfo/1/scrub_speed_max")),
        )
        .unwrap();
        let b = Btrfs::open(&target(), &cfg, c).unwrap();
        assert!(b.bucket.is_some());
        assert!(b.rate_limit.unwrap().contains("fallow pacing"));
    }
}
