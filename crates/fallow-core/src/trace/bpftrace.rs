//! The output of fallow's bpftrace one-liner (docs/formats.md), which
//! prints one line per completed block request from the kernel's
//! `block:block_rq_issue` and `block:block_rq_complete` tracepoints:
//!
//! ```text
//! Attaching 3 probes...
//! fallow-io 81237741000 81238020000 8 16 2048 4096 R
//! ```
//!
//! Fields after the `fallow-io` tag: issue time and completion time (ns,
//! the kernel's monotonic clock, `nsecs`), device major and minor, start
//! sector (512 bytes), bytes, and the request's RWBS flags. The device id
//! is `major << 20 | minor` as for blkparse, so `8 16` is 8388624. RWBS
//! containing `W` is a write, `R` a read; requests moving no data
//! (flushes, discards: `F`, `D`, `N`, or 0 bytes) are ignored and counted.
//! bpftrace's `Attaching N probes...` banner and any map it prints at exit
//! (`@name[...]: value`) are ignored and counted; anything else is a bad
//! record naming the line and field.

use super::lines::{for_each_line, parse_u64, show, split_ws, trim};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::io::BufRead;

/// The tag that starts every line the one-liner prints.
pub(crate) const TAG: &[u8] = b"fallow-io";
const SECTOR_BYTES: u64 = 512;

pub(crate) const BANNER: &str = "bpftrace: `Attaching N probes` banner or map printed at exit";
pub(crate) const NO_DATA: &str = "bpftrace: request moving no data (flush, discard, 0 bytes)";

/// The bpftrace reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "bpftrace",
    aliases: &[],
    summary: "fallow's bpftrace one-liner, see docs/formats.md",
    code: 9,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: true,
    detect_rank: 70,
    detect: |h| sniff(looks_like(h.bytes)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    for_each_line(input, ctx, |ctx, line_no, line| {
        let t = trim(line);
        if t.is_empty() {
            return Ok(());
        }
        if is_banner(t) {
            ctx.report.ignore(BANNER);
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse_line(t) {
            Ok(Some(req)) => ctx.push(loc, req),
            Ok(None) => {
                ctx.report.ignore(NO_DATA);
                Ok(())
            }
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

fn is_banner(line: &[u8]) -> bool {
    (line.starts_with(b"Attaching ") && line.ends_with(b"...")) || line.starts_with(b"@")
}

/// True when the head's first data line is the one-liner's output, or
/// bpftrace's banner followed by it.
pub(crate) fn looks_like(head: &[u8]) -> bool {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(trim)
        .filter(|l| !l.is_empty());
    match lines.next() {
        Some(l) if l.starts_with(TAG) => parse_line(l).is_ok(),
        Some(l) if is_banner(l) => lines
            .next()
            .is_some_and(|l| l.starts_with(TAG) && parse_line(l).is_ok()),
        _ => false,
    }
}

type FieldError = (&'static str, String);

/// `fallow-io issue_ns complete_ns major minor sector bytes rwbs`; `None`
/// for a request that moves no data.
fn parse_line(line: &[u8]) -> std::result::Result<Option<RawRequest>, FieldError> {
    let mut f = split_ws(line, false);
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected `fallow-io issue_ns complete_ns major minor sector bytes rwbs`)"
                    .to_string(),
            )
        })
    };
    let tag = next("tag")?;
    if tag != TAG {
        return Err((
            "tag",
            format!("`{}` where the one-liner prints `fallow-io`", show(tag)),
        ));
    }
    let arrival_ns = parse_u64(next("issue_ns")?).map_err(|m| ("issue_ns", m))?;
    let completion_ns = parse_u64(next("complete_ns")?).map_err(|m| ("complete_ns", m))?;
    let major = parse_u64(next("major")?).map_err(|m| ("major", m))?;
    let minor = parse_u64(next("minor")?).map_err(|m| ("minor", m))?;
    if major >= 1 << 12 || minor >= 1 << 20 {
        return Err((
            "major",
            format!("{major},{minor} does not fit Linux's 12-bit major, 20-bit minor numbering"),
        ));
    }
    let sector = parse_u64(next("sector")?).map_err(|m| ("sector", m))?;
    let offset_bytes = sector
        .checked_mul(SECTOR_BYTES)
        .ok_or_else(|| ("sector", format!("{sector} overflows a byte offset")))?;
    let bytes = parse_u64(next("bytes")?).map_err(|m| ("bytes", m))?;
    let size_bytes = u32::try_from(bytes)
        .map_err(|_| ("bytes", format!("{bytes} is too large for one request")))?;
    let rwbs = next("rwbs")?;
    if let Some(&bad) = rwbs.iter().find(|b| !b"FWRDENSMAB".contains(b)) {
        return Err((
            "rwbs",
            format!(
                "`{}` has `{}`, not an RWBS letter (F W R D E N S M A B)",
                show(rwbs),
                show(&[bad])
            ),
        ));
    }
    if let Some(extra) = f.next() {
        return Err((
            "rwbs",
            format!("unexpected `{}` after the last field", show(extra)),
        ));
    }
    // A discard (`D`) or secure erase (`E`) carries a size but moves no data.
    let op = if rwbs.contains(&b'D') || rwbs.contains(&b'E') {
        None
    } else if rwbs.contains(&b'W') {
        Some(Op::Write)
    } else if rwbs.contains(&b'R') {
        Some(Op::Read)
    } else {
        None
    };
    let Some(op) = op.filter(|_| size_bytes > 0) else {
        return Ok(None);
    };
    Ok(Some(RawRequest {
        arrival_ns,
        completion_ns: Some(completion_ns),
        offset_bytes,
        size_bytes,
        op,
        device: ((major as u32) << 20) | minor as u32,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_line() {
        let r = parse_line(b"fallow-io 81237741000 81238020000 8 16 2048 4096 WS")
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                r.arrival_ns,
                r.completion_ns,
                r.device,
                r.offset_bytes,
                r.size_bytes,
                r.op
            ),
            (
                81_237_741_000,
                Some(81_238_020_000),
                8 << 20 | 16,
                2048 * 512,
                4096,
                Op::Write
            )
        );
        assert_eq!(parse_line(b"fallow-io 1 2 8 0 0 0 FF").unwrap(), None);
        assert_eq!(parse_line(b"fallow-io 1 2 8 0 8 4096 DS").unwrap(), None);
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| parse_line(l).unwrap_err().0;
        assert_eq!(bad(b"io 1 2 8 0 0 512 R"), "tag");
        assert_eq!(bad(b"fallow-io x 2 8 0 0 512 R"), "issue_ns");
        assert_eq!(bad(b"fallow-io 1 2 4096 0 0 512 R"), "major");
        assert_eq!(bad(b"fallow-io 1 2 8 0 0 512 Q"), "rwbs");
        assert_eq!(bad(b"fallow-io 1 2 8 0 0 512"), "rwbs");
        assert_eq!(bad(b"fallow-io 1 2 8 0 0 512 R x"), "rwbs");
    }

    #[test]
    fn recognises_the_output() {
        assert!(looks_like(
            b"Attaching 3 probes...\nfallow-io 1 2 8 0 0 512 R\n"
        ));
        assert!(looks_like(b"fallow-io 1 2 8 0 0 512 R\n"));
        assert!(!looks_like(b"Attaching 3 probes...\n@x: 3\n"));
    }
}
