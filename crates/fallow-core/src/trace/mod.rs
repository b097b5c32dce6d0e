//! Block traces: the [`Trace`] columns, the [`Format`]s fallow reads, and
//! [`read_trace`], which detects the format, decompresses gzip transparently
//! and streams records into a [`TraceBuilder`].
//!
//! Each format is one small reader file (libCacheSim style) with a single
//! `read(input, ctx)` entry point; everything shared (line splitting, number
//! parsing, bad-record policy) lives in `ReadContext` and `lines.rs`.

mod alibaba;
#[cfg(feature = "arrow")]
mod arrow_ipc;
mod biosnoop;
mod blkparse;
mod blktrace;
mod bpftrace;
mod builder;
mod bytes;
mod columnar;
mod concat;
pub use concat::DEFAULT_GAP_NS;
mod detect;
pub mod devnum;
mod fallow_bin;
mod fifo;
mod fio_iolog;
mod fio_lat;
mod frame;
mod hp_srt;
mod latency;
pub(crate) mod lines;
mod msr;
mod parallel;
#[cfg(feature = "arrow")]
mod parquet;
#[cfg(feature = "arrow")]
pub mod partition;
mod plain;
mod reader;
mod spc;
mod tencent;
mod vscsi;

pub use builder::{RawRequest, TraceBuilder};
pub use columnar::{write_columnar, ColumnarKind, ENABLED as COLUMNAR_ENABLED};
pub use fallow_bin::write_fallow_bin;
pub(crate) use fallow_bin::MAGIC as FALLOW_BIN_MAGIC;
pub use frame::{ns_from_f64, ns_from_i64, scale_bytes, sizes_u32, Columns};
pub use msr::{write_msr, write_msr_records, MsrRecord, MSR_HEADER, WRITTEN_HOST};
#[doc(hidden)]
pub use parallel::{threads_from_env, Parallelism};
pub use reader::{Completions, Head, ReaderEntry, Sniff, Writer};

use crate::error::{Error, Location, Result};
use crate::registry::Registry;
use serde::Serialize;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Request direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum Op {
    /// A read.
    Read = 0,
    /// A write.
    Write = 1,
}

/// The readers, alphabetically by format name: each line puts a reader
/// file's entry in the registry (its module is declared above). Adding a
/// format is its file, exporting a [`ReaderEntry`], and one line here.
macro_rules! readers {
    ($($entry:path,)*) => {
        static READERS: &[ReaderEntry] = &[$($entry,)*];
    };
}
readers! {
    alibaba::READER,
    columnar::ARROW,
    biosnoop::READER,
    blkparse::READER,
    blktrace::READER,
    bpftrace::READER,
    fallow_bin::READER,
    fio_iolog::READER,
    fio_lat::READER,
    hp_srt::READER,
    msr::READER,
    columnar::PARQUET,
    plain::READER,
    spc::READER,
    tencent::READER,
    vscsi::READER,
}

/// Every reader's entry, alphabetically by name.
pub fn readers() -> &'static [ReaderEntry] {
    READERS
}

/// The trace format registry: lookup by name or alias, and its
/// consistency check. Front ends (the CLI's `--format`, Python's
/// `read_trace(format=…)`) take their lists from here.
pub fn formats() -> Registry<ReaderEntry> {
    Registry::new("format", READERS)
}

/// The writer an output path's extension chooses (case-insensitively),
/// with its format: Parquet for `.parquet`, Arrow IPC for `.arrow`, and
/// so on through the registry's writers; fallow's binary cache for any
/// other extension.
pub fn writer_for(path: &Path) -> (Format, &'static Writer) {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    READERS
        .iter()
        .flat_map(|e| e.writers.iter().map(move |w| (Format(e), w)))
        .find(|(_, w)| w.extensions.contains(&ext.as_str()))
        .unwrap_or((Format::Fallow, &fallow_bin::READER.writers[0]))
}

/// A trace format: a handle on its reader's [`ReaderEntry`], compared by
/// name (names are unique: the registry test checks it).
#[derive(Clone, Copy)]
pub struct Format(&'static ReaderEntry);

/// Handles for the code that names a format (special cases, tests); a new
/// format needs none.
#[allow(non_upper_case_globals)]
impl Format {
    /// MSR Cambridge / SNIA CSV.
    pub const Msr: Format = Format(&msr::READER);
    /// UMass / SPC CSV.
    pub const Spc: Format = Format(&spc::READER);
    /// HP SRT binary.
    pub const HpSrt: Format = Format(&hp_srt::READER);
    /// `blkparse` text.
    pub const Blkparse: Format = Format(&blkparse::READER);
    /// VMware vscsi v1 binary.
    pub const Vscsi: Format = Format(&vscsi::READER);
    /// Plain text `time dev offset size op`.
    pub const Plain: Format = Format(&plain::READER);
    /// fallow's binary cache.
    pub const Fallow: Format = Format(&fallow_bin::READER);
    /// bcc `biosnoop` text.
    pub const Biosnoop: Format = Format(&biosnoop::READER);
    /// fallow's bpftrace one-liner's output.
    pub const Bpftrace: Format = Format(&bpftrace::READER);
    /// blktrace's binary per-CPU files.
    pub const Blktrace: Format = Format(&blktrace::READER);
    /// fio iolog.
    pub const FioIolog: Format = Format(&fio_iolog::READER);
    /// fio latency log.
    pub const FioLat: Format = Format(&fio_lat::READER);
    /// Apache Arrow IPC.
    pub const Arrow: Format = Format(&columnar::ARROW);
    /// Apache Parquet.
    pub const Parquet: Format = Format(&columnar::PARQUET);
}

impl Format {
    /// The format an entry describes (a reader outside the registry, such
    /// as the worked example of docs/extending.md, is a format too).
    pub const fn of(entry: &'static ReaderEntry) -> Format {
        Format(entry)
    }

    /// Its reader's entry.
    pub fn entry(self) -> &'static ReaderEntry {
        self.0
    }

    /// Every registered format, alphabetically.
    pub fn all() -> impl Iterator<Item = Format> {
        READERS.iter().map(Format)
    }

    /// The name used on the command line and in Python.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// True for formats whose device ids are Linux device numbers
    /// (`major << 20 | minor`, see [`devnum`]), shown as `major,minor`.
    pub fn numbers_devices(self) -> bool {
        self.0.numbers_devices
    }

    /// Comma-separated list of all format names, for messages.
    pub fn names() -> String {
        formats().names().collect::<Vec<_>>().join(", ")
    }

    /// The `--format` help: every format with its summary, from the registry.
    pub fn help() -> String {
        let list: Vec<String> = READERS
            .iter()
            .map(|e| format!("{} ({})", e.name, e.summary))
            .collect();
        format!(
            "Trace format: {}. [default: detected from the first bytes and the file name]",
            list.join(", ")
        )
    }

    /// The help of an output trace's path (`fallow convert -o`), from the
    /// registry's writers: which extensions write which format (a writer
    /// added with its reader shows here with no other edit), and what any
    /// other extension writes ([`writer_for`]).
    pub fn output_help() -> String {
        let list: Vec<String> = READERS
            .iter()
            .filter(|e| !e.writers.is_empty() && e.name != fallow_bin::READER.name)
            .map(|e| {
                let exts: Vec<String> = e
                    .writers
                    .iter()
                    .flat_map(|w| w.extensions.iter().map(|x| format!("`.{x}`")))
                    .collect();
                format!("{} ({}: {})", exts.join(", "), e.name, e.summary)
            })
            .collect();
        format!(
            "Output file, its format chosen by the extension: {}; any other extension: {} \
             (conventionally `.fbt`). Written to a temporary file in the same directory and \
             renamed into place, so it is never left half-written.",
            list.join("; "),
            fallow_bin::READER.summary
        )
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl std::hash::Hash for Format {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Format({})", self.0.name)
    }
}

impl Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let s = s.to_ascii_lowercase();
        READERS
            .iter()
            .find(|e| e.name == s || e.aliases.contains(&s.as_str()))
            .map(Format)
            .ok_or_else(|| {
                Error::invalid(
                    "format",
                    format!(
                        "unknown format `{}` (known: {})",
                        lines::escape_controls(&s),
                        Format::names()
                    ),
                )
            })
    }
}

/// A time unit for text formats whose unit is not fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TimeUnit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

impl TimeUnit {
    /// Nanoseconds in one unit.
    pub fn ns(self) -> f64 {
        match self {
            TimeUnit::Ns => 1.0,
            TimeUnit::Us => 1e3,
            TimeUnit::Ms => 1e6,
            TimeUnit::S => 1e9,
        }
    }
}

impl FromStr for TimeUnit {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ns" => Ok(TimeUnit::Ns),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ms" => Ok(TimeUnit::Ms),
            "s" => Ok(TimeUnit::S),
            _ => Err(Error::invalid(
                "time unit",
                format!(
                    "`{}` is not one of ns, us, ms, s",
                    lines::escape_controls(s)
                ),
            )),
        }
    }
}

/// Units of the `plain` format's columns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PlainOptions {
    /// Unit of the time column (default ms, as in the MSR cuts).
    pub time_unit: TimeUnit,
    /// Bytes per unit of the offset column (1 = bytes, 512 = sectors).
    pub offset_unit_bytes: u64,
    /// Bytes per unit of the size column.
    pub size_unit_bytes: u64,
    /// Read a sixth column as the completion time (same unit and clock as
    /// the time column); without it, fields after the fifth are ignored.
    pub completion: bool,
}

impl Default for PlainOptions {
    fn default() -> Self {
        PlainOptions {
            time_unit: TimeUnit::Ms,
            offset_unit_bytes: 1,
            size_unit_bytes: 1,
            completion: false,
        }
    }
}

/// How to read a trace.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Force a format instead of detecting it.
    pub format: Option<Format>,
    /// Count and skip malformed records instead of failing on the first.
    pub skip_bad: bool,
    /// Units for the `plain` format.
    pub plain: PlainOptions,
}

/// Requests per device, as listed in summaries (`trace.devices`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceCount {
    /// Device id as in the trace (HP SRT: physical disk number; MSR: the
    /// disk number, plus `host_index << 24` for the second and later hosts).
    pub id: u32,
    /// Requests on that device.
    pub requests: u64,
    /// `host:disk` for an MSR file with several hosts, `major,minor` for a
    /// trace of Linux device numbers (blkparse, blktrace, bpftrace), the
    /// disk's name for biosnoop (`sda`); absent otherwise, so other
    /// summaries are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl DeviceCount {
    /// The device as users write it: its name, else its id.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.id.to_string())
    }
}

/// The label ([`DeviceCount::label`]) of device `id` in `devices`, or the
/// bare id when it is not listed.
pub fn device_label(devices: &[DeviceCount], id: u32) -> String {
    devices
        .iter()
        .find(|d| d.id == id)
        .map_or_else(|| id.to_string(), DeviceCount::label)
}

/// A device as the user names it: an id (`0`), a Linux `major,minor`
/// (`8,16`, the id `major << 20 | minor` blkparse traces use, see
/// [`devnum`]), an MSR `host:disk` (`hm:0`), or a disk's name as the trace
/// gives it (biosnoop's `sda`). A number in a file with several MSR hosts
/// means the disk of that number when only one host has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSel {
    /// A device id, or a disk number.
    Id(u32),
    /// An MSR host and disk number.
    Name {
        /// Hostname as in the file's second column.
        host: String,
        /// Disk number.
        disk: u32,
    },
    /// A device's name as the trace gives it (biosnoop's DISK column, fio
    /// iolog's file name).
    Label(String),
}

impl FromStr for DeviceSel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim();
        let bad = || {
            Error::invalid(
                "device",
                format!(
                    "`{}` is neither a device id (`0`), a `major,minor` (`8,16`), an MSR `host:disk` (`hm:0`) nor a disk's name (`sda`)",
                    lines::escape_controls(t)
                ),
            )
        };
        if t.contains(',') {
            return match devnum::parse(t.as_bytes()) {
                Some(Ok(id)) => Ok(DeviceSel::Id(id)),
                Some(Err(why)) => Err(Error::invalid("device", why)),
                None => Err(bad()),
            };
        }
        match t.rsplit_once(':') {
            Some((host, disk)) if !host.is_empty() => Ok(DeviceSel::Name {
                host: host.to_string(),
                disk: disk.parse().map_err(|_| bad())?,
            }),
            Some(_) => Err(bad()),
            None => match t.parse() {
                Ok(id) => Ok(DeviceSel::Id(id)),
                // A name starts with a letter (`sda`, `nvme0n1`); anything
                // else that is not a number is a typo of one.
                Err(_)
                    if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
                        && !t.contains(char::is_whitespace) =>
                {
                    Ok(DeviceSel::Label(t.to_string()))
                }
                Err(_) => Err(bad()),
            },
        }
    }
}

impl std::fmt::Display for DeviceSel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSel::Id(id) => write!(f, "{id}"),
            DeviceSel::Name { host, disk } => write!(f, "{host}:{disk}"),
            DeviceSel::Label(name) => f.write_str(name),
        }
    }
}

/// Bits of an MSR device id that hold the disk number; the host's index
/// (in order of first appearance) sits above them.
pub(crate) const MSR_DISK_BITS: u32 = 24;

/// What reading a trace noticed, for reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadReport {
    /// Path read (empty for in-memory traces).
    pub path: PathBuf,
    /// Format used.
    pub format: Option<Format>,
    /// Records skipped as malformed (only with `skip_bad`).
    pub skipped: u64,
    /// The first few skip reasons, for the user.
    pub skip_examples: Vec<String>,
    /// Records that arrived earlier than a record before them and were sorted into place.
    pub reordered: u64,
    /// Records ignored by design (blkparse events other than D/C, unmatched completions, …).
    pub ignored: u64,
    /// `ignored` by reason (blkparse), so nothing is dropped without saying why.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ignored_by_reason: std::collections::BTreeMap<&'static str, u64>,
    /// Absolute time of the first arrival in the source's clock, ns (time zero of the columns).
    pub origin_ns: u64,
    /// Format of the original source when this trace was read from a fallow
    /// binary cache (`fallow convert`); `None` otherwise or when unknown.
    pub source_format: Option<Format>,
    /// MSR hostnames by index (the device id's high bits), in order of
    /// first appearance; empty for other formats. Not serialised: the
    /// names reach summaries through [`Trace::devices`], and only for files
    /// of several hosts, so single-host outputs stay as they were.
    #[serde(skip)]
    pub hosts: Vec<String>,
}

impl ReadReport {
    /// Count one record ignored by design, and why.
    pub(crate) fn ignore(&mut self, reason: &'static str) {
        self.ignored = self.ignored.saturating_add(1);
        let n = self.ignored_by_reason.entry(reason).or_default();
        *n = n.saturating_add(1);
    }
}

/// A block trace as columns (struct of arrays), sorted by arrival.
///
/// Times are integer nanoseconds since the first arrival. `completion_ns`
/// is present when the source recorded completions (or response times).
#[derive(Debug, Clone)]
pub struct Trace {
    pub(crate) arrival_ns: Vec<u64>,
    pub(crate) completion_ns: Option<Vec<u64>>,
    pub(crate) offset_bytes: Vec<u64>,
    pub(crate) size_bytes: Vec<u32>,
    pub(crate) op: Vec<Op>,
    pub(crate) device: Vec<u32>,
    pub(crate) report: ReadReport,
}

impl Trace {
    /// Number of requests.
    pub fn len(&self) -> usize {
        self.arrival_ns.len()
    }
    /// True when the trace has no requests.
    pub fn is_empty(&self) -> bool {
        self.arrival_ns.is_empty()
    }
    /// Arrival (enqueue/issue) times, ns since the first arrival, non-decreasing.
    pub fn arrival_ns(&self) -> &[u64] {
        &self.arrival_ns
    }
    /// Completion times, ns on the same clock, if the source had them.
    pub fn completion_ns(&self) -> Option<&[u64]> {
        self.completion_ns.as_deref()
    }
    /// Byte offsets.
    pub fn offset_bytes(&self) -> &[u64] {
        &self.offset_bytes
    }
    /// Request sizes in bytes.
    pub fn size_bytes(&self) -> &[u32] {
        &self.size_bytes
    }
    /// Directions.
    pub fn op(&self) -> &[Op] {
        &self.op
    }
    /// Device ids.
    pub fn device(&self) -> &[u32] {
        &self.device
    }
    /// What reading noticed (path, format, skipped and reordered records).
    pub fn report(&self) -> &ReadReport {
        &self.report
    }
    /// Time from the first arrival to the last arrival or completion, ns.
    pub fn span_ns(&self) -> u64 {
        let first_arrival = self.arrival_ns.first().copied().unwrap_or(0);
        let last_arrival = self.arrival_ns.last().copied().unwrap_or(0);
        let last_completion = self
            .completion_ns
            .as_ref()
            .and_then(|c| c.iter().copied().max())
            .unwrap_or(0);
        last_arrival.max(last_completion) - first_arrival
    }

    /// Devices in the trace with their request counts, by id; named
    /// `host:disk` when the trace has several MSR hosts, `major,minor` in a
    /// blkparse trace.
    pub fn devices(&self) -> Vec<DeviceCount> {
        // counted by runs of one id: a one-device trace (what every
        // simulate, compare and energy call checks for) is one linear
        // scan, not a map update per request (about 0.2 s on 20 M
        // requests, and done before a call could be interrupted: docs/tuning.md)
        let mut counts: std::collections::BTreeMap<u32, u64> = Default::default();
        let ids = &self.device[..];
        let mut i = 0;
        while i < ids.len() {
            let d = ids[i];
            let run = ids[i..].iter().take_while(|&&x| x == d).count();
            *counts.entry(d).or_default() += run as u64;
            i += run;
        }
        counts
            .into_iter()
            .map(|(id, requests)| DeviceCount {
                id,
                requests,
                name: self.named_devices().then(|| self.device_name(id)).flatten(),
            })
            .collect()
    }

    /// Whether devices are shown by name rather than id: MSR files of
    /// several hosts, traces of Linux device numbers (also once converted).
    fn named_devices(&self) -> bool {
        self.report.hosts.len() > 1 || self.numbers_devices() || self.names_disks()
    }

    /// Whether the trace's `hosts` are device names (biosnoop's DISK
    /// column, fio iolog's file names, also once converted) rather than
    /// MSR hostnames.
    fn names_disks(&self) -> bool {
        !self.report.hosts.is_empty()
            && [self.report.format, self.report.source_format]
                .iter()
                .flatten()
                .any(|&f| f == Format::Biosnoop || f == Format::FioIolog)
    }

    fn numbers_devices(&self) -> bool {
        [self.report.format, self.report.source_format]
            .iter()
            .flatten()
            .any(|f| f.numbers_devices())
    }

    /// The name of a device id: `major,minor` in a trace of Linux device
    /// numbers (blkparse), `host:disk` of an MSR id whose host the trace knows.
    pub fn device_name(&self, id: u32) -> Option<String> {
        if self.numbers_devices() {
            return Some(devnum::format(id));
        }
        let host = self.report.hosts.get((id >> MSR_DISK_BITS) as usize)?;
        if self.names_disks() {
            return Some(host.clone());
        }
        Some(format!("{host}:{}", id & ((1 << MSR_DISK_BITS) - 1)))
    }

    /// The id of the device `sel` names. A number is an id, except in a
    /// trace with several MSR hosts, where it is a disk number that must be
    /// unique among the hosts (`0` with `hm:0` and `rsrch:0` is ambiguous).
    pub fn resolve_device(&self, sel: &DeviceSel) -> Result<u32> {
        let devices = self.devices();
        let missing = |device: String| Error::NoSuchDevice {
            path: self.report.path.clone(),
            device,
            available: self.device_list(),
        };
        match sel {
            DeviceSel::Label(name) => devices
                .iter()
                .find(|d| d.name.as_deref() == Some(name.as_str()))
                .map(|d| d.id)
                .ok_or_else(|| missing(name.clone())),
            DeviceSel::Id(n) if self.names_disks() => devices
                .iter()
                .find(|d| d.id == *n)
                .map(|d| d.id)
                .ok_or_else(|| missing(n.to_string())),
            DeviceSel::Id(n) if self.report.hosts.len() > 1 => {
                let disk_mask = (1 << MSR_DISK_BITS) - 1;
                let same_disk: Vec<&DeviceCount> =
                    devices.iter().filter(|d| d.id & disk_mask == *n).collect();
                match same_disk.as_slice() {
                    [one] => Ok(one.id),
                    [] if devices.iter().any(|d| d.id == *n) => Ok(*n),
                    [] => Err(missing(n.to_string())),
                    several => Err(Error::invalid(
                        "device",
                        format!(
                            "disk {n} is on several hosts ({}); name one as host:disk",
                            several
                                .iter()
                                .filter_map(|d| d.name.clone())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                }
            }
            DeviceSel::Id(n) => Ok(*n),
            DeviceSel::Name { host, disk } => self
                .report
                .hosts
                .iter()
                .position(|h| h == host)
                .filter(|_| *disk < 1 << MSR_DISK_BITS)
                .map(|i| (i as u32) << MSR_DISK_BITS | disk)
                .filter(|id| devices.iter().any(|d| d.id == *id))
                .ok_or_else(|| missing(sel.to_string())),
        }
    }

    /// `id (n requests)` or `host:disk (n requests)` for every device.
    fn device_list(&self) -> String {
        self.devices()
            .iter()
            .map(|d| match &d.name {
                Some(name) => format!("{name} ({} requests)", d.requests),
                None => format!("{} ({} requests)", d.id, d.requests),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The requests of one device, as a trace of their own: the same
    /// trace a file holding only them gives, so its time zero is the
    /// device's first arrival (`origin_ns` moves with it, so absolute
    /// times are kept). Spans, utilisation and throughput are then the
    /// device's own, not measured from another device's first request.
    pub fn select_device(&self, id: u32) -> Result<Trace> {
        let keep: Vec<usize> = (0..self.len()).filter(|&i| self.device[i] == id).collect();
        if keep.is_empty() {
            return Err(Error::NoSuchDevice {
                path: self.report.path.clone(),
                device: self
                    .named_devices()
                    .then(|| self.device_name(id))
                    .flatten()
                    .unwrap_or_else(|| id.to_string()),
                available: self.device_list(),
            });
        }
        let mut one = self.take(&keep);
        let zero = one.arrival_ns[0];
        if zero > 0 {
            for a in &mut one.arrival_ns {
                *a -= zero;
            }
            // A completion never precedes its arrival (the builder's rule),
            // so none goes below the new zero.
            for c in one.completion_ns.iter_mut().flatten() {
                *c -= zero;
            }
            one.report.origin_ns = one.report.origin_ns.saturating_add(zero);
        }
        Ok(one)
    }

    /// A new trace of the rows at `idx` (in that order).
    pub(crate) fn take(&self, idx: &[usize]) -> Trace {
        fn pick<T: Copy>(v: &[T], idx: &[usize]) -> Vec<T> {
            idx.iter().map(|&i| v[i]).collect()
        }
        Trace {
            arrival_ns: pick(&self.arrival_ns, idx),
            completion_ns: self.completion_ns.as_ref().map(|c| pick(c, idx)),
            offset_bytes: pick(&self.offset_bytes, idx),
            size_bytes: pick(&self.size_bytes, idx),
            op: pick(&self.op, idx),
            device: pick(&self.device, idx),
            report: self.report.clone(),
        }
    }

    /// A trace from columns (Python, synthetic workloads). Arrivals need not
    /// be sorted; they are sorted like a file's would be.
    pub fn from_columns(
        arrival_ns: Vec<u64>,
        completion_ns: Option<Vec<u64>>,
        offset_bytes: Vec<u64>,
        size_bytes: Vec<u32>,
        op: Vec<Op>,
        device: Vec<u32>,
    ) -> Result<Trace> {
        let n = arrival_ns.len();
        let lens = [
            ("offset_bytes", offset_bytes.len()),
            ("size_bytes", size_bytes.len()),
            ("op", op.len()),
            ("device", device.len()),
            (
                "completion_ns",
                completion_ns.as_ref().map_or(n, |c| c.len()),
            ),
        ];
        for (name, len) in lens {
            if len != n {
                return Err(Error::invalid(
                    name,
                    format!("has {len} values but arrival_ns has {n}"),
                ));
            }
        }
        let mut b = TraceBuilder::new(completion_ns.is_some());
        for i in 0..n {
            b.push(RawRequest {
                arrival_ns: arrival_ns[i],
                completion_ns: completion_ns.as_ref().map(|c| c[i]),
                offset_bytes: offset_bytes[i],
                size_bytes: size_bytes[i],
                op: op[i],
                device: device[i],
            })
            .map_err(|(field, message)| Error::Record {
                path: PathBuf::from("<columns>"),
                location: Location::Record(i as u64),
                field,
                message,
            })?;
        }
        b.finish(ReadReport::default())
    }
}

/// Per-read state handed to every format reader ([`ReaderEntry::read`]):
/// the builder, the path for messages and the bad-record policy. A reader
/// hands each record to [`ReadContext::push`] and each malformed one to
/// [`ReadContext::bad`].
pub struct ReadContext<'a> {
    pub(crate) builder: TraceBuilder,
    pub(crate) path: &'a Path,
    pub(crate) opts: &'a ReadOptions,
    pub(crate) report: ReadReport,
    /// Whether the input starts at the start of the file. False for the
    /// chunks after the first of a parallel read, whose line numbers are
    /// relative to the chunk (made absolute when the chunks are joined) and
    /// whose line 1 is not the file's (so no header may be skipped there).
    pub(crate) at_file_start: bool,
    /// Lines seen, set by `for_each_line` at the end of the input.
    pub(crate) lines: u64,
    /// The first skipped records' errors, kept as errors rather than text
    /// until [`ReadContext::finish`] so a chunk's line numbers can still be
    /// shifted; they become `report.skip_examples`.
    pub(crate) skip_errors: Vec<Error>,
    /// MSR hostnames seen, in order of first appearance (the index is the
    /// device id's high bits); `last_host` is the index of the previous
    /// line's, as nearly every line repeats it.
    pub(crate) hosts: Vec<Vec<u8>>,
    pub(crate) last_host: usize,
    /// Where checked requests go instead of the builder in a streaming
    /// read ([`stream_trace`]), with how many it took.
    pub(crate) sink: Option<&'a mut RequestSink<'a>>,
    pub(crate) streamed: u64,
}

/// Receives each request of a streaming read ([`stream_trace`]) in file
/// order, with where it sits in the file; an error stops the read.
pub type RequestSink<'a> = dyn FnMut(Location, RawRequest) -> Result<()> + Send + 'a;

/// Devices one file may name ([`ReadContext::named_device`]): as many as
/// the id's bits above MSR's disk number can index.
const MAX_NAMED_DEVICES: usize = 1 << (32 - MSR_DISK_BITS);

/// Skip reasons kept for the report.
const SKIP_EXAMPLES: usize = 5;

impl<'a> ReadContext<'a> {
    /// The path being read, for messages.
    pub fn path(&self) -> &Path {
        self.path
    }

    /// The options of this read.
    pub fn options(&self) -> &ReadOptions {
        self.opts
    }

    /// The device id of the device a format names (biosnoop's DISK `sda`,
    /// fio iolog's file `/dev/sdb`): its index among the file's names, in
    /// order of first appearance, in the bits above MSR's disk number, the
    /// name kept in the report's `hosts` so names survive `fallow
    /// convert` the way MSR hostnames do, and a device is shown and chosen
    /// by its name. `field` names the column in the error past the limit.
    pub(crate) fn named_device(
        &mut self,
        name: &[u8],
        field: &'static str,
    ) -> std::result::Result<u32, (&'static str, String)> {
        let index = match self.hosts.get(self.last_host) {
            Some(h) if h.as_slice() == name => self.last_host,
            _ => match self.hosts.iter().position(|h| h.as_slice() == name) {
                Some(i) => i,
                None if self.hosts.len() < MAX_NAMED_DEVICES => {
                    self.hosts.push(name.to_vec());
                    self.hosts.len() - 1
                }
                None => {
                    return Err((
                        field,
                        format!(
                            "`{}` would be device {}; one file names at most {MAX_NAMED_DEVICES}",
                            lines::show(name),
                            MAX_NAMED_DEVICES + 1
                        ),
                    ))
                }
            },
        };
        self.last_host = index;
        Ok((index as u32) << MSR_DISK_BITS)
    }

    /// A fresh context for reading `format` from `path`.
    pub(crate) fn new(path: &'a Path, opts: &'a ReadOptions, format: Format) -> Self {
        let has_completion = format.entry().has_completion(opts);
        ReadContext {
            builder: TraceBuilder::new(has_completion),
            path,
            opts,
            report: ReadReport {
                path: path.to_path_buf(),
                format: Some(format),
                ..Default::default()
            },
            at_file_start: true,
            lines: 0,
            skip_errors: Vec::new(),
            hosts: Vec::new(),
            last_host: 0,
            sink: None,
            streamed: 0,
        }
    }

    /// A malformed record: an error, or (with `skip_bad`) a counted skip.
    pub fn bad(
        &mut self,
        location: Location,
        field: &'static str,
        message: impl Into<String>,
    ) -> Result<()> {
        let err = Error::Record {
            path: self.path.to_path_buf(),
            location,
            field,
            message: message.into(),
        };
        if self.opts.skip_bad {
            self.report.skipped += 1;
            if self.skip_errors.len() < SKIP_EXAMPLES {
                self.skip_errors.push(err);
            }
            Ok(())
        } else {
            Err(err)
        }
    }

    /// Push a request; inconsistencies become [`ReadContext::bad`].
    pub fn push(&mut self, location: Location, req: RawRequest) -> Result<()> {
        if let Some(sink) = self.sink.as_mut() {
            // the builder's checks, without keeping the request
            return match self.builder.check(&req) {
                Ok(()) => {
                    self.streamed += 1;
                    sink(location, req)
                }
                Err((field, message)) => self.bad(location, field, message),
            };
        }
        match self.builder.push(req) {
            Ok(()) => Ok(()),
            Err((field, message)) => self.bad(location, field, message),
        }
    }

    /// An I/O error on this file.
    pub fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.to_path_buf(),
            source,
        }
    }

    /// The trace read, or [`Error::Empty`] when no record was usable.
    pub fn finish(self) -> Result<Trace> {
        let ReadContext {
            builder,
            mut report,
            skip_errors,
            path,
            hosts,
            ..
        } = self;
        report.skip_examples = skip_errors.iter().map(Error::to_string).collect();
        report.hosts = hosts
            .iter()
            .map(|h| lines::escape_controls(&String::from_utf8_lossy(h)))
            .collect();
        if builder.is_empty() {
            let mut notes = Vec::new();
            if report.skipped > 0 {
                notes.push(format!(
                    "{} malformed records skipped; first: {}",
                    report.skipped,
                    report.skip_examples.first().cloned().unwrap_or_default()
                ));
            }
            if !report.ignored_by_reason.is_empty() {
                let why: Vec<String> = report
                    .ignored_by_reason
                    .iter()
                    .map(|(reason, n)| format!("{n} {reason}"))
                    .collect();
                notes.push(format!("ignored: {}", why.join(", ")));
            }
            let detail = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            };
            return Err(Error::Empty {
                path: path.to_path_buf(),
                detail,
            });
        }
        builder.finish(report)
    }
}

/// Read a whole trace file: detect (or take) the format, decompress gzip,
/// stream records, sort out-of-order arrivals. A large uncompressed text
/// trace is read on several threads; see [`read_trace_with_progress`].
///
/// ```no_run
/// use fallow_core::trace::{read_trace, ReadOptions};
/// let trace = read_trace("disk.csv.gz", &ReadOptions::default())?;
/// println!("{} requests on {} devices", trace.len(), trace.devices().len());
/// # Ok::<(), fallow_core::Error>(())
/// ```
pub fn read_trace(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Trace> {
    read_trace_with_progress(path, opts, &mut |_| {})
}

/// [`read_trace`] calling `progress(bytes_read_from_disk)` as it goes, for progress bars.
///
/// A large uncompressed text trace whose records are independent lines
/// (MSR, SPC, plain) is read by several threads, one byte range each; the
/// result, including errors and the report, is the same as a sequential
/// read's. Threads: one per core, or `FALLOW_THREADS` if that environment
/// variable is set (`FALLOW_THREADS=1` reads sequentially), at most four
/// per core; a value that is not a whole number from 1 to 1024 is an
/// error naming the variable. Files under 32 MiB are always read sequentially.
pub fn read_trace_with_progress(
    path: impl AsRef<Path>,
    opts: &ReadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Trace> {
    read_trace_tuned(path, opts, progress, Parallelism::try_from_env()?)
}

/// [`read_trace_with_progress`] with explicit parallelism, so tests can
/// force the parallel reader onto small files and compare it with the
/// sequential one. Not a stable interface.
#[doc(hidden)]
pub fn read_trace_tuned(
    path: impl AsRef<Path>,
    opts: &ReadOptions,
    progress: &mut dyn FnMut(u64),
    par: Parallelism,
) -> Result<Trace> {
    let path = path.as_ref();
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    // Only a regular file has a size worth trusting (not a pipe or a device).
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let counted = CountingReader {
        inner: file,
        count: 0,
        progress,
    };
    let mut raw = BufReader::with_capacity(1 << 16, counted);
    let gz = raw.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    // One of blktrace's per-CPU files stands for the whole set.
    if let Some(files) = blktrace::per_cpu_files(path) {
        let blk = match opts.format {
            Some(f) => f == Format::Blktrace,
            // blktrace leaves an empty file for a CPU that saw no I/O;
            // naming it still means the set.
            None => gz || raw.buffer().is_empty() || blktrace::looks_like(raw.buffer()),
        };
        if blk {
            let CountingReader { progress, .. } = raw.into_inner();
            return blktrace::read_per_cpu(path, &files, opts, progress);
        }
    }
    if gz {
        let mut input =
            BufReader::with_capacity(1 << 18, flate2::bufread::MultiGzDecoder::new(raw));
        return read_input(&mut input, path, opts, None);
    }
    if let Some(size) = size.filter(|&s| par.splits(s)) {
        let head = raw.buffer();
        let format = match opts.format {
            Some(f) => Some(f),
            None => detect::detect(head, path).ok(),
        };
        if let Some(format) = format.filter(|&f| f.entry().splittable) {
            let bytes_per_line = bytes_per_line(head);
            let CountingReader {
                inner: file,
                count,
                progress,
            } = raw.into_inner();
            let job = parallel::Job {
                file: &file,
                size,
                path,
                opts,
                format,
                bytes_per_line,
            };
            return parallel::read(&job, par, &mut |n| progress(n.max(count)));
        }
    }
    read_input(&mut raw, path, opts, size)
}

/// Read a trace from any buffered input; `path` is only used in messages
/// and for extension-based format hints.
pub fn read_from(input: &mut dyn BufRead, path: &Path, opts: &ReadOptions) -> Result<Trace> {
    read_input(input, path, opts, None)
}

/// What a streaming read ([`stream_trace`]) saw: the report a whole read
/// gives (path, format, skipped records, MSR hostnames), the requests it
/// handed on, and a way to name the devices.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// What reading noticed; `reordered` stays 0 (nothing is sorted).
    pub report: ReadReport,
    /// Requests handed to the sink.
    pub requests: u64,
    /// Whether the whole file was held in memory first (a fallow binary
    /// cache stores columns, not records), rather than streamed.
    pub loaded_whole: bool,
}

impl Streamed {
    /// The name a whole read's [`Trace::devices`] gives device `id`
    /// (`host:disk`, `major,minor`, a disk's name), if it names devices.
    pub fn device_name(&self, id: u32) -> Option<String> {
        let t = Trace {
            arrival_ns: Vec::new(),
            completion_ns: None,
            offset_bytes: Vec::new(),
            size_bytes: Vec::new(),
            op: Vec::new(),
            device: Vec::new(),
            report: self.report.clone(),
        };
        t.named_devices().then(|| t.device_name(id)).flatten()
    }
}

/// Read a trace file record by record without keeping it: every request
/// that a whole read ([`read_trace`]) would keep is handed to `sink`, in
/// file order (not sorted by arrival, not rebased), with the same checks
/// and bad-record policy. Memory is the reader's own state, whatever the
/// file's length, for the readers that hand records on line by line or
/// record by record (msr, spc, plain, hp-srt, alibaba, tencent, vscsi,
/// bpftrace, fio iologs); those that pair events (blkparse, blktrace,
/// biosnoop, fio latency logs) gather them first, Parquet and Arrow read
/// the file's bytes, and a fallow binary cache is loaded whole, then handed
/// on ([`Streamed::loaded_whole`]); docs/fleet.md. gzip is read
/// transparently; the per-CPU file set of a blktrace run is not.
pub fn stream_trace(
    path: impl AsRef<Path>,
    opts: &ReadOptions,
    sink: &mut RequestSink<'_>,
) -> Result<Streamed> {
    let path = path.as_ref();
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let mut raw = BufReader::with_capacity(1 << 16, file);
    let gz = raw.fill_buf().map_err(io_err)?.starts_with(&[0x1f, 0x8b]);
    let mut input: Box<dyn BufRead> = if gz {
        Box::new(BufReader::with_capacity(
            1 << 18,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    };
    let format = stream_format(&mut *input, path, opts)?;
    stream_input(&mut *input, path, opts, format, sink)
}

/// The format a read of `path` uses: given, or detected from its head
/// (through gzip), before a streaming pass.
pub fn detected_format(path: &Path, opts: &ReadOptions) -> Result<Format> {
    Ok(match opts.format {
        Some(f) => f,
        None => {
            let mut input =
                std::io::BufReader::new(std::fs::File::open(path).map_err(|source| Error::Io {
                    path: path.to_path_buf(),
                    source,
                })?);
            let mut gz;
            let mut plain;
            let input: &mut dyn std::io::BufRead = {
                let head = std::io::BufRead::fill_buf(&mut input).map_err(|source| Error::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                if head.starts_with(&[0x1f, 0x8b]) {
                    gz = std::io::BufReader::new(flate2::bufread::MultiGzDecoder::new(input));
                    &mut gz
                } else {
                    plain = input;
                    &mut plain
                }
            };
            stream_format(input, path, opts)?
        }
    })
}

/// The format of `input`: given, or detected from its head.
pub fn stream_format(input: &mut dyn BufRead, path: &Path, opts: &ReadOptions) -> Result<Format> {
    if let Some(f) = opts.format {
        return Ok(f);
    }
    let head = input.fill_buf().map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if head.is_empty() {
        return Err(Error::Empty {
            path: path.to_path_buf(),
            detail: " (the file is empty)".into(),
        });
    }
    detect::detect(head, path)
}

fn stream_input(
    input: &mut dyn BufRead,
    path: &Path,
    opts: &ReadOptions,
    format: Format,
    sink: &mut RequestSink<'_>,
) -> Result<Streamed> {
    // Reborrowed for the context's single lifetime; the context ends here.
    let mut forward = |loc: Location, r: RawRequest| sink(loc, r);
    let mut ctx = ReadContext::new(path, opts, format);
    ctx.sink = Some(&mut forward);
    read_format(format, input, &mut ctx)?;
    let streamed = ctx.streamed;
    let ReadContext {
        builder,
        mut report,
        skip_errors,
        hosts,
        ..
    } = ctx;
    report.skip_examples = skip_errors.iter().map(Error::to_string).collect();
    report.hosts = hosts
        .iter()
        .map(|h| lines::escape_controls(&String::from_utf8_lossy(h)))
        .collect();
    let loaded_whole = !builder.is_empty();
    let mut requests = streamed;
    if loaded_whole {
        // A reader that replaced the builder with whole columns (fallow's
        // own binary format): hand its rows on in their stored order.
        let t = builder.finish(report.clone())?;
        report.origin_ns = t.report.origin_ns;
        report.skipped = t.report.skipped;
        report.source_format = t.report.source_format;
        report.hosts = t.report.hosts.clone();
        for i in 0..t.len() {
            sink(
                Location::Record(i as u64),
                RawRequest {
                    arrival_ns: t.arrival_ns[i],
                    completion_ns: t.completion_ns.as_ref().map(|c| c[i]),
                    offset_bytes: t.offset_bytes[i],
                    size_bytes: t.size_bytes[i],
                    op: t.op[i],
                    device: t.device[i],
                },
            )?;
        }
        requests += t.len() as u64;
    }
    if requests == 0 {
        let detail = if report.skipped > 0 {
            format!(
                " ({} malformed records skipped; first: {})",
                report.skipped,
                report.skip_examples.first().cloned().unwrap_or_default()
            )
        } else {
            String::new()
        };
        return Err(Error::Empty {
            path: path.to_path_buf(),
            detail,
        });
    }
    Ok(Streamed {
        report,
        requests,
        loaded_whole,
    })
}

/// [`read_from`] knowing the input's size in bytes, if it is a plain file,
/// to size the columns once instead of growing them.
fn read_input(
    input: &mut dyn BufRead,
    path: &Path,
    opts: &ReadOptions,
    size: Option<u64>,
) -> Result<Trace> {
    let io_err = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let format = match opts.format {
        Some(f) => f,
        None => {
            let head = input.fill_buf().map_err(io_err)?;
            if head.is_empty() {
                return Err(Error::Empty {
                    path: path.to_path_buf(),
                    detail: " (the file is empty)".into(),
                });
            }
            detect::detect(head, path)?
        }
    };
    let mut ctx = ReadContext::new(path, opts, format);
    if let Some(size) = size.filter(|_| format.entry().splittable) {
        // Best effort: a read error here is the reader's to report.
        if let Ok(head) = input.fill_buf() {
            ctx.builder.reserve(lines_in(size, bytes_per_line(head)));
        }
    }
    read_format(format, input, &mut ctx)?;
    ctx.finish()
}

/// Run the reader of `format` over `input`.
fn read_format(format: Format, input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    (format.entry().read)(input, ctx)
}

/// Average bytes per line of a text head, as a basis for guessing how many
/// records a file holds. Never below 16 (a short MSR record), so a head of
/// blank lines cannot make us reserve columns for billions of records.
fn bytes_per_line(head: &[u8]) -> u64 {
    let lines = memchr::memchr_iter(b'\n', head).count() as u64;
    (head.len() as u64 / lines.max(1)).max(16)
}

/// Records to reserve room for in `bytes` of text: a 1/16 margin over the
/// estimate, since running short costs a copy of every column and running
/// over only address space.
fn lines_in(bytes: u64, bytes_per_line: u64) -> usize {
    let lines = bytes / bytes_per_line.max(1);
    usize::try_from(lines + lines / 16).unwrap_or(usize::MAX)
}

struct CountingReader<'p, R> {
    inner: R,
    count: u64,
    progress: &'p mut dyn FnMut(u64),
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        (self.progress)(self.count);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_help_names_each_writers_extensions_and_their_format() {
        // `fallow convert -o`'s help once left out `.csv` and `.pq`
        let help = Format::output_help();
        for e in readers()
            .iter()
            .filter(|e| e.name != fallow_bin::READER.name)
        {
            for x in e.writers.iter().flat_map(|w| w.extensions) {
                assert!(help.contains(&format!("`.{x}`")), "{x} in {help}");
                assert_eq!(writer_for(Path::new(&format!("t.{x}"))).0.name(), e.name);
            }
        }
        assert!(help.contains("`.csv` (msr: "), "{help}");
        assert!(
            help.contains("any other extension: fallow's binary cache"),
            "{help}"
        );
        assert_eq!(writer_for(Path::new("t.bin")).0.name(), "fallow");
    }

    #[test]
    fn devices_are_counted_by_id_over_runs_and_interleaving() {
        // runs of one id and ids that come back: counted as one request each
        let ids = vec![3, 3, 1, 3, 1, 1, 1, 2];
        let n = ids.len();
        let t = Trace::from_columns(
            (0..n as u64).collect(),
            None,
            vec![0; n],
            vec![4096; n],
            vec![Op::Read; n],
            ids,
        )
        .unwrap();
        let got: Vec<(u32, u64)> = t.devices().iter().map(|d| (d.id, d.requests)).collect();
        assert_eq!(got, vec![(1, 4), (2, 1), (3, 3)]);
    }
}
