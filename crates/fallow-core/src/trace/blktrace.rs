//! blktrace's binary per-CPU files (`DEV.blktrace.0`, `DEV.blktrace.1`, …,
//! what `blktrace -d /dev/DEV` writes): a sequence of `struct blk_io_trace`
//! records (Linux `include/uapi/linux/blktrace_api.h`), each followed by
//! `pdu_len` bytes of payload:
//!
//! | offset | field | type | |
//! |---|---|---|---|
//! | 0 | `magic` | u32 | `0x65617400 \| version`; version 7 |
//! | 4 | `sequence` | u32 | event number |
//! | 8 | `time` | u64 | ns |
//! | 16 | `sector` | u64 | 512-byte sectors |
//! | 24 | `bytes` | u32 | transfer length |
//! | 28 | `action` | u32 | action in the low 16 bits, category bits above |
//! | 32 | `pid` | u32 | |
//! | 36 | `device` | u32 | kernel `dev_t`, `major << 20 \| minor` |
//! | 40 | `cpu` | u32 | |
//! | 44 | `error` | u16 | |
//! | 46 | `pdu_len` | u16 | payload bytes after the record |
//!
//! Records are in the recording machine's byte order; the magic tells
//! which (both are read). Reading one of a set of per-CPU files reads them
//! all (every `DEV.blktrace.N` beside it): a request is often issued on
//! one CPU and completed on another. Events of all files are merged by
//! time, stably, and matched as the `blkparse` reader matches them: the
//! issue (`D`, action 7) is the arrival, the completion (`C`, action 8) the
//! oldest pending issue's with the same device and start sector (FIFO),
//! and a requeue (action 6) cancels the newest pending issue of its
//! sector. The device id is the `dev_t`, so ids agree with blkparse's.
//!
//! Category bits give the direction (`BLK_TC_WRITE`, else a read).
//! Ignored and counted by reason: notify records (process names,
//! timestamps, messages), other actions (queue, merge, plug…),
//! passthrough (`BLK_TC_PC`) commands, events moving no data (0 bytes,
//! discards), requeued issues, issues never completed and completions
//! without an issue. A bad magic, an unsupported version or a truncated
//! record is an error naming the file and byte offset.

use super::bytes::{field_at, read_full};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{fifo, Op, RawRequest, ReadContext};
use crate::error::{Error, Location, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

const RECORD: usize = 48;
const MAGIC: u32 = 0x6561_7400;
const VERSION: u32 = 7;
const SECTOR_BYTES: u64 = 512;

const TA_REQUEUE: u32 = 6;
const TA_ISSUE: u32 = 7;
const TA_COMPLETE: u32 = 8;
/// `__BLK_TA_CGROUP`: a cgroup id leads the payload; not part of the action.
const TA_CGROUP: u32 = 1 << 8;
const TC_WRITE: u32 = 1 << 1;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;

const LAYOUT: [(&str, usize); 12] = [
    ("magic", 0),
    ("sequence", 4),
    ("time", 8),
    ("sector", 16),
    ("bytes", 24),
    ("action", 28),
    ("pid", 32),
    ("device", 36),
    ("cpu", 40),
    ("error", 44),
    ("pdu_len", 46),
    ("pdu", 48),
];

pub(crate) const NOTIFY: &str = "blktrace: notify record (process name, timestamp, message)";
pub(crate) const OTHER_ACTION: &str = "blktrace: action other than issue, complete or requeue";
pub(crate) const PASSTHROUGH: &str = "blktrace: passthrough (BLK_TC_PC) command";
pub(crate) const NO_DATA: &str = "blktrace: event moving no data (0 bytes, discard)";
pub(crate) const REQUEUE: &str = "blktrace: requeue event";
pub(crate) const REQUEUED_ISSUE: &str = "blktrace: issue requeued before completing";
pub(crate) const NEVER_COMPLETED: &str = "blktrace: issue without a completion";
pub(crate) const UNMATCHED_COMPLETION: &str = "blktrace: completion without a pending issue";

/// True when the input starts with a blk_io_trace magic, either byte order.
pub(crate) fn looks_like(head: &[u8]) -> bool {
    head.len() >= RECORD && byte_order(&head[..4]).is_some()
}

/// `Some(little_endian)` for a blk_io_trace magic (any version).
fn byte_order(magic: &[u8]) -> Option<bool> {
    let m = [magic[0], magic[1], magic[2], magic[3]];
    if u32::from_le_bytes(m) & 0xffff_ff00 == MAGIC {
        Some(true)
    } else if u32::from_be_bytes(m) & 0xffff_ff00 == MAGIC {
        Some(false)
    } else {
        None
    }
}

/// Every per-CPU file of the set `path` belongs to (`DEV.blktrace.N`
/// beside it), in CPU order; `None` when the name is not of that form.
pub(crate) fn per_cpu_files(path: &Path) -> Option<Vec<PathBuf>> {
    let name = path.file_name()?.to_str()?;
    let (stem, cpu) = name.rsplit_once(".blktrace.")?;
    if stem.is_empty() || cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = format!("{stem}.blktrace.");
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e.file_name();
            let n = n.to_str()?;
            let cpu = n.strip_prefix(&prefix)?;
            let cpu: u64 = cpu
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| cpu.parse().ok())??;
            Some((cpu, dir.join(n)))
        })
        .collect();
    files.sort();
    (!files.is_empty()).then(|| files.into_iter().map(|(_, p)| p).collect())
}

/// Read `path` and every other per-CPU file of its set as one trace.
pub(crate) fn read_per_cpu<'a>(
    path: &'a Path,
    files: &'a [PathBuf],
    opts: &'a super::ReadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<super::Trace> {
    let mut ctx = ReadContext::new(path, opts, super::Format::Blktrace);
    let mut events = Vec::new();
    let mut done_bytes = 0u64;
    for (i, file) in files.iter().enumerate() {
        let io = |source| Error::Io {
            path: file.clone(),
            source,
        };
        let f = std::fs::File::open(file).map_err(io)?;
        done_bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut raw = BufReader::with_capacity(1 << 16, f);
        let gz = raw.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        ctx.path = file;
        if gz {
            let mut input = BufReader::new(flate2::bufread::MultiGzDecoder::new(raw));
            parse_records(&mut input, &mut ctx, i, &mut events)?;
        } else {
            parse_records(&mut raw, &mut ctx, i, &mut events)?;
        }
        progress(done_bytes);
    }
    ctx.path = path;
    match_events(&mut ctx, events, files)?;
    ctx.finish()
}

/// The blktrace reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "blktrace",
    aliases: &[],
    summary: "binary `DEV.blktrace.N`; one file reads the whole per-CPU set",
    code: 10,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: true,
    detect_rank: 40,
    detect: |h| sniff(looks_like(h.bytes)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut events = Vec::new();
    parse_records(input, ctx, 0, &mut events)?;
    match_events(ctx, events, &[])
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Action {
    Issue = 0,
    Requeue = 1,
    Complete = 2,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    time_ns: u64,
    action: Action,
    device: u32,
    sector: u64,
    size_bytes: u32,
    op: Op,
    /// File (index into the per-CPU list) and byte offset, for messages.
    file: usize,
    offset: u64,
}

/// Decode every record of one file into `events` (issue, complete and
/// requeue events that move data); the rest is counted as ignored.
fn parse_records(
    input: &mut dyn BufRead,
    ctx: &mut ReadContext<'_>,
    file: usize,
    events: &mut Vec<Event>,
) -> Result<()> {
    let mut at: u64 = 0;
    let mut rec = [0u8; RECORD];
    let mut pdu = Vec::new();
    let fatal =
        |ctx: &ReadContext<'_>, at: u64, field: &'static str, message: String| Error::Record {
            path: ctx.path.to_path_buf(),
            location: Location::Offset(at),
            field,
            message,
        };
    loop {
        let got = read_full(input, &mut rec).map_err(|e| ctx.io(e))?;
        if got == 0 {
            return Ok(());
        }
        if got < RECORD {
            let field = field_at(&LAYOUT, got);
            let msg = format!("truncated record: {got} of {RECORD} bytes");
            return ctx.bad(Location::Offset(at + got as u64), field, msg);
        }
        // A record that is not one cannot be skipped: without its
        // pdu_len, the next record's start is unknown.
        let Some(le) = byte_order(&rec[..4]) else {
            let msg = format!(
                "0x{:08x} is not a blk_io_trace magic (0x654174NN)",
                u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]])
            );
            return Err(fatal(ctx, at, "magic", msg));
        };
        let u32_at = |o: usize| {
            let b = [rec[o], rec[o + 1], rec[o + 2], rec[o + 3]];
            if le {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }
        };
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&rec[o..o + 8]);
            if le {
                u64::from_le_bytes(b)
            } else {
                u64::from_be_bytes(b)
            }
        };
        let version = u32_at(0) & 0xff;
        if version != VERSION {
            let msg =
                format!("version {version}; this reader reads version {VERSION} (blktrace 1.x)");
            return Err(fatal(ctx, at, "version", msg));
        }
        let pdu_len = {
            let b = [rec[46], rec[47]];
            if le {
                u16::from_le_bytes(b)
            } else {
                u16::from_be_bytes(b)
            }
        };
        pdu.resize(usize::from(pdu_len), 0);
        let got_pdu = read_full(input, &mut pdu).map_err(|e| ctx.io(e))?;
        if got_pdu < pdu.len() {
            let msg = format!("truncated payload: {got_pdu} of {pdu_len} bytes");
            return ctx.bad(Location::Offset(at + (RECORD + got_pdu) as u64), "pdu", msg);
        }
        let offset = at;
        at += (RECORD + pdu.len()) as u64;

        let action = u32_at(28);
        let category = action >> 16;
        let act = action & 0xffff & !TA_CGROUP;
        if category & TC_NOTIFY != 0 {
            ctx.report.ignore(NOTIFY);
            continue;
        }
        let action = match act {
            TA_ISSUE => Action::Issue,
            TA_COMPLETE => Action::Complete,
            TA_REQUEUE => Action::Requeue,
            _ => {
                ctx.report.ignore(OTHER_ACTION);
                continue;
            }
        };
        if category & TC_PC != 0 {
            ctx.report.ignore(PASSTHROUGH);
            continue;
        }
        let size_bytes = u32_at(24);
        if size_bytes == 0 || category & TC_DISCARD != 0 {
            ctx.report.ignore(NO_DATA);
            continue;
        }
        let sector = u64_at(16);
        if sector.checked_mul(SECTOR_BYTES).is_none() {
            ctx.bad(
                Location::Offset(offset + 16),
                "sector",
                format!("{sector} overflows a byte offset"),
            )?;
            continue;
        }
        events.push(Event {
            time_ns: u64_at(8),
            action,
            device: u32_at(36),
            sector,
            size_bytes,
            op: if category & TC_WRITE != 0 {
                Op::Write
            } else {
                Op::Read
            },
            file,
            offset,
        });
    }
}

/// Merge by time (stably; an issue before a completion at one instant)
/// and pair completions with issues, FIFO per device and sector.
fn match_events<'a>(
    ctx: &mut ReadContext<'a>,
    mut events: Vec<Event>,
    files: &'a [PathBuf],
) -> Result<()> {
    events.sort_by_key(|e| (e.time_ns, e.action));
    const REASONS: fifo::Reasons = fifo::Reasons {
        requeue: REQUEUE,
        requeued_issue: REQUEUED_ISSUE,
        never_completed: NEVER_COMPLETED,
        unmatched_completion: UNMATCHED_COMPLETION,
    };
    let step = |ev: &Event| {
        let step = match ev.action {
            Action::Issue => fifo::Step::Issue,
            Action::Requeue => fifo::Step::Requeue,
            Action::Complete => fifo::Step::Complete,
        };
        (step, (ev.device, ev.sector))
    };
    let whole = ctx.path;
    for (ev, done) in fifo::pair(events, step, &mut ctx.report, &REASONS) {
        // A bad request is reported at its issue record, in its file.
        ctx.path = files.get(ev.file).map_or(whole, |p| p.as_path());
        let pushed = ctx.push(
            Location::Offset(ev.offset),
            RawRequest {
                arrival_ns: ev.time_ns,
                completion_ns: Some(done.time_ns),
                offset_bytes: ev.sector * SECTOR_BYTES,
                size_bytes: ev.size_bytes,
                op: ev.op,
                device: ev.device,
            },
        );
        ctx.path = whole;
        pushed?;
    }
    Ok(())
}
