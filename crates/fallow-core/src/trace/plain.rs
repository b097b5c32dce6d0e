//! Plain text: `time dev offset size op`, one request per line, fields
//! separated by blanks, tabs or commas. This is the layout of the MSR
//! Cambridge cuts used by Heimdall (ucare-uchicago/Heimdall,
//! `ds_pipeline/data/raw_data/*.trace`: `t_ms dev offset_bytes size_bytes op`)
//! and what most ad-hoc scripts write.
//!
//! Units come from [`PlainOptions`]: time in ms by
//! default (a decimal, parsed exactly), offset and size in bytes unless
//! scaled (512 for sectors). `op` is `1`, `r`, `R` or `read` for a read and
//! `0`, `w`, `W` or `write` for a write (Heimdall's cuts use 1 = read).
//! Fields after the fifth are ignored; `#` lines are comments.
//!
//! With [`PlainOptions::completion`] (`--completion-column`), a sixth field
//! is required: the request's completion time, in the time column's unit
//! and on its clock (`time dev offset size op completion`). Detection
//! never guesses it: a six-field file is refused with a message naming the
//! flag. Without it the format records no completion time.
//!
//! [`PlainOptions::completion`]: super::PlainOptions::completion

use super::lines::{for_each_line, is_blank_or_comment, parse_time_ns, parse_u64, show, split_ws};
use super::reader::{Completions, Head, ReaderEntry, Sniff};
use super::{Op, PlainOptions, RawRequest, ReadContext, TimeUnit};
use crate::error::{Location, Result};
use std::io::BufRead;

/// Detection: five fields that read as a record; a sixth that reads as a
/// completion time is not assumed (the error names the flag).
fn detect(h: &Head<'_>) -> Sniff {
    match h.first_line {
        Some(line) if looks_like(line) => Sniff::Yes,
        Some(line) if looks_like_with_completion(line) => Sniff::Refuse(format!(
            "first line `{}` has six fields; if the sixth is each request's completion time, \
             pass `--format plain --completion-column`",
            show(line)
        )),
        _ => Sniff::No,
    }
}

/// The plain reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "plain",
    aliases: &["text", "txt"],
    summary: "`time dev offset size op [completion]`",
    code: 6,
    completions: Completions::IfAsked,
    splittable: true,
    numbers_devices: false,
    detect_rank: 140,
    detect,
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let units = ctx.opts.plain;
    for_each_line(input, ctx, |ctx, line_no, line| {
        if is_blank_or_comment(line) {
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse_record(line, &units) {
            Ok(r) => ctx.push(loc, r),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

/// True when `line` has exactly five fields: four numbers (the first may be
/// a decimal) and a read/write marker.
pub(crate) fn looks_like(line: &[u8]) -> bool {
    split_ws(line, true).count() == 5 && parse_record(line, &PlainOptions::default()).is_ok()
}

/// True when `line` is a plain record with a sixth field that reads as a
/// completion time (which detection does not assume: it names the flag).
pub(crate) fn looks_like_with_completion(line: &[u8]) -> bool {
    let units = PlainOptions {
        completion: true,
        ..PlainOptions::default()
    };
    split_ws(line, true).count() == 6 && parse_record(line, &units).is_ok()
}

fn unit_ns(u: TimeUnit) -> u64 {
    match u {
        TimeUnit::Ns => 1,
        TimeUnit::Us => 1_000,
        TimeUnit::Ms => 1_000_000,
        TimeUnit::S => 1_000_000_000,
    }
}

type FieldError = (&'static str, String);

fn parse_record(line: &[u8], units: &PlainOptions) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split_ws(line, true);
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected `time dev offset size op`)".to_string(),
            )
        })
    };
    let time = next("time")?;
    let dev = next("dev")?;
    let offset = next("offset")?;
    let size = next("size")?;
    let op = next("op")?;
    let completion = if units.completion {
        let c = f.next().ok_or_else(|| {
            (
                "completion",
                "missing field (expected `time dev offset size op completion` with --completion-column)"
                    .to_string(),
            )
        })?;
        Some(parse_time_ns(c, unit_ns(units.time_unit)).map_err(|m| ("completion", m))?)
    } else {
        None
    };

    let arrival_ns = parse_time_ns(time, unit_ns(units.time_unit)).map_err(|m| ("time", m))?;
    let device = parse_u64(dev).map_err(|m| ("dev", m))?;
    let device = u32::try_from(device).map_err(|_| {
        (
            "dev",
            format!("`{}` is too large for a device id", show(dev)),
        )
    })?;
    let offset_bytes = parse_u64(offset)
        .map_err(|m| ("offset", m))?
        .checked_mul(units.offset_unit_bytes)
        .ok_or_else(|| {
            (
                "offset",
                format!("`{}` overflows a byte offset", show(offset)),
            )
        })?;
    let size_bytes = parse_u64(size)
        .map_err(|m| ("size", m))?
        .checked_mul(units.size_unit_bytes)
        .and_then(|s| u32::try_from(s).ok())
        .ok_or_else(|| {
            (
                "size",
                format!("`{}` is too large for one request", show(size)),
            )
        })?;
    let op = match op {
        b"1" | b"r" | b"R" => Op::Read,
        b"0" | b"w" | b"W" => Op::Write,
        o if o.eq_ignore_ascii_case(b"read") => Op::Read,
        o if o.eq_ignore_ascii_case(b"write") => Op::Write,
        o => return Err(("op", format!("`{}` is not 1/r/read or 0/w/write", show(o)))),
    };
    Ok(RawRequest {
        arrival_ns,
        completion_ns: completion,
        offset_bytes,
        size_bytes,
        op,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms() -> PlainOptions {
        PlainOptions::default()
    }

    #[test]
    fn parses_a_heimdall_line() {
        // Second line of msr.cut.per_10k.rw_20_80.105.trace.
        let r = parse_record(b"223.412 0 3159347200 36864 0", &ms()).unwrap();
        assert_eq!(r.arrival_ns, 223_412_000);
        assert_eq!(
            (r.device, r.offset_bytes, r.size_bytes, r.op),
            (0, 3_159_347_200, 36_864, Op::Write)
        );
    }

    #[test]
    fn commas_units_and_op_spellings() {
        let units = PlainOptions {
            time_unit: TimeUnit::Us,
            offset_unit_bytes: 512,
            size_unit_bytes: 512,
            completion: false,
        };
        let r = parse_record(b"1.5, 2, 10, 8, read", &units).unwrap();
        assert_eq!(r.arrival_ns, 1500);
        assert_eq!((r.device, r.offset_bytes, r.size_bytes), (2, 5120, 4096));
        assert_eq!(r.op, Op::Read);
        for (text, op) in [
            ("W", Op::Write),
            ("write", Op::Write),
            ("r", Op::Read),
            ("1", Op::Read),
        ] {
            let line = format!("0 0 0 1 {text}");
            assert_eq!(parse_record(line.as_bytes(), &ms()).unwrap().op, op);
        }
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| parse_record(l, &ms()).unwrap_err().0;
        assert_eq!(bad(b"1 0 0 4096 2"), "op");
        assert_eq!(bad(b"1 0 0 4096"), "op");
        assert_eq!(bad(b"-1 0 0 4096 1"), "time");
        assert_eq!(bad(b"1 x 0 4096 1"), "dev");
        assert_eq!(bad(b"1 0 0.5 4096 1"), "offset");
        assert_eq!(bad(b"1 0 0 4294967296 1"), "size");
    }

    #[test]
    fn a_sixth_column_is_the_completion_when_asked() {
        let with = PlainOptions {
            completion: true,
            ..ms()
        };
        let r = parse_record(b"1.5 0 0 4096 r 2.25", &with).unwrap();
        assert_eq!(
            (r.arrival_ns, r.completion_ns),
            (1_500_000, Some(2_250_000))
        );
        // Without the flag the sixth field is ignored, as before.
        assert_eq!(
            parse_record(b"1.5 0 0 4096 r 2.25", &ms())
                .unwrap()
                .completion_ns,
            None
        );
        let bad = |l: &[u8]| parse_record(l, &with).unwrap_err().0;
        assert_eq!(bad(b"1.5 0 0 4096 r"), "completion");
        assert_eq!(bad(b"1.5 0 0 4096 r x"), "completion");
        assert!(looks_like_with_completion(b"1.5 0 0 4096 r 2.25"));
        assert!(!looks_like_with_completion(b"1.5 0 0 4096 r"));
    }

    #[test]
    fn recognises_five_field_lines() {
        assert!(looks_like(b"0.000 0 11562803200 4096 1"));
        assert!(looks_like(b"0.5,1,0,512,W"));
        assert!(!looks_like(b"0.5 1 0 512 W extra"));
        assert!(!looks_like(b"0,303567,3584,w,0.000000"));
    }
}
