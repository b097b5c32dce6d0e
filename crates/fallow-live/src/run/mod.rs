//! `fallow run -- CMD`: a maintenance command (a backup, an rsync, a
//! compaction) that runs only in the idle time a policy picks, paused and
//! resumed as a whole.
//!
//! - [`freezer`]: pausing (cgroup v2, cgroup v1, or signals).
//! - [`guardian`]: the process that thaws the command if fallow dies.
//! - [`io`]: the command's own disk I/O, which the monitor subtracts.
//! - [`frozen_io`]: the reads it goes on doing while frozen (work in the
//!   kernel that freezing cannot pause), counted apart from frozen time.
//! - [`watch`]: which disk to watch ([`WatchedDisk`]).
//!
//! [`Managed`] is the command, and the [`BgExecutor`] a
//! [`crate::Driver`] runs: one BG "request" lets the command run for one
//! slice; between back-to-back requests it keeps running, and it is
//! frozen as soon as the driver stops issuing requests
//! ([`BgExecutor::pause`]: an FG arrival, a policy's wait, the end).
//!
//! ## Example
//! A command run by the `aggressive` policy on a device nobody else uses,
//! paused with signals (no privileges needed) and without a guardian.
//! ```
//! use fallow_live::run::{CommandSpec, FreezerKind, Managed, RunConfig};
//! use fallow_live::{Driver, DriverConfig, Monitor};
//! use std::sync::atomic::AtomicBool;
//! use std::sync::Arc;
//!
//! let cmd = CommandSpec {
//!     program: "sh".into(),
//!     args: vec!["-c".into(), "sleep 0.05; exit 3".into()],
//!     netns: None,
//! };
//! let cfg = RunConfig {
//!     freezer: Some(FreezerKind::Signal),
//!     slice_ns: 20_000_000,
//!     account_dev: None,
//!     guardian: None,
//! };
//! let stop = Arc::new(AtomicBool::new(false)); // raised when the command exits
//! let mut cmd = Managed::spawn(&cmd, &cfg, stop.clone())?;
//! let mut driver = Driver::from_spec("aggressive", DriverConfig::default())?;
//! let report = driver.run(&mut Monitor::without_device(), &mut cmd, &stop)?;
//! assert!(report.bg_requests >= 2); // 50 ms of work in 20 ms slices
//! let end = cmd.finish()?;
//! assert_eq!(end.status.code(), Some(3));
//! assert!(end.stats.running_s >= 0.05);
//! # Ok::<(), fallow_live::Error>(())
//! ```
//!
//! ## Starting without a window
//! The command must be in its cgroup (and frozen) before it executes a
//! single instruction of its own. It is started through a trampoline,
//! `sh -c 'kill -STOP $$; exec "$@"'`, in a new process group: the shell
//! stops itself; fallow, seeing it stopped, moves it into the frozen
//! cgroups, tells the guardian its process group and sends `SIGCONT`,
//! which the freezer holds until the policy lets the command run; then
//! the shell `exec`s the command (same pid). With the signal freezer the
//! trampoline simply stays stopped until the first thaw, and it ignores
//! `SIGHUP` (kept across `exec`, as `nohup` does): when a process group
//! with a stopped member loses its parent, the kernel sends it `SIGHUP`
//! (POSIX orphaned process groups), which would kill the command if fallow
//! died while it was paused.

pub mod freezer;
pub mod frozen_io;
pub mod guardian;
pub mod io;
pub mod session;
pub mod watch;

pub use freezer::{CgroupLayout, Freezer, FreezerKind};
pub use frozen_io::{
    native_alternative, FrozenIoNotice, FrozenIoProbe, FrozenIoStats, FrozenIoWatch, OnFrozenIo,
};
pub use guardian::{guard, GuardReport, Guardian, GuardianSpec, ReleaseAction};
pub use io::{BlkioIo, IoAccounting, Linger, Members, ProcGroupIo};
pub use session::{RunNote, RunOutcome, RunSession, RunSignals};
pub use watch::WatchedDisk;

use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::{CgroupIo, CommandIo, OwnIoSource};
use rustix::process::{kill_process, Pid, Signal, WaitId, WaitIdOptions};
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The trampoline for cgroup freezers: stop, then become the command.
const TRAMPOLINE: &str = r#"kill -STOP $$ && exec "$@""#;

/// The trampoline for the signal freezer (see the module documentation).
const TRAMPOLINE_SIGNAL: &str = r#"trap '' HUP && kill -STOP $$ && exec "$@""#;

pub use crate::run_kinds::SLICE_RANGE_NS;

/// The command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// Program (looked up in `PATH` when it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Run it in this network namespace (`ip netns exec NAME`), so that
    /// its traffic is apart from the monitored interface's.
    pub netns: Option<String>,
}

/// Where `program` is: itself if it has a `/`, else the first executable
/// of that name on `path` (a `PATH` value).
pub fn find_program(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    let is_exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    if program.is_empty() {
        return None;
    }
    std::env::split_paths(path?)
        .map(|d| {
            if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d
            }
        })
        .map(|d| d.join(program))
        .find(|p| is_exec(p))
}

impl CommandSpec {
    /// Check that the command can be started, so that a typo is a clear
    /// error rather than a shell's exit status 127.
    pub fn check(&self) -> Result<()> {
        let path = std::env::var_os("PATH");
        if find_program(&self.program, path.as_deref()).is_none() {
            let shown = self.program.to_string_lossy();
            return Err(if self.program.as_bytes().contains(&b'/') {
                Error::invalid(
                    "command",
                    format!("`{shown}` does not exist or is not executable"),
                )
            } else {
                Error::invalid(
                    "command",
                    format!("`{shown}` is not found in PATH (or is not executable)"),
                )
            });
        }
        if let Some(ns) = &self.netns {
            if ns.is_empty() || ns.contains('/') {
                return Err(Error::invalid(
                    "--netns",
                    format!("`{ns}` is not a namespace name"),
                ));
            }
            let f = Path::new("/run/netns").join(ns);
            if !f.exists() {
                return Err(Error::invalid(
                    "--netns",
                    format!(
                        "no network namespace `{ns}` ({} does not exist; `ip netns add {ns}` makes one)",
                        f.display()
                    ),
                ));
            }
            if !rustix::process::geteuid().is_root() {
                return Err(Error::Unsupported(
                    "--netns needs root (`ip netns exec` enters the namespace with setns)".into(),
                ));
            }
            if find_program(OsStr::new("ip"), path.as_deref()).is_none() {
                return Err(Error::Unsupported(
                    "--netns needs the `ip` command (iproute2), which is not in PATH".into(),
                ));
            }
        }
        Ok(())
    }

    /// The argument vector the trampoline `exec`s.
    fn argv(&self) -> Vec<OsString> {
        let mut v = Vec::new();
        if let Some(ns) = &self.netns {
            v.extend(["ip", "netns", "exec"].map(OsString::from));
            v.push(ns.into());
        }
        v.push(self.program.clone());
        v.extend(self.args.iter().cloned());
        v
    }
}

/// How to start the guardian: `program leading_args…` followed by the
/// spec's arguments (`fallow __guardian …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardianCommand {
    /// The program (fallow itself).
    pub program: PathBuf,
    /// Arguments before the spec's (`__guardian`).
    pub leading_args: Vec<OsString>,
}

/// Settings of a managed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    /// How to freeze it; `None`: the best available.
    pub freezer: Option<FreezerKind>,
    /// How long one BG request lets it run, ns.
    pub slice_ns: u64,
    /// The monitored disk (`major:minor`), whose I/O of the command is
    /// counted; `None`: not counted (the monitor does not watch a disk).
    pub account_dev: Option<(u32, u32)>,
    /// The guardian; `None` runs without one (the command may then stay
    /// frozen if this process is killed: for tests only).
    pub guardian: Option<GuardianCommand>,
}

/// What a managed command did, for reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunStats {
    /// Slices (BG requests) run.
    pub slices: u64,
    /// Times it was thawed.
    pub thaws: u64,
    /// Time it was allowed to run, s.
    pub running_s: f64,
    /// Time it was frozen, s: frozen in effect, without
    /// [`RunStats::frozen_io_s`].
    pub frozen_s: f64,
    /// Time it was frozen but went on reading (work in the kernel that
    /// freezing does not pause), s; not part of `frozen_s`.
    pub frozen_io_s: f64,
    /// Bytes it read while frozen, beyond the tail a freeze lets through.
    pub frozen_io_bytes: u64,
    /// Frozen intervals in which it went on reading.
    pub frozen_io_intervals: u64,
}

#[derive(Debug, Default)]
struct ExitWatch {
    exited: Mutex<bool>,
    cv: Condvar,
}

impl ExitWatch {
    fn exited(&self) -> bool {
        *self.exited.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait up to `ns` for the exit; true if it has happened.
    fn wait_ns(&self, ns: u64) -> bool {
        let g = self.exited.lock().unwrap_or_else(|p| p.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, Duration::from_nanos(ns), |e| !*e)
            .unwrap_or_else(|p| p.into_inner());
        *g
    }
}

/// How a managed command ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it did.
    pub stats: RunStats,
    /// Cleanup that could not be done now (a cgroup a leftover child of
    /// the command still uses; the guardian removes it later), in words.
    pub left_behind: Vec<String>,
}

/// A running command under fallow's control.
pub struct Managed {
    child: Child,
    pid: u32,
    freezer: Freezer,
    accounting: IoAccounting,
    own_io: Option<Arc<dyn OwnIoSource>>,
    blkio_dir: Option<PathBuf>,
    guardian: Option<Guardian>,
    exit: Arc<ExitWatch>,
    slice_ns: u64,
    running_since_ns: Option<u64>,
    frozen_since_ns: Option<u64>,
    frozen_io: Option<FrozenIoWatch>,
    stats: RunStats,
    status: Option<ExitStatus>,
}

impl std::fmt::Debug for Managed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Managed")
            .field("pid", &self.pid)
            .field("freezer", &self.freezer)
            .field("accounting", &self.accounting)
            .field("guardian", &self.guardian)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The exit code a shell would report: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

impl Managed {
    /// Start `cmd` frozen under `cfg`; `wake` is raised when it exits (so a
    /// driver waiting for idle time notices). Everything made on the way
    /// is undone if a later step fails.
    pub fn spawn(cmd: &CommandSpec, cfg: &RunConfig, wake: Arc<AtomicBool>) -> Result<Managed> {
        if !(SLICE_RANGE_NS.0..=SLICE_RANGE_NS.1).contains(&cfg.slice_ns) {
            return Err(Error::invalid(
                "--slice",
                format!("{} ns: use 1 ms to 60 s", cfg.slice_ns),
            ));
        }
        cmd.check()?;
        let layout = match CgroupLayout::of_this_process() {
            Ok(l) => l,
            // no /proc/self/cgroup: only signals can work
            Err(_) if cfg.freezer.is_none() => CgroupLayout::default(),
            Err(e) => return Err(e),
        };
        let name = unique_cgroup_name();
        let mut freezer = Freezer::create(cfg.freezer, &layout, &name)?;
        let (accounting, blkio_dir) = command_accounting(cfg, &freezer, &layout, &name);
        let mut guardian = match &cfg.guardian {
            Some(g) => match start_guardian(g, &freezer, &blkio_dir) {
                Ok(g) => Some(g),
                Err(e) => {
                    remove_blkio_cgroup(&blkio_dir);
                    return Err(e);
                }
            },
            None => None,
        };
        let mut child = match start_trampoline(cmd, &freezer) {
            Ok(c) => c,
            Err(e) => {
                remove_blkio_cgroup(&blkio_dir);
                return Err(e);
            }
        };
        let pid = child.id();
        hold_frozen(&mut child, &mut freezer, &blkio_dir, guardian.as_mut())?;
        let own_io = own_io_source(&accounting, cfg.account_dev, &freezer, pid);
        let frozen_at_ns = monotonic_ns();
        let frozen_io = FrozenIoWatch::start(
            read_bytes_of(&accounting, cfg.account_dev, &freezer, pid),
            is_frozen_of(&freezer, pid),
            frozen_at_ns,
        )
        .map_err(|e| Error::io("thread", "cannot start the frozen-I/O watch", e))?;
        let exit = watch_exit(pid, wake)?;
        Ok(Managed {
            child,
            pid,
            freezer,
            accounting,
            own_io,
            blkio_dir,
            guardian,
            exit,
            slice_ns: cfg.slice_ns,
            running_since_ns: None,
            frozen_since_ns: Some(frozen_at_ns),
            frozen_io: Some(frozen_io),
            stats: RunStats::default(),
            status: None,
        })
    }

    /// The command's pid, which is also its process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The freezer in use.
    pub fn freezer(&self) -> &Freezer {
        &self.freezer
    }

    /// How the command's I/O is counted.
    pub fn accounting(&self) -> &IoAccounting {
        &self.accounting
    }

    /// The command's I/O on the monitored disk, for the monitor to subtract.
    pub fn own_io(&self) -> Option<Arc<dyn OwnIoSource>> {
        self.own_io.clone()
    }

    /// The guardian's pid, if there is one.
    pub fn guardian_pid(&self) -> Option<u32> {
        self.guardian.as_ref().map(Guardian::pid)
    }

    /// The blkio cgroup made to count the command's I/O (cgroup v1).
    pub fn blkio_dir(&self) -> Option<&Path> {
        self.blkio_dir.as_deref()
    }

    /// True once the command has exited.
    pub fn has_exited(&self) -> bool {
        self.exit.exited()
    }

    /// What it has done so far.
    pub fn stats(&self) -> RunStats {
        let mut s = self.stats.clone();
        let now = monotonic_ns();
        if let Some(t) = self.running_since_ns {
            s.running_s += (now - t) as f64 / 1e9;
        }
        if let Some(t) = self.frozen_since_ns {
            let leak_s = self
                .frozen_io
                .as_ref()
                .map_or(0.0, |w| w.leaking_now_s(now));
            s.frozen_s += ((now - t) as f64 / 1e9 - leak_s).max(0.0);
            s.frozen_io_s += leak_s;
        }
        if let Some(w) = &self.frozen_io {
            let f = w.stats();
            (s.frozen_io_bytes, s.frozen_io_intervals) = (f.bytes, f.intervals);
        }
        s
    }

    /// Call `f` (from another thread) as soon as the command is seen
    /// reading while frozen, once.
    pub fn on_frozen_io(&self, f: OnFrozenIo) {
        if let Some(w) = &self.frozen_io {
            w.on_frozen_io(f);
        }
    }

    /// Reads the frozen-I/O totals from another thread (metrics).
    pub fn frozen_io_probe(&self) -> Option<FrozenIoProbe> {
        self.frozen_io.as_ref().map(FrozenIoWatch::probe)
    }

    /// Let it run (no-op if it is running).
    pub fn resume(&mut self) -> Result<()> {
        if self.running_since_ns.is_some() {
            return Ok(());
        }
        self.freezer.thaw()?;
        let now = monotonic_ns();
        let leak_s = self.frozen_io.as_ref().map_or(0.0, |w| w.thawed(now));
        if let Some(t) = self.frozen_since_ns.take() {
            // time it went on reading was not frozen time
            self.stats.frozen_s += ((now - t) as f64 / 1e9 - leak_s).max(0.0);
            self.stats.frozen_io_s += leak_s;
        }
        self.stats.thaws += 1;
        self.running_since_ns = Some(now);
        Ok(())
    }

    /// Pause it (no-op if it is paused or has exited).
    pub fn suspend(&mut self) -> Result<()> {
        let Some(t) = self.running_since_ns else {
            return Ok(());
        };
        if !self.has_exited() {
            self.freezer.freeze()?;
        }
        let now = monotonic_ns();
        self.stats.running_s += (now - t) as f64 / 1e9;
        self.running_since_ns = None;
        self.frozen_since_ns = Some(now);
        if let Some(w) = &self.frozen_io {
            w.frozen(now);
        }
        Ok(())
    }

    /// Thaw it and send `sig` to its process group.
    pub fn signal(&mut self, sig: Signal) -> Result<()> {
        self.resume()?;
        freezer::signal_group(self.pid, sig)
    }

    /// Pass on a Ctrl-C: thaw it and send `SIGINT` to its process group.
    pub fn interrupt(&mut self) -> Result<()> {
        self.signal(Signal::INT)
    }

    /// End it (`SIGKILL` to its process group), e.g. when the monitor
    /// cannot start and it has not run yet; then [`Managed::finish`].
    pub fn kill(&mut self) -> Result<()> {
        self.signal(Signal::KILL)
    }

    /// Wait for it to exit (running it unpaused), then remove its cgroups
    /// and release the guardian. A cgroup that cannot be removed (a child
    /// of the command still runs in it) is left to the guardian, which
    /// removes it once empty, and named in [`Finished::left_behind`].
    pub fn finish(mut self) -> Result<Finished> {
        self.resume()?;
        let status = match self.status {
            Some(s) => s,
            None => self
                .child
                .wait()
                .map_err(|e| Error::io(format!("process {}", self.pid), "cannot wait for", e))?,
        };
        self.status = Some(status);
        let stats = self.stats();
        let left_behind = self.cleanup();
        Ok(Finished {
            status,
            stats,
            left_behind,
        })
    }

    fn cleanup(&mut self) -> Vec<String> {
        // children of the command may outlive it (`sh -c 'job &'`): they
        // keep its cgroups until they go
        const PATIENCE_MS: u64 = 200;
        let mut problems: Vec<String> = Vec::new();
        if let Err(e) = self.freezer.remove(PATIENCE_MS) {
            problems.push(e.to_string());
        }
        if let Some(d) = self.blkio_dir.take() {
            if let Err(e) = freezer::remove_cgroup(&d, PATIENCE_MS) {
                problems.push(e.to_string());
            }
        }
        if let Some(g) = self.guardian.take() {
            if !problems.is_empty() {
                // what is left is the guardian's to clean up later
                g.hand_over();
            } else if let Err(e) = g.release() {
                problems.push(e.to_string());
            }
        }
        problems
    }

    /// Stop managing it: thaw it and leave it running, its cgroups to the
    /// guardian (which removes them once the command's processes are gone).
    pub fn detach(mut self) -> Result<()> {
        self.resume()?;
        if let Some(g) = self.guardian.take() {
            g.hand_over();
        }
        Ok(())
    }
}

impl BgExecutor for Managed {
    fn run_one(&mut self, _size_bytes: u64) -> Result<Step> {
        if self.has_exited() {
            return Ok(Step::Finished);
        }
        self.resume()?;
        self.stats.slices += 1;
        Ok(if self.exit.wait_ns(self.slice_ns) {
            Step::Finished
        } else {
            Step::More
        })
    }

    fn pause(&mut self) -> Result<()> {
        self.suspend()
    }
}

/// The name of a managed command's cgroups: unique per process and per
/// command (a library may manage several).
fn unique_cgroup_name() -> String {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "fallow-run-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// How the command's I/O on `cfg.account_dev` is counted: v2 io.stat
/// where the io controller is on, else v1 blkio (in a cgroup `name` made
/// for it, returned to be removed at the end), else /proc.
fn command_accounting(
    cfg: &RunConfig,
    freezer: &Freezer,
    layout: &CgroupLayout,
    name: &str,
) -> (IoAccounting, Option<PathBuf>) {
    let mut blkio_dir = None;
    let accounting = match cfg.account_dev {
        None => IoAccounting::None,
        Some(dev) => match freezer.cgroup_dir() {
            Some(d) if freezer.kind() == FreezerKind::Cgroup2 && d.join("io.stat").exists() => {
                IoAccounting::CgroupV2(d.to_path_buf())
            }
            _ => match layout.v1_dir("blkio").map(|d| d.join(name)) {
                Some(d) if io::make_blkio_cgroup(&d, dev).is_ok() => {
                    blkio_dir = Some(d.clone());
                    IoAccounting::BlkioV1(d)
                }
                _ => IoAccounting::Proc,
            },
        },
    };
    (accounting, blkio_dir)
}

/// Remove the blkio cgroup made by [`command_accounting`], if any: a step
/// after it failed.
fn remove_blkio_cgroup(blkio_dir: &Option<PathBuf>) {
    if let Some(d) = blkio_dir {
        let _ = freezer::remove_cgroup(d, 0);
    }
}

/// Start the guardian `g` over the command's freezer and cgroups.
fn start_guardian(
    g: &GuardianCommand,
    freezer: &Freezer,
    blkio_dir: &Option<PathBuf>,
) -> Result<Guardian> {
    let spec = GuardianSpec {
        kind: freezer.kind(),
        control: freezer.control(),
        cgroups: freezer
            .cgroup_dir()
            .map(Path::to_path_buf)
            .into_iter()
            .chain(blkio_dir.clone())
            .collect(),
        release: vec![],
    };
    Guardian::spawn(&g.program, &g.leading_args, &spec)
}

/// Start `cmd` behind the trampoline that stops it before its first
/// instruction (see the module documentation), in a new process group.
fn start_trampoline(cmd: &CommandSpec, freezer: &Freezer) -> Result<Child> {
    let script = if freezer.kind() == FreezerKind::Signal {
        TRAMPOLINE_SIGNAL
    } else {
        TRAMPOLINE
    };
    Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .arg("fallow-run")
        .args(cmd.argv())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("/bin/sh", "cannot start the command's trampoline", e))
}

/// Wait until the trampoline has stopped itself, then put it into the
/// freezer ([`enter_freezer`]). On failure the child is killed and
/// reaped and the blkio cgroup removed.
fn hold_frozen(
    child: &mut Child,
    freezer: &mut Freezer,
    blkio_dir: &Option<PathBuf>,
    guardian: Option<&mut Guardian>,
) -> Result<()> {
    let pid = child.id();
    // kill first, then thaw: a v1-frozen process acts on SIGKILL only
    // once thawed, and then dies before running another instruction
    let fail = |child: &mut Child, freezer: &mut Freezer, e: Error| {
        let _ = child.kill();
        let _ = freezer.thaw();
        let _ = child.wait();
        remove_blkio_cgroup(blkio_dir);
        e
    };
    match wait_stopped(pid) {
        Ok(true) => {}
        Ok(false) => {
            let st = child.wait().map(exit_code).unwrap_or(-1);
            remove_blkio_cgroup(blkio_dir);
            return Err(Error::Unsupported(format!(
                "the command's trampoline (/bin/sh) exited with status {st} before it started the command"
            )));
        }
        Err(e) => return Err(fail(child, freezer, e)),
    }
    enter_freezer(pid, freezer, blkio_dir, guardian).map_err(|e| fail(child, freezer, e))
}

/// Move the stopped trampoline `pid` into the freezer and the blkio
/// cgroup, tell the guardian its process group, and continue it where a
/// cgroup holds it frozen.
fn enter_freezer(
    pid: u32,
    freezer: &mut Freezer,
    blkio_dir: &Option<PathBuf>,
    guardian: Option<&mut Guardian>,
) -> Result<()> {
    freezer.attach(pid)?;
    if let Some(d) = blkio_dir {
        freezer::move_into(d, pid)?;
    }
    if let Some(g) = guardian {
        g.watch_group(pid)?;
    }
    if freezer.kind() != FreezerKind::Signal {
        // the cgroup holds it frozen from here
        let p = Pid::from_raw(pid as i32).expect("a child's pid is positive");
        kill_process(p, Signal::CONT)
            .map_err(|e| Error::io(format!("process {pid}"), "cannot continue", e.into()))?;
    }
    Ok(())
}

/// The command's I/O on the monitored disk as the monitor subtracts it,
/// from its `accounting`.
fn own_io_source(
    accounting: &IoAccounting,
    account_dev: Option<(u32, u32)>,
    freezer: &Freezer,
    pid: u32,
) -> Option<Arc<dyn OwnIoSource>> {
    let grace = io::Linger::<CgroupIo>::DEFAULT_GRACE_NS;
    let counters: Option<Box<dyn OwnIoSource>> = match (accounting, account_dev) {
        (IoAccounting::CgroupV2(d), Some(dev)) => {
            Some(Box::new(io::Linger::new(CgroupIo::new(d, dev), grace)))
        }
        (IoAccounting::BlkioV1(d), Some(dev)) => {
            Some(Box::new(io::Linger::new(BlkioIo::new(d, dev), grace)))
        }
        (IoAccounting::Proc, _) => Some(Box::new(io::Linger::new(
            ProcGroupIo::new(match freezer.cgroup_dir() {
                Some(d) => Members::Cgroup(d.to_path_buf()),
                None => Members::Tree(pid),
            }),
            grace,
        ))),
        _ => None,
    };
    // in a v2 cgroup of its own, the event monitor can tell the
    // command's bios apart by cgroup (monitor::cgroup_bios); the
    // counters stay for its writes and for the poller
    match (counters, freezer.cgroup_dir()) {
        (Some(c), Some(d)) if freezer.kind() == FreezerKind::Cgroup2 => {
            Some(Arc::new(CommandIo::new(d, c)))
        }
        (Some(c), _) => Some(Arc::from(c)),
        (None, _) => None,
    }
}

/// A thread that sees the command `pid` exit (without reaping it), then
/// raises `wake` and the returned watch.
fn watch_exit(pid: u32, wake: Arc<AtomicBool>) -> Result<Arc<ExitWatch>> {
    let exit = Arc::new(ExitWatch::default());
    let exit2 = exit.clone();
    std::thread::Builder::new()
        .name("fallow-run-exit".into())
        .spawn(move || {
            let p = Pid::from_raw(pid as i32).expect("a child's pid is positive");
            // NOWAIT: see the exit without reaping (Child::wait reaps)
            while let Err(rustix::io::Errno::INTR) = rustix::process::waitid(
                WaitId::Pid(p),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {}
            // wake first: whoever sees `exited` may rely on it being raised
            wake.store(true, Ordering::SeqCst);
            *exit2.exited.lock().unwrap_or_else(|p| p.into_inner()) = true;
            exit2.cv.notify_all();
        })
        .map_err(|e| Error::io("thread", "cannot start the exit watcher", e))?;
    Ok(exit)
}

/// The bytes read charged to the command, as the frozen-I/O watch reads
/// them: its cgroup's counters on the watched disk where there are some
/// (own instances: the monitor's keep their own state), else its
/// processes' `/proc/<pid>/io`, which needs no disk.
fn read_bytes_of(
    accounting: &IoAccounting,
    dev: Option<(u32, u32)>,
    freezer: &Freezer,
    pid: u32,
) -> frozen_io::ReadBytes {
    use crate::monitor::OwnIoSource;
    const SECTOR: u64 = crate::monitor::stat::STAT_SECTOR_BYTES;
    match (accounting, dev) {
        (IoAccounting::CgroupV2(d), Some(dev)) => {
            let src = CgroupIo::new(d, dev);
            Box::new(move || Some(src.snapshot().read_sectors * SECTOR))
        }
        (IoAccounting::BlkioV1(d), Some(dev)) => {
            let src = BlkioIo::new(d, dev);
            Box::new(move || Some(src.snapshot().read_sectors * SECTOR))
        }
        _ => {
            let src = ProcGroupIo::new(match freezer.cgroup_dir() {
                Some(d) => Members::Cgroup(d.to_path_buf()),
                None => Members::Tree(pid),
            });
            Box::new(move || Some(src.totals().0))
        }
    }
}

/// Whether the freezer has every process of the command frozen, as the
/// kernel says: `cgroup.events` `frozen 1` (v2), `freezer.state`
/// `FROZEN` (v1), or the leader in state `T` (signals).
fn is_frozen_of(freezer: &Freezer, pid: u32) -> frozen_io::IsFrozen {
    let control = freezer.control();
    match (freezer.kind(), control) {
        (FreezerKind::Cgroup2, Some(c)) => {
            let events = c.with_file_name("cgroup.events");
            Box::new(move || {
                std::fs::read_to_string(&events)
                    .map(|t| t.lines().any(|l| l.trim() == "frozen 1"))
                    .unwrap_or(false)
            })
        }
        (FreezerKind::Cgroup1, Some(c)) => Box::new(move || {
            std::fs::read_to_string(&c)
                .map(|t| t.trim() == "FROZEN")
                .unwrap_or(false)
        }),
        _ => Box::new(move || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| crate::monitor::stat_field(&s, 0).map(|st| st == "T"))
                .unwrap_or(false)
        }),
    }
}

/// Wait until process `pid` (a child) has stopped (true) or exited (false).
fn wait_stopped(pid: u32) -> Result<bool> {
    let p = Pid::from_raw(pid as i32).expect("a child's pid is positive");
    loop {
        match rustix::process::waitid(
            WaitId::Pid(p),
            WaitIdOptions::STOPPED | WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(st)) => return Ok(st.stopped()),
            Ok(None) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                return Err(Error::io(
                    format!("process {pid}"),
                    "cannot wait for the trampoline",
                    e.into(),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_like_a_shell() {
        let path = std::env::var_os("PATH");
        assert!(find_program(OsStr::new("sh"), path.as_deref()).is_some());
        assert!(find_program(OsStr::new("/bin/sh"), None).is_some());
        assert!(find_program(OsStr::new("no-such-program-fallow"), path.as_deref()).is_none());
        assert!(
            find_program(OsStr::new("/etc/passwd"), None).is_none(),
            "not executable"
        );
        assert!(find_program(OsStr::new(""), path.as_deref()).is_none());
    }

    #[test]
    fn bad_commands_are_clear_errors() {
        let spec = |p: &str, ns: Option<&str>| CommandSpec {
            program: p.into(),
            args: vec![],
            netns: ns.map(String::from),
        };
        let e = spec("no-such-program-fallow", None)
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("not found in PATH"), "{e}");
        let e = spec("/nope/x", None).check().unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
        let e = spec("sh", Some("fallow-no-such-ns"))
            .check()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no network namespace `fallow-no-such-ns`"),
            "{e}"
        );
        let e = spec("sh", Some("../x")).check().unwrap_err().to_string();
        assert!(e.contains("not a namespace name"), "{e}");
    }

    #[test]
    fn exit_codes_like_a_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        // killed by SIGTERM (15)
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }

    fn cfg(kind: FreezerKind) -> RunConfig {
        RunConfig {
            freezer: Some(kind),
            slice_ns: 20_000_000,
            account_dev: None,
            guardian: None,
        }
    }

    fn sh(script: &str) -> CommandSpec {
        CommandSpec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            netns: None,
        }
    }

    /// Lines of a file the command appends to.
    fn lines(p: &Path) -> usize {
        std::fs::read_to_string(p)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// The command does nothing until resumed, stops when suspended, and
    /// its exit status comes through.
    fn frozen_until_resumed(kind: FreezerKind) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ticks");
        let script = format!(
            "i=0; while [ $i -lt 40 ]; do echo $i >> {}; i=$((i+1)); sleep 0.01; done; exit 5",
            out.display()
        );
        let wake = Arc::new(AtomicBool::new(false));
        let mut m = match Managed::spawn(&sh(&script), &cfg(kind), wake.clone()) {
            Ok(m) => m,
            Err(e) if kind != FreezerKind::Signal => {
                eprintln!("skip: the {kind} freezer is not available here: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(m.freezer().kind(), kind);
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(lines(&out), 0, "it ran while frozen");
        assert_eq!(m.run_one(1).unwrap(), Step::More);
        std::thread::sleep(Duration::from_millis(50));
        m.pause().unwrap();
        let n = lines(&out);
        assert!(n > 0, "it did not run when resumed");
        // frozen again: no more lines (one in progress may land)
        std::thread::sleep(Duration::from_millis(150));
        assert!(lines(&out) <= n + 1, "{} > {n} + 1", lines(&out));
        // run to the end
        while m.run_one(1).unwrap() == Step::More {}
        assert!(wake.load(Ordering::SeqCst));
        let cg = m.freezer().cgroup_dir().map(Path::to_path_buf);
        let end = m.finish().unwrap();
        let (st, stats) = (end.status, end.stats);
        assert!(end.left_behind.is_empty(), "{:?}", end.left_behind);
        assert_eq!(exit_code(st), 5);
        assert!(
            stats.slices >= 2 && stats.running_s > 0.0 && stats.frozen_s > 0.2,
            "{stats:?}"
        );
        assert_eq!(lines(&out), 40);
        if let Some(cg) = cg {
            assert!(!cg.exists(), "the cgroup {} was not removed", cg.display());
        }
    }

    #[test]
    fn signal_freezer_holds_and_releases() {
        frozen_until_resumed(FreezerKind::Signal);
    }

    #[test]
    fn cgroup2_freezer_holds_and_releases() {
        frozen_until_resumed(FreezerKind::Cgroup2);
    }

    #[test]
    fn cgroup1_freezer_holds_and_releases() {
        frozen_until_resumed(FreezerKind::Cgroup1);
    }

    #[test]
    fn a_command_killed_while_frozen_ends_the_wait() {
        let wake = Arc::new(AtomicBool::new(false));
        let m = Managed::spawn(&sh("sleep 30"), &cfg(FreezerKind::Signal), wake.clone()).unwrap();
        // SIGKILL works on a stopped process
        freezer::signal_group(m.pid(), Signal::KILL).unwrap();
        let t0 = monotonic_ns();
        while !wake.load(Ordering::SeqCst) {
            assert!(monotonic_ns() - t0 < 5_000_000_000, "no wake within 5 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(m.has_exited());
        assert_eq!(exit_code(m.finish().unwrap().status), 128 + 9);
    }

    #[test]
    fn bad_slices_are_refused() {
        let mut c = cfg(FreezerKind::Signal);
        c.slice_ns = 10;
        let e = Managed::spawn(&sh("true"), &c, Arc::new(AtomicBool::new(false)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--slice"), "{e}");
    }
}
