//! `fstrim:MOUNT`: FITRIM by ranges, one range per BG request.
//!
//! `fstrim` issues one `FITRIM` ioctl over the whole file system: minutes
//! of discards on a large disk, which nothing can pause. Here each BG
//! request is one `FITRIM` over `[offset, offset + size)` (the semantics of
//! `fstrim --offset --length`: file-system byte addresses, `minlen` the
//! least free extent worth discarding), so an FG arrival waits for one
//! range at most. The file system's size is `statvfs`'s `f_blocks ×
//! f_frsize`, which for ext4 leaves out its fixed overhead; the last range
//! therefore runs to the end of the address space (`len = u64::MAX −
//! offset`, as `fstrim` does by default), so no range past that estimate is
//! skipped.
//!
//! The kernel keeps no position, so fallow does: after every range the
//! next offset, the bytes the file system reports trimmed and the ranges
//! are written atomically to a checkpoint ([`crate::scrub::checkpoint`]'s
//! `write_atomically`), and `--resume` continues at that offset. A range
//! repeated after a crash costs a little time and nothing else (trimming
//! free space twice is harmless).
//!
//! The discards (and the checkpoint's write, when it is on the same disk)
//! are the job's own I/O: the [`Gate`] is open from just before the ioctl
//! until the checkpoint is on disk.

use super::control::Control;
use super::gate::Gate;
use super::{Kind, NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::resolve_device;
use crate::run::guardian::ReleaseAction;
use crate::scrub::checkpoint::{lock, unix_now_s, write_atomically, Lock};
use crate::scrub::{Resume, TokenBucket, Windows};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The registry entry.
pub const KIND: Kind = Kind {
    prefix: "fstrim",
    summary: "FITRIM of a mounted file system's free space, one range of the request size per BG request, resumable by offset",
    open,
};

/// Smallest range, bytes: file systems refuse a FITRIM shorter than a block.
pub const MIN_RANGE_BYTES: u64 = 1 << 20;

fn open(
    t: &NativeTarget,
    cfg: &NativeConfig,
    _ctl: Arc<dyn Control>,
) -> Result<Box<dyn NativeExecutor>> {
    Ok(Box::new(Fstrim::open(t, cfg)?))
}

/// fallow's progress of a trim, in its checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrimCheckpoint {
    /// The target (`fstrim:/srv`).
    pub target: String,
    /// The file system's size when the pass began, bytes.
    pub fs_bytes: u64,
    /// `minlen`, bytes.
    pub minlen_bytes: u64,
    /// The next range starts here, bytes.
    pub next_offset: u64,
    /// Bytes the file system reported trimmed in this pass.
    pub trimmed_bytes: u64,
    /// FITRIM calls in this pass.
    pub ranges: u64,
    /// The pass is complete.
    pub complete: bool,
    /// Which pass (1 for the first).
    pub pass: u64,
    /// When it was last written, Unix s.
    pub updated_unix_s: u64,
}

impl TrimCheckpoint {
    /// The checkpoint at `path`, if there is one.
    pub fn load(path: &Path) -> Result<Option<TrimCheckpoint>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, "cannot read the checkpoint", e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| Error::Parse {
                path: path.to_path_buf(),
                message: format!("not a fallow trim checkpoint: {e}"),
            })
    }

    fn save(&mut self, path: &Path) -> Result<()> {
        self.updated_unix_s = unix_now_s();
        let mut text = serde_json::to_vec_pretty(self).expect("a checkpoint serialises");
        text.push(b'\n');
        write_atomically(path, &text)
    }
}

#[allow(unsafe_code)]
mod ioctl {
    use std::os::fd::AsFd;

    /// `_IOWR('X', 121, struct fstrim_range)` (linux/fs.h).
    const FITRIM: rustix::ioctl::Opcode = 0xC018_5879;

    /// `struct fstrim_range`.
    #[repr(C)]
    struct FstrimRange {
        start: u64,
        len: u64,
        minlen: u64,
    }

    /// Trim `[start, start + len)` of the file system holding `fd`; the
    /// bytes the file system says it trimmed.
    pub(super) fn fitrim(fd: impl AsFd, start: u64, len: u64, minlen: u64) -> std::io::Result<u64> {
        let mut r = FstrimRange { start, len, minlen };
        // SAFETY: FITRIM takes a `struct fstrim_range *`, which
        // `FstrimRange` mirrors (`repr(C)`, three u64); the kernel reads it
        // and writes the trimmed byte count back into `len` during the call
        // and keeps no pointer after it returns.
        unsafe {
            let req = rustix::ioctl::Updater::<FITRIM, FstrimRange>::new(&mut r);
            rustix::ioctl::ioctl(fd.as_fd(), req)?;
        }
        Ok(r.len)
    }
}

/// A trim under fallow's control.
#[derive(Debug)]
pub struct Fstrim {
    label: String,
    dir: File,
    devices: Vec<String>,
    gate: Arc<Gate>,
    ck: TrimCheckpoint,
    ck_path: PathBuf,
    _lock: Lock,
    windows: Windows,
    bucket: Option<TokenBucket>,
    max_bytes: Option<u64>,
    resumed_from: u64,
    requests: u64,
    active_ns: u64,
    t0_ns: u64,
}

impl Fstrim {
    /// Open `fstrim:MOUNT`, loading or starting its checkpoint.
    pub fn open(t: &NativeTarget, cfg: &NativeConfig) -> Result<Fstrim> {
        cfg.check_options("fstrim", &["minlen"])?;
        let label = t.to_string();
        let mount = PathBuf::from(&t.arg);
        let minlen_bytes = match cfg.options.get("minlen") {
            Some(v) => fallow_core::units::parse_bytes(v)
                .map_err(|e| Error::invalid("--minlen", format!("`{v}`: {e}")))?,
            None => 0,
        };
        let md = std::fs::metadata(&mount).map_err(|e| Error::io(&mount, "cannot stat", e))?;
        if !md.is_dir() {
            return Err(Error::invalid(
                "target",
                format!("{label}: give the file system's mount point (a directory)"),
            ));
        }
        let dir = File::open(&mount).map_err(|e| Error::io(&mount, "cannot open", e))?;
        let vfs = rustix::fs::fstatvfs(&dir)
            .map_err(|e| Error::io(&mount, "statvfs failed", e.into()))?;
        let fs_bytes = vfs.f_blocks.saturating_mul(vfs.f_frsize);
        let ck_path = cfg.checkpoint_path.clone().ok_or_else(|| {
            Error::invalid(
                "--checkpoint",
                format!("{label}: a checkpoint file is needed"),
            )
        })?;
        let lock = lock(&ck_path)?;
        let fresh = TrimCheckpoint {
            target: label.clone(),
            fs_bytes,
            minlen_bytes,
            next_offset: 0,
            trimmed_bytes: 0,
            ranges: 0,
            complete: false,
            pass: 1,
            updated_unix_s: 0,
        };
        let existing = match cfg.resume {
            Resume::Restart => None,
            _ => TrimCheckpoint::load(&ck_path)?,
        };
        let ck = match (existing, cfg.resume) {
            (None, _) => fresh,
            (Some(c), _) if c.target != label => {
                return Err(Error::CheckpointMismatch {
                    path: ck_path,
                    message: format!(
                        "it belongs to {}, not {label}: give another --checkpoint, or --restart",
                        c.target
                    ),
                })
            }
            (Some(c), Resume::Yes) if c.complete => TrimCheckpoint {
                pass: c.pass + 1,
                ..fresh
            },
            (Some(c), Resume::Yes) => TrimCheckpoint { minlen_bytes, ..c },
            (Some(c), _) if !c.complete => {
                return Err(Error::CheckpointMismatch {
                    path: ck_path,
                    message: format!(
                        "an unfinished trim of {label} is at {} of {} bytes: --resume continues it, --restart starts over",
                        c.next_offset, c.fs_bytes
                    ),
                })
            }
            (Some(c), _) => TrimCheckpoint {
                pass: c.pass + 1,
                ..fresh
            },
        };
        let devices: Vec<String> = resolve_device(&mount)?
            .map(|d| d.disk)
            .into_iter()
            .collect();
        let sources = devices
            .iter()
            .map(|d| crate::monitor::StatSource::sysfs(d))
            .collect::<Result<Vec<_>>>()?;
        let bucket = cfg
            .max_rate_bytes_per_s
            .map(|r| TokenBucket::new(r, MIN_RANGE_BYTES))
            .transpose()?;
        Ok(Fstrim {
            label,
            dir,
            devices,
            gate: Gate::new(&sources)?,
            resumed_from: ck.next_offset,
            ck,
            ck_path,
            _lock: lock,
            windows: cfg.windows.clone(),
            bucket,
            max_bytes: cfg.max_bytes,
            requests: 0,
            active_ns: 0,
            t0_ns: monotonic_ns(),
        })
    }

    /// The checkpoint as it stands.
    pub fn checkpoint(&self) -> &TrimCheckpoint {
        &self.ck
    }

    fn run_bytes(&self) -> u64 {
        self.ck.next_offset.saturating_sub(self.resumed_from)
    }
}

impl BgExecutor for Fstrim {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        let w = u64::from(self.windows.wait_now_s()) * 1_000_000_000;
        if w > 0 {
            return Ok(w);
        }
        Ok(match &mut self.bucket {
            Some(b) => b.ready_in_ns(size_bytes.max(MIN_RANGE_BYTES), now_ns),
            None => 0,
        })
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.ck.complete || self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
            return Ok(Step::Finished);
        }
        let start = self.ck.next_offset;
        let size = size_bytes.max(MIN_RANGE_BYTES);
        let last = start.saturating_add(size) >= self.ck.fs_bytes;
        let len = if last { u64::MAX - start } else { size };
        let t0 = monotonic_ns();
        self.gate.open();
        let trimmed = ioctl::fitrim(&self.dir, start, len, self.ck.minlen_bytes);
        let trimmed = match trimmed {
            Ok(n) => n,
            Err(e) => {
                self.gate.close();
                let unsupported =
                    e.raw_os_error() == Some(rustix::io::Errno::OPNOTSUPP.raw_os_error());
                return Err(match unsupported {
                    true => Error::Unsupported(format!(
                        "{}: the file system or its device does not support discard (FITRIM: {e})",
                        self.label
                    )),
                    false => Error::io(
                        &self.label,
                        format!(
                            "FITRIM of bytes {start}..{} failed",
                            start.saturating_add(len)
                        ),
                        e,
                    ),
                });
            }
        };
        if let Some(b) = &mut self.bucket {
            b.take(size, monotonic_ns());
        }
        self.requests += 1;
        self.ck.ranges += 1;
        self.ck.trimmed_bytes += trimmed;
        self.ck.next_offset = if last { self.ck.fs_bytes } else { start + size };
        self.ck.complete = last;
        let saved = self.ck.save(&self.ck_path);
        self.gate.close();
        self.active_ns += monotonic_ns() - t0;
        saved?;
        Ok(
            if self.ck.complete || self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
                Step::Finished
            } else {
                Step::More
            },
        )
    }
}

impl NativeExecutor for Fstrim {
    fn devices(&self) -> Vec<String> {
        self.devices.clone()
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    fn release_actions(&self) -> Vec<ReleaseAction> {
        // each range ends by itself: nothing is left paused
        Vec::new()
    }

    fn report(&mut self) -> Result<NativeReport> {
        let mut native = BTreeMap::new();
        native.insert("trimmed_bytes".to_string(), self.ck.trimmed_bytes);
        native.insert("ranges".to_string(), self.ck.ranges);
        native.insert("minlen_bytes".to_string(), self.ck.minlen_bytes);
        native.insert("pass".to_string(), self.ck.pass);
        Ok(NativeReport {
            target: self.label.clone(),
            kind: "fstrim".into(),
            tool: "FITRIM ioctl".into(),
            target_bytes: Some(self.ck.fs_bytes),
            scrubbed_bytes: self.ck.next_offset,
            position_bytes: self.ck.next_offset,
            run_bytes: self.run_bytes(),
            run_requests: self.requests,
            run_active_s: self.active_ns as f64 / 1e9,
            run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
            complete: self.ck.complete,
            errors_corrected: None,
            errors_uncorrectable: None,
            native,
            rate_limit: self
                .bucket
                .as_ref()
                .map(|b| format!("fallow pacing at {:.0} bytes/s", b.rate_bytes_per_s())),
            checkpoint: Some(self.ck_path.display().to_string()),
        })
    }

    fn finish(&mut self) -> Result<()> {
        // saved after every range; nothing is in flight between requests
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ck: &Path, resume: Resume) -> NativeConfig {
        NativeConfig {
            checkpoint_path: Some(ck.to_path_buf()),
            resume,
            ..NativeConfig::default()
        }
    }

    #[test]
    fn checkpoints_of_other_targets_and_unfinished_ones_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let ck = d.path().join("ck.json");
        let t = NativeTarget::parse(&format!("fstrim:{}", d.path().display()))
            .unwrap()
            .unwrap();
        let mut other = TrimCheckpoint {
            target: "fstrim:/elsewhere".into(),
            fs_bytes: 1 << 30,
            minlen_bytes: 0,
            next_offset: 1 << 20,
            trimmed_bytes: 0,
            ranges: 1,
            complete: false,
            pass: 1,
            updated_unix_s: 0,
        };
        other.save(&ck).unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Yes)).unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("/elsewhere"),
            "{e}"
        );
        other.target = t.to_string();
        other.save(&ck).unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::No))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--resume continues it"), "{e}");
        let f = Fstrim::open(&t, &cfg(&ck, Resume::Yes)).unwrap();
        assert_eq!(f.checkpoint().next_offset, 1 << 20);
        drop(f);
        let f = Fstrim::open(&t, &cfg(&ck, Resume::Restart)).unwrap();
        assert_eq!(f.checkpoint().next_offset, 0);
        drop(f);
        std::fs::write(&ck, "{\"x\": 1}").unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Yes))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a fallow trim checkpoint"), "{e}");
        let mut bad = cfg(&ck, Resume::Restart);
        bad.options.insert("minlen".into(), "lots".into());
        let e = Fstrim::open(&t, &bad).unwrap_err().to_string();
        assert!(e.contains("--minlen"), "{e}");
        let t = NativeTarget::parse(&format!("fstrim:{}", ck.display()))
            .unwrap()
            .unwrap();
        let e = Fstrim::open(&t, &cfg(&ck, Resume::Restart))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mount point"), "{e}");
    }
}
