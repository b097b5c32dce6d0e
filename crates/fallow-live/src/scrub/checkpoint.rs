//! The scrub's checkpoint: a small JSON file with what was scrubbed (the
//! next visit index of a fixed order), the target's identity and the bad
//! ranges found, replaced atomically after every request so that a
//! crash, `kill -9` or power loss loses at most the request in service.
//!
//! Atomic replacement: write a temporary file in the same directory,
//! fsync it, rename it over the checkpoint, fsync the directory. A reader
//! sees the old checkpoint or the new one, never a mix or a truncated one.

use super::order::Order;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Format version written; a different one is refused with a clear message.
pub const VERSION: u32 = 1;

/// What makes a target the same target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetId {
    /// The path as given (absolute).
    pub path: String,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// `block` or `file`.
    pub kind: String,
    /// `MAJ:MIN` of a block device; `MAJ:MIN:INODE` of a file.
    pub device: String,
}

/// The checkpoint file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// The target scrubbed.
    pub target: TargetId,
    /// Visiting order.
    pub order: Order,
    /// Request (segment) size, bytes.
    pub request_size_bytes: u64,
    /// Segments in the target.
    pub segments: u64,
    /// Visits done: segments `segment_of_visit(0..next_visit)` are scrubbed.
    pub next_visit: u64,
    /// Bytes verified in this pass (all runs).
    pub scrubbed_bytes: u64,
    /// Requests issued in this pass (all runs).
    pub requests: u64,
    /// Unreadable byte ranges found in this pass, `[first_byte, last_byte]`,
    /// sorted and merged.
    pub bad_ranges: Vec<[u64; 2]>,
    /// The pass is complete.
    pub complete: bool,
    /// Passes completed before this one.
    pub passes_completed: u64,
    /// When this pass started, Unix seconds.
    pub pass_started_unix_s: u64,
    /// When the checkpoint was written, Unix seconds.
    pub updated_unix_s: u64,
    /// Wall time runs of this pass have spent, s.
    pub active_s: f64,
    /// Runs of this pass (the first and each resume).
    pub runs: u64,
}

impl Checkpoint {
    /// A fresh pass over `target`.
    pub fn new(target: TargetId, order: Order, request_size_bytes: u64, segments: u64) -> Self {
        let now = unix_now_s();
        Checkpoint {
            version: VERSION,
            target,
            order,
            request_size_bytes,
            segments,
            next_visit: 0,
            scrubbed_bytes: 0,
            requests: 0,
            bad_ranges: Vec::new(),
            complete: false,
            passes_completed: 0,
            pass_started_unix_s: now,
            updated_unix_s: now,
            active_s: 0.0,
            runs: 0,
        }
    }

    /// Read a checkpoint; `Ok(None)` if there is none.
    pub fn load(path: &Path) -> Result<Option<Checkpoint>> {
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, "cannot read the checkpoint", e)),
        };
        let bad = |m: String| Error::Parse {
            path: path.to_path_buf(),
            message: format!("not a fallow scrub checkpoint: {m} (move it away to start afresh)"),
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        match v.get("version").and_then(|x| x.as_u64()) {
            Some(n) if n == u64::from(VERSION) => {}
            Some(n) => {
                return Err(bad(format!(
                    "format version {n}, this fallow reads version {VERSION}"
                )))
            }
            None => return Err(bad("no `version` field".into())),
        }
        let c: Checkpoint = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
        if c.segments == 0 && c.target.size_bytes > 0
            || c.next_visit > c.segments
            || c.request_size_bytes == 0
        {
            return Err(bad(format!(
                "inconsistent: next_visit {} of {} segments of {} bytes",
                c.next_visit, c.segments, c.request_size_bytes
            )));
        }
        Ok(Some(c))
    }

    /// Write atomically (see the module documentation).
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.updated_unix_s = unix_now_s();
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("cannot serialise the checkpoint: {e}"),
        })?;
        text.push(b'\n');
        write_atomically(path, &text)
    }

    /// Refuse a checkpoint made for another scrub: a different target
    /// (path, size, device), order or request size.
    pub fn check_matches(
        &self,
        path: &Path,
        target: &TargetId,
        order: Order,
        request_size_bytes: u64,
    ) -> Result<()> {
        let refuse = |what: String| {
            Err(Error::CheckpointMismatch {
                path: path.to_path_buf(),
                message: format!(
                    "{what}; resume with the settings it was made with, give another --checkpoint, or --restart to discard it"
                ),
            })
        };
        let c = &self.target;
        if c.path != target.path {
            return refuse(format!(
                "this checkpoint is for {}, not {}",
                c.path, target.path
            ));
        }
        if c.size_bytes != target.size_bytes {
            return refuse(format!(
                "{} was {} bytes when the checkpoint was made and is {} bytes now",
                target.path, c.size_bytes, target.size_bytes
            ));
        }
        if c.kind == "file" && c.device != target.device {
            return refuse(format!(
                "{} is another file than when the checkpoint was made (device:inode {} then, {} now)",
                target.path, c.device, target.device
            ));
        }
        if self.order != order {
            return refuse(format!(
                "the checkpoint's order is {}, not {}",
                self.order, order
            ));
        }
        if self.request_size_bytes != request_size_bytes {
            return refuse(format!(
                "the checkpoint's request size is {} bytes, not {}",
                self.request_size_bytes, request_size_bytes
            ));
        }
        Ok(())
    }

    /// Start the next pass over the same target (after a complete one).
    pub fn next_pass(&mut self) {
        let passes = self.passes_completed + 1;
        *self = Checkpoint::new(
            self.target.clone(),
            self.order,
            self.request_size_bytes,
            self.segments,
        );
        self.passes_completed = passes;
    }
}

/// Where a target's checkpoint goes when none is given:
/// `/var/lib/fallow/scrub/` for root, else `$XDG_STATE_HOME/fallow/scrub/`
/// (`~/.local/state/fallow/scrub/`), named after the target's absolute
/// path (`/dev/sda` → `dev_sda.json`). The directory is not created here.
pub fn default_path(target: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(target).map_err(|e| Error::io(target, "bad path", e))?;
    let dir = if rustix::process::geteuid().is_root() {
        PathBuf::from("/var/lib/fallow/scrub")
    } else {
        match (std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")) {
            (Some(x), _) if !x.is_empty() => PathBuf::from(x).join("fallow/scrub"),
            (_, Some(h)) if !h.is_empty() => PathBuf::from(h).join(".local/state/fallow/scrub"),
            _ => {
                return Err(Error::invalid(
                    "--checkpoint",
                    "neither XDG_STATE_HOME nor HOME is set: give --checkpoint PATH",
                ))
            }
        }
    };
    Ok(dir.join(format!("{}.json", sanitise(&abs.to_string_lossy()))))
}

/// A path as one file name: `/dev/disk/by-id/ata-X 1` → `dev_disk_by-id_ata-X-1`.
pub fn sanitise(path: &str) -> String {
    let s: String = path
        .trim_start_matches('/')
        .chars()
        .map(|c| match c {
            '/' => '_',
            c if c.is_ascii_alphanumeric() || "._-".contains(c) => c,
            _ => '-',
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// An exclusive lock on a checkpoint (`<checkpoint>.lock`, `flock`), held
/// while a scrub runs so that two scrubs never share one checkpoint. The
/// kernel releases it when the process dies, `kill -9` included.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Take the lock of the checkpoint at `path`, or say who holds it.
pub fn lock(path: &Path) -> Result<Lock> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, "cannot create the checkpoint's lock file", e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Lock { _file: file }),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(Error::Unsupported(format!(
            "{}: another fallow scrub is using this checkpoint (its lock {} is held)",
            path.display(),
            lock_path.display()
        ))),
        Err(e) => Err(Error::io(&lock_path, "cannot lock", e.into())),
    }
}

/// Unix time now, s.
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Replace `path` with `bytes` atomically: temporary file in the same
/// directory, fsync, rename, fsync the directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| {
            Error::invalid("checkpoint", format!("{}: not a file name", path.display()))
        })?
        .to_string_lossy()
        .into_owned();
    // one fixed name: a writer killed mid-write leaves at most this file,
    // which the next save truncates (writers of one checkpoint are
    // serialised by its lock, see `lock`)
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::io(&tmp, "cannot create the checkpoint's temporary file", e))?;
        f.write_all(bytes)
            .map_err(|e| Error::io(&tmp, "cannot write the checkpoint", e))?;
        f.sync_all()
            .map_err(|e| Error::io(&tmp, "fsync of the checkpoint failed", e))?;
        drop(f);
        fs::rename(&tmp, path)
            .map_err(|e| Error::io(path, "cannot move the new checkpoint into place", e))?;
        // make the rename durable; not every file system lets a directory be synced
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Add `[first, last]` to sorted, merged `ranges`, merging with any range
/// it overlaps or touches.
pub fn add_range(ranges: &mut Vec<[u64; 2]>, first: u64, last: u64) {
    debug_assert!(first <= last);
    ranges.push([first, last]);
    ranges.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::with_capacity(ranges.len());
    for r in ranges.drain(..) {
        match out.last_mut() {
            Some(prev) if r[0] <= prev[1].saturating_add(1) => prev[1] = prev[1].max(r[1]),
            _ => out.push(r),
        }
    }
    *ranges = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> TargetId {
        TargetId {
            path: "/dev/loop9".into(),
            size_bytes: 1 << 30,
            kind: "block".into(),
            device: "7:9".into(),
        }
    }

    fn sample() -> Checkpoint {
        let mut c = Checkpoint::new(target(), Order::Staggered { regions: 128 }, 1 << 20, 1024);
        c.next_visit = 17;
        c.scrubbed_bytes = 17 << 20;
        c.requests = 17;
        c.bad_ranges = vec![[4096, 4607]];
        c.runs = 2;
        c.active_s = 1.5;
        c
    }

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        assert_eq!(Checkpoint::load(&p).unwrap(), None);
        let mut c = sample();
        c.save(&p).unwrap();
        assert_eq!(Checkpoint::load(&p).unwrap(), Some(c.clone()));
        // and nothing else is left in the directory
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_crash_before_the_rename_leaves_the_old_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        let mut c = sample();
        c.save(&p).unwrap();
        // a writer killed mid-write leaves a partial temporary file behind
        fs::write(dir.path().join(".ck.json.tmp"), b"{\"version\": 1, \"tar").unwrap();
        assert_eq!(Checkpoint::load(&p).unwrap(), Some(c.clone()));
        // and the next save still works and replaces the checkpoint whole
        c.next_visit = 18;
        c.save(&p).unwrap();
        assert_eq!(Checkpoint::load(&p).unwrap().unwrap().next_visit, 18);
    }

    #[test]
    fn a_failed_write_keeps_the_old_checkpoint_and_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        sample().save(&p).unwrap();
        let e = write_atomically(&dir.path().join("no/such/dir/ck.json"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
        assert!(Checkpoint::load(&p).unwrap().is_some());
    }

    #[test]
    fn refuses_garbage_and_other_versions_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        fs::write(&p, "hello").unwrap();
        let e = Checkpoint::load(&p).unwrap_err().to_string();
        assert!(e.contains("not a fallow scrub checkpoint"), "{e}");
        fs::write(&p, r#"{"version": 7}"#).unwrap();
        let e = Checkpoint::load(&p).unwrap_err().to_string();
        assert!(e.contains("version 7"), "{e}");
        let mut v = serde_json::to_value(sample()).unwrap();
        v["next_visit"] = 5000.into();
        fs::write(&p, v.to_string()).unwrap();
        let e = Checkpoint::load(&p).unwrap_err().to_string();
        assert!(e.contains("inconsistent"), "{e}");
    }

    #[test]
    fn mismatches_are_refused_naming_what_differs() {
        let c = sample();
        let p = Path::new("/x/ck.json");
        let o = Order::Staggered { regions: 128 };
        assert!(c.check_matches(p, &target(), o, 1 << 20).is_ok());
        let mut other = target();
        other.path = "/dev/loop8".into();
        let e = c
            .check_matches(p, &other, o, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is for /dev/loop9, not /dev/loop8"), "{e}");
        let mut bigger = target();
        bigger.size_bytes += 512;
        let e = c
            .check_matches(p, &bigger, o, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bytes now"), "{e}");
        let e = c
            .check_matches(p, &target(), Order::Sequential, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("order is staggered, 128 regions, not sequential"),
            "{e}"
        );
        let e = c
            .check_matches(p, &target(), o, 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("request size"), "{e}");
        // a block device that got another number after a reboot is the same target
        let mut renumbered = target();
        renumbered.device = "7:12".into();
        assert!(c.check_matches(p, &renumbered, o, 1 << 20).is_ok());
    }

    #[test]
    fn a_checkpoint_is_locked_by_one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        let held = lock(&p).unwrap();
        let e = lock(&p).unwrap_err().to_string();
        assert!(e.contains("another fallow scrub"), "{e}");
        drop(held);
        assert!(lock(&p).is_ok());
    }

    #[test]
    fn next_pass_resets_progress_and_counts_passes() {
        let mut c = sample();
        c.complete = true;
        c.next_pass();
        assert_eq!((c.next_visit, c.scrubbed_bytes, c.complete), (0, 0, false));
        assert_eq!(c.passes_completed, 1);
        assert!(c.bad_ranges.is_empty());
    }

    #[test]
    fn default_paths_are_one_flat_name_per_target() {
        assert_eq!(sanitise("/dev/sda"), "dev_sda");
        assert_eq!(
            sanitise("/dev/disk/by-id/ata-X 1"),
            "dev_disk_by-id_ata-X-1"
        );
        assert_eq!(sanitise("/.hidden"), "_.hidden");
        let p = default_path(Path::new("/dev/loop3")).unwrap();
        assert!(
            p.ends_with("fallow/scrub/dev_loop3.json"),
            "{}",
            p.display()
        );
    }

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        let mut r = Vec::new();
        add_range(&mut r, 1024, 1535);
        add_range(&mut r, 0, 511);
        assert_eq!(r, vec![[0, 511], [1024, 1535]]);
        add_range(&mut r, 512, 1023); // touches both
        assert_eq!(r, vec![[0, 1535]]);
        add_range(&mut r, 4096, 4096);
        add_range(&mut r, 100, 200); // inside
        assert_eq!(r, vec![[0, 1535], [4096, 4096]]);
    }
}
