//! Which disk `fallow run` watches: given by name (`sda`, a partition
//! `sda2` meaning its disk), by device node (`/dev/sda`), by any file or
//! directory on it, or a counters file in the `stat` format (an emulated
//! disk). A partition is watched as its whole disk, since foreground I/O to
//! any partition competes with the command for the same device.

use crate::error::{Error, Result};
use crate::monitor::{resolve_device, DiskStat, StatSource};
use std::path::{Path, PathBuf};

/// A disk to watch, and its `major:minor` for counting the command's I/O
/// (none for a counters file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedDisk {
    /// The counters to sample.
    pub source: StatSource,
    /// The whole disk's `major:minor`.
    pub dev: Option<(u32, u32)>,
}

impl WatchedDisk {
    /// Interpret `spec` (see the module documentation).
    pub fn parse(spec: &str) -> Result<WatchedDisk> {
        Self::parse_in(Path::new("/sys"), spec)
    }

    fn parse_in(sys: &Path, spec: &str) -> Result<WatchedDisk> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(Error::invalid("--device", "empty"));
        }
        // a name, unless sysfs has no such device and it is a path here (`.`)
        if !spec.contains('/')
            && spec != "."
            && spec != ".."
            && (sys.join("class/block").join(spec).exists() || !Path::new(spec).exists())
        {
            return Self::by_name(sys, spec);
        }
        let path = Path::new(spec);
        let md = std::fs::metadata(path)
            .map_err(|e| Error::io(path, "cannot watch: no such device, file or directory", e))?;
        // a regular file in the stat format: an emulated disk's counters
        if md.is_file() && !spec.starts_with("/dev/") {
            if let Ok(text) = std::fs::read_to_string(path) {
                if DiskStat::parse(&text).is_ok() {
                    return Ok(WatchedDisk {
                        source: StatSource::file(path)?,
                        dev: None,
                    });
                }
            }
        }
        match resolve_device(path)? {
            Some(d) => Self::by_name(sys, &d.disk),
            None => Err(Error::invalid(
                "--device",
                format!(
                    "{spec} is not on a block device the kernel counts I/O for \
                     (tmpfs, overlayfs, a network file system?): name the disk, as in --device sda"
                ),
            )),
        }
    }

    fn by_name(sys: &Path, name: &str) -> Result<WatchedDisk> {
        let name = name.trim_start_matches("/dev/");
        let link = sys.join("class/block").join(name);
        let dir = std::fs::canonicalize(&link).map_err(|_| {
            Error::invalid(
                "--device",
                format!(
                    "no block device `{name}`: {} does not exist (lsblk lists the devices)",
                    link.display()
                ),
            )
        })?;
        let disk_dir: PathBuf = if dir.join("partition").is_file() {
            dir.parent().map(Path::to_path_buf).unwrap_or(dir.clone())
        } else {
            dir
        };
        let disk = disk_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| name.to_string());
        let dev_file = disk_dir.join("dev");
        let dev = std::fs::read_to_string(&dev_file).ok().and_then(|t| {
            let (a, b) = t.trim().split_once(':')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        let stat_path = disk_dir.join("stat");
        if !stat_path.is_file() {
            return Err(Error::invalid(
                "--device",
                format!(
                    "no block device `{name}`: {} does not exist",
                    stat_path.display()
                ),
            ));
        }
        let inflight = disk_dir.join("inflight");
        Ok(WatchedDisk {
            source: StatSource {
                label: disk,
                stat_path,
                inflight_path: inflight.is_file().then_some(inflight),
                sysfs: sys.starts_with("/sys"),
            },
            dev,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs with disk sdx (8:16) and its partition sdx1.
    fn fake_sys() -> tempfile::TempDir {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("devices/virtual/block/sdx");
        std::fs::create_dir_all(disk.join("sdx1")).unwrap();
        std::fs::write(disk.join("dev"), "8:16\n").unwrap();
        std::fs::write(disk.join("stat"), "0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        std::fs::write(disk.join("sdx1/partition"), "1\n").unwrap();
        std::fs::write(disk.join("sdx1/dev"), "8:17\n").unwrap();
        std::fs::write(disk.join("sdx1/stat"), "0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        std::fs::create_dir_all(sys.path().join("class/block")).unwrap();
        std::os::unix::fs::symlink(&disk, sys.path().join("class/block/sdx")).unwrap();
        std::os::unix::fs::symlink(disk.join("sdx1"), sys.path().join("class/block/sdx1")).unwrap();
        sys
    }

    #[test]
    fn a_partition_is_watched_as_its_disk() {
        let sys = fake_sys();
        for name in ["sdx", "sdx1", "/dev/sdx1"] {
            let w = WatchedDisk::by_name(sys.path(), name).unwrap();
            assert_eq!(w.source.label, "sdx", "{name}");
            assert_eq!(w.dev, Some((8, 16)), "{name}");
            assert!(!w.source.sysfs);
        }
        let e = WatchedDisk::parse_in(sys.path(), "sdzz")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no block device `sdzz`"), "{e}");
    }

    #[test]
    fn a_stat_file_is_an_emulated_disk_and_other_paths_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n").unwrap();
        let w = WatchedDisk::parse(stat.to_str().unwrap()).unwrap();
        assert_eq!(
            (w.source.stat_path.as_path(), w.dev),
            (stat.as_path(), None)
        );
        let e = WatchedDisk::parse("/no/such/place")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such/place"), "{e}");
        // the temp dir and `.`: their disk when on one, a clear error when not
        for p in [dir.path().to_str().unwrap(), "."] {
            match WatchedDisk::parse(p) {
                Ok(w) => assert!(w.dev.is_some() && w.source.sysfs, "{w:?}"),
                Err(e) => assert!(e.to_string().contains("not on a block device"), "{e}"),
            }
        }
    }
}
