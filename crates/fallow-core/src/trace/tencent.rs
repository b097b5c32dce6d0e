//! Tencent Cloud Block Storage (CBS) traces (2018): one CSV line per
//! request, `Timestamp,Offset,Size,IOType,VolumeID`, as documented with
//! the trace set on SNIA IOTTA (docs/formats.md cites it):
//!
//! - `Timestamp`: seconds (Unix time), whole seconds in the release, so
//!   every request of one second arrives at the same instant here (a
//!   characterisation of such a trace sees one-second granularity);
//! - `Offset`, `Size`: 512-byte sectors;
//! - `IOType`: `0` read, `1` write;
//! - `VolumeID`: the cloud volume, kept as the device id, so `--device
//!   1063` selects volume 1063.
//!
//! The format records no completion or response time: busy and idle
//! periods need a service model (`--service`), and the error says so.

use super::detect::commas;
use super::lines::{parse_time_ns, parse_u64, read_line_records, show, split, trim};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::Result;
use std::io::BufRead;

const SECTOR_BYTES: u64 = 512;
const NS_PER_S: u64 = 1_000_000_000;
/// The first timestamp must read as Unix time since 2001 (1e9 s): what
/// tells this layout from other five-number CSVs (a fio latency log's
/// first time is milliseconds since the job started).
const FIRST_UNIX_S: u64 = 1_000_000_000;

/// The tencent reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "tencent",
    aliases: &["tencent-cbs"],
    summary: "Tencent CBS trace CSV `timestamp,offset,size,iotype,volume_id`",
    code: 16,
    completions: Completions::Absent,
    splittable: true,
    numbers_devices: false,
    detect_rank: 125,
    detect: |h| sniff(h.first_line.is_some_and(looks_like)),
    read,
    writers: &[],
};

/// Five whole numbers, a 0/1 IOType and a first time in Unix seconds.
fn looks_like(line: &[u8]) -> bool {
    let fields: Vec<&[u8]> = split(line, b',').collect();
    commas(line) == 4
        && fields.iter().all(|f| parse_u64(f).is_ok())
        && parse_u64(fields[0]).is_ok_and(|t| t >= FIRST_UNIX_S)
        && parse_record(line).is_ok()
}

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    read_line_records(input, ctx, parse_record)
}

type FieldError = (&'static str, String);

fn sectors(field: &[u8], name: &'static str) -> std::result::Result<u64, FieldError> {
    let v = parse_u64(field).map_err(|m| (name, m))?;
    v.checked_mul(SECTOR_BYTES).ok_or_else(|| {
        (
            name,
            format!("`{}` sectors overflow a byte count", show(field)),
        )
    })
}

fn parse_record(line: &[u8]) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected timestamp,offset,size,iotype,volume_id)".to_string(),
            )
        })
    };
    let ts = next("timestamp")?;
    let offset = next("offset")?;
    let size = next("size")?;
    let io_type = next("iotype")?;
    let volume = next("volume_id")?;
    let arrival_ns = parse_time_ns(ts, NS_PER_S).map_err(|m| ("timestamp", m))?;
    let offset_bytes = sectors(offset, "offset")?;
    let size = sectors(size, "size")?;
    let size_bytes = u32::try_from(size)
        .map_err(|_| ("size", format!("{size} bytes is too large for one request")))?;
    let op = match trim(io_type) {
        b"0" => Op::Read,
        b"1" => Op::Write,
        other => {
            return Err((
                "iotype",
                format!("`{}` is neither 0 (read) nor 1 (write)", show(other)),
            ))
        }
    };
    let volume = parse_u64(volume).map_err(|m| ("volume_id", m))?;
    let device = u32::try_from(volume).map_err(|_| {
        (
            "volume_id",
            format!("{volume} is too large for a device id"),
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
        // volume 1063 reads 8 sectors at sector 2,048 at 2018-10-01T00:00:00Z
        let r = parse_record(b"1538352000,2048,8,0,1063").unwrap();
        assert_eq!((r.device, r.op), (1063, Op::Read));
        assert_eq!((r.offset_bytes, r.size_bytes), (2048 * 512, 4096));
        assert_eq!(r.arrival_ns, 1_538_352_000 * NS_PER_S);
        assert_eq!(parse_record(b"1538352000,0,1,1,7").unwrap().op, Op::Write);
        assert!(looks_like(b"1538352000,2048,8,0,1063"));
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"1538352000,0,8,2,1").unwrap_err().0, "iotype");
        assert_eq!(
            parse_record(b"1538352000,0,8,0").unwrap_err().0,
            "volume_id"
        );
        assert_eq!(parse_record(b"x,0,8,0,1").unwrap_err().0, "timestamp");
        assert_eq!(
            parse_record(b"1538352000,36028797018963968,8,0,1")
                .unwrap_err()
                .0,
            "offset"
        );
        assert_eq!(
            parse_record(b"1538352000,0,8388608,0,1").unwrap_err().0,
            "size"
        );
        assert_eq!(
            parse_record(b"1538352000,0,8,0,4294967296").unwrap_err().0,
            "volume_id"
        );
    }

    #[test]
    fn other_five_number_csvs_are_not_taken() {
        // a fio latency log (ms since start, latency, direction, bs, offset)
        assert!(!looks_like(b"12,345,0,4096,0"));
        // an Alibaba line (its opcode is a letter)
        assert!(!looks_like(b"419,W,8171520,4096,1577836800000009"));
    }
}
