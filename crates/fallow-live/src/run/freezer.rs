//! Pausing and resuming a managed command as a whole: the cgroup v2
//! freezer (`cgroup.freeze`), the cgroup v1 freezer (`freezer.state`), or
//! `SIGSTOP`/`SIGCONT` to its process group.
//!
//! A cgroup freezer catches every process the command forks, whatever its
//! process group, and a frozen process cannot tell (no `SIGCHLD` to its
//! parent, no `EINTR` in its system calls); signals reach only the
//! command's process group and are visible to it (a shell reports "Stopped"
//! for its children). The order of preference is therefore v2, v1, signals.
//!
//! Cgroups are made as children of fallow's own cgroup in each hierarchy
//! (from `/proc/self/cgroup`, mounts from `/proc/self/mountinfo`), so a
//! command run by a systemd service stays inside the service's cgroup.

use crate::error::{Error, Result};
pub use crate::run_kinds::FreezerKind;
use rustix::process::{kill_process_group, Pid, Signal};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies are mounted and where fallow sits in them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupLayout {
    /// Mount point of the v2 hierarchy, if mounted.
    pub v2_mount: Option<PathBuf>,
    /// fallow's cgroup in v2 (`/` or `/system.slice/x.service`).
    pub v2_path: Option<String>,
    /// v1 hierarchies by controller (`freezer`, `blkio`): mount point and
    /// fallow's cgroup in it.
    pub v1: BTreeMap<String, (PathBuf, String)>,
}

impl CgroupLayout {
    /// The layout of this process.
    pub fn of_this_process() -> Result<CgroupLayout> {
        let read = |p: &str| std::fs::read_to_string(p).map_err(|e| Error::io(p, "cannot read", e));
        Ok(CgroupLayout::parse(
            &read("/proc/self/mountinfo")?,
            &read("/proc/self/cgroup")?,
        ))
    }

    /// The layout from the text of `/proc/self/mountinfo` and
    /// `/proc/self/cgroup`. Lines that are not cgroup mounts are skipped.
    pub fn parse(mountinfo: &str, self_cgroup: &str) -> CgroupLayout {
        let mut v2_mount = None;
        let mut v1_mounts: BTreeMap<String, PathBuf> = BTreeMap::new();
        for line in mountinfo.lines() {
            // ID PARENT M:m ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let mut l = left.split(' ');
            let (Some(root), Some(mount)) = (l.nth(3), l.next()) else {
                continue;
            };
            // a bind mount of a sub-cgroup (containers) is not the hierarchy's root
            if root != "/" {
                continue;
            }
            let mut r = right.split(' ');
            let fstype = r.next().unwrap_or("");
            let superopts = r.nth(1).unwrap_or("");
            let mount = PathBuf::from(unescape_mount(mount));
            match fstype {
                "cgroup2" if v2_mount.is_none() => v2_mount = Some(mount),
                "cgroup" => {
                    for opt in superopts.split(',') {
                        if matches!(opt, "freezer" | "blkio") {
                            v1_mounts.entry(opt.to_string()).or_insert(mount.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        let mut v2_path = None;
        let mut v1 = BTreeMap::new();
        for line in self_cgroup.lines() {
            // ID:CONTROLLERS:PATH (v2: 0::PATH)
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctrls.is_empty() {
                v2_path = Some(path.to_string());
                continue;
            }
            for c in ctrls.split(',') {
                if let Some(m) = v1_mounts.get(c) {
                    v1.insert(c.to_string(), (m.clone(), path.to_string()));
                }
            }
        }
        CgroupLayout {
            v2_path: v2_mount.as_ref().and(v2_path),
            v2_mount,
            v1,
        }
    }

    /// The directory of fallow's own cgroup in v2.
    pub fn v2_dir(&self) -> Option<PathBuf> {
        Some(join_cgroup(self.v2_mount.as_ref()?, self.v2_path.as_ref()?))
    }

    /// The directory of fallow's own cgroup in the v1 hierarchy of `controller`.
    pub fn v1_dir(&self, controller: &str) -> Option<PathBuf> {
        let (mount, path) = self.v1.get(controller)?;
        Some(join_cgroup(mount, path))
    }
}

fn join_cgroup(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim_start_matches('/'))
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = oct.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Create a cgroup directory, with a message that says what to do when
/// it cannot be (not root, hierarchy read-only).
pub(crate) fn make_cgroup(dir: &Path, what: &str) -> Result<()> {
    std::fs::create_dir(dir).map_err(|e| {
        let hint = match e.kind() {
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
                " (needs root, or a cgroup delegated to this user; --freezer signal works without)"
            }
            _ => "",
        };
        Error::io(dir, format!("cannot create the {what} cgroup{hint}"), e)
    })
}

/// Move process `pid` into the cgroup at `dir`.
pub(crate) fn move_into(dir: &Path, pid: u32) -> Result<()> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, format!("{pid}\n")).map_err(|e| {
        Error::io(
            &procs,
            format!("cannot move process {pid} into the cgroup"),
            e,
        )
    })
}

/// Remove a cgroup directory once its processes have left, waiting up to
/// `patience_ms` for exiting ones (a just-killed process lingers briefly).
/// A directory already gone is fine.
pub(crate) fn remove_cgroup(dir: &Path, patience_ms: u64) -> Result<()> {
    let deadline = crate::clock::monotonic_ns() + patience_ms * 1_000_000;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            // EBUSY: processes still leaving (ErrorKind::ResourceBusy needs Rust 1.83)
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
                    && crate::clock::monotonic_ns() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(Error::io(dir, "cannot remove the cgroup", e)),
        }
    }
}

/// True when the cgroup at `dir` has no processes (or is gone).
pub fn cgroup_is_empty(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.procs")) {
        Ok(t) => t.trim().is_empty(),
        Err(_) => true,
    }
}

/// Thaw what a freezer froze, from its description alone: what the
/// guardian does when fallow is gone. `control` is the cgroup's
/// `cgroup.freeze` or `freezer.state` (ignored for signals); every process
/// group in `pgids` also gets `SIGCONT`, which un-stops a command still
/// held by its start trampoline. A cgroup or group already gone is not an
/// error.
pub fn thaw_raw(kind: FreezerKind, control: Option<&Path>, pgids: &[u32]) -> Result<()> {
    let mut first_err = None;
    if let (FreezerKind::Cgroup2 | FreezerKind::Cgroup1, Some(c)) = (kind, control) {
        if let Err(e) = std::fs::write(c, thaw_word(kind)) {
            if e.kind() != ErrorKind::NotFound {
                first_err = Some(Error::io(c, "cannot thaw", e));
            }
        }
    }
    for &g in pgids {
        if let Err(e) = signal_group(g, Signal::CONT) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn thaw_word(kind: FreezerKind) -> &'static str {
    match kind {
        FreezerKind::Cgroup2 => "0",
        _ => "THAWED",
    }
}

fn freeze_word(kind: FreezerKind) -> &'static str {
    match kind {
        FreezerKind::Cgroup2 => "1",
        _ => "FROZEN",
    }
}

/// Send `sig` to process group `pgid`; a group that no longer exists is fine.
pub fn signal_group(pgid: u32, sig: Signal) -> Result<()> {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return Err(Error::invalid(
            "process group",
            format!("{pgid} is not a process id"),
        ));
    };
    match kill_process_group(pid, sig) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::SRCH) => Ok(()),
        Err(e) => Err(Error::io(
            format!("process group {pgid}"),
            format!("cannot send signal {}", sig.as_raw()),
            e.into(),
        )),
    }
}

/// One command's freezer: a cgroup made for it, or its process group.
#[derive(Debug)]
pub struct Freezer {
    kind: FreezerKind,
    /// The cgroup (none for signals).
    dir: Option<PathBuf>,
    /// The command's process group, once it is running.
    pgid: Option<u32>,
    frozen: bool,
    /// Why the preferred kinds were passed over (for the report).
    passed_over: Vec<String>,
}

impl Freezer {
    /// A freezer of `kind` (or the best available when `None`) for a
    /// cgroup named `name` beside fallow's own. The cgroup starts frozen,
    /// so that a command moved into it does not run until thawed.
    pub fn create(kind: Option<FreezerKind>, layout: &CgroupLayout, name: &str) -> Result<Freezer> {
        let mut passed_over = Vec::new();
        let kinds: &[FreezerKind] = match kind {
            Some(ref k) => std::slice::from_ref(k),
            None => &FreezerKind::ALL,
        };
        for &k in kinds {
            match Self::try_create(k, layout, name) {
                Ok(mut f) => {
                    f.passed_over = passed_over;
                    return Ok(f);
                }
                // asked for this one: say why it cannot be had
                Err(e) if kind.is_some() => return Err(e),
                Err(e) => passed_over.push(format!("{k}: {e}")),
            }
        }
        // signals need nothing, so the loop above returns for them
        Err(Error::Unsupported(format!(
            "no freezer available: {}",
            passed_over.join("; ")
        )))
    }

    fn try_create(kind: FreezerKind, layout: &CgroupLayout, name: &str) -> Result<Freezer> {
        let dir = match kind {
            FreezerKind::Signal => {
                return Ok(Freezer {
                    kind,
                    dir: None,
                    pgid: None,
                    frozen: false,
                    passed_over: vec![],
                })
            }
            FreezerKind::Cgroup2 => layout
                .v2_dir()
                .ok_or_else(|| Error::Unsupported("no cgroup v2 hierarchy is mounted".into()))?,
            FreezerKind::Cgroup1 => layout.v1_dir("freezer").ok_or_else(|| {
                Error::Unsupported("no cgroup v1 freezer hierarchy is mounted".into())
            })?,
        }
        .join(name);
        make_cgroup(&dir, kind.name())?;
        let mut f = Freezer {
            kind,
            dir: Some(dir.clone()),
            pgid: None,
            frozen: false,
            passed_over: vec![],
        };
        let control = f.control().expect("a cgroup freezer has a control file");
        if !control.exists() {
            let _ = remove_cgroup(&dir, 0);
            return Err(Error::Unsupported(format!(
                "{} does not exist (cgroup v2 freezing needs Linux 5.2 or later)",
                control.display()
            )));
        }
        if let Err(e) = f.freeze() {
            let _ = remove_cgroup(&dir, 0);
            return Err(e);
        }
        Ok(f)
    }

    /// Which kind this is.
    pub fn kind(&self) -> FreezerKind {
        self.kind
    }

    /// The cgroup's directory (none for signals).
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The file that freezes and thaws the cgroup (none for signals).
    pub fn control(&self) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(match self.kind {
            FreezerKind::Cgroup2 => dir.join("cgroup.freeze"),
            FreezerKind::Cgroup1 => dir.join("freezer.state"),
            FreezerKind::Signal => return None,
        })
    }

    /// Kinds tried before this one and why they could not be used.
    pub fn passed_over(&self) -> &[String] {
        &self.passed_over
    }

    /// The command's process group, once attached.
    pub fn pgid(&self) -> Option<u32> {
        self.pgid
    }

    /// True while frozen (by this freezer's account).
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Take in the command: `pid` leads its own process group. For a
    /// cgroup, the process is moved into the (frozen) cgroup; for signals
    /// it is counted as frozen, as the start trampoline holds it stopped.
    pub fn attach(&mut self, pid: u32) -> Result<()> {
        if let Some(dir) = &self.dir {
            move_into(dir, pid)?;
        } else {
            self.frozen = true;
        }
        self.pgid = Some(pid);
        Ok(())
    }

    /// Pause the command.
    pub fn freeze(&mut self) -> Result<()> {
        self.set(true)
    }

    /// Resume the command.
    pub fn thaw(&mut self) -> Result<()> {
        self.set(false)
    }

    fn set(&mut self, frozen: bool) -> Result<()> {
        match (self.control(), self.pgid) {
            (Some(c), _) => {
                let word = if frozen {
                    freeze_word(self.kind)
                } else {
                    thaw_word(self.kind)
                };
                std::fs::write(&c, word).map_err(|e| {
                    Error::io(
                        &c,
                        if frozen {
                            "cannot freeze"
                        } else {
                            "cannot thaw"
                        },
                        e,
                    )
                })?;
            }
            (None, Some(g)) => signal_group(g, if frozen { Signal::STOP } else { Signal::CONT })?,
            (None, None) => {}
        }
        self.frozen = frozen;
        Ok(())
    }

    /// Thaw and remove the cgroup, waiting up to `patience_ms` for its
    /// processes to be gone (it cannot be removed while any is left).
    pub fn remove(&mut self, patience_ms: u64) -> Result<()> {
        if self.frozen {
            self.thaw()?;
        }
        match self.dir.take() {
            Some(d) => remove_cgroup(&d, patience_ms),
            None => Ok(()),
        }
    }
}

impl Drop for Freezer {
    /// Never leave a command frozen, whatever path the caller took.
    fn drop(&mut self) {
        if self.frozen {
            let _ = self.thaw();
        }
        if let Some(d) = &self.dir {
            if cgroup_is_empty(d) {
                let _ = remove_cgroup(d, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
35 30 0:31 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
36 30 0:32 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
37 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
50 30 0:40 /inner /mnt/bound rw - cgroup cgroup rw,freezer
";

    const SELF: &str = "\
9:name=systemd:/
7:blkio:/user.slice
6:freezer:/
4:memory:/x
0::/system.slice/fallow.service
";

    #[test]
    fn layout_from_mountinfo_and_self_cgroup() {
        let l = CgroupLayout::parse(MOUNTINFO, SELF);
        assert_eq!(
            l.v2_dir().unwrap(),
            PathBuf::from("/sys/fs/cgroup/unified/system.slice/fallow.service")
        );
        assert_eq!(
            l.v1_dir("freezer").unwrap(),
            PathBuf::from("/sys/fs/cgroup/freezer")
        );
        assert_eq!(
            l.v1_dir("blkio").unwrap(),
            PathBuf::from("/sys/fs/cgroup/blkio/user.slice")
        );
        // the bind mount of a sub-cgroup is not taken for the hierarchy
        assert_eq!(l.v1.len(), 2);
        // no v2 mount: no v2 dir even though /proc/self/cgroup has a 0:: line
        let l = CgroupLayout::parse(
            "35 30 0:31 / /c/freezer rw - cgroup cgroup rw,freezer\n",
            SELF,
        );
        assert_eq!(l.v2_dir(), None);
        assert_eq!(l.v1_dir("freezer").unwrap(), PathBuf::from("/c/freezer"));
        assert_eq!(l.v1_dir("blkio"), None);
    }

    #[test]
    fn mount_points_with_escapes() {
        assert_eq!(unescape_mount(r"/a\040b"), "/a b");
        assert_eq!(unescape_mount(r"/plain"), "/plain");
        assert_eq!(unescape_mount(r"/end\"), r"/end\");
    }

    #[test]
    fn kinds_parse_and_print() {
        for k in FreezerKind::ALL {
            assert_eq!(k.name().parse::<FreezerKind>().unwrap(), k);
        }
        let e = "cgroup3".parse::<FreezerKind>().unwrap_err().to_string();
        assert!(
            e.contains("--freezer") && e.contains("cgroup2, cgroup1 or signal"),
            "{e}"
        );
    }

    #[test]
    fn a_forced_kind_that_is_not_mounted_is_a_clear_error() {
        let empty = CgroupLayout::default();
        let e = Freezer::create(Some(FreezerKind::Cgroup2), &empty, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no cgroup v2"), "{e}");
        // automatic choice falls back to signals and says why
        let f = Freezer::create(None, &empty, "x").unwrap();
        assert_eq!(f.kind(), FreezerKind::Signal);
        assert_eq!(f.passed_over().len(), 2, "{:?}", f.passed_over());
    }

    #[test]
    fn thawing_a_group_that_is_gone_is_not_an_error() {
        // pids are below pid_max, which is at most 2^22: no such group
        thaw_raw(FreezerKind::Signal, None, &[4_194_304]).unwrap();
        thaw_raw(
            FreezerKind::Cgroup2,
            Some(Path::new("/nonexistent/fallow/cgroup.freeze")),
            &[],
        )
        .unwrap();
    }
}
