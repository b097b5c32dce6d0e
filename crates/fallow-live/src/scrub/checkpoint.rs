//! The scrub's checkpoint: a small JSON file with what was scrubbed (the
//! next visit index of a fixed order), the target's identity and the bad
//! ranges found, replaced atomically after every request so that a
//! crash, `kill -9` or power loss loses at most the request in service.
//!
//! Atomic replacement: write a temporary file in the same directory,
//! fsync it, rename it over the checkpoint, fsync the directory. A reader
//! sees the old checkpoint or the new one, never a mix or a truncated one.
//!
//! ## Format (version 2)
//!
//! Pretty-printed JSON: `"format": "fallow-scrub-checkpoint"` first (the
//! mark [`fallow_core::outpath`] recognises before replacing a file), the
//! fields of [`Checkpoint`], and last a `"checksum": "crc32:XXXXXXXX"`
//! member: the CRC-32 (IEEE, as in gzip) of the file's bytes with that
//! member (the `,\n  "checksum": …` line) taken out. Any edit, even of
//! white space, makes the checksum disagree, and the file is refused.
//!
//! ## What `load` checks
//!
//! Before a checkpoint is trusted ([`Checkpoint::load`]): the checksum; no
//! duplicate and no unknown keys; then, field by field, consistency with
//! the target and request size it records ([`Checkpoint::validate`]):
//! `segments` = ⌈target size / request size⌉, `next_visit` ≤ `segments`,
//! `complete` exactly when every segment is visited, `scrubbed_bytes` the
//! bytes of the visited segments, bad ranges ordered, merged, inside the
//! target and inside the visited segments, staggered `regions` ≥ 1, pass
//! and run counts and times plausible. [`Checkpoint::check_matches`] then
//! compares the recorded target with the real one. Every refusal names
//! the file and the field.
//!
//! Version-1 checkpoints (before the checksum) are accepted with the same
//! validation, so a scrub under way survives an upgrade; the next save
//! writes version 2.

use super::order::{Order, Plan};
use crate::error::{Error, Result};
use fallow_core::outpath::{Atomic, CHECKPOINT_FORMAT};
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

/// Format version written; a different one is refused with a clear message.
pub const VERSION: u32 = 2;
/// The oldest version read (without a checksum; validated all the same).
pub const OLDEST_VERSION: u32 = 1;
/// Most passes a checkpoint may claim: a run starts at most one pass, so
/// more than this many (2³², a run a second for 136 years) is corruption.
pub const MAX_PASSES: u64 = 1 << 32;
/// A checkpoint larger than this is not one (64 MiB: millions of bad ranges).
const MAX_BYTES: u64 = 64 << 20;

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
    /// [`CHECKPOINT_FORMAT`] (absent in version 1).
    #[serde(default)]
    pub format: String,
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
            format: CHECKPOINT_FORMAT.to_string(),
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

    /// Read a checkpoint and check it (see the module documentation);
    /// `Ok(None)` if there is none.
    pub fn load(path: &Path) -> Result<Option<Checkpoint>> {
        let mut bytes = Vec::new();
        // never opened unless a regular file: a FIFO would block the open,
        // a device node give endless bytes
        match fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    message: "not a fallow scrub checkpoint: not a regular file (a directory, device node, FIFO or socket)".into(),
                })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            _ => {}
        }
        match File::open(path) {
            Ok(f) => f
                .take(MAX_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(path, "cannot read the checkpoint", e))?,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, "cannot read the checkpoint", e)),
        };
        let bad = |m: String| Error::Parse {
            path: path.to_path_buf(),
            message: format!(
                "not a fallow scrub checkpoint: {m} (move it away, or give another --checkpoint)"
            ),
        };
        if bytes.len() as u64 > MAX_BYTES {
            return Err(bad(format!("larger than {MAX_BYTES} bytes")));
        }
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))?;
        #[derive(Deserialize)]
        struct Probe {
            version: Option<u64>,
        }
        let probe: Probe = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let corrupt = |field: &str, m: String| {
            Error::Parse {
            path: path.to_path_buf(),
            message: format!(
                "corrupt or edited checkpoint: `{field}`: {m}; it cannot be trusted (move it away, or --restart to discard it)"
            ),
        }
        };
        let body = match probe.version {
            Some(2) => {
                let (body, stored) = split_checksum(&text)
                    .ok_or_else(|| corrupt("checksum", "missing or malformed".into()))?;
                let computed = crc32(&body);
                if stored != computed {
                    return Err(corrupt(
                        "checksum",
                        format!(
                            "the file says crc32:{stored:08x}, its content gives crc32:{computed:08x}"
                        ),
                    ));
                }
                body
            }
            Some(1) => text,
            Some(n) => {
                return Err(bad(format!(
                    "format version {n}, this fallow reads versions {OLDEST_VERSION} to {VERSION}"
                )))
            }
            None => return Err(bad("no `version` field".into())),
        };
        // straight into the struct: serde refuses duplicate and unknown keys
        let c: Checkpoint =
            serde_json::from_str(&body).map_err(|e| corrupt("(json)", e.to_string()))?;
        c.validate().map_err(|(field, m)| corrupt(field, m))?;
        Ok(Some(c))
    }

    /// Internal consistency: every field against the target size and
    /// request size the checkpoint records. The error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let fail = |field: &'static str, m: String| Err((field, m));
        match self.version {
            1 if self.format.is_empty() => {}
            1 => return fail("format", "a version-1 checkpoint has no `format`".into()),
            _ if self.format != CHECKPOINT_FORMAT => {
                return fail(
                    "format",
                    format!("{:?}, not {CHECKPOINT_FORMAT:?}", self.format),
                )
            }
            _ => {}
        }
        let size = self.target.size_bytes;
        if self.request_size_bytes == 0 {
            return fail("request_size_bytes", "0".into());
        }
        if let Order::Staggered { regions: 0 } = self.order {
            return fail("order", "a staggered order of 0 regions".into());
        }
        let plan = Plan::new(size, self.request_size_bytes, self.order);
        if self.segments != plan.segments {
            return fail(
                "segments",
                format!(
                    "{}, but a target of {size} bytes in requests of {} bytes has {}",
                    self.segments, self.request_size_bytes, plan.segments
                ),
            );
        }
        if self.next_visit > self.segments {
            return fail(
                "next_visit",
                format!("{} of {} segments", self.next_visit, self.segments),
            );
        }
        if self.complete != (self.next_visit == self.segments) {
            return fail(
                "complete",
                format!(
                    "{} with {} of {} segments visited",
                    self.complete, self.next_visit, self.segments
                ),
            );
        }
        let visited = plan.visited_bytes(self.next_visit);
        if self.scrubbed_bytes != visited {
            return fail(
                "scrubbed_bytes",
                format!(
                    "{}, but the {} segments visited hold {visited} bytes (target {size} bytes)",
                    self.scrubbed_bytes, self.next_visit
                ),
            );
        }
        if self.next_visit > 0 && self.requests == 0 {
            return fail(
                "requests",
                format!("0 with {} segments visited", self.next_visit),
            );
        }
        let mut prev: Option<[u64; 2]> = None;
        for (i, r) in self.bad_ranges.iter().enumerate() {
            let [first, last] = *r;
            if first > last || last >= size {
                return fail(
                    "bad_ranges",
                    format!("range {i} [{first}, {last}] is not inside the target of {size} bytes"),
                );
            }
            if prev.is_some_and(|p| first <= p[1].saturating_add(1)) {
                return fail(
                    "bad_ranges",
                    format!("range {i} [{first}, {last}] is out of order or not merged with the one before"),
                );
            }
            let seg = self.request_size_bytes;
            if plan.max_visit_in(first / seg, last / seg) >= self.next_visit {
                return fail(
                    "bad_ranges",
                    format!("range {i} [{first}, {last}] lies in segments not scrubbed yet"),
                );
            }
            prev = Some(*r);
        }
        if self.passes_completed > MAX_PASSES {
            return fail(
                "passes_completed",
                format!("{} (more than {MAX_PASSES})", self.passes_completed),
            );
        }
        if self.runs == 0 || self.runs > MAX_PASSES {
            return fail(
                "runs",
                format!("{} (a saved checkpoint has 1 to {MAX_PASSES})", self.runs),
            );
        }
        if self.pass_started_unix_s > self.updated_unix_s {
            return fail(
                "pass_started_unix_s",
                format!(
                    "{} is after updated_unix_s {}",
                    self.pass_started_unix_s, self.updated_unix_s
                ),
            );
        }
        if !(self.active_s.is_finite() && self.active_s >= 0.0) {
            return fail("active_s", format!("{}", self.active_s));
        }
        Ok(())
    }

    /// Write atomically (see the module documentation), with its checksum.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.updated_unix_s = unix_now_s();
        self.format = CHECKPOINT_FORMAT.to_string();
        self.version = VERSION;
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            message: format!("cannot serialise the checkpoint: {e}"),
        })?;
        write_atomically(path, with_checksum(&text).as_bytes())
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

/// [`default_path`] for `target`, its directory made; `what` names the
/// file in the error (`the checkpoint`, `the budget window`).
pub fn default_path_made(target: &Path, what: &str) -> Result<PathBuf> {
    let p = default_path(target)?;
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Setting(format!(
                "cannot create {} for {what} ({e}); give --checkpoint FILE",
                dir.display()
            ))
        })?;
    }
    Ok(p)
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

/// The lock file of the checkpoint at `path`: `<path>.lock`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The temporary file a save of the checkpoint at `path` writes first:
/// `.<name>.tmp` beside it.
pub fn temp_path(path: &Path) -> PathBuf {
    Atomic::fixed_temp_path(path)
}

/// How long [`lock`] retries a lock that is held, ms. A `flock` belongs
/// to the open file, and a child another thread of the same process has
/// forked shares it until its `exec` closes the descriptor: for that
/// instant a lock just released looks held (a CI run failed on it; a
/// thread spawning `true` in a loop reproduced it in 6 lock-and-release
/// rounds). A real holder, another scrub, holds it far longer.
const LOCK_RETRY_MS: u64 = 500;

/// Take the lock of the checkpoint at `path`, or say who holds it.
pub fn lock(path: &Path) -> Result<Lock> {
    let lock_path = lock_path(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, "cannot create the checkpoint's lock file", e))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(LOCK_RETRY_MS);
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(Lock { _file: file }),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
                return Err(Error::Unsupported(format!(
                    "{}: another fallow scrub is using this checkpoint (its lock {} is held)",
                    path.display(),
                    lock_path.display()
                )));
            }
            Err(e) if e == rustix::io::Errno::INTR => continue,
            Err(e) => return Err(Error::io(&lock_path, "cannot lock", e.into())),
        }
    }
}

/// CRC-32 (IEEE) of `text`.
fn crc32(text: &str) -> u32 {
    crc32fast::hash(text.as_bytes())
}

/// The saved text: `body` (pretty JSON ending in `\n}`) with the checksum
/// of `body` as its last member, and a final newline.
pub(crate) fn with_checksum(body: &str) -> String {
    let open = body.strip_suffix("\n}").unwrap_or(body);
    format!(
        "{open},\n  \"checksum\": \"crc32:{:08x}\"\n}}\n",
        crc32(body)
    )
}

/// Undo [`with_checksum`]: the body and the checksum stored, or `None`
/// when the last member is not a well-formed checksum.
pub(crate) fn split_checksum(text: &str) -> Option<(String, u32)> {
    let rest = text.strip_suffix("\"\n}\n")?;
    let at = rest.rfind(",\n  \"checksum\": \"crc32:")?;
    let hex = &rest[at + ",\n  \"checksum\": \"crc32:".len()..];
    if hex.len() != 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let stored = u32::from_str_radix(hex, 16).ok()?;
    Some((format!("{}\n}}", &rest[..at]), stored))
}

/// Unix time now, s.
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Replace `path` with `bytes` atomically: temporary file in the same
/// directory (one fixed name, [`temp_path`]: a writer killed mid-write
/// leaves at most this file, which the next save replaces; writers of one
/// checkpoint are serialised by its lock, see `lock`), fsync, rename,
/// fsync the directory ([`fallow_core::outpath::Atomic`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    Atomic {
        fixed_temp: true,
        ..Atomic::DURABLE
    }
    .write_bytes(path, bytes)
    .map_err(|e| Error::io(path, "cannot write the checkpoint", e))
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
        c.scrubbed_bytes = 18 << 20;
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
    }

    /// Write `c` as a forger who recomputes the checksum would: only the
    /// consistency checks can catch it then.
    fn forge(p: &Path, c: &Checkpoint) {
        let text = serde_json::to_string_pretty(c).unwrap();
        fs::write(p, with_checksum(&text)).unwrap();
    }

    fn refused(p: &Path) -> String {
        let e = Checkpoint::load(p).unwrap_err().to_string();
        assert!(e.contains(&p.display().to_string()), "{e}");
        e
    }

    /// An 8 MiB target in 1 MiB requests, 3 segments done.
    fn eight() -> Checkpoint {
        let mut t = target();
        t.size_bytes = 8 << 20;
        let mut c = Checkpoint::new(t, Order::Sequential, 1 << 20, 8);
        c.next_visit = 3;
        c.scrubbed_bytes = 3 << 20;
        c.requests = 3;
        c.runs = 1;
        c
    }

    #[test]
    fn a_hand_edit_breaks_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        eight().save(&p).unwrap();
        assert!(Checkpoint::load(&p).is_ok());
        let text = fs::read_to_string(&p).unwrap();
        assert!(
            text.starts_with("{\n  \"format\": \"fallow-scrub-checkpoint\""),
            "{text}"
        );
        // segments 8 -> 4, next_visit 3 -> 7, by hand
        for (from, to) in [
            ("\"segments\": 8", "\"segments\": 4"),
            ("\"next_visit\": 3", "\"next_visit\": 7"),
        ] {
            fs::write(&p, text.replace(from, to)).unwrap();
            let e = refused(&p);
            assert!(
                e.contains("`checksum`") && e.contains("cannot be trusted"),
                "{e}"
            );
        }
        // the checksum member removed or mangled
        let body = text.rsplit_once(",\n  \"checksum\"").unwrap().0.to_string() + "\n}\n";
        fs::write(&p, &body).unwrap();
        assert!(refused(&p).contains("missing or malformed"));
        fs::write(&p, text.replace("crc32:", "crc32:zz")).unwrap();
        assert!(refused(&p).contains("missing or malformed"));
        // the checksum is CRC-32/IEEE of the body: check one by hand (zlib's)
        assert_eq!(crc32("123456789"), 0xcbf4_3926);
    }

    #[test]
    fn inconsistent_checkpoints_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        type Edit = Box<dyn Fn(&mut Checkpoint)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("segments", Box::new(|c| c.segments = 4)),
            ("next_visit", Box::new(|c| c.next_visit = 9)),
            // next_visit 3 -> 7 with the bytes left at 3 MiB
            ("scrubbed_bytes", Box::new(|c| c.next_visit = 7)),
            // complete claimed with 3 of 8 segments read
            ("complete", Box::new(|c| c.complete = true)),
            ("scrubbed_bytes", Box::new(|c| c.scrubbed_bytes = 9 << 20)),
            (
                "bad_ranges",
                Box::new(|c| c.bad_ranges = vec![[100 << 20, 200 << 20]]),
            ),
            // inside the target, but in a segment not read yet
            (
                "bad_ranges",
                Box::new(|c| c.bad_ranges = vec![[5 << 20, (5 << 20) + 511]]),
            ),
            (
                "bad_ranges",
                Box::new(|c| c.bad_ranges = vec![[1024, 2047], [0, 511]]),
            ),
            (
                "bad_ranges",
                Box::new(|c| c.bad_ranges = vec![[0, 511], [512, 1023]]),
            ),
            ("bad_ranges", Box::new(|c| c.bad_ranges = vec![[600, 500]])),
            ("request_size_bytes", Box::new(|c| c.request_size_bytes = 0)),
            (
                "order",
                Box::new(|c| c.order = Order::Staggered { regions: 0 }),
            ),
            ("requests", Box::new(|c| c.requests = 0)),
            (
                "passes_completed",
                Box::new(|c| c.passes_completed = u64::MAX),
            ),
            ("runs", Box::new(|c| c.runs = 0)),
            ("active_s", Box::new(|c| c.active_s = -1.0)),
            (
                "pass_started_unix_s",
                Box::new(|c| c.pass_started_unix_s = u64::MAX),
            ),
            ("format", Box::new(|c| c.format = "something-else".into())),
        ];
        for (field, edit) in cases {
            let mut c = eight();
            edit(&mut c);
            forge(&p, &c);
            let e = refused(&p);
            assert!(e.contains(&format!("`{field}`")), "{field}: {e}");
        }
        // consistent ones load, a staggered one with a short last segment too
        let mut c = eight();
        c.bad_ranges = vec![[0, 511], [(2 << 20) + 4096, (3 << 20) - 1]];
        forge(&p, &c);
        assert_eq!(Checkpoint::load(&p).unwrap(), Some(c));
        let mut t = target();
        t.size_bytes = 10 * 4096 + 100; // 11 segments, 3 regions of 4, 4, 3
        let mut c = Checkpoint::new(t, Order::Staggered { regions: 3 }, 4096, 11);
        // visits 0..6 are segments 0, 4, 8, 1, 5, 9; the short one (10) is not among them
        c.next_visit = 6;
        c.scrubbed_bytes = 6 * 4096;
        c.requests = 6;
        c.runs = 1;
        c.bad_ranges = vec![[4 * 4096, 6 * 4096 - 1]]; // segments 4 and 5: visited
        forge(&p, &c);
        assert!(Checkpoint::load(&p).is_ok());
        c.bad_ranges = vec![[4 * 4096, 7 * 4096 - 1]]; // segment 6 is not
        forge(&p, &c);
        assert!(refused(&p).contains("`bad_ranges`"));
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for p in [Path::new("/dev/zero"), dir.path()] {
            let e = Checkpoint::load(p).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        let text = serde_json::to_string_pretty(&eight()).unwrap();
        // a second next_visit after the first: serde_json's Value would keep the last
        let dup = text.replacen(
            "\"next_visit\": 3,",
            "\"next_visit\": 3,\n  \"next_visit\": 8,",
            1,
        );
        assert_ne!(dup, text);
        fs::write(&p, with_checksum(&dup)).unwrap();
        let e = refused(&p);
        assert!(e.contains("duplicate field `next_visit`"), "{e}");
        let dup = text.replacen(
            "\"kind\": \"sequential\"",
            "\"kind\": \"sequential\", \"kind\": \"sequential\"",
            1,
        );
        assert_ne!(dup, text);
        fs::write(&p, with_checksum(&dup)).unwrap();
        assert!(refused(&p).contains("duplicate field `kind`"));
    }

    #[test]
    fn version_one_checkpoints_are_read_with_the_same_checks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        let mut v = serde_json::to_value(eight()).unwrap();
        v.as_object_mut().unwrap().remove("format");
        v["version"] = 1.into();
        fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        let c = Checkpoint::load(&p).unwrap().unwrap();
        assert_eq!((c.version, c.next_visit), (1, 3));
        // and saving it writes version 2 with a checksum
        let mut c = c;
        c.save(&p).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert!(text.contains("\"version\": 2") && text.contains("\"checksum\": \"crc32:"));
        assert!(Checkpoint::load(&p).is_ok());
        v["next_visit"] = 7.into();
        fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        assert!(refused(&p).contains("`scrubbed_bytes`"));
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

    /// A lock released while another thread forks and execs children
    /// (as a test binary's other tests, or fallow's own guardian, do) is
    /// free again at once: the child's moment of holding the descriptor
    /// between fork and exec must not read as another scrub.
    #[test]
    fn a_released_lock_is_free_while_other_threads_spawn_processes() {
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ck.json");
        let stop = Arc::new(AtomicBool::new(false));
        let spawned = Arc::new(AtomicU32::new(0));
        let spawner = {
            let (stop, spawned) = (stop.clone(), spawned.clone());
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let _ = std::process::Command::new("true").status();
                    spawned.fetch_add(1, SeqCst);
                }
            })
        };
        // lock and release until 100 children were spawned meanwhile
        // (without the retry a round failed before the 4th child, 3 of 3)
        let t0 = std::time::Instant::now();
        let mut failed = None;
        let mut rounds = 0u32;
        while spawned.load(SeqCst) < 100 && t0.elapsed().as_secs() < 30 {
            if let Err(e) = lock(&p) {
                failed = Some(format!("round {rounds}: {e}"));
                break;
            }
            rounds += 1;
        }
        stop.store(true, SeqCst);
        spawner.join().unwrap();
        let spawned = spawned.load(SeqCst);
        assert!(failed.is_none(), "{failed:?} ({spawned} processes spawned)");
        assert!(
            spawned >= 100,
            "{spawned} processes spawned in {rounds} rounds"
        );
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
