//! fio latency logs (`write_lat_log=NAME` with `log_offset=1`; fio's HOWTO,
//! "Log File Formats"): `NAME_clat.N.log` or `NAME_lat.N.log`, one line per
//! I/O,
//!
//! ```text
//! time (ms), latency (ns), ddir, block size (bytes), offset (bytes), priority[, issue time (ns)]
//! 13, 280361, 0, 4096, 1052672, 0
//! ```
//!
//! fio logs an I/O when it completes: `time` is the completion in ms since
//! the job started (whole ms), the value its latency in ns. The completion
//! is then `time`, the arrival `time − latency` (1 ms resolution). With
//! `log_issue_time=1` a seventh field gives the issue time in ns on the
//! same clock; when it is not 0 (clat logs) the arrival is that issue time
//! and the completion issue + latency, exact to the ns. ddir 0 is a read,
//! 1 a write; 2 (trim) moves no data and is ignored, as are windowed
//! averages (`log_avg_msec`, which fio writes with block size 0). Each file
//! is one job on one device: device 0.
//!
//! A log without offsets (five fields: `log_offset=0`) is an error asking
//! for `log_offset=1`. Submission-latency (`_slat.`), bandwidth (`_bw.`)
//! and IOPS (`_iops.`) logs hold no completions and are refused by name.

use super::latency::{push_all, Logged};
use super::lines::{for_each_line, is_blank_or_comment, parse_u64, show, split, trim};
use super::reader::{sniff, Completions, Head, ReaderEntry, Sniff};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Error, Location, Result};
use std::io::BufRead;
use std::path::Path;

const NS_PER_MS: u64 = 1_000_000;

pub(crate) const TRIM: &str = "fio-lat: trim (ddir 2), moving no data";
pub(crate) const WINDOWED: &str = "fio-lat: windowed average (log_avg_msec), not one I/O";

/// The kind of fio log a file name says it is, when it is not a latency log.
pub(crate) fn refused_kind(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
    [
        ("_slat.", "a submission-latency log (no completions)"),
        ("_bw.", "a bandwidth log (no per-I/O times)"),
        ("_iops.", "an IOPS log (no per-I/O times)"),
    ]
    .into_iter()
    .find(|(tag, _)| name.contains(tag))
    .map(|(_, what)| what)
}

/// True when the file name is a completion or total latency log's.
pub(crate) fn named_like(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.contains("_clat.") || name.contains("_lat.")
}

/// Detection: a fio log line, in a file named like a latency log. Any
/// other fio log (bandwidth, IOPS, a renamed file) is refused, since
/// `plain` would take five of its integers for `time dev offset size op`:
/// latencies would become device ids.
fn detect(h: &Head<'_>) -> Sniff {
    match h.first_line {
        Some(line) if looks_like_fio_log(line) => {
            if named_like(h.path) && refused_kind(h.path).is_none() {
                return Sniff::Yes;
            }
            Sniff::Refuse(format!(
                "first line `{}` looks like a fio log (`time, value, ddir, bs, offset[, prio]`), \
                 not a block trace; a latency log recorded with log_offset=1 reads with \
                 `--format fio-lat` (detected when named `*_clat.N.log` or `*_lat.N.log`), \
                 while `--format plain` would read its columns as `time dev offset size op`",
                show(line)
            ))
        }
        _ => sniff(false),
    }
}

/// A fio latency, bandwidth or IOPS log line (fio(1), "log file
/// formats"): `time, value, ddir, bs, offset[, prio]`, integers separated
/// by a comma and a space, ddir 0 (read), 1 (write) or 2 (trim).
fn looks_like_fio_log(line: &[u8]) -> bool {
    let fields: Vec<&[u8]> = line.split(|&b| b == b',').collect();
    // Seven with `log_issue_time=1`; the priority is hex with `log_prio=1`.
    let hex = |f: &[u8]| {
        f.strip_prefix(b"0x")
            .is_some_and(|h| !h.is_empty() && h.iter().all(u8::is_ascii_hexdigit))
    };
    (5..=7).contains(&fields.len())
        && fields[1..].iter().all(|f| f.first() == Some(&b' '))
        && fields.iter().enumerate().all(|(i, f)| {
            let f = trim(f);
            parse_u64(f).is_ok() || (i >= 4 && hex(f))
        })
        && matches!(trim(fields[2]), b"0" | b"1" | b"2")
}

/// The fio-lat reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "fio-lat",
    aliases: &[],
    summary: "fio latency log with `log_offset=1`",
    code: 12,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: false,
    detect_rank: 130,
    detect,
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    if let Some(what) = refused_kind(ctx.path) {
        return Err(Error::Unsupported(format!(
            "{}: the name says this is {what}, not a latency log (`NAME_clat.N.log` or `NAME_lat.N.log`)",
            ctx.path.display()
        )));
    }
    let mut logged = Vec::new();
    let mut latest_ns = 0;
    for_each_line(input, ctx, |ctx, line_no, line| {
        if is_blank_or_comment(line) {
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse_line(line) {
            Ok(Sample::Io {
                completion_ns,
                latency_ns,
                offset_bytes,
                size_bytes,
                op,
            }) => {
                if completion_ns < latest_ns {
                    ctx.report.reordered = ctx.report.reordered.saturating_add(1);
                } else {
                    latest_ns = completion_ns;
                }
                logged.push(Logged {
                    loc,
                    completion_ns,
                    latency_ns,
                    req: RawRequest {
                        arrival_ns: 0,
                        completion_ns: None,
                        offset_bytes,
                        size_bytes,
                        op,
                        device: 0,
                    },
                });
                Ok(())
            }
            Ok(Sample::Trim) => {
                ctx.report.ignore(TRIM);
                Ok(())
            }
            Ok(Sample::Windowed) => {
                ctx.report.ignore(WINDOWED);
                Ok(())
            }
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })?;
    push_all(ctx, logged)
}

#[derive(Debug, PartialEq)]
enum Sample {
    Io {
        completion_ns: u64,
        latency_ns: u64,
        offset_bytes: u64,
        size_bytes: u32,
        op: Op,
    },
    Trim,
    Windowed,
}

type FieldError = (&'static str, String);

fn parse_line(line: &[u8]) -> std::result::Result<Sample, FieldError> {
    let f: Vec<&[u8]> = split(line, b',').map(trim).collect();
    let (time, lat, ddir, bs, offset, prio, issue) = match f[..] {
        [t, v, d, b, o, p] => (t, v, d, b, o, p, None),
        [t, v, d, b, o, p, i] => (t, v, d, b, o, p, Some(i)),
        [_, _, _, _, _] => {
            return Err((
                "offset",
                "five fields: a log without offsets; record it with fio's log_offset=1".into(),
            ))
        }
        _ => {
            return Err((
                "line",
                format!(
                    "{} fields, expected `time, latency, ddir, bs, offset, prio[, issue_time]`",
                    f.len()
                ),
            ))
        }
    };
    let time_ms = parse_u64(time).map_err(|m| ("time", m))?;
    let latency_ns = parse_u64(lat).map_err(|m| ("latency", m))?;
    let op = match ddir {
        b"0" => Op::Read,
        b"1" => Op::Write,
        b"2" => Op::Read, // trim: checked below, then ignored
        d => return Err(("ddir", format!("`{}` is not 0, 1 or 2", show(d)))),
    };
    let size = parse_u64(bs).map_err(|m| ("bs", m))?;
    let size_bytes =
        u32::try_from(size).map_err(|_| ("bs", format!("{size} is too large for one request")))?;
    let offset_bytes = parse_u64(offset).map_err(|m| ("offset", m))?;
    // With log_prio=1 the priority is written in hex (`0x2004`).
    let prio_ok = match prio.strip_prefix(b"0x") {
        Some(hex) => !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit),
        None => parse_u64(prio).is_ok(),
    };
    if !prio_ok {
        return Err(("prio", format!("`{}` is not a priority", show(prio))));
    }
    let issue_ns = match issue {
        Some(i) => parse_u64(i).map_err(|m| ("issue_time", m))?,
        None => 0,
    };
    if ddir == b"2" {
        return Ok(Sample::Trim);
    }
    if size_bytes == 0 {
        return Ok(Sample::Windowed);
    }
    let completion_ns = if issue_ns > 0 {
        issue_ns.checked_add(latency_ns).ok_or_else(|| {
            (
                "latency",
                format!("issue {issue_ns} ns + {latency_ns} ns overflows"),
            )
        })?
    } else {
        time_ms
            .checked_mul(NS_PER_MS)
            .ok_or_else(|| ("time", format!("{time_ms} ms overflows the ns clock")))?
    };
    Ok(Sample::Io {
        completion_ns,
        latency_ns,
        offset_bytes,
        size_bytes,
        op,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_from_time_or_issue() {
        assert_eq!(
            parse_line(b"13, 280361, 0, 4096, 1052672, 0").unwrap(),
            Sample::Io {
                completion_ns: 13_000_000,
                latency_ns: 280_361,
                offset_bytes: 1_052_672,
                size_bytes: 4096,
                op: Op::Read
            }
        );
        let Sample::Io { completion_ns, .. } =
            parse_line(b"13, 280361, 1, 4096, 0, 0x2004, 12719639").unwrap()
        else {
            panic!()
        };
        assert_eq!(completion_ns, 12_719_639 + 280_361);
        assert_eq!(parse_line(b"13, 5, 2, 4096, 0, 0").unwrap(), Sample::Trim);
        assert_eq!(
            parse_line(b"500, 5123, 0, 0, 0, 0").unwrap(),
            Sample::Windowed
        );
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| parse_line(l).unwrap_err().0;
        assert_eq!(bad(b"1, 523, 0, 4096, 0"), "offset");
        assert_eq!(bad(b"1, 523, 3, 4096, 0, 0"), "ddir");
        assert_eq!(bad(b"1, x, 0, 4096, 0, 0"), "latency");
        assert_eq!(bad(b"1, 5, 0, 4096, 0, 0xg"), "prio");
        assert_eq!(bad(b"1, 5, 0, 4096, 0, 0, 1, 2"), "line");
    }

    #[test]
    fn refuses_other_logs_by_name() {
        assert!(refused_kind(Path::new("job_slat.1.log")).is_some());
        assert!(refused_kind(Path::new("/x/job_bw.2.log")).is_some());
        assert!(refused_kind(Path::new("job_clat.1.log")).is_none());
        assert!(named_like(Path::new("job_clat.1.log")) && named_like(Path::new("a_lat.3.log")));
        assert!(!named_like(Path::new("job_bw.1.log")));
    }
}
