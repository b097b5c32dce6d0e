//! Alibaba Cloud block traces (2020): one CSV line per request,
//! `device_id,opcode,offset,length,timestamp`, as documented in the
//! release's README (alibaba/block-traces; docs/formats.md cites it):
//!
//! - `device_id`: the virtual volume (0 to 999 in the 2020 release), kept
//!   as the device id, so `--device 17` selects volume 17;
//! - `opcode`: `R` read, `W` write;
//! - `offset`, `length`: bytes;
//! - `timestamp`: microseconds (Unix time), parsed exactly into ns.
//!
//! The format records no completion or response time: busy and idle
//! periods need a service model (`--service`), and the error says so.

use super::detect::commas;
use super::lines::{parse_u64, read_line_records, show, split, trim};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::Result;
use std::io::BufRead;

const NS_PER_US: u64 = 1_000;

/// The alibaba reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "alibaba",
    aliases: &["alibaba-block"],
    summary: "Alibaba Cloud block trace CSV `device_id,opcode,offset,length,timestamp`",
    code: 15,
    completions: Completions::Absent,
    splittable: true,
    numbers_devices: false,
    detect_rank: 115,
    detect: |h| {
        sniff(
            h.first_line
                .is_some_and(|l| commas(l) == 4 && parse_record(l).is_ok()),
        )
    },
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    read_line_records(input, ctx, parse_record)
}

type FieldError = (&'static str, String);

fn parse_record(line: &[u8]) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected device_id,opcode,offset,length,timestamp)".to_string(),
            )
        })
    };
    let device = next("device_id")?;
    let opcode = next("opcode")?;
    let offset = next("offset")?;
    let length = next("length")?;
    let ts = next("timestamp")?;
    let device = parse_u64(device).map_err(|m| ("device_id", m))?;
    let device = u32::try_from(device).map_err(|_| {
        (
            "device_id",
            format!("{device} is too large for a device id"),
        )
    })?;
    let op = match trim(opcode) {
        b"R" | b"r" => Op::Read,
        b"W" | b"w" => Op::Write,
        other => return Err(("opcode", format!("`{}` is neither R nor W", show(other)))),
    };
    let offset_bytes = parse_u64(offset).map_err(|m| ("offset", m))?;
    let length = parse_u64(length).map_err(|m| ("length", m))?;
    let size_bytes = u32::try_from(length).map_err(|_| {
        (
            "length",
            format!("{length} bytes is too large for one request"),
        )
    })?;
    let us = parse_u64(ts).map_err(|m| ("timestamp", m))?;
    let arrival_ns = us.checked_mul(NS_PER_US).ok_or_else(|| {
        (
            "timestamp",
            format!("{us} µs is past the nanosecond clock's range (year 2554)"),
        )
    })?;
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
    fn parses_a_line_of_the_documented_layout() {
        // a line in the README's layout: volume 419 writes 4 KiB at byte
        // 8,171,520, 2020-01-01T00:00:00.000009Z
        let r = parse_record(b"419,W,8171520,4096,1577836800000009").unwrap();
        assert_eq!((r.device, r.op), (419, Op::Write));
        assert_eq!((r.offset_bytes, r.size_bytes), (8_171_520, 4096));
        assert_eq!(r.arrival_ns, 1_577_836_800_000_009_000);
        assert_eq!(r.completion_ns, None);
        assert_eq!(parse_record(b"0,R,0,512,5").unwrap().op, Op::Read);
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"1,X,0,512,5").unwrap_err().0, "opcode");
        assert_eq!(parse_record(b"1,R,0,512").unwrap_err().0, "timestamp");
        assert_eq!(parse_record(b"a,R,0,512,5").unwrap_err().0, "device_id");
        assert_eq!(
            parse_record(b"4294967296,R,0,512,5").unwrap_err().0,
            "device_id"
        );
        assert_eq!(parse_record(b"1,R,-1,512,5").unwrap_err().0, "offset");
        assert_eq!(parse_record(b"1,R,0,4294967296,5").unwrap_err().0, "length");
        assert_eq!(
            parse_record(b"1,R,0,512,18446744073709552").unwrap_err().0,
            "timestamp"
        );
    }
}
