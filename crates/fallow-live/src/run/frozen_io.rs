//! What a frozen command still does: the I/O charged to it while it is
//! frozen, so that `fallow run` says at once when freezing pauses nothing.
//!
//! Much maintenance runs in the kernel: a btrfs scrub's reads are issued
//! inside its `BTRFS_IOC_SCRUB` ioctl, an md check by a kernel thread, a
//! ZFS scrub by the pool's sync thread, `fstrim` in one `FITRIM` ioctl.
//! Freezing the process that asked for it pauses none of that. Measured
//! here (btrfs over a loop device, `btrfs scrub start -B` in a cgroup v2
//! freezer and a v1 blkio cgroup): one second after `cgroup.freeze` was
//! set the blkio cgroup had been charged 546 MB of reads and the device
//! had read 546 MB, while the scrub's ioctl thread sat in `D` state and
//! `cgroup.events` never reached `frozen 1` (docs/run.md).
//!
//! [`FrozenIoWatch`] polls the bytes read that are charged to the command
//! (its cgroup's `io.stat`, its v1 blkio cgroup, or its processes'
//! `/proc/<pid>/io`) every [`FrozenIoWatch::POLL_NS`] while it is frozen.
//! The count starts once the freezer says every process is frozen
//! (`cgroup.events` `frozen 1`, `freezer.state` `FROZEN`, state `T`): a
//! read syscall in progress at the freeze finishes first, and its I/O is
//! the command's own doing. If the freezer has not got there after
//! [`FrozenIoWatch::SETTLE_MAX_NS`] (a thread held in the kernel, as the
//! btrfs scrub's is), the count starts [`FrozenIoWatch::SETTLE_NS`] after
//! the freeze request. Reads that grow by more than
//! [`FrozenIoWatch::SLACK_BYTES`] from there mark the interval "frozen but
//! still doing I/O": from the last poll that saw no growth until the
//! command is thawed, that time is not frozen time.
//! Only reads count: write-back of a writer's dirty pages after it is
//! frozen is charged to it under cgroup v2 and is not work it goes on
//! doing. [`native_alternative`] names the executor that can pause a
//! recognised command.

use crate::clock::monotonic_ns;
use serde::Serialize;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bytes read charged to the command so far (cumulative), or `None` when
/// they cannot be read now.
pub type ReadBytes = Box<dyn Fn() -> Option<u64> + Send>;

/// True when the freezer has frozen every process of the command.
pub type IsFrozen = Box<dyn Fn() -> bool + Send>;

/// Told once, at the first frozen interval in which the command kept
/// reading.
pub type OnFrozenIo = Box<dyn FnMut(&FrozenIoNotice) + Send>;

/// The first sign that freezing does not pause the command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrozenIoNotice {
    /// Bytes it read after the freeze had settled, up to this notice.
    pub bytes: u64,
    /// How long after the freeze request it was noticed, s.
    pub after_freeze_s: f64,
}

/// Totals of the frozen intervals in which the command kept reading.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FrozenIoStats {
    /// Frozen intervals in which it read more than the slack.
    pub intervals: u64,
    /// Bytes it read in those intervals after the freeze had settled.
    pub bytes: u64,
    /// Time of those intervals that was not frozen in effect, s (counted
    /// apart from the frozen time).
    pub seconds: f64,
}

#[derive(Default)]
struct State {
    /// The current frozen interval began (freeze requested) at.
    frozen_since_ns: Option<u64>,
    /// Bytes read when the freeze had settled (or while it settles).
    baseline: Option<u64>,
    /// The freeze has settled: growth from the baseline counts.
    settled: bool,
    /// Bytes read at the last poll, and when it was taken.
    last: u64,
    /// Time of the last poll that saw no growth since the one before.
    still_ns: Option<u64>,
    /// The interval is one of I/O since then.
    leaking_since_ns: Option<u64>,
    /// Looks that saw the count grow since the count started.
    growing_polls: u32,
    stats: FrozenIoStats,
    notified: bool,
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
    notify: Mutex<Option<OnFrozenIo>>,
}

/// Watches a command's reads while it is frozen (see the module doc).
pub struct FrozenIoWatch {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for FrozenIoWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenIoWatch")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl FrozenIoWatch {
    /// How often the reads are looked at while frozen, ns: well inside the
    /// second within which `fallow run` must say so.
    pub const POLL_NS: u64 = 50_000_000;
    /// Time after a freeze request from which reads count when the
    /// freezer never says it has frozen everything, ns.
    pub const SETTLE_NS: u64 = 100_000_000;
    /// How long to wait for the freezer to say so, ns: a process that has
    /// not frozen by then is held in the kernel; with
    /// [`FrozenIoWatch::POLL_NS`] it is seen within 300 ms of the freeze.
    /// A plain command's read syscall in progress at the freeze (1 MiB
    /// buffered: milliseconds) ends long before.
    pub const SETTLE_MAX_NS: u64 = 250_000_000;
    /// Reads after the freeze has settled that still count as the tail of
    /// what it was doing, bytes: a read syscall held in `D` state on a
    /// loaded disk past [`FrozenIoWatch::SETTLE_MAX_NS`] ends with its read
    /// and readahead (2.5 MiB for `dd bs=1M`, measured), once.
    pub const SLACK_BYTES: u64 = 4 << 20;
    /// Looks that must see the count grow: work in the kernel goes on,
    /// a syscall's tail lands at once.
    pub const GROWING_POLLS: u32 = 2;

    /// Start watching with `read_bytes` and `is_frozen`; the command
    /// starts frozen (as [`crate::run::Managed`] spawns it) at
    /// `frozen_since_ns`.
    pub fn start(
        read_bytes: ReadBytes,
        is_frozen: IsFrozen,
        frozen_since_ns: u64,
    ) -> std::io::Result<FrozenIoWatch> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                frozen_since_ns: Some(frozen_since_ns),
                ..State::default()
            }),
            stop: AtomicBool::new(false),
            notify: Mutex::new(None),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fallow-frozen-io".into())
            .spawn(move || {
                while !s2.stop.load(Ordering::Relaxed) {
                    let frozen = s2.state.lock().map(|s| s.frozen_since_ns.is_some());
                    let notice = match frozen {
                        Ok(true) => {
                            // settled only once the freezer says so: ask first
                            let confirmed = is_frozen();
                            read_bytes().and_then(|b| poll(&s2, b, monotonic_ns(), confirmed))
                        }
                        _ => None,
                    };
                    if let Some(n) = notice {
                        if let Some(f) =
                            s2.notify.lock().unwrap_or_else(|p| p.into_inner()).as_mut()
                        {
                            f(&n);
                        }
                    }
                    std::thread::sleep(Duration::from_nanos(Self::POLL_NS));
                }
            })?;
        Ok(FrozenIoWatch {
            shared,
            thread: Some(thread),
        })
    }

    /// Call `f` at the first frozen interval with I/O.
    pub fn on_frozen_io(&self, f: OnFrozenIo) {
        *self.shared.notify.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    /// The command was frozen at `now_ns`.
    pub fn frozen(&self, now_ns: u64) {
        let mut st = self.lock();
        st.frozen_since_ns = Some(now_ns);
        st.baseline = None;
        st.settled = false;
        st.growing_polls = 0;
        st.still_ns = None;
        st.leaking_since_ns = None;
    }

    /// The command was thawed at `now_ns`; returns the time of the frozen
    /// interval that just ended which was I/O rather than frozen, s.
    pub fn thawed(&self, now_ns: u64) -> f64 {
        let mut st = self.lock();
        let leak_s = close(&mut st, now_ns);
        st.frozen_since_ns = None;
        leak_s
    }

    /// Time of the current frozen interval (if any) that has been I/O so
    /// far, s.
    pub fn leaking_now_s(&self, now_ns: u64) -> f64 {
        let st = self.lock();
        st.leaking_since_ns
            .map_or(0.0, |t| now_ns.saturating_sub(t) as f64 / 1e9)
    }

    /// Totals so far, the current interval included.
    pub fn stats(&self) -> FrozenIoStats {
        self.probe().stats()
    }

    /// A handle that reads the totals from another thread (metrics).
    pub fn probe(&self) -> FrozenIoProbe {
        FrozenIoProbe(self.shared.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads a [`FrozenIoWatch`]'s totals; cheap to clone.
#[derive(Clone)]
pub struct FrozenIoProbe(Arc<Shared>);

impl std::fmt::Debug for FrozenIoProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FrozenIoProbe").field(&self.stats()).finish()
    }
}

impl FrozenIoProbe {
    /// Totals so far, the current interval included.
    pub fn stats(&self) -> FrozenIoStats {
        let st = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut s = st.stats.clone();
        if let (Some(t), Some(b)) = (st.leaking_since_ns, st.baseline) {
            s.intervals += 1;
            s.bytes += st.last.saturating_sub(b);
            s.seconds += monotonic_ns().saturating_sub(t) as f64 / 1e9;
        }
        s
    }
}

impl Drop for FrozenIoWatch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// End the current frozen interval at `now_ns`: add it to the totals if
/// it was one of I/O; its I/O time, s.
fn close(st: &mut State, now_ns: u64) -> f64 {
    let Some(t) = st.leaking_since_ns.take() else {
        return 0.0;
    };
    let s = now_ns.saturating_sub(t) as f64 / 1e9;
    st.stats.intervals += 1;
    st.stats.bytes += st.last.saturating_sub(st.baseline.unwrap_or(st.last));
    st.stats.seconds += s;
    s
}

/// One look at `bytes` (read so far) at `now_ns`, `confirmed` if the
/// freezer said everything was frozen before they were read; a notice the
/// first time an interval turns out to be one of I/O.
fn poll(shared: &Shared, bytes: u64, now_ns: u64, confirmed: bool) -> Option<FrozenIoNotice> {
    let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    let since = st.frozen_since_ns?;
    let age_ns = now_ns.saturating_sub(since);
    if !st.settled {
        if confirmed || (age_ns < FrozenIoWatch::SETTLE_NS || st.baseline.is_none()) {
            // reads the freeze still lets through (a syscall finishing) do not count
            st.baseline = Some(bytes);
            st.last = bytes;
            st.still_ns = Some(now_ns);
            st.settled = confirmed;
            st.growing_polls = 0;
            return None;
        }
        // not frozen yet: counted from SETTLE_NS, judged from SETTLE_MAX_NS
        st.settled = age_ns >= FrozenIoWatch::SETTLE_MAX_NS;
    }
    let grew = bytes > st.last;
    if !grew && st.leaking_since_ns.is_none() {
        st.still_ns = Some(now_ns);
    }
    st.growing_polls += u32::from(grew);
    st.last = st.last.max(bytes);
    let read = st.last - st.baseline.unwrap_or(st.last);
    if st.settled
        && st.leaking_since_ns.is_none()
        && read > FrozenIoWatch::SLACK_BYTES
        && st.growing_polls >= FrozenIoWatch::GROWING_POLLS
    {
        // it has been reading since the last look that saw it still
        st.leaking_since_ns = Some(st.still_ns.unwrap_or(since));
        if !st.notified {
            st.notified = true;
            return Some(FrozenIoNotice {
                bytes: read,
                after_freeze_s: now_ns.saturating_sub(since) as f64 / 1e9,
            });
        }
    }
    None
}

/// The tools whose work runs in the kernel, and the executor that pauses it.
const NATIVE_TOOLS: [&str; 4] = ["btrfs", "zpool", "mdadm", "fstrim"];

/// Commands that run another (`sudo`, `nice -n 5`, `ionice -c 3`, …).
const WRAPPERS: [&str; 9] = [
    "sudo", "nice", "ionice", "env", "chrt", "nohup", "timeout", "taskset", "doas",
];

/// For a command whose work runs in the kernel (`btrfs scrub`, `zpool
/// scrub`, `mdadm --action=check` or `check` written to an md array's
/// `sync_action`, `fstrim`), why freezing it cannot pause that work and
/// the exact native command that can: `btrfs scrub runs in the kernel,
/// which freezing `btrfs` does not pause: use `fallow scrub btrfs:/mnt``.
/// `None` for any other command. Wrappers in front (`sudo`, `nice -n 5`,
/// `ionice -c 3`) are looked through; a shell's script (`sh -c "echo check
/// > /sys/block/md0/md/sync_action"`) is looked into for md's file.
pub fn native_alternative(argv: &[OsString]) -> Option<String> {
    let words: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(m) = md_sync_action(&words) {
        return Some(m);
    }
    let base = |w: &str| {
        Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut i = 0;
    let tool = loop {
        let w = words.get(i)?;
        let b = base(w);
        if NATIVE_TOOLS.contains(&b.as_str()) {
            break b;
        }
        let option_like = w.starts_with('-') || w.contains('=') || w.parse::<f64>().is_ok();
        if !(WRAPPERS.contains(&b.as_str()) || option_like) {
            return None;
        }
        i += 1;
    };
    let rest = &words[i + 1..];
    let operands: Vec<&str> = rest
        .iter()
        .map(String::as_str)
        .filter(|w| !w.starts_with('-'))
        .collect();
    let has = |w: &str| rest.iter().any(|r| r == w);
    let last = operands.last().copied();
    match tool.as_str() {
        "btrfs" if has("scrub") && (has("start") || has("resume")) => Some(format!(
            "btrfs scrub runs in the kernel, which freezing `btrfs` does not pause: use `fallow scrub btrfs:{}{}`",
            last.filter(|w| !["scrub", "start", "resume"].contains(w)).unwrap_or("MOUNT"),
            if has("resume") { " --resume" } else { "" }
        )),
        "zpool" if has("scrub") => Some(format!(
            "a ZFS scrub runs in the kernel, which freezing `zpool` does not pause: use `fallow scrub zfs:{}`",
            last.filter(|w| *w != "scrub").unwrap_or("POOL")
        )),
        "mdadm" if rest.iter().any(|r| r.starts_with("--action")) => Some(format!(
            "an md check runs in a kernel thread, which freezing `mdadm` does not pause: use `fallow scrub md:{}`",
            operands
                .iter()
                .find(|w| w.starts_with("/dev/"))
                .copied()
                .unwrap_or("/dev/mdX")
        )),
        "fstrim" => Some(format!(
            "fstrim trims in one FITRIM ioctl in the kernel, which freezing `fstrim` does not pause: use `fallow trim {}` (FITRIM by ranges)",
            last.filter(|w| w.starts_with('/')).unwrap_or("MOUNT")
        )),
        _ => None,
    }
}

/// `check` or `repair` written to `/sys/…/mdX/md/sync_action`, by any
/// command (`sh -c "echo check > …"`, `tee …`): the array and the action.
fn md_sync_action(words: &[String]) -> Option<String> {
    let text = words.join(" ");
    let at = text.find("/md/sync_action")?;
    // the array's name: the path component before `/md/sync_action`
    let before = &text[..at];
    let name = before.rsplit('/').next().filter(|n| n.starts_with("md"))?;
    let action = if text.contains("repair") {
        "repair"
    } else if text.contains("check") || words.first().is_some_and(|w| w.ends_with("tee")) {
        "check"
    } else {
        return None; // `idle`, `frozen`: nothing runs
    };
    let flag = if action == "repair" {
        " --action repair"
    } else {
        ""
    };
    Some(format!(
        "an md {action} runs in a kernel thread, which freezing the command that started it does not pause: use `fallow scrub md:/dev/{name}{flag}`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            state: Mutex::new(State {
                frozen_since_ns: Some(0),
                ..State::default()
            }),
            stop: AtomicBool::new(false),
            notify: Mutex::new(None),
        }
    }

    const MS: u64 = 1_000_000;

    /// A thread held in the kernel: the freezer never gets there.
    #[test]
    fn reads_while_never_frozen_are_noticed_and_their_time_is_not_frozen_time() {
        let s = shared();
        // the freeze lets 3 MiB through at first: not counted
        assert_eq!(poll(&s, 0, 0, false), None);
        assert_eq!(poll(&s, 3 << 20, 50 * MS, false), None);
        // still at 150 ms, then 400 MB/s from 200 ms
        assert_eq!(poll(&s, 3 << 20, 150 * MS, false), None);
        assert_eq!(
            poll(&s, (3 << 20) + (20 << 20), 200 * MS, false),
            None,
            "judged at 250 ms"
        );
        let n = poll(&s, (3 << 20) + (40 << 20), 250 * MS, false).expect("noticed");
        assert_eq!(n.bytes, 40 << 20);
        assert!((n.after_freeze_s - 0.25).abs() < 1e-9);
        // once only
        assert_eq!(poll(&s, (3 << 20) + (60 << 20), 450 * MS, false), None);
        // thawed at 1 s: I/O since the last still look (150 ms)
        let mut st = s.state.lock().unwrap();
        let leak = close(&mut st, 1000 * MS);
        assert!((leak - 0.85).abs() < 1e-9, "{leak}");
        assert_eq!(st.stats.bytes, 60 << 20);
        assert_eq!(st.stats.intervals, 1);
    }

    /// Everything frozen, and reads still charged to it: work in the kernel.
    #[test]
    fn reads_after_the_freezer_says_frozen_are_noticed_at_once() {
        let s = shared();
        assert_eq!(poll(&s, 7 << 20, 0, false), None);
        assert_eq!(poll(&s, 8 << 20, 20 * MS, true), None);
        assert_eq!(poll(&s, 8 << 20, 40 * MS, true), None);
        assert_eq!(poll(&s, 14 << 20, 70 * MS, true), None, "one growing look");
        let n = poll(&s, 20 << 20, 100 * MS, true).expect("noticed");
        assert_eq!(n.bytes, 12 << 20);
    }

    /// Regression (run_kernel test on a loaded machine): `dd bs=1M` held
    /// in a read syscall for 900 ms, never frozen, then its read and
    /// readahead landed at once: 2.5 MiB, one look, and nothing after.
    #[test]
    fn a_syscalls_tail_landing_late_is_not_flagged() {
        let s = shared();
        for t in (0..900).step_by(50) {
            assert_eq!(poll(&s, 50 << 20, t * MS, false), None, "{t} ms");
        }
        assert_eq!(poll(&s, (50 << 20) + (5 << 19), 900 * MS, false), None);
        for t in (950..2000).step_by(50) {
            assert_eq!(
                poll(&s, (50 << 20) + (5 << 19), t * MS, true),
                None,
                "{t} ms"
            );
        }
    }

    #[test]
    fn a_command_that_stops_reading_once_frozen_is_not_flagged() {
        let s = shared();
        // a slow 1 MiB read and its readahead finish 200 ms after the
        // freeze request; then the freezer has it
        for (t, b, frozen) in [
            (0, 100 << 20, false),
            (50, 101 << 20, false),
            (150, 102 << 20, false),
            (200, (103 << 20) + 4096, false),
            (240, (103 << 20) + 4096, true),
        ] {
            assert_eq!(poll(&s, b, t * MS, frozen), None, "{t} ms");
        }
        for t in (350..2000).step_by(50) {
            assert_eq!(poll(&s, (103 << 20) + 8192, t * MS, true), None);
        }
        let mut st = s.state.lock().unwrap();
        assert_eq!(close(&mut st, 2000 * MS), 0.0);
        assert_eq!(st.stats, FrozenIoStats::default());
    }

    #[test]
    fn the_watch_thread_calls_back_within_a_second() {
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let c2 = counter.clone();
        // a command reading 100 MB/s whatever the freezer says
        let t0 = monotonic_ns();
        let w = FrozenIoWatch::start(
            Box::new(move || {
                let b = (monotonic_ns() - t0) / 10;
                c2.store(b, Ordering::Relaxed);
                Some(b)
            }),
            Box::new(|| false),
            t0,
        )
        .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        w.on_frozen_io(Box::new(move |n| {
            let _ = tx.send(n.clone());
        }));
        let n = rx
            .recv_timeout(Duration::from_secs(1))
            .expect("no notice within 1 s");
        assert!(n.bytes > FrozenIoWatch::SLACK_BYTES, "{n:?}");
        std::thread::sleep(Duration::from_millis(100));
        let leak = w.thawed(monotonic_ns());
        // all but at most the first settle and one poll was I/O
        let total = (monotonic_ns() - t0) as f64 / 1e9;
        assert!(leak > total - 0.2 && leak <= total, "{leak} of {total}");
        assert_eq!(w.stats().intervals, 1);
        assert!(counter.load(Ordering::Relaxed) > 0);
    }

    fn argv(s: &str) -> Vec<OsString> {
        s.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn kernel_side_tools_are_recognised() {
        let h = |s: &str| native_alternative(&argv(s));
        assert!(h("btrfs scrub start -B /mnt/data")
            .unwrap()
            .ends_with("`fallow scrub btrfs:/mnt/data`"));
        assert!(h("sudo ionice -c 3 /usr/bin/btrfs scrub resume -B /srv")
            .unwrap()
            .ends_with("`fallow scrub btrfs:/srv --resume`"));
        assert!(h("zpool scrub -w tank")
            .unwrap()
            .ends_with("`fallow scrub zfs:tank`"));
        assert!(h("mdadm --action=check /dev/md0")
            .unwrap()
            .ends_with("`fallow scrub md:/dev/md0`"));
        assert!(h("fstrim -v /home")
            .unwrap()
            .contains("`fallow trim /home`"));
        // the exact command, with --resume for a resume, and
        // md's sync_action written by a shell or tee
        assert!(h("btrfs scrub resume -B /srv")
            .unwrap()
            .ends_with("`fallow scrub btrfs:/srv --resume`"));
        let md = native_alternative(&[
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from("echo check > /sys/block/md0/md/sync_action"),
        ])
        .unwrap();
        assert!(md.ends_with("`fallow scrub md:/dev/md0`"), "{md}");
        assert!(h("tee /sys/devices/virtual/block/md127/md/sync_action")
            .unwrap()
            .ends_with("`fallow scrub md:/dev/md127`"));
        let repair = native_alternative(&[
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from("echo repair >/sys/block/md1/md/sync_action"),
        ])
        .unwrap();
        assert!(
            repair.ends_with("`fallow scrub md:/dev/md1 --action repair`"),
            "{repair}"
        );
        assert_eq!(
            native_alternative(&[
                OsString::from("sh"),
                OsString::from("-c"),
                OsString::from("echo idle > /sys/block/md0/md/sync_action"),
            ]),
            None
        );
        for other in [
            "rsync -a /btrfs/ /backup/",
            "btrfs balance start /mnt",
            "dd if=/dev/loop0 of=/dev/null",
            "zpool status tank",
            "sh -c btrfs",
        ] {
            assert_eq!(h(other), None, "{other}");
        }
    }
}
