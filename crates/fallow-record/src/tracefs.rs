//! tracefs: finding (or mounting) it, and a private trace instance that is
//! removed again on drop, so the global trace buffer and other tracers are
//! left alone.

use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted, mounting it at `/sys/kernel/tracing` if it is
/// nowhere.
pub fn root() -> Result<PathBuf> {
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("instances").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    let target = Path::new("/sys/kernel/tracing");
    rustix::mount::mount(
        "nodev",
        target,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| Error::NoTracefs(format!("mount -t tracefs nodev {}: {e}", target.display())))?;
    if target.join("instances").is_dir() {
        Ok(target.to_path_buf())
    } else {
        Err(Error::NoTracefs(format!(
            "{} has no instances/ after mounting",
            target.display()
        )))
    }
}

/// A trace instance `instances/<name>`: its own ring buffer, events and
/// `trace_pipe`. Removed on drop (events off first, as the kernel refuses to
/// remove an instance that is in use).
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
}

pub(crate) fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(|source| Error::Tracefs {
        path: path.to_path_buf(),
        source,
    })
}

impl Instance {
    /// Create `instances/<name>` under `root`, replacing a leftover one of
    /// the same name.
    pub fn create(root: &Path, name: &str) -> Result<Instance> {
        let dir = root.join("instances").join(name);
        if dir.exists() {
            let _ = fs::remove_dir(&dir);
        }
        fs::create_dir(&dir).map_err(|source| Error::Tracefs {
            path: dir.clone(),
            source,
        })?;
        Ok(Instance { dir })
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write `value` to the instance's file `rel`.
    pub fn set(&self, rel: &str, value: &str) -> Result<()> {
        write(&self.dir.join(rel), value)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = write(&self.dir.join("tracing_on"), "0");
        let _ = write(&self.dir.join("events/enable"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Remove `instances/fallow-<pid>` left by recorders that died without
/// cleaning up (killed with SIGKILL), so they stop costing ring-buffer memory.
pub fn remove_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root.join("instances")) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("fallow-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            drop(Instance { dir: e.path() });
        }
    }
}
