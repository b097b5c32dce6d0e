//! UMass Trace Repository / Storage Performance Council (SPC) CSV:
//! `ASU,LBA,Size,Opcode,Timestamp[,...]`, one request per line, as in the
//! UMass "OLTP Application I/O" (Financial1/2) and "Search Engine I/O"
//! (WebSearch1–3) traces and the SPC trace file format specification 1.0.1.
//!
//! - `ASU`: application specific storage unit, the device id;
//! - `LBA`: logical block address in 512-byte sectors;
//! - `Size`: request size in bytes;
//! - `Opcode`: `r`/`R` read, `w`/`W` write;
//! - `Timestamp`: seconds since the start of the trace, a decimal parsed
//!   exactly into integer nanoseconds.
//!
//! Fields after the fifth (some releases append more) are ignored. The
//! format records no completion or response time.

use super::detect::commas;
use super::lines::{parse_time_ns, parse_u64, read_line_records, show, split};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::Result;
use std::io::BufRead;

const SECTOR_BYTES: u64 = 512;
const NS_PER_S: u64 = 1_000_000_000;

/// The spc reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "spc",
    aliases: &["umass"],
    summary: "UMass/SPC CSV",
    code: 2,
    completions: Completions::Absent,
    splittable: true,
    numbers_devices: false,
    detect_rank: 120,
    detect: |h| {
        sniff(
            h.first_line
                .is_some_and(|l| commas(l) >= 4 && looks_like(l)),
        )
    },
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    read_line_records(input, ctx, parse_record)
}

/// True when `line` reads as an SPC record: three whole numbers, an `r`/`w`
/// opcode and a decimal timestamp.
pub(crate) fn looks_like(line: &[u8]) -> bool {
    parse_record(line).is_ok()
}

type FieldError = (&'static str, String);

fn parse_record(line: &[u8]) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected ASU,LBA,Size,Opcode,Timestamp)".to_string(),
            )
        })
    };
    let asu = next("asu")?;
    let lba = next("lba")?;
    let size = next("size")?;
    let opcode = next("opcode")?;
    let ts = next("timestamp")?;

    let device = parse_u64(asu).map_err(|m| ("asu", m))?;
    let device = u32::try_from(device).map_err(|_| {
        (
            "asu",
            format!("`{}` is too large for a device id", show(asu)),
        )
    })?;
    let lba_v = parse_u64(lba).map_err(|m| ("lba", m))?;
    let offset_bytes = lba_v.checked_mul(SECTOR_BYTES).ok_or_else(|| {
        (
            "lba",
            format!("`{}` sectors overflow a byte offset", show(lba)),
        )
    })?;
    let size_v = parse_u64(size).map_err(|m| ("size", m))?;
    let size_bytes = u32::try_from(size_v).map_err(|_| {
        (
            "size",
            format!("{size_v} bytes is too large for one request"),
        )
    })?;
    let op = match super::lines::trim(opcode) {
        b"r" | b"R" => Op::Read,
        b"w" | b"W" => Op::Write,
        other => return Err(("opcode", format!("`{}` is neither r nor w", show(other)))),
    };
    let arrival_ns = parse_time_ns(ts, NS_PER_S).map_err(|m| ("timestamp", m))?;
    Ok(RawRequest {
        arrival_ns,
        completion_ns: None,
        offset_bytes,
        size_bytes,
        op,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_financial1_line() {
        // First line of the UMass Financial1.spc trace.
        let r = parse_record(b"0,303567,3584,w,0.000000").unwrap();
        assert_eq!(r.device, 0);
        assert_eq!(r.offset_bytes, 303_567 * 512);
        assert_eq!(r.size_bytes, 3584);
        assert_eq!(r.op, Op::Write);
        assert_eq!(r.arrival_ns, 0);
        assert_eq!(r.completion_ns, None);
    }

    #[test]
    fn exact_seconds_and_extra_fields() {
        let r = parse_record(b"3,10,512,R,12.000001,extra,fields").unwrap();
        assert_eq!(r.arrival_ns, 12_000_001_000);
        assert_eq!((r.device, r.offset_bytes, r.op), (3, 5120, Op::Read));
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"0,1,512,x,0.5").unwrap_err().0, "opcode");
        assert_eq!(parse_record(b"0,1,512,r").unwrap_err().0, "timestamp");
        assert_eq!(parse_record(b"0,1,512,r,-1").unwrap_err().0, "timestamp");
        assert_eq!(parse_record(b"a,1,512,r,0").unwrap_err().0, "asu");
        assert_eq!(parse_record(b"0,1,5000000000,r,0").unwrap_err().0, "size");
        assert_eq!(
            parse_record(b"0,36028797018963968,512,r,0").unwrap_err().0,
            "lba"
        );
    }

    #[test]
    fn recognises_spc_lines_only() {
        assert!(looks_like(b"0,303567,3584,w,0.000000"));
        assert!(!looks_like(b"0.000 0 11562803200 4096 1"));
        assert!(!looks_like(
            b"134085312000000000,pgbench,0,Read,138502144,4096,2670"
        ));
    }
}
