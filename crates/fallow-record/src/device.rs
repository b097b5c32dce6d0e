//! Which block device to record: a path (`/dev/loop0`, a by-id symlink) or
//! a kernel name (`loop0`), resolved to its major and minor numbers.

use crate::error::{Error, Result};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A whole block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The kernel's name, e.g. `loop0`, `sda`, `nvme0n1`.
    pub name: String,
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl Device {
    /// The `dev` value the block tracepoints carry: `(major << 20) | minor`
    /// (the kernel's internal `dev_t`, not the user-space encoding; see the
    /// `print fmt` of `events/block/block_rq_issue/format`).
    pub fn trace_dev(&self) -> u64 {
        (u64::from(self.major) << 20) | u64::from(self.minor)
    }

    /// Resolve `spec`: a path to a block device node or a name under
    /// `/sys/class/block`. Partitions are refused: their requests are
    /// traced on the whole disk, with the disk's sector numbers.
    pub fn resolve(spec: &str) -> Result<Device> {
        let bad = |message: String| Error::Device {
            device: spec.to_string(),
            message,
        };
        let (major, minor) = if spec.contains('/') {
            let meta = std::fs::metadata(spec).map_err(|e| bad(e.to_string()))?;
            if !meta.file_type().is_block_device() {
                return Err(bad(
                    "not a block device (record a device such as /dev/sda or /dev/loop0; \
                     for a file, put a loop device over it: losetup -f --show FILE)"
                        .into(),
                ));
            }
            split_dev(meta.rdev())
        } else {
            let dev_file = Path::new("/sys/class/block").join(spec).join("dev");
            let text = std::fs::read_to_string(&dev_file).map_err(|_| {
                bad(format!(
                    "no such block device (not in /sys/class/block; known: {})",
                    known_devices()
                ))
            })?;
            let (a, b) = text.trim().split_once(':').ok_or_else(|| {
                bad(format!(
                    "{}: unexpected `{}`",
                    dev_file.display(),
                    text.trim()
                ))
            })?;
            let num = |s: &str| {
                s.parse::<u32>().map_err(|_| {
                    bad(format!(
                        "{}: unexpected `{}`",
                        dev_file.display(),
                        text.trim()
                    ))
                })
            };
            (num(a)?, num(b)?)
        };
        let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        let name = std::fs::canonicalize(&sys)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .ok_or_else(|| {
                bad(format!(
                    "no {} (device {major}:{minor} is gone?)",
                    sys.display()
                ))
            })?;
        if sys.join("partition").exists() {
            let parent = std::fs::canonicalize(sys.join(".."))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "the whole disk".into());
            return Err(bad(format!(
                "{name} is a partition; block tracepoints report requests on the whole disk: \
                 record {parent} instead"
            )));
        }
        Ok(Device { name, major, minor })
    }
}

/// glibc's `dev_t` encoding (as `st_rdev` carries it) to major and minor.
fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

fn known_devices() -> String {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with("ram"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_t_encodings() {
        // glibc's makedev, written out: 259:65537 (a large minor) and 4097:3
        // (a large major) survive the round trip
        let makedev = |major: u64, minor: u64| {
            ((major & 0xfff) << 8)
                | ((major & !0xfff) << 32)
                | (minor & 0xff)
                | ((minor & !0xff) << 12)
        };
        assert_eq!(split_dev(makedev(259, 65537)), (259, 65537));
        assert_eq!(split_dev(makedev(4097, 3)), (4097, 3));
        assert_eq!(split_dev(0x0700), (7, 0));
        let d = Device {
            name: "loop0".into(),
            major: 7,
            minor: 3,
        };
        assert_eq!(d.trace_dev(), (7 << 20) | 3);
    }

    #[test]
    fn bad_devices_are_named() {
        let e = Device::resolve("no-such-disk-xyz").unwrap_err().to_string();
        assert!(
            e.starts_with("device no-such-disk-xyz: no such block device"),
            "{e}"
        );
        let e = Device::resolve("/proc/version").unwrap_err().to_string();
        assert!(e.contains("not a block device"), "{e}");
        let e = Device::resolve("/nonexistent/dev").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/dev"), "{e}");
    }
}
