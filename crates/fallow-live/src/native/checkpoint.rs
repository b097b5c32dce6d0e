//! [`OffsetCheckpoint`]: the one checkpoint of the native jobs whose tool
//! keeps no position of its own (`fstrim:` — FITRIM has no memory — and
//! `md:` — the kernel forgets `sync_min` when a check stops), so fallow
//! records where the next request starts.
//!
//! The same promises as the block scrub's checkpoint
//! ([`crate::scrub::checkpoint`]):
//!
//! - **Nothing the user owns is overwritten**: before anything is written
//!   (not even the lock), the path passes [`OutputGuard`]: never an input,
//!   a device node, a FIFO, a directory, or an existing file fallow does
//!   not recognise as a checkpoint of its own, unless `--overwrite`.
//! - **Atomic**: written to `.NAME.tmp`, fsynced, renamed over the file.
//! - **Never trusted unchecked**: pretty JSON with
//!   `"format": "fallow-native-checkpoint"` first and a
//!   `"checksum": "crc32:XXXXXXXX"` member last (the CRC-32 of the file
//!   without that member, as the block checkpoint's); [`OffsetCheckpoint::load`]
//!   refuses a file whose checksum disagrees, with duplicate or unknown
//!   keys, or whose fields contradict each other (next offset past the
//!   end, `complete` without reaching it, more requests than the offset
//!   allows, a pass count no run could reach), and
//!   [`OffsetCheckpoint::open`] refuses one of another target or of a
//!   target whose size changed, before `--resume` continues from it.
//!
//! Positions are bytes whatever the kind counts in (md: sectors × 512), so
//! one set of checks serves every kind; a kind's own fields sit in
//! `detail` ([`Detail`]).
//!
//! Checkpoints written before this format (no `format`, no checksum) are
//! recognised as fallow's own, so `--restart` replaces them without
//! `--overwrite`, but never resumed: nothing in them can be checked.

use super::Kind;
use crate::error::{Error, Result};
use crate::scrub::checkpoint::{
    self as block, lock, split_checksum, temp_path, unix_now_s, with_checksum, write_atomically,
    Lock, MAX_PASSES,
};
use crate::scrub::Resume;
use fallow_core::outpath::{
    is_legacy_native_checkpoint as is_legacy, OutputGuard, OutputKind, NATIVE_CHECKPOINT_FORMAT,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::fs::{self, File};
use std::io::{ErrorKind, Read};
use std::path::Path;

/// Refuse `path` as a checkpoint (and the lock and temporary files a save
/// creates beside it) if writing it could destroy something the user owns
/// ([`OutputGuard`]). Executors call it before they touch anything, and
/// [`OffsetCheckpoint::open`] again before it writes.
pub fn check_paths(path: &Path, guard: &OutputGuard) -> Result<()> {
    guard.check(path, OutputKind::Checkpoint, "--checkpoint")?;
    for p in [block::lock_path(path), temp_path(path)] {
        guard.check(&p, OutputKind::AppendedLog, "--checkpoint")?;
    }
    Ok(())
}

/// Format version written and read.
pub const VERSION: u32 = 1;
/// A native checkpoint is a few hundred bytes; a larger file is not one.
const MAX_BYTES: u64 = 1 << 20;

/// A kind's own fields of the checkpoint.
pub trait Detail: Serialize + DeserializeOwned + Clone + PartialEq + Debug {
    /// The kind whose checkpoint this is (its [`Kind`]).
    const KIND: &'static Kind;
    /// What a pass is called in messages (`trim`, `check`).
    fn job(&self) -> String;
    /// The least a request other than a pass's last advances the offset,
    /// bytes: bounds the requests a given offset can have taken.
    fn min_step_bytes(&self) -> u64;
    /// Checks of these fields against the rest of the checkpoint, naming
    /// the field at fault.
    fn validate(&self, ck: &OffsetCheckpoint<Self>) -> std::result::Result<(), Bad>;
}

/// A field at fault and why.
pub type Bad = (&'static str, String);

/// fallow's progress of a native job that goes by offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffsetCheckpoint<D> {
    /// [`NATIVE_CHECKPOINT_FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The kind's prefix (`fstrim`).
    pub kind: String,
    /// The target (`fstrim:/srv`).
    pub target: String,
    /// What a pass covers, bytes (the file system's or the array's size).
    pub size_bytes: u64,
    /// The next request starts here, bytes.
    pub next_offset_bytes: u64,
    /// Requests (FITRIM ranges, md windows) in this pass.
    pub requests: u64,
    /// The pass is complete (the offset reached `size_bytes`).
    pub complete: bool,
    /// Which pass (1 for the first).
    pub pass: u64,
    /// When it was last written, Unix s.
    pub updated_unix_s: u64,
    /// The kind's own fields.
    pub detail: D,
}

impl<D: Detail> OffsetCheckpoint<D> {
    /// A fresh first pass over `target` of `size_bytes`.
    pub fn new(target: &str, size_bytes: u64, detail: D) -> Self {
        OffsetCheckpoint {
            format: NATIVE_CHECKPOINT_FORMAT.to_string(),
            version: VERSION,
            kind: D::KIND.prefix.to_string(),
            target: target.to_string(),
            size_bytes,
            next_offset_bytes: 0,
            requests: 0,
            complete: false,
            pass: 1,
            updated_unix_s: 0,
            detail,
        }
    }

    /// Check `path` with `guard` (and the lock and temporary files a save
    /// creates beside it), take its lock, and load it unless `resume` is
    /// [`Resume::Restart`]: the checkpoint to go on from, checked against
    /// `fresh` (the target and its size now). `adopt` carries the settings
    /// of this run (`fresh.detail`) into a resumed pass's detail.
    pub fn open(
        path: &Path,
        guard: &OutputGuard,
        resume: Resume,
        fresh: Self,
        adopt: impl FnOnce(&mut D, &D),
    ) -> Result<(Self, Lock)> {
        check_paths(path, guard)?;
        let lock = lock(path)?;
        let existing = match resume {
            Resume::Restart => None,
            _ => Self::load(path)?,
        };
        let label = fresh.target.clone();
        let mismatch = |message: String| Error::CheckpointMismatch {
            path: path.to_path_buf(),
            message,
        };
        let next_pass = |c: &Self| OffsetCheckpoint {
            pass: c.pass + 1,
            ..fresh.clone()
        };
        let ck = match existing {
            None => fresh.clone(),
            Some(c) if c.target != label => {
                return Err(mismatch(format!(
                    "it belongs to {}, not {label}: give another --checkpoint, or --restart",
                    c.target
                )))
            }
            Some(c) if c.size_bytes != fresh.size_bytes => {
                return Err(mismatch(format!(
                    "{label} had {} bytes when the checkpoint was made and has {} now: --restart to start over",
                    c.size_bytes, fresh.size_bytes
                )))
            }
            Some(c) if c.complete => next_pass(&c),
            Some(mut c) if resume == Resume::Yes => {
                adopt(&mut c.detail, &fresh.detail);
                c
            }
            Some(c) => {
                return Err(mismatch(format!(
                    "an unfinished {} of {label} is at byte {} of {}: --resume continues it, --restart starts over",
                    c.detail.job(),
                    c.next_offset_bytes,
                    c.size_bytes
                )))
            }
        };
        Ok((ck, lock))
    }

    /// Read the checkpoint at `path` and check it (checksum, keys, fields;
    /// see the module documentation); `Ok(None)` if there is none.
    pub fn load(path: &Path) -> Result<Option<Self>> {
        let what = format!("a fallow {} checkpoint", D::KIND.prefix);
        let bad = |m: String| Error::Parse {
            path: path.to_path_buf(),
            message: format!("not {what}: {m} (move it away, or give another --checkpoint)"),
        };
        // never opened unless a regular file: a FIFO would block the open
        match fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(bad(
                    "not a regular file (a directory, device node, FIFO or socket)".into(),
                ))
            }
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        let mut bytes = Vec::new();
        match File::open(path) {
            Ok(f) => f
                .take(MAX_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(path, "cannot read the checkpoint", e))?,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, "cannot read the checkpoint", e)),
        };
        if bytes.len() as u64 > MAX_BYTES {
            return Err(bad(format!("larger than {MAX_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if is_legacy(&value) {
            return Err(Error::CheckpointMismatch {
                path: path.to_path_buf(),
                message: "written by an earlier fallow, without a checksum: it cannot be checked, so it is not resumed; --restart starts over (and replaces it)".into(),
            });
        }
        if value.get("format").and_then(|f| f.as_str()) != Some(NATIVE_CHECKPOINT_FORMAT) {
            return Err(bad(format!(
                "no \"format\": \"{NATIVE_CHECKPOINT_FORMAT}\""
            )));
        }
        let corrupt = |field: &str, m: String| {
            Error::Parse {
            path: path.to_path_buf(),
            message: format!(
                "corrupt or edited checkpoint: `{field}`: {m}; it cannot be trusted (move it away, or --restart to discard it)"
            ),
        }
        };
        let (body, stored) = split_checksum(&text)
            .ok_or_else(|| corrupt("checksum", "missing or malformed".into()))?;
        let computed = crc32fast::hash(body.as_bytes());
        if stored != computed {
            return Err(corrupt(
                "checksum",
                format!("the file says crc32:{stored:08x}, its content gives crc32:{computed:08x}"),
            ));
        }
        // straight into the struct: serde refuses duplicate and unknown keys
        let c: Self = serde_json::from_str(&body).map_err(|e| corrupt("(json)", e.to_string()))?;
        c.validate().map_err(|(field, m)| corrupt(field, m))?;
        Ok(Some(c))
    }

    /// Internal consistency, naming the field at fault.
    pub fn validate(&self) -> std::result::Result<(), Bad> {
        let fail = |field: &'static str, m: String| Err((field, m));
        if self.version != VERSION {
            return fail(
                "version",
                format!("{}, this fallow reads {VERSION}", self.version),
            );
        }
        if self.kind != D::KIND.prefix {
            return fail("kind", format!("{:?}, not {:?}", self.kind, D::KIND.prefix));
        }
        let prefix = format!("{}:", D::KIND.prefix);
        if !self.target.starts_with(&prefix) {
            return fail(
                "target",
                format!("{:?} is not a {prefix} target", self.target),
            );
        }
        if self.size_bytes == 0 {
            return fail("size_bytes", "0".into());
        }
        let (next, size) = (self.next_offset_bytes, self.size_bytes);
        if next > size {
            return fail(
                "next_offset_bytes",
                format!("{next}, past the end at {size}"),
            );
        }
        if self.complete != (next == size) {
            return fail(
                "complete",
                format!(
                    "{} with the next offset at {next} of {size} bytes",
                    self.complete
                ),
            );
        }
        // every request but a pass's last moves the offset by a step or more
        let step = self.detail.min_step_bytes().max(1);
        let most = next.div_ceil(step);
        if self.requests > most || (next > 0) != (self.requests > 0) {
            return fail(
                "requests",
                format!(
                    "{} to reach byte {next} in steps of at least {step} bytes (0 to {most}, and 0 only at byte 0)",
                    self.requests
                ),
            );
        }
        if self.pass == 0 || self.pass > MAX_PASSES {
            return fail(
                "pass",
                format!("{} (a saved checkpoint has 1 to {MAX_PASSES})", self.pass),
            );
        }
        self.detail.validate(self)
    }

    /// Write it atomically, with its checksum.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.updated_unix_s = unix_now_s();
        let body = serde_json::to_string_pretty(self).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("cannot serialise the checkpoint: {e}"),
        })?;
        write_atomically(path, with_checksum(&body).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Probe {
        step_bytes: u64,
    }

    impl Detail for Probe {
        const KIND: &'static Kind = &crate::native::fstrim::KIND;
        fn job(&self) -> String {
            "probe".into()
        }
        fn min_step_bytes(&self) -> u64 {
            self.step_bytes
        }
        fn validate(&self, _: &OffsetCheckpoint<Self>) -> std::result::Result<(), Bad> {
            Ok(())
        }
    }

    fn sample() -> OffsetCheckpoint<Probe> {
        let mut c = OffsetCheckpoint::new(
            "fstrim:/srv",
            10 << 20,
            Probe {
                step_bytes: 1 << 20,
            },
        );
        c.next_offset_bytes = 3 << 20;
        c.requests = 3;
        c
    }

    #[test]
    fn saved_checkpoints_load_back_and_any_edit_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ck.json");
        let mut c = sample();
        c.save(&p).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("{\n  \"format\": \"fallow-native-checkpoint\""),
            "{text}"
        );
        assert!(text.contains("\"checksum\": \"crc32:"), "{text}");
        assert_eq!(
            OffsetCheckpoint::<Probe>::load(&p).unwrap(),
            Some(c.clone())
        );
        // an edit, even one that keeps the fields consistent, breaks the checksum
        fs::write(&p, text.replace("\"requests\": 3", "\"requests\": 2")).unwrap();
        let e = OffsetCheckpoint::<Probe>::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("`checksum`") && e.contains("cannot be trusted"),
            "{e}"
        );
        fs::write(&p, text.replace("  \"checksum\"", "  \"checksum_\"")).unwrap();
        assert!(OffsetCheckpoint::<Probe>::load(&p).is_err());
        assert_eq!(
            OffsetCheckpoint::<Probe>::load(&d.path().join("none")).unwrap(),
            None
        );
    }

    /// A checkpoint with `edit` applied and a valid checksum, as a forger
    /// who knows the format would write it.
    fn forged(edit: impl FnOnce(&mut OffsetCheckpoint<Probe>)) -> String {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ck.json");
        let mut c = sample();
        edit(&mut c);
        let body = serde_json::to_string_pretty(&c).unwrap();
        fs::write(&p, with_checksum(&body)).unwrap();
        OffsetCheckpoint::<Probe>::load(&p).unwrap_err().to_string()
    }

    #[test]
    fn inconsistent_fields_are_refused_by_name() {
        type Edit = Box<dyn FnOnce(&mut OffsetCheckpoint<Probe>)>;
        let cases: [(&str, Edit); 9] = [
            (
                "next_offset_bytes",
                Box::new(|c| c.next_offset_bytes = 11 << 20),
            ),
            ("complete", Box::new(|c| c.complete = true)),
            (
                "complete",
                Box::new(|c| {
                    c.next_offset_bytes = 10 << 20;
                    c.requests = 10;
                }),
            ),
            // 3 MiB in steps of 1 MiB or more: at most 3 requests
            ("requests", Box::new(|c| c.requests = 4)),
            ("requests", Box::new(|c| c.requests = 0)),
            ("pass", Box::new(|c| c.pass = 0)),
            ("pass", Box::new(|c| c.pass = MAX_PASSES + 1)),
            ("kind", Box::new(|c| c.kind = "md".into())),
            ("target", Box::new(|c| c.target = "md:/dev/md0".into())),
        ];
        for (field, edit) in cases {
            let e = forged(edit);
            assert!(e.contains(&format!("`{field}`")), "{field}: {e}");
        }
        let e = forged(|c| c.size_bytes = 0);
        assert!(e.contains("`size_bytes`"), "{e}");
    }

    #[test]
    fn open_checks_the_path_the_target_and_the_resume_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ck.json");
        let guard = OutputGuard::new(false);
        let fresh = || {
            OffsetCheckpoint::new(
                "fstrim:/srv",
                10 << 20,
                Probe {
                    step_bytes: 1 << 20,
                },
            )
        };
        let keep = |_: &mut Probe, _: &Probe| {};
        sample().save(&p).unwrap();
        let open = |resume, fresh| OffsetCheckpoint::open(&p, &guard, resume, fresh, keep);
        let (c, lock) = open(Resume::Yes, fresh()).unwrap();
        assert_eq!(c.next_offset_bytes, 3 << 20);
        drop(lock);
        let e = open(Resume::No, fresh()).unwrap_err().to_string();
        assert!(
            e.contains("unfinished probe") && e.contains("--resume continues it"),
            "{e}"
        );
        let (c, lock) = open(Resume::Restart, fresh()).unwrap();
        assert_eq!(c.next_offset_bytes, 0);
        drop(lock);
        let other = OffsetCheckpoint::new("fstrim:/other", 10 << 20, Probe { step_bytes: 1 });
        let e = open(Resume::Yes, other).unwrap_err().to_string();
        assert!(
            e.contains("belongs to fstrim:/srv, not fstrim:/other"),
            "{e}"
        );
        let grown = OffsetCheckpoint::new("fstrim:/srv", 20 << 20, Probe { step_bytes: 1 });
        let e = open(Resume::Yes, grown).unwrap_err().to_string();
        assert!(
            e.contains("had 10485760 bytes") && e.contains("--restart"),
            "{e}"
        );
        // a complete pass starts the next
        let mut done = sample();
        done.next_offset_bytes = 10 << 20;
        done.requests = 10;
        done.complete = true;
        done.save(&p).unwrap();
        let (c, _lock) = open(Resume::No, fresh()).unwrap();
        assert_eq!((c.pass, c.next_offset_bytes, c.requests), (2, 0, 0));
    }

    #[test]
    fn legacy_checkpoints_are_recognised_but_not_resumed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ck.json");
        let old = r#"{"target": "fstrim:/srv", "fs_bytes": 10, "minlen_bytes": 0, "next_offset": 4,
            "trimmed_bytes": 0, "ranges": 1, "complete": false, "pass": 1, "updated_unix_s": 5}"#;
        fs::write(&p, old).unwrap();
        assert!(is_legacy(&serde_json::from_str(old).unwrap()));
        let e = OffsetCheckpoint::<Probe>::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("earlier fallow") && e.contains("--restart"),
            "{e}"
        );
        // the guard lets --restart replace it without --overwrite
        assert!(OutputGuard::new(false)
            .check(&p, OutputKind::Checkpoint, "--checkpoint")
            .is_ok());
        let (c, _lock) = OffsetCheckpoint::open(
            &p,
            &OutputGuard::new(false),
            Resume::Restart,
            sample(),
            |_, _| {},
        )
        .unwrap();
        assert_eq!(c.next_offset_bytes, 3 << 20);
    }
}
