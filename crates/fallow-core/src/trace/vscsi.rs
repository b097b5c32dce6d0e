//! VMware vscsi trace, version 1 (the CloudPhysics traces of Waldspurger et
//! al., FAST'15, as distributed with libCacheSim): a headerless sequence of
//! 32-byte little-endian records
//!
//! | offset | field | type | meaning |
//! |---|---|---|---|
//! | 0 | `sn` | u32 | serial number |
//! | 4 | `len` | u32 | request size, bytes |
//! | 8 | `nSG` | u32 | scatter-gather elements |
//! | 12 | `cmd` | u16 | SCSI opcode |
//! | 14 | `ver` | u16 | version in the high byte (`0x01xx`) |
//! | 16 | `lbn` | u64 | logical block, 512-byte sectors |
//! | 24 | `ts` | u64 | timestamp, µs |
//!
//! The layout is libCacheSim's `trace_v1_record_t`
//! (1a1a11a/libCacheSim, `libCacheSim/traceReader/customizedReader/vscsi.h`),
//! which also takes the version from `ver >> 8`. READ(6/10/12/16) opcodes
//! 0x08, 0x28, 0xa8, 0x88 are reads and WRITE(6/10/12/16) 0x0a, 0x2a,
//! 0xaa, 0x8a writes; other commands (TEST UNIT READY, SYNCHRONIZE
//! CACHE, …) move no user data and are ignored. The format has one device
//! (id 0) and no completion times. Version 2 (40-byte records with a
//! response time) is recognised and refused.

use super::bytes::{field_at, le_u16, le_u32, le_u64, read_full};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Error, Location, Result};
use std::io::BufRead;

const RECORD: usize = 32;
const LAYOUT: [(&str, usize); 7] = [
    ("sn", 0),
    ("len", 4),
    ("nSG", 8),
    ("cmd", 12),
    ("ver", 14),
    ("lbn", 16),
    ("ts", 24),
];
const SECTOR_BYTES: u64 = 512;
const NS_PER_US: u64 = 1_000;

fn op_of(cmd: u16) -> Option<Op> {
    match cmd {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Write),
        _ => None,
    }
}

/// The vscsi reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "vscsi",
    aliases: &[],
    summary: "VMware vscsi v1 binary, the CloudPhysics traces",
    code: 5,
    completions: Completions::Absent,
    splittable: false,
    numbers_devices: false,
    detect_rank: 60,
    detect: |h| sniff(h.file_name.contains(".vscsi") || looks_like(h.bytes)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut buf = [0u8; RECORD];
    let mut at: u64 = 0;
    loop {
        let n = read_full(input, &mut buf).map_err(|e| ctx.io(e))?;
        if n == 0 {
            return Ok(());
        }
        let loc = Location::Offset(at);
        if n < RECORD {
            return ctx.bad(
                loc,
                field_at(&LAYOUT, n),
                format!("truncated record: {n} of {RECORD} bytes before the end of the file"),
            );
        }
        if at == 0 && le_u16(&buf, 2) >> 8 == 2 && le_u16(&buf, 14) >> 8 != 1 {
            return Err(Error::Record {
                path: ctx.path.to_path_buf(),
                location: loc,
                field: "ver",
                message: "vscsi version 2 (40-byte records) is not supported".into(),
            });
        }
        at += RECORD as u64;
        match parse_record(&buf) {
            Ok(Some(r)) => ctx.push(loc, r)?,
            Ok(None) => ctx.report.ignore("vscsi: command moving no data"),
            Err((field, msg)) => ctx.bad(loc, field, msg)?,
        }
    }
}

/// True when the first records (up to four, at least two) all have version
/// 1, as libCacheSim's `test_vscsi_version` checks, and at least two of them
/// are reads or writes (random bytes pass that about once in 10¹⁴).
pub(crate) fn looks_like(head: &[u8]) -> bool {
    let first = || head.chunks_exact(RECORD).take(4);
    first().count() >= 2
        && first().all(|r| le_u16(r, 14) >> 8 == 1)
        && first().filter(|r| op_of(le_u16(r, 12)).is_some()).count() >= 2
}

type FieldError = (&'static str, String);

/// `Ok(None)` for a well-formed record of a command that moves no data.
fn parse_record(b: &[u8; RECORD]) -> std::result::Result<Option<RawRequest>, FieldError> {
    let ver = le_u16(b, 14);
    if ver >> 8 != 1 {
        return Err((
            "ver",
            format!("version {} (0x{ver:04x}), expected 1", ver >> 8),
        ));
    }
    let cmd = le_u16(b, 12);
    let Some(op) = op_of(cmd) else {
        return Ok(None);
    };
    let lbn = le_u64(b, 16);
    let offset_bytes = lbn
        .checked_mul(SECTOR_BYTES)
        .ok_or_else(|| ("lbn", format!("{lbn} sectors overflow a byte offset")))?;
    let ts = le_u64(b, 24);
    let arrival_ns = ts
        .checked_mul(NS_PER_US)
        .ok_or_else(|| ("ts", format!("{ts} µs overflows 64-bit nanoseconds")))?;
    Ok(Some(RawRequest {
        arrival_ns,
        completion_ns: None,
        offset_bytes,
        size_bytes: le_u32(b, 4),
        op,
        device: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cmd: u16, ver: u16, lbn: u64, ts: u64, len: u32) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0..4].copy_from_slice(&7u32.to_le_bytes());
        b[4..8].copy_from_slice(&len.to_le_bytes());
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[12..14].copy_from_slice(&cmd.to_le_bytes());
        b[14..16].copy_from_slice(&ver.to_le_bytes());
        b[16..24].copy_from_slice(&lbn.to_le_bytes());
        b[24..32].copy_from_slice(&ts.to_le_bytes());
        b
    }

    #[test]
    fn decodes_the_first_cloudphysics_record() {
        // First 32 bytes of cloudPhysicsIO.vscsi, from `xxd`.
        let b: [u8; 32] = [
            0xf4, 0x00, 0x00, 0x80, 0x00, 0x02, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2a, 0x00,
            0x00, 0x01, 0x09, 0x1a, 0x8f, 0x02, 0x00, 0x00, 0x00, 0x00, 0x22, 0xcf, 0x82, 0xbe,
            0x1f, 0x05, 0x00, 0x00,
        ];
        let r = parse_record(&b).unwrap().unwrap();
        assert_eq!(r.op, Op::Write); // 0x2a = WRITE(10)
        assert_eq!(r.size_bytes, 512);
        assert_eq!(r.offset_bytes, 0x028f_1a09 * 512);
        assert_eq!(r.arrival_ns, 0x051f_be82_cf22 * 1000);
    }

    #[test]
    fn reads_writes_others_and_bad_versions() {
        assert_eq!(
            parse_record(&record(0x28, 0x100, 1, 2, 4096))
                .unwrap()
                .unwrap()
                .op,
            Op::Read
        );
        assert_eq!(
            parse_record(&record(0x8a, 0x100, 1, 2, 4096))
                .unwrap()
                .unwrap()
                .op,
            Op::Write
        );
        assert_eq!(parse_record(&record(0x35, 0x100, 1, 2, 0)).unwrap(), None);
        assert_eq!(
            parse_record(&record(0x28, 0x300, 1, 2, 0)).unwrap_err().0,
            "ver"
        );
        assert_eq!(
            parse_record(&record(0x28, 0x100, u64::MAX, 2, 0))
                .unwrap_err()
                .0,
            "lbn"
        );
        assert_eq!(
            parse_record(&record(0x28, 0x100, 1, u64::MAX, 0))
                .unwrap_err()
                .0,
            "ts"
        );
    }

    #[test]
    fn version_2_is_refused_by_name() {
        // v2 records start with cmd, ver (u16 each): ver 0x0200 at byte 2.
        let mut b = [0u8; 80];
        b[0] = 0x28;
        b[3] = 0x02;
        let opts = crate::trace::ReadOptions {
            format: Some(super::super::Format::Vscsi),
            ..Default::default()
        };
        let e = crate::trace::read_from(&mut &b[..], std::path::Path::new("v2"), &opts)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("byte offset 0: field `ver`: vscsi version 2"),
            "{e}"
        );
    }

    #[test]
    fn detection_needs_two_plausible_records() {
        let mut head = record(0x28, 0x100, 1, 2, 512).to_vec();
        assert!(!looks_like(&head));
        head.extend_from_slice(&record(0x2a, 0x101, 1, 3, 512));
        assert!(looks_like(&head));
        head.extend_from_slice(&record(0x12, 0x100, 1, 3, 512)); // INQUIRY
        assert!(looks_like(&head));
        head.extend_from_slice(&record(0x28, 0x200, 1, 3, 512)); // version 2
        assert!(!looks_like(&head));
        assert!(!looks_like(
            &[record(0x28, 0x100, 1, 2, 512), record(0x12, 0x100, 1, 2, 0)].concat()
        ));
        assert!(!looks_like(
            b"0.000 0 11562803200 4096 1\n0.000 0 11562991616 4096 1\n0.000 0"
        ));
    }
}
