//! What a root test starts in the background (an emulated disk's server,
//! a daemon) and the mount it serves: stopped, detached and unmounted
//! whatever the test does. `live_tools.rs` and `spindown.rs` share it.

use super::run_tool;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// On drop: detach `loop_dev`, SIGTERM the `pids` (the last started
/// first), wait up to 5 s for `mnt` to be unmounted by them, then unmount
/// it lazily if it still is.
pub struct Cleanup {
    /// Processes to stop.
    pub pids: Vec<u32>,
    /// A loop device over a file on the mount, detached first.
    pub loop_dev: Option<String>,
    /// The mount point.
    pub mnt: PathBuf,
}

impl Cleanup {
    /// Nothing to stop yet, `mnt` to release.
    pub fn new(mnt: &Path) -> Cleanup {
        Cleanup {
            pids: Vec::new(),
            loop_dev: None,
            mnt: mnt.to_path_buf(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(l) = self.loop_dev.take() {
            let _ = run_tool("losetup", &["-d", &l]);
            // the kernel lets go of the file on the mount a moment later
            std::thread::sleep(Duration::from_millis(200));
        }
        let stopped = !self.pids.is_empty();
        for pid in self.pids.drain(..).rev() {
            terminate(pid);
        }
        let t = Instant::now();
        while stopped && t.elapsed() < Duration::from_secs(5) && is_mounted(&self.mnt) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if is_mounted(&self.mnt) {
            let _ = run_tool("umount", &["-l", &self.mnt.to_string_lossy()]);
        }
    }
}

/// SIGTERM to a process the test started.
pub fn terminate(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
    }
}

/// Whether `mnt` is a mount point of this namespace (`/proc/self/mountinfo`).
pub fn is_mounted(mnt: &Path) -> bool {
    let m = mnt.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|s| s.lines().any(|l| l.split(' ').nth(4) == Some(&*m)))
        .unwrap_or(false)
}
