//! fio I/O logs (`write_iolog=FILE`; fio's HOWTO, "Trace file format"),
//! versions 2 and 3:
//!
//! ```text
//! fio version 3 iolog
//! 0 /dev/sdb add
//! 12 /dev/sdb open
//! 131 /dev/sdb read 4096 4096
//! 160 /dev/sdb write 1048576 65536
//! ```
//!
//! Version 3 (fio 3.31 and later) starts each line with a timestamp in µs
//! since the start of the run. Version 2 has none; its `wait` action
//! (`FILE wait USEC 0`) advances the clock, so an arrival is the sum of the
//! waits before it (all zero in a log without waits). `read` and `write`
//! with byte offset and length are requests; each file is a device, with
//! ids 0, 1, 2… in order of first appearance. `add`, `open` and `close`,
//! `trim`, `sync` and `datasync` move no data and are ignored and counted.
//!
//! **No completion times**: fio logs an I/O when it submits it, and nothing
//! when it completes. Busy and idle periods then need a service model
//! (`--service`), as for SPC traces; fio's latency logs (`fio-lat`) do
//! carry completions.

use super::lines::{for_each_line, is_blank_or_comment, parse_u64, show, split_ws, trim};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::io::BufRead;

const NS_PER_US: u64 = 1_000;

pub(crate) const FILE_ACTION: &str = "fio-iolog: file action (add, open, close)";
pub(crate) const NO_DATA: &str = "fio-iolog: action moving no data (trim, sync, datasync)";

/// True when the first line is a version 2 or 3 header.
pub(crate) fn looks_like(first_line: &[u8]) -> bool {
    version(trim(first_line)).is_some()
}

fn version(line: &[u8]) -> Option<u8> {
    match line {
        b"fio version 2 iolog" => Some(2),
        b"fio version 3 iolog" => Some(3),
        _ => None,
    }
}

/// The fio-iolog reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "fio-iolog",
    aliases: &[],
    summary: "fio iolog v2/v3, no completion times",
    code: 11,
    completions: Completions::Absent,
    splittable: false,
    numbers_devices: false,
    detect_rank: 100,
    detect: |h| sniff(h.first_line.is_some_and(looks_like)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut ver: Option<u8> = None;
    let mut clock_us: u64 = 0;
    for_each_line(input, ctx, |ctx, line_no, line| {
        let loc = Location::Line(line_no);
        let Some(v) = ver else {
            if is_blank_or_comment(line) {
                return Ok(());
            }
            return match version(trim(line)) {
                Some(v) => {
                    ver = Some(v);
                    Ok(())
                }
                // Nothing after a missing header can be read: fatal even
                // under --skip-bad.
                None => Err(crate::Error::Record {
                    path: ctx.path.to_path_buf(),
                    location: loc,
                    field: "version",
                    message: format!(
                        "`{}` is not `fio version 2 iolog` or `fio version 3 iolog` \
                         (version 1 logs are unsupported, as by fio since 1.20)",
                        show(line)
                    ),
                }),
            };
        };
        if trim(line).is_empty() {
            return Ok(());
        }
        match parse_line(line, v, &mut clock_us) {
            Ok(Entry::Io {
                file,
                arrival_us,
                offset_bytes,
                size_bytes,
                op,
            }) => {
                let Some(arrival_ns) = arrival_us.checked_mul(NS_PER_US) else {
                    return ctx.bad(
                        loc,
                        "time",
                        format!("{arrival_us} µs overflows the ns clock"),
                    );
                };
                let device = match ctx.named_device(file, "file") {
                    Ok(d) => d,
                    Err((field, msg)) => return ctx.bad(loc, field, msg),
                };
                ctx.push(
                    loc,
                    RawRequest {
                        arrival_ns,
                        completion_ns: None,
                        offset_bytes,
                        size_bytes,
                        op,
                        device,
                    },
                )
            }
            Ok(Entry::FileAction) => {
                ctx.report.ignore(FILE_ACTION);
                Ok(())
            }
            Ok(Entry::NoData) => {
                ctx.report.ignore(NO_DATA);
                Ok(())
            }
            Ok(Entry::Wait) => Ok(()),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })?;
    if ver.is_none() {
        return Err(crate::Error::Empty {
            path: ctx.path.to_path_buf(),
            detail: " (no `fio version N iolog` header)".into(),
        });
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
enum Entry<'a> {
    Io {
        file: &'a [u8],
        arrival_us: u64,
        offset_bytes: u64,
        size_bytes: u32,
        op: Op,
    },
    FileAction,
    NoData,
    Wait,
}

type FieldError = (&'static str, String);

/// One line after the header; `clock_us` is version 2's running sum of waits.
fn parse_line<'a>(
    line: &'a [u8],
    ver: u8,
    clock_us: &mut u64,
) -> std::result::Result<Entry<'a>, FieldError> {
    let fields: Vec<&[u8]> = split_ws(line, false).collect();
    let (time_us, rest) = if ver == 3 {
        let (t, rest) = fields
            .split_first()
            .ok_or_else(|| ("timestamp", "missing field".to_string()))?;
        (Some(parse_u64(t).map_err(|m| ("timestamp", m))?), rest)
    } else {
        (None, &fields[..])
    };
    let (file, action, args) = match rest {
        [file, action, args @ ..] => (*file, *action, args),
        _ => {
            return Err((
                "action",
                "missing field (expected `FILE ACTION [OFFSET LENGTH]`)".into(),
            ))
        }
    };
    let numbers = |args: &[&[u8]]| -> std::result::Result<(u64, u64), FieldError> {
        match args {
            [o, l] => Ok((
                parse_u64(o).map_err(|m| ("offset", m))?,
                parse_u64(l).map_err(|m| ("length", m))?,
            )),
            _ => Err((
                "length",
                format!("`{}` takes an offset and a length", show(action)),
            )),
        }
    };
    match action {
        b"add" | b"open" | b"close" if args.is_empty() => Ok(Entry::FileAction),
        b"read" | b"write" => {
            let (offset_bytes, length) = numbers(args)?;
            let size_bytes = u32::try_from(length)
                .map_err(|_| ("length", format!("{length} is too large for one request")))?;
            let arrival_us = time_us.unwrap_or(*clock_us);
            Ok(Entry::Io {
                file,
                arrival_us,
                offset_bytes,
                size_bytes,
                op: if action == b"read" { Op::Read } else { Op::Write },
            })
        }
        b"trim" | b"sync" | b"datasync" => {
            numbers(args)?;
            Ok(Entry::NoData)
        }
        b"wait" if ver == 2 => {
            let (delay_us, _) = numbers(args)?;
            *clock_us = clock_us
                .checked_add(delay_us)
                .ok_or_else(|| ("offset", format!("a wait of {delay_us} µs overflows the clock")))?;
            Ok(Entry::Wait)
        }
        b"wait" => Err((
            "action",
            "`wait` is not allowed in a version 3 log (fio ignores it)".into(),
        )),
        a => Err((
            "action",
            format!(
                "`{}` is not an iolog action (add, open, close, read, write, trim, sync, datasync, wait)",
                show(a)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_3_lines() {
        let mut clock = 0;
        assert_eq!(
            parse_line(b"160 /dev/sdb write 1048576 65536", 3, &mut clock).unwrap(),
            Entry::Io {
                file: b"/dev/sdb",
                arrival_us: 160,
                offset_bytes: 1_048_576,
                size_bytes: 65_536,
                op: Op::Write
            }
        );
        assert_eq!(
            parse_line(b"0 /dev/sdb add", 3, &mut clock).unwrap(),
            Entry::FileAction
        );
        assert_eq!(
            parse_line(b"9 /dev/sdb sync 0 0", 3, &mut clock).unwrap(),
            Entry::NoData
        );
        assert_eq!(
            parse_line(b"9 /dev/sdb wait 5 0", 3, &mut clock)
                .unwrap_err()
                .0,
            "action"
        );
    }

    #[test]
    fn version_2_waits_advance_the_clock() {
        let mut clock = 0;
        let at = |line: &[u8], clock: &mut u64| match parse_line(line, 2, clock).unwrap() {
            Entry::Io { arrival_us, .. } => arrival_us,
            other => panic!("{other:?}"),
        };
        assert_eq!(at(b"/f read 0 4096", &mut clock), 0);
        assert_eq!(
            parse_line(b"/f wait 250 0", 2, &mut clock).unwrap(),
            Entry::Wait
        );
        assert_eq!(
            parse_line(b"/f wait 50 0", 2, &mut clock).unwrap(),
            Entry::Wait
        );
        assert_eq!(at(b"/f write 8192 512", &mut clock), 300);
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8], v| parse_line(l, v, &mut 0).unwrap_err().0;
        assert_eq!(bad(b"x /f read 0 4096", 3), "timestamp");
        assert_eq!(bad(b"1 /f read x 4096", 3), "offset");
        assert_eq!(bad(b"1 /f read 0", 3), "length");
        assert_eq!(bad(b"/f frobnicate 0 1", 2), "action");
        assert_eq!(bad(b"/f read 0 4294967296", 2), "length");
    }
}
