//! The one guard every output path of fallow passes before anything is
//! written to it: checkpoints, scrub logs, HTML and JSON reports, converted
//! and recorded traces. "Nothing the user owns is written by accident":
//!
//! - never an input of the command (the scrub target, the trace, a config):
//!   the same file by device and inode, through any symlink or hard link;
//! - never a device node (`/dev/null`, `/dev/full`, a disk), FIFO or
//!   socket: writes are atomic (temporary file + rename), and a rename
//!   would replace the node itself with a regular file;
//! - never a directory, except the one output that is a directory: a
//!   partitioned dataset (`fallow convert --partition-by device -o DIR`,
//!   [`OutputGuard::check_dataset`]), which must be absent, empty, or a
//!   dataset fallow wrote (only `device=…` directories of `part-N.parquet`
//!   files fallow recognises), `--overwrite` or not;
//! - an existing regular file only if it is empty or fallow recognises it
//!   as its own output of that kind ([`OutputKind`] says how), unless the
//!   user forces it (`--overwrite`, [`OutputGuard::new`]'s `overwrite`).
//!
//! The first three are refused even with `--overwrite`: no flag makes
//! replacing the input being read, or `/dev/null`, what the user meant.
//! [`write_atomically`] repeats the device-node test just before its
//! rename, so a path that became one since the check is still refused.

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What an output is, which decides what an existing file must look like
/// to be replaced without `--overwrite`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// A checkpoint: a block scrub's, a JSON object with `"format":
    /// "fallow-scrub-checkpoint"` (version 2 on) or a version-1 one (a
    /// `version` of 1 with `target`, `segments` and `next_visit` keys); or a
    /// native job's (`fstrim:`, `md:`), with `"format":
    /// "fallow-native-checkpoint"`, or one written before that marker
    /// ([`is_legacy_native_checkpoint`]).
    Checkpoint,
    /// The scrub's per-request log (appended to, never replaced): its first
    /// line is a JSON object with `first_byte`, `last_byte` and `bad`.
    ScrubLog,
    /// An HTML report: `<meta name="generator" content="fallow` in its head.
    HtmlReport,
    /// A JSON report fallow wrote (`fallow demo`'s `report.json`, `fallow
    /// run --report`): a top-level `"generator": "fallow …"`, or the
    /// top-level keys of one written before the marker existed.
    JsonReport,
    /// A trace in fallow's binary format (`fallow convert`): its magic bytes.
    FallowBin,
    /// A Parquet or Arrow IPC trace fallow wrote (`fallow convert -o
    /// x.parquet`): the format's magic and fallow's schema metadata key
    /// (`fallow.origin_ns`) within its first or last 64 KiB.
    ColumnarTrace,
    /// A text trace `fallow record` writes (MSR CSV). Text traces carry no
    /// mark of who wrote them, so an existing non-empty one is never
    /// recognised: replacing it takes `--overwrite`.
    TextTrace,
    /// A counters file in `/sys/block/<dev>/stat` format (`fallow
    /// emulate-disk --stat-file`): one line of 11 to 17 whole numbers.
    StatFile,
    /// A text log fallow only appends to (`fallow emulate-disk --log`):
    /// what is there is kept, so any regular file is accepted.
    AppendedLog,
    /// A manual page `fallow man --dir` wrote: roff whose title line is
    /// `.TH fallow` (fallow(1)) or `.TH fallow-…` (a subcommand's page).
    ManPage,
    /// `fallow spindown`'s status file (`--state`): a JSON object with the
    /// daemon's `pid`, `updated` and `disks`.
    SpindownStatus,
    /// `fallow spindown`'s event log (`--log`, appended to): JSON lines,
    /// the first an object with `time`, `disk` and `event`. Unlike
    /// [`OutputKind::AppendedLog`] a foreign file is refused: appending
    /// JSON to someone's notes or to the `--power` file spoils it.
    SpindownLog,
    /// fallow's messages (`fallow emulate-disk --log`, appended to): its
    /// first line starts with `fallow`, as every line fallow writes to
    /// stderr does. Someone's notes are refused.
    MessageLog,
    /// A systemd unit `fallow spindown units` wrote: a comment line
    /// starting with [`UNIT_GENERATOR`] in its first 64 KiB.
    SystemdUnit,
}

impl OutputKind {
    /// The kind in words, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            OutputKind::Checkpoint => "a fallow checkpoint",
            OutputKind::ScrubLog => "a fallow scrub log",
            OutputKind::HtmlReport => "an HTML report fallow wrote",
            OutputKind::JsonReport => "a JSON report fallow wrote",
            OutputKind::FallowBin => "a trace in fallow's binary format",
            OutputKind::ColumnarTrace => "a Parquet or Arrow trace fallow wrote",
            OutputKind::TextTrace => "a trace fallow can tell it wrote",
            OutputKind::StatFile => "a counters file in /sys/block/<dev>/stat format",
            OutputKind::AppendedLog => "a log",
            OutputKind::ManPage => "a manual page fallow wrote",
            OutputKind::SpindownStatus => "a fallow spindown status file",
            OutputKind::SpindownLog => "a fallow spindown event log",
            OutputKind::SystemdUnit => "a systemd unit fallow wrote",
            OutputKind::MessageLog => "a log of fallow's messages",
        }
    }
}

/// The marker of a version-2 (and later) checkpoint.
pub const CHECKPOINT_FORMAT: &str = "fallow-scrub-checkpoint";
/// The marker of a native job's checkpoint (`fstrim:`, `md:`).
pub const NATIVE_CHECKPOINT_FORMAT: &str = "fallow-native-checkpoint";
/// The value of a JSON report's `generator` key (followed by the version).
pub const JSON_GENERATOR: &str = "fallow";
/// The first line's start of a systemd unit fallow writes.
pub const UNIT_GENERATOR: &str = "# Written by fallow";
/// How much of an existing file is read to recognise it. A checkpoint is
/// parsed whole (bad ranges can make it long); a longer file is not one.
const HEAD_BYTES: u64 = 64 << 10;
const WHOLE_BYTES: u64 = 64 << 20;

/// An input of the command, by identity.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Input {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The inputs of one command and whether the user forces overwriting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputGuard {
    inputs: Vec<Input>,
    overwrite: bool,
}

impl OutputGuard {
    /// A guard with no inputs yet; `overwrite` lets existing regular files
    /// fallow does not recognise be replaced (`--overwrite`).
    pub fn new(overwrite: bool) -> OutputGuard {
        OutputGuard {
            inputs: Vec::new(),
            overwrite,
        }
    }

    /// Whether unrecognised files may be replaced.
    pub fn overwrite(&self) -> bool {
        self.overwrite
    }

    /// Add an input (followed through symlinks). A path that does not
    /// exist is no input anything could overwrite and is left out.
    pub fn input(mut self, path: &Path) -> OutputGuard {
        self.add_input(path);
        self
    }

    /// [`OutputGuard::input`] in place.
    pub fn add_input(&mut self, path: &Path) {
        if let Ok(m) = fs::metadata(path) {
            self.inputs.push(Input {
                path: path.to_path_buf(),
                dev: m.dev(),
                ino: m.ino(),
            });
        }
    }

    /// Refuse `path` as the output `kind` given by `param` (a flag such as
    /// `--html`, or a config key) if writing it could destroy something
    /// the user owns; see the module documentation for the rules.
    pub fn check(&self, path: &Path, kind: OutputKind, param: &str) -> Result<()> {
        let refuse = |why: String| Err(Error::invalid(param, format!("{}: {why}", path.display())));
        if path.file_name().is_none() {
            return refuse("not a file name".into());
        }
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            // nothing there (or a dangling symlink, which the rename replaces)
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return refuse(format!("cannot inspect it ({e}); refusing to write it")),
        };
        if let Some(i) = self
            .inputs
            .iter()
            .find(|i| i.dev == meta.dev() && i.ino == meta.ino())
        {
            let same = if i.path == path {
                String::new()
            } else {
                format!(" (the same file as {})", i.path.display())
            };
            return refuse(format!(
                "is an input of this command{same}; writing it would destroy it: choose another path"
            ));
        }
        if let Some(what) = special(&meta.file_type()) {
            return refuse(format!(
                "is {what}; fallow writes outputs only to regular files (and replacing one by rename would turn the node into a file)"
            ));
        }
        if meta.is_dir() {
            return refuse("is a directory; give a file name".into());
        }
        if meta.len() == 0 || self.overwrite {
            return Ok(());
        }
        match recognise(path, kind) {
            Ok(true) => Ok(()),
            Ok(false) => refuse(format!(
                "exists and is not {}; pass --overwrite to replace it",
                kind.describe()
            )),
            Err(e) => refuse(format!(
                "exists and cannot be read to tell whether fallow wrote it ({e}); pass --overwrite to replace it"
            )),
        }
    }
}

impl OutputGuard {
    /// Refuse `dir` as a partitioned dataset's directory (given by
    /// `param`) unless it is absent, empty, or a dataset fallow wrote:
    /// nothing but `device=…` directories holding nothing but
    /// `part-N.parquet` files recognised as [`OutputKind::ColumnarTrace`].
    /// No input of the command may lie inside it. `--overwrite` does not
    /// loosen this: replacing a directory removes everything in it.
    pub fn check_dataset(&self, dir: &Path, param: &str) -> Result<()> {
        let refuse = |why: String| Err(Error::invalid(param, format!("{}: {why}", dir.display())));
        if dir.file_name().is_none() {
            return refuse("not a directory name".into());
        }
        let meta = match fs::metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return refuse(format!("cannot inspect it ({e}); refusing to write it")),
        };
        if let Some(what) = special(&meta.file_type()) {
            return refuse(format!(
                "is {what}; a dataset is written as a new directory"
            ));
        }
        if !meta.is_dir() {
            return refuse(
                "is a file; --partition-by writes a directory of Parquet files: give a directory name"
                    .into(),
            );
        }
        let canon = fs::canonicalize(dir).map_err(|e| Error::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        for i in &self.inputs {
            if fs::canonicalize(&i.path).is_ok_and(|p| p.starts_with(&canon)) {
                return refuse(format!(
                    "holds {}, an input of this command; replacing the directory would destroy it",
                    i.path.display()
                ));
            }
        }
        let list = |d: &Path| -> Result<Vec<fs::DirEntry>> {
            fs::read_dir(d)
                .and_then(|it| it.collect::<io::Result<Vec<_>>>())
                .map_err(|source| Error::Io {
                    path: d.to_path_buf(),
                    source,
                })
        };
        let not_ours = |what: &Path| {
            refuse(format!(
                "is not empty and not a dataset fallow wrote ({} is not a `device=…` directory \
                 of `part-N.parquet` files fallow wrote); choose a new or empty directory",
                what.display()
            ))
        };
        for e in list(dir)? {
            let p = e.path();
            let name = e.file_name();
            let ft = e.file_type().map_err(|source| Error::Io {
                path: p.clone(),
                source,
            })?;
            if !ft.is_dir() || !name.to_string_lossy().starts_with("device=") {
                return not_ours(&p);
            }
            for f in list(&p)? {
                let fp = f.path();
                let fname = f.file_name().to_string_lossy().into_owned();
                let numbered = fname
                    .strip_prefix("part-")
                    .and_then(|r| r.strip_suffix(".parquet"))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                let regular = f.file_type().is_ok_and(|t| t.is_file());
                if !numbered
                    || !regular
                    || !recognise(&fp, OutputKind::ColumnarTrace).unwrap_or(false)
                {
                    return not_ours(&fp);
                }
            }
        }
        Ok(())
    }
}

/// A file type fallow never writes into: a device node, FIFO or socket.
fn special(t: &fs::FileType) -> Option<&'static str> {
    if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// Whether the existing file at `path` is fallow's own output of `kind`.
pub fn recognise(path: &Path, kind: OutputKind) -> io::Result<bool> {
    let limit = match kind {
        OutputKind::Checkpoint | OutputKind::JsonReport | OutputKind::SpindownStatus => WHOLE_BYTES,
        _ => HEAD_BYTES,
    };
    let mut bytes = Vec::new();
    File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    let whole = bytes.len() as u64 <= limit;
    Ok(match kind {
        OutputKind::Checkpoint => whole && is_checkpoint(&bytes),
        OutputKind::ScrubLog => {
            let first = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
            match serde_json::from_slice::<serde_json::Value>(first) {
                Ok(serde_json::Value::Object(m)) => ["first_byte", "last_byte", "bad"]
                    .iter()
                    .all(|k| m.contains_key(*k)),
                _ => false,
            }
        }
        OutputKind::HtmlReport => {
            let marker = b"<meta name=\"generator\" content=\"fallow";
            bytes.windows(marker.len()).any(|w| w == marker)
        }
        OutputKind::JsonReport => whole && is_json_report(&bytes),
        OutputKind::FallowBin => bytes.starts_with(crate::trace::FALLOW_BIN_MAGIC),
        OutputKind::ColumnarTrace => is_columnar_trace(path, &bytes)?,
        OutputKind::TextTrace => false,
        OutputKind::StatFile => {
            let text = String::from_utf8_lossy(&bytes);
            let fields: Vec<&str> = text.split_whitespace().collect();
            bytes.len() <= 512
                && text.trim_end().lines().count() == 1
                && (11..=17).contains(&fields.len())
                && fields.iter().all(|f| f.parse::<u64>().is_ok())
        }
        OutputKind::AppendedLog => true,
        OutputKind::ManPage => String::from_utf8_lossy(&bytes)
            .lines()
            .any(|l| l.starts_with(".TH fallow ") || l.starts_with(".TH fallow-")),
        OutputKind::SpindownStatus => {
            whole
                && matches!(
                    serde_json::from_slice::<serde_json::Value>(&bytes),
                    Ok(serde_json::Value::Object(m))
                        if ["pid", "updated", "disks"].iter().all(|k| m.contains_key(*k))
                )
        }
        OutputKind::SpindownLog => {
            let first = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
            matches!(
                serde_json::from_slice::<serde_json::Value>(first),
                Ok(serde_json::Value::Object(m))
                    if ["time", "disk", "event"].iter().all(|k| m.contains_key(*k))
            )
        }
        OutputKind::MessageLog => bytes.starts_with(b"fallow"),
        OutputKind::SystemdUnit => String::from_utf8_lossy(&bytes)
            .lines()
            .any(|l| l.starts_with(UNIT_GENERATOR)),
    })
}

/// A Parquet or Arrow IPC file carrying fallow's metadata key: in the
/// schema at the start of an Arrow file or stream, in the footer at the
/// end of a Parquet file (and of an Arrow file).
fn is_columnar_trace(path: &Path, head: &[u8]) -> io::Result<bool> {
    use std::io::{Seek, SeekFrom};
    let magic =
        head.starts_with(b"PAR1") || head.starts_with(b"ARROW1") || head.starts_with(&[0xff; 4]);
    if !magic {
        return Ok(false);
    }
    let marker = b"fallow.origin_ns";
    let has = |b: &[u8]| b.windows(marker.len()).any(|w| w == marker);
    if has(head) {
        return Ok(true);
    }
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(HEAD_BYTES)))?;
    let mut tail = Vec::new();
    f.take(HEAD_BYTES).read_to_end(&mut tail)?;
    Ok(has(&tail))
}

fn is_checkpoint(bytes: &[u8]) -> bool {
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(bytes)
    else {
        return false;
    };
    let format = m.get("format").and_then(|f| f.as_str());
    format == Some(CHECKPOINT_FORMAT)
        || format == Some(NATIVE_CHECKPOINT_FORMAT)
        || (m.get("version").and_then(|v| v.as_u64()) == Some(1)
            && ["target", "segments", "next_visit"]
                .iter()
                .all(|k| m.contains_key(*k)))
        || is_legacy_native_checkpoint(&serde_json::Value::Object(m))
}

/// A checkpoint `fstrim:` or `md:` wrote before
/// [`NATIVE_CHECKPOINT_FORMAT`] existed: no `format`, a target of the kind
/// and its position fields. fallow's own, so `--restart` may replace it;
/// never resumed (it has no checksum).
pub fn is_legacy_native_checkpoint(v: &serde_json::Value) -> bool {
    let Some(m) = v.as_object() else {
        return false;
    };
    let target = m.get("target").and_then(|t| t.as_str()).unwrap_or("");
    let has = |keys: &[&str]| keys.iter().all(|k| m.contains_key(*k));
    !m.contains_key("format")
        && has(&["complete", "pass", "updated_unix_s"])
        && ((target.starts_with("fstrim:") && has(&["fs_bytes", "next_offset"]))
            || (target.starts_with("md:") && has(&["total_sectors", "next_sector"])))
}

fn is_json_report(bytes: &[u8]) -> bool {
    let Ok(serde_json::Value::Object(m)) = serde_json::from_slice::<serde_json::Value>(bytes)
    else {
        return false;
    };
    let has = |keys: &[&str]| keys.iter().all(|k| m.contains_key(*k));
    m.get("generator")
        .and_then(|g| g.as_str())
        .is_some_and(|g| g.split(' ').next() == Some(JSON_GENERATOR))
        // written before the marker: a characterisation (`fallow demo`),
        // a `fallow run --report`
        || has(&["trace", "idle", "busy", "utilization"])
        || has(&["command", "policy_from", "driver", "monitor"])
}

/// What writing a trace to `path` is: the format its extension chooses
/// (the registry's writers, [`crate::trace::writer_for`]) and the kind of
/// output it makes. A Parquet or Arrow path without the `arrow` feature is
/// refused, naming `param`.
fn trace_output(
    path: &Path,
    param: &str,
) -> Result<(
    crate::trace::Format,
    &'static crate::trace::Writer,
    OutputKind,
)> {
    use crate::trace::Format;
    let (format, writer) = crate::trace::writer_for(path);
    let columnar = format == Format::Arrow || format == Format::Parquet;
    if columnar && !crate::trace::COLUMNAR_ENABLED {
        return Err(Error::invalid(
            param,
            format!(
                "{}: this fallow was built without the `arrow` cargo feature, so it cannot \
                 write Parquet or Arrow files (rebuild with default features, or write `.fbt`)",
                path.display()
            ),
        ));
    }
    let kind = if columnar {
        OutputKind::ColumnarTrace
    } else if format == Format::Fallow {
        OutputKind::FallowBin
    } else {
        OutputKind::TextTrace // `.csv`: MSR CSV
    };
    Ok((format, writer, kind))
}

/// Check `path` as the output of [`write_trace`] under `guard` (named
/// `param` in errors), before the work that makes the trace.
pub fn check_trace_output(guard: &OutputGuard, path: &Path, param: &str) -> Result<()> {
    let (_, _, kind) = trace_output(path, param)?;
    guard.check(path, kind, param)
}

/// Write `trace` to `path` atomically in the format its extension chooses
/// (`.fbt` or any other: fallow's binary format; `.parquet`, `.arrow`, …:
/// columnar; `.csv`: MSR CSV), the path checked under `guard` first.
/// `fallow convert -o` and Python's `Trace.write` write through it.
pub fn write_trace(
    trace: &crate::trace::Trace,
    path: &Path,
    guard: &OutputGuard,
    param: &str,
) -> Result<crate::trace::Format> {
    let (format, writer, kind) = trace_output(path, param)?;
    guard.check(path, kind, param)?;
    // a writer's own error (a trace an MSR CSV cannot hold) is the error,
    // not the I/O error it becomes inside the atomic write
    let mut failure = None;
    let written = write_atomically(path, |w| {
        (writer.write)(trace, w).map_err(|e| {
            let io = io::Error::other(e.to_string());
            failure = Some(e);
            io
        })
    });
    match (written, failure) {
        (Ok(()), _) => Ok(format),
        (Err(_), Some(e)) => Err(e),
        (Err(source), None) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Replace `path` atomically with what `write` produces: a new temporary
/// file in the same directory, fsync, rename over `path`, fsync the
/// directory. Readers see the old file or the new one, never a mix; a
/// failure leaves the old file and no temporary behind. The destination
/// must not be a device node, FIFO, socket or directory (checked again
/// right before the rename); callers check it with [`OutputGuard`] first.
/// [`Atomic::DURABLE`]; [`Atomic`] for the other ways fallow replaces
/// files.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    Atomic::DURABLE.write(path, write)
}

/// How a file is replaced atomically: the one implementation behind every
/// file fallow replaces (reports, checkpoints, the budget window, peer
/// keys, the emulated disk's stat file). Every way writes a temporary file
/// in the destination's directory, never through a symlink or over an
/// existing file (`create_new`), refuses to rename over a device node,
/// FIFO, socket or directory, and removes the temporary on failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atomic {
    /// fsync the file before the rename and the directory after it: a file
    /// that must survive a crash whole. False for a file that describes
    /// the running process (the emulated disk's stat line, rewritten at
    /// every change) and is worthless after a crash.
    pub durable: bool,
    /// The temporary is `.NAME.tmp`, one fixed name, removed first when a
    /// killed writer left it (a symlink there: the link, never what it
    /// points to). For writers serialised by a lock (a checkpoint): a
    /// crash leaves at most that one file, which the next write replaces,
    /// and guards can check its name in advance. Otherwise
    /// `.NAME.PID.N.tmp`, unique among concurrent writers.
    pub fixed_temp: bool,
    /// Permission bits of the new file (before the umask); `None`: 0o666.
    pub mode: Option<u32>,
}

impl Atomic {
    /// fsynced, a unique temporary, default permissions.
    pub const DURABLE: Atomic = Atomic {
        durable: true,
        fixed_temp: false,
        mode: None,
    };

    /// The fixed temporary name of `path` ([`Atomic::fixed_temp`]).
    pub fn fixed_temp_path(path: &Path) -> PathBuf {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        path.with_file_name(format!(".{name}.tmp"))
    }

    /// Replace `path` with what `write` produces (see [`Atomic`]), through
    /// a 1 MiB buffer (reports and traces are written in small pieces).
    pub fn write(
        self,
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        self.replace(path, |file| {
            let mut out = BufWriter::with_capacity(1 << 20, file);
            write(&mut out)?;
            out.into_inner().map_err(|e| e.into_error())
        })
    }

    /// [`Atomic::write`] of bytes already in memory, straight to the file
    /// with no buffer: checkpoints, keys, and the emulated disk's stat
    /// line, rewritten up to a thousand times a second.
    pub fn write_bytes(self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.replace(path, |mut file| {
            file.write_all(bytes)?;
            Ok(file)
        })
    }

    /// The temporary created, `fill`ed (which returns the file when done),
    /// synced if durable, checked and renamed over `path`.
    fn replace(self, path: &Path, fill: impl FnOnce(File) -> io::Result<File>) -> io::Result<()> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
        check_replaceable(path)?;
        let (tmp_path, file) = if self.fixed_temp {
            let tmp = Atomic::fixed_temp_path(path);
            match fs::remove_file(&tmp) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let f = self.options().open(&tmp)?;
            (tmp, f)
        } else {
            create_temp(&dir, &name.to_string_lossy(), self.options())?
        };
        let result = (|| -> io::Result<()> {
            let file = fill(file)?;
            if self.durable {
                file.sync_all()?;
            }
            drop(file);
            check_replaceable(path)?;
            fs::rename(&tmp_path, path)?;
            // make the rename durable; not every file system lets a directory be synced
            if self.durable {
                if let Ok(d) = File::open(&dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp_path);
        }
        result
    }

    /// A new file, never an existing one or a symlink's target.
    fn options(self) -> OpenOptions {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        if let Some(mode) = self.mode {
            o.mode(mode);
        }
        o
    }
}

/// Refuse to replace `path` by a rename when it is (or its symlink points
/// to) a directory, a device node, a FIFO or a socket.
pub fn check_replaceable(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        )),
        Ok(m) => match special(&m.file_type()) {
            Some(what) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("is {what}; refusing to replace it with a regular file"),
            )),
            None => Ok(()),
        },
        Err(_) => Ok(()),
    }
}

/// A new, exclusively created temporary file next to the destination
/// (never an existing file: `create_new`).
fn create_temp(dir: &Path, name: &str, options: OpenOptions) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut last_err = None;
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{pid}.{attempt}.tmp"));
        match options.open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("no temporary file name free")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<()>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn an_input_is_refused_through_any_name() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data.img");
        fs::write(&data, vec![7u8; 4096]).unwrap();
        let link = d.path().join("link.img");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        let hard = d.path().join("hard.img");
        fs::hard_link(&data, &hard).unwrap();
        // --overwrite does not lift it
        let g = OutputGuard::new(true).input(&data);
        for p in [&data, &link, &hard] {
            let e = msg(g.check(p, OutputKind::Checkpoint, "--checkpoint"));
            assert!(
                e.contains("--checkpoint") && e.contains("input of this command"),
                "{e}"
            );
            assert!(e.contains(&p.display().to_string()), "{e}");
        }
        // a missing input is no input; a path next to it is fine
        let g = OutputGuard::new(false)
            .input(&d.path().join("missing"))
            .input(&data);
        assert!(g
            .check(&d.path().join("ck.json"), OutputKind::Checkpoint, "x")
            .is_ok());
    }

    #[test]
    fn device_nodes_fifos_and_directories_are_refused_even_forced() {
        let d = tempfile::tempdir().unwrap();
        let g = OutputGuard::new(true);
        for (p, what) in [
            (Path::new("/dev/null"), "character device"),
            (Path::new("/dev/full"), "character device"),
            (d.path(), "directory"),
        ] {
            let e = msg(g.check(p, OutputKind::HtmlReport, "--html"));
            assert!(e.contains(what), "{e}");
        }
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = msg(g.check(&fifo, OutputKind::ScrubLog, "--log"));
            assert!(e.contains("FIFO"), "{e}");
        } else {
            println!("skip: mkfifo is not available; FIFO case not tested");
        }
        // and the atomic writer refuses the device node itself
        let e = write_atomically(Path::new("/dev/null"), |w| w.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn existing_files_need_to_be_fallows_own_or_forced() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let foreign = "my precious notes\n";
        let cases: [(OutputKind, &[u8]); 11] = [
            (
                OutputKind::Checkpoint,
                br#"{"format": "fallow-scrub-checkpoint", "version": 2}"#,
            ),
            (
                OutputKind::ScrubLog,
                b"{\"t_ns\":1,\"first_byte\":0,\"last_byte\":9,\"bad\":[]}\n{\"x\n",
            ),
            (
                OutputKind::HtmlReport,
                b"<!DOCTYPE html>\n<html><head><meta name=\"generator\" content=\"fallow 0.1.0\">",
            ),
            (
                OutputKind::JsonReport,
                br#"{"generator": "fallow 0.1.0", "x": 1}"#,
            ),
            (OutputKind::FallowBin, b"FALLOWT\x01rest"),
            (OutputKind::TextTrace, b""),
            (OutputKind::StatFile, b"1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
            (
                OutputKind::SpindownStatus,
                br#"{"pid": 7, "updated": "x", "uptime_s": 1.0, "disks": []}"#,
            ),
            (
                OutputKind::SpindownLog,
                b"{\"time\":\"x\",\"t_s\":0.0,\"disk\":\"sdb\",\"event\":\"start\"}\n{\"par",
            ),
            (
                OutputKind::MessageLog,
                b"fallow emulate-disk: messages of pid 7\n",
            ),
            (
                OutputKind::SystemdUnit,
                b"# Written by fallow 0.1.0 (fallow spindown units)\n[Unit]\n",
            ),
        ];
        for (kind, own) in cases {
            fs::write(&p, own).unwrap();
            assert!(
                OutputGuard::new(false).check(&p, kind, "-o").is_ok(),
                "{kind:?}"
            );
            fs::write(&p, foreign).unwrap();
            let e = msg(OutputGuard::new(false).check(&p, kind, "-o"));
            assert!(
                e.contains("--overwrite") && e.contains(kind.describe()),
                "{e}"
            );
            assert!(OutputGuard::new(true).check(&p, kind, "-o").is_ok());
        }
        // a version-1 checkpoint (no marker) is still a checkpoint
        fs::write(
            &p,
            r#"{"version": 1, "target": {}, "segments": 8, "next_visit": 3}"#,
        )
        .unwrap();
        assert!(OutputGuard::new(false)
            .check(&p, OutputKind::Checkpoint, "--checkpoint")
            .is_ok());
        // a JSON file that is not one of fallow's reports
        fs::write(&p, r#"{"generator": "fallowish", "a": 1}"#).unwrap();
        assert!(OutputGuard::new(false)
            .check(&p, OutputKind::JsonReport, "--report")
            .is_err());
        // a text trace someone has is never taken for fallow's own
        fs::write(&p, "128166372003061629,hm,0,Read,0,4096,100\n").unwrap();
        assert!(OutputGuard::new(false)
            .check(&p, OutputKind::TextTrace, "-o")
            .is_err());
    }

    #[test]
    fn atomic_writes_replace_whole_and_clean_up() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        write_atomically(&p, |w| w.write_all(b"one")).unwrap();
        write_atomically(&p, |w| w.write_all(b"two")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let e = write_atomically(&p, |w| {
            w.write_all(b"partial")?;
            Err(io::Error::other("boom"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
