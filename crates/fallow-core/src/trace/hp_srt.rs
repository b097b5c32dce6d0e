//! HP Labs SRT binary traces (the HP-UX workstation traces of Ruemmler and
//! Wilkes, 1992–93, e.g. `hplajw`, and the Cello traces), as DiskSim reads
//! them with its `hpl` trace format.
//!
//! A text header (`$$TR_IOREC-1.3 …`, disk descriptions) ends with a form
//! feed (0x0C); DiskSim's `hpl2` variant has no header. Then come records
//! of big-endian 32-bit words, each starting with its own length in bytes:
//!
//! `size, id, sec, usec, start, stop, size_bytes, sectno, devno, drivertype,
//! cylno, ioflags, info[, queuelen][, susflags]`
//!
//! - `id`: record version (1–4) in the high 16 bits, type in the low 16:
//!   1 = short I/O, 4 = suspect I/O. Version 4 adds `queuelen`, suspect
//!   records add `susflags`. The `size` word is honoured, so longer records
//!   are read whole and their extra words ignored.
//! - arrival = `sec.usec` (the enqueue time); `start` and `stop` are µs
//!   after the enqueue, so completion = arrival + `stop`.
//! - device = `(devno >> 8) & 0xFF`, the physical disk (the low byte is the
//!   partition), offset = `sectno · 512` bytes, size = `size_bytes`.
//! - read when `ioflags & 0x1` (HP-UX 8.0 `B_READ`), else write.
//!
//! The field meanings, the device mapping, 512-byte sectors (`blkno =
//! sectno`, `bcount = size >> 9`), the read flag (`HPL_READ 0x00000001`)
//! and skipping suspect records all follow DiskSim 4.0:
//! `iotrace_hpl_get_ioreq_event` in `src/disksim_iotrace.c` and
//! `src/disksim_hptrace.h`. Suspect records are counted as ignored.

use super::bytes::{be_u32, field_at, read_full};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Error, Location, Result};
use std::io::BufRead;

const FIELDS: [(&str, usize); 15] = [
    ("size", 0),
    ("id", 4),
    ("sec", 8),
    ("usec", 12),
    ("start", 16),
    ("stop", 20),
    ("size_bytes", 24),
    ("sectno", 28),
    ("devno", 32),
    ("drivertype", 36),
    ("cylno", 40),
    ("ioflags", 44),
    ("info", 48),
    ("queuelen", 52),
    ("susflags", 56),
];
/// Words every record has (`size` … `info`).
const BASE_BYTES: u32 = 13 * 4;
/// Longer than any record version DiskSim knows; a larger `size` means the
/// stream is corrupt (and cannot be resynchronised).
const MAX_RECORD: u32 = 1024;
const MAX_HEADER: u64 = 1 << 20;
const SHORT_IO: u32 = 1;
const SUSPECT_IO: u32 = 4;
const HPL_READ: u32 = 0x0000_0001;
const SECTOR_BYTES: u64 = 512;

/// The hp-srt reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "hp-srt",
    aliases: &["srt", "hp"],
    summary: "HP SRT binary: the HP Cello and workstation traces",
    code: 3,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: false,
    detect_rank: 50,
    detect: |h| sniff(looks_like(h.bytes)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut at = skip_header(input, ctx)?;
    let mut buf = vec![0u8; MAX_RECORD as usize];
    loop {
        let n = read_full(input, &mut buf[..4]).map_err(|e| ctx.io(e))?;
        if n == 0 {
            return Ok(());
        }
        let loc = Location::Offset(at);
        if n < 4 {
            return ctx.bad(loc, "size", truncated(n, 4));
        }
        let size = be_u32(&buf, 0);
        if !(BASE_BYTES..=MAX_RECORD).contains(&size) || size % 4 != 0 {
            // Without a trustworthy length the next record cannot be found,
            // so this is fatal even when skipping bad records.
            return Err(Error::Record {
                path: ctx.path.to_path_buf(),
                location: loc,
                field: "size",
                message: format!(
                    "record length {size} is not a multiple of 4 between {BASE_BYTES} and {MAX_RECORD}; the file is corrupt or not HP SRT"
                ),
            });
        }
        let size = size as usize;
        let got = 4 + read_full(input, &mut buf[4..size]).map_err(|e| ctx.io(e))?;
        if got < size {
            return ctx.bad(loc, field_at(&FIELDS, got), truncated(got, size));
        }
        at += size as u64;
        match parse_record(&buf[..size]) {
            Ok(Some(r)) => ctx.push(loc, r)?,
            Ok(None) => ctx
                .report
                .ignore("hp-srt: suspect record (DiskSim skips them)"),
            Err((field, msg)) => ctx.bad(loc, field, msg)?,
        }
    }
}

fn truncated(got: usize, want: usize) -> String {
    format!("truncated record: {got} of {want} bytes before the end of the file")
}

/// Skip the text header through its form feed; returns its length. Input
/// not starting with `$$` has no header (DiskSim's `hpl2`).
fn skip_header(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<u64> {
    let head = input.fill_buf().map_err(|e| ctx.io(e))?;
    if !head.starts_with(b"$$") {
        return Ok(0);
    }
    let mut len: u64 = 0;
    loop {
        let buf = input.fill_buf().map_err(|e| ctx.io(e))?;
        if buf.is_empty() || len > MAX_HEADER {
            return Err(Error::Record {
                path: ctx.path.to_path_buf(),
                location: Location::Offset(0),
                field: "header",
                message: format!("no form feed (0x0C) ends the text header within {len} bytes"),
            });
        }
        if let Some(ff) = memchr::memchr(0x0C, buf) {
            input.consume(ff + 1);
            return Ok(len + ff as u64 + 1);
        }
        let k = buf.len();
        input.consume(k);
        len += k as u64;
    }
}

/// True for an SRT header, or a headerless stream whose first word is a
/// plausible record length followed by a known version and type.
pub(crate) fn looks_like(head: &[u8]) -> bool {
    if head.starts_with(b"$$TR") {
        return true;
    }
    if head.len() < 8 {
        return false;
    }
    let (size, id) = (be_u32(head, 0), be_u32(head, 4));
    (BASE_BYTES..=BASE_BYTES + 8).contains(&size)
        && size % 4 == 0
        && (1..=4).contains(&(id >> 16))
        && matches!(id & 0xFFFF, SHORT_IO | SUSPECT_IO)
}

type FieldError = (&'static str, String);

/// Decode one whole record (`rec.len()` = its `size`, at least 52 bytes).
/// `Ok(None)` for a suspect record, which DiskSim skips.
fn parse_record(rec: &[u8]) -> std::result::Result<Option<RawRequest>, FieldError> {
    let word = |i: usize| be_u32(rec, 4 * i);
    let id = word(1);
    let (version, kind) = (id >> 16, id & 0xFFFF);
    if !(1..=4).contains(&version) {
        return Err((
            "id",
            format!("record version {version} (id 0x{id:08x}), expected 1 to 4"),
        ));
    }
    if kind != SHORT_IO && kind != SUSPECT_IO {
        return Err((
            "id",
            format!("record type {kind} (id 0x{id:08x}) is not a short or suspect I/O"),
        ));
    }
    let needed =
        BASE_BYTES as usize + 4 * usize::from(version == 4) + 4 * usize::from(kind == SUSPECT_IO);
    if rec.len() < needed {
        return Err((
            "size",
            format!(
                "{} bytes is too short for a version {version} type {kind} record ({needed} bytes)",
                rec.len()
            ),
        ));
    }
    if kind == SUSPECT_IO {
        return Ok(None);
    }
    let (sec, usec) = (word(2), word(3));
    if usec >= 1_000_000 {
        return Err(("usec", format!("{usec} µs is not below one second")));
    }
    // Times and sizes are signed in DiskSim; a set sign bit is corruption.
    let signed = |i: usize, name: &'static str| {
        i32::try_from(word(i)).map_err(|_| (name, format!("negative value {}", word(i) as i32)))
    };
    let start = signed(4, "start")?;
    let stop = signed(5, "stop")?;
    if start > stop {
        return Err((
            "start",
            format!("service starts {start} µs after enqueue but stops at {stop} µs"),
        ));
    }
    let size_bytes = signed(6, "size_bytes")? as u32;
    let arrival_ns = u64::from(sec) * 1_000_000_000 + u64::from(usec) * 1_000;
    let completion_ns = arrival_ns + stop as u64 * 1_000;
    let op = if word(11) & HPL_READ != 0 {
        Op::Read
    } else {
        Op::Write
    };
    Ok(Some(RawRequest {
        arrival_ns,
        completion_ns: Some(completion_ns),
        offset_bytes: u64::from(word(7)) * SECTOR_BYTES,
        size_bytes,
        op,
        device: (word(8) >> 8) & 0xFF,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn decodes_an_hplajw_record() {
        // Sixth record of ajw.1week.srt (decoded by hand with Python's struct).
        let r = record(&[
            56,
            0x40001,
            30,
            183968,
            146,
            36899,
            8192,
            674032,
            0x0800_0008,
            4,
            745,
            0x8810a,
            0x22000f,
            1,
        ]);
        let q = parse_record(&r).unwrap().unwrap();
        assert_eq!(q.arrival_ns, 30_183_968_000);
        assert_eq!(q.completion_ns, Some(30_183_968_000 + 36_899_000));
        assert_eq!(q.size_bytes, 8192);
        assert_eq!(q.offset_bytes, 674_032 * 512);
        assert_eq!(q.device, 0);
        assert_eq!(q.op, Op::Write); // 0x8810a has no B_READ bit
        let first = record(&[
            56,
            0x40001,
            0,
            0,
            174,
            19687,
            4096,
            1056,
            0x0800_0107,
            4,
            1,
            0x1b,
            0x70000,
            1,
        ]);
        let q = parse_record(&first).unwrap().unwrap();
        assert_eq!((q.device, q.op), (1, Op::Read));
    }

    #[test]
    fn versions_suspect_records_and_bad_fields() {
        // version 1 has no queuelen: 52 bytes
        let v1 = record(&[52, 0x10001, 1, 0, 0, 10, 512, 0, 0x800, 0, 0, 1, 0]);
        assert_eq!(parse_record(&v1).unwrap().unwrap().device, 8);
        let suspect = record(&[60, 0x40004, 1, 0, 0, 10, 512, 0, 0, 0, 0, 1, 0, 0, 7]);
        assert_eq!(parse_record(&suspect).unwrap(), None);
        let short_suspect = record(&[56, 0x40004, 1, 0, 0, 10, 512, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(parse_record(&short_suspect).unwrap_err().0, "size");
        let bad = |w: &[u32]| parse_record(&record(w)).unwrap_err().0;
        assert_eq!(
            bad(&[52, 0x50001, 1, 0, 0, 10, 512, 0, 0, 0, 0, 1, 0]),
            "id"
        );
        assert_eq!(
            bad(&[52, 0x10002, 1, 0, 0, 10, 512, 0, 0, 0, 0, 1, 0]),
            "id"
        );
        assert_eq!(
            bad(&[52, 0x10001, 1, 1_000_000, 0, 10, 512, 0, 0, 0, 0, 1, 0]),
            "usec"
        );
        assert_eq!(
            bad(&[52, 0x10001, 1, 0, 11, 10, 512, 0, 0, 0, 0, 1, 0]),
            "start"
        );
        assert_eq!(
            bad(&[52, 0x10001, 1, 0, 0, 0xFFFF_FFFF, 512, 0, 0, 0, 0, 1, 0]),
            "stop"
        );
    }

    #[test]
    fn detection() {
        assert!(looks_like(b"$$TR_IOREC-1.3 (IOAdaptor Upgrade Version)"));
        assert!(looks_like(&record(&[56, 0x40001])));
        assert!(!looks_like(&record(&[5600, 0x40001])));
        assert!(!looks_like(b"0.000 0 11562803200 4096 1"));
    }
}
