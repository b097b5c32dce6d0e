//! bcc `biosnoop` text output (iovisor/bcc `tools/biosnoop.py`), with or
//! without `-Q` (and `-P`):
//!
//! ```text
//! TIME(s)     COMM           PID     DISK      T SECTOR     BYTES  QUE(ms) LAT(ms)
//! 0.000000    kworker/u72:1  13379   nvme1n1   W 1142400    4096      0.01    0.55
//! ```
//!
//! One line per completed request, printed at its completion: `TIME(s)` is
//! the completion time in seconds since biosnoop's first event (µs
//! resolution), `LAT(ms)` the time from issue to the device to completion
//! (two decimals: 10 µs resolution). The arrival is the issue, `TIME − LAT`,
//! as for blkparse's `D` event; `QUE(ms)` (time queued in the OS before the
//! issue, `-Q`) is read and checked but not part of the request.
//! `SECTOR` is in 512-byte sectors, `BYTES` the request's size, `T` is `R`
//! or `W`. Disks are named (`sda`, `nvme0n1`); their ids are 0, 1, 2… in
//! order of first appearance. `COMM` (a process name, up to 14 characters)
//! may contain blanks, so a line is split from the right.
//!
//! Ignored and counted by reason: lines whose disk is `<unknown>` (biosnoop
//! did not see the issuing process, and then prints sector 0 and device 0),
//! requests of 0 bytes (flushes), biosnoop's `Possibly lost N samples`
//! notices and repeated headers.

use super::latency::{push_all, Logged};
use super::lines::{for_each_line, parse_time_ns, parse_u64, show, split_ws, trim};
use super::reader::{Completions, Head, ReaderEntry, Sniff};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::io::BufRead;

const SECTOR_BYTES: u64 = 512;
const NS_PER_S: u64 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;

pub(crate) const UNKNOWN_DISK: &str =
    "biosnoop: disk <unknown> (issuing process not seen; no sector recorded)";
pub(crate) const NO_DATA: &str = "biosnoop: request moving no data (0 bytes)";
pub(crate) const NOTICE: &str = "biosnoop: header or `Possibly lost` notice";

/// Detection: biosnoop's header; lines of biosnoop events without it are
/// named (when no other reader takes them) rather than guessed.
fn detect(h: &Head<'_>) -> Sniff {
    match h.first_line {
        Some(line) if looks_like(line) => Sniff::Yes,
        Some(line) if looks_like_event(line) => Sniff::Hint(format!(
            "first line `{}` looks like biosnoop output without its `TIME(s) ... LAT(ms)` \
             header; pass `--format biosnoop`",
            show(line)
        )),
        _ => Sniff::No,
    }
}

/// The biosnoop reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "biosnoop",
    aliases: &[],
    summary: "bcc `biosnoop`, with or without `-Q`",
    code: 8,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: false,
    detect_rank: 90,
    detect,
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut logged = Vec::new();
    let mut latest_ns = 0;
    for_each_line(input, ctx, |ctx, line_no, line| {
        let t = trim(line);
        if t.is_empty() {
            return Ok(());
        }
        if is_header(t) || t.starts_with(b"Possibly lost") {
            ctx.report.ignore(NOTICE);
            return Ok(());
        }
        let loc = Location::Line(line_no);
        let rec = match parse_line(t) {
            Ok(r) => r,
            Err((field, msg)) => return ctx.bad(loc, field, msg),
        };
        if rec.disk == b"<unknown>" {
            ctx.report.ignore(UNKNOWN_DISK);
            return Ok(());
        }
        if rec.size_bytes == 0 {
            ctx.report.ignore(NO_DATA);
            return Ok(());
        }
        // Lines are printed in completion order; one out of it was edited
        // or interleaved, and is counted like any reader's late record.
        if rec.completion_ns < latest_ns {
            ctx.report.reordered = ctx.report.reordered.saturating_add(1);
        } else {
            latest_ns = rec.completion_ns;
        }
        let device = match ctx.named_device(rec.disk, "DISK") {
            Ok(d) => d,
            Err((field, msg)) => return ctx.bad(loc, field, msg),
        };
        logged.push(Logged {
            loc,
            completion_ns: rec.completion_ns,
            latency_ns: rec.latency_ns,
            req: RawRequest {
                arrival_ns: 0,
                completion_ns: None,
                offset_bytes: rec.offset_bytes,
                size_bytes: rec.size_bytes,
                op: rec.op,
                device,
            },
        });
        Ok(())
    })?;
    push_all(ctx, logged)
}

/// biosnoop's header line (every version starts it with `TIME(s)` and ends
/// it with `LAT(ms)`).
fn is_header(line: &[u8]) -> bool {
    line.starts_with(b"TIME(s)") && trim(line).ends_with(b"LAT(ms)")
}

/// True when the head's first line is biosnoop's header.
pub(crate) fn looks_like(first_line: &[u8]) -> bool {
    is_header(trim(first_line))
}

/// True when `line` parses as a biosnoop event (for detection's hint on a
/// file whose header was cut off).
pub(crate) fn looks_like_event(line: &[u8]) -> bool {
    parse_line(trim(line)).is_ok()
}

#[derive(Debug, PartialEq)]
struct Record<'a> {
    completion_ns: u64,
    latency_ns: u64,
    disk: &'a [u8],
    op: Op,
    offset_bytes: u64,
    size_bytes: u32,
}

type FieldError = (&'static str, String);

/// Split from the right: `LAT [QUE] [P] BYTES SECTOR T DISK PID`, then
/// `TIME` first; whatever lies between TIME and PID is COMM.
fn parse_line(line: &[u8]) -> std::result::Result<Record<'_>, FieldError> {
    let fields: Vec<&[u8]> = split_ws(line, false).collect();
    let missing = |name: &'static str| -> FieldError {
        (
            name,
            "missing field (expected `TIME(s) COMM PID DISK T SECTOR BYTES [P] [QUE(ms)] LAT(ms)`)"
                .to_string(),
        )
    };
    let mut rest = &fields[..];
    let mut pop = |name: &'static str| match rest {
        [head @ .., last] => {
            rest = head;
            Ok(*last)
        }
        [] => Err(missing(name)),
    };
    let lat = pop("LAT(ms)")?;
    let latency_ns = parse_time_ns(lat, NS_PER_MS).map_err(|m| ("LAT(ms)", m))?;
    let mut field = pop("BYTES")?;
    // `-Q`: QUE(ms) is the only decimal before LAT.
    if field.contains(&b'.') {
        parse_time_ns(field, NS_PER_MS).map_err(|m| ("QUE(ms)", m))?;
        field = pop("BYTES")?;
    }
    // `-P`: a pattern letter, S(equential), R(andom) or ? (first request).
    if matches!(field, b"S" | b"R" | b"?") {
        field = pop("BYTES")?;
    }
    let size = parse_u64(field).map_err(|m| ("BYTES", m))?;
    let size_bytes = u32::try_from(size)
        .map_err(|_| ("BYTES", format!("{size} is too large for one request")))?;
    let sector = pop("SECTOR")?;
    let sector = parse_u64(sector).map_err(|m| ("SECTOR", m))?;
    let offset_bytes = sector
        .checked_mul(SECTOR_BYTES)
        .ok_or_else(|| ("SECTOR", format!("{sector} overflows a byte offset")))?;
    let op = match pop("T")? {
        b"R" => Op::Read,
        b"W" => Op::Write,
        t => return Err(("T", format!("`{}` is neither R nor W", show(t)))),
    };
    let disk = pop("DISK")?;
    let pid = pop("PID")?;
    parse_u64(pid).map_err(|m| ("PID", m))?;
    let time = rest.first().ok_or_else(|| missing("TIME(s)"))?;
    let completion_ns = parse_time_ns(time, NS_PER_S).map_err(|m| ("TIME(s)", m))?;
    if !time.contains(&b'.') {
        return Err((
            "TIME(s)",
            format!("`{}` is not biosnoop's decimal seconds", show(time)),
        ));
    }
    Ok(Record {
        completion_ns,
        latency_ns,
        disk,
        op,
        offset_bytes,
        size_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_bccs_example_with_and_without_q() {
        // tools/biosnoop_example.txt (iovisor/bcc).
        let r =
            parse_line(b"0.000004    supervise      1950   xvda1   W 13092560   4096       0.74")
                .unwrap();
        assert_eq!(
            r,
            Record {
                completion_ns: 4_000,
                latency_ns: 740_000,
                disk: b"xvda1",
                op: Op::Write,
                offset_bytes: 13_092_560 * 512,
                size_bytes: 4096,
            }
        );
        let q = parse_line(
            b"5.333065    xfsaild/nvme1n 1061   nvme1n1 W 20971521   512       0.02    0.65",
        )
        .unwrap();
        assert_eq!(
            (q.completion_ns, q.latency_ns, q.disk, q.size_bytes),
            (5_333_065_000, 650_000, &b"nvme1n1"[..], 512)
        );
        // A process name with a blank, -P's pattern letter, and both.
        let p = parse_line(b"1.5 Web Content 77 sda R 8 4096 S 0.10 2.00").unwrap();
        assert_eq!(
            (p.op, p.latency_ns, p.offset_bytes),
            (Op::Read, 2_000_000, 4096)
        );
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| parse_line(l).unwrap_err().0;
        assert_eq!(bad(b"0.1 a 1 sda X 8 4096 0.5"), "T");
        assert_eq!(bad(b"0.1 a 1 sda W x 4096 0.5"), "SECTOR");
        assert_eq!(bad(b"0.1 a 1 sda W 8 4096 -0.5"), "LAT(ms)");
        assert_eq!(bad(b"0.1 a x sda W 8 4096 0.5"), "PID");
        assert_eq!(bad(b"abc a 1 sda W 8 4096 0.5"), "TIME(s)");
        assert_eq!(bad(b"sda W 8 4096 0.5"), "PID");
        assert_eq!(bad(b"0.1 a 1 sda W 8 99999999999 0.5"), "BYTES");
    }

    #[test]
    fn recognises_the_header() {
        assert!(looks_like(
            b"TIME(s)     COMM           PID    DISK    T SECTOR     BYTES  QUE(ms) LAT(ms)"
        ));
        assert!(!looks_like(b"TIME(s) something else"));
    }
}
