//! MSR Cambridge / SNIA CSV:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with
//! Timestamp and ResponseTime in Windows filetime ticks (100 ns). The
//! response time gives the completion; DiskNumber is the device.

use super::lines::{for_each_line, is_blank_or_comment, parse_u64, show, split};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::io::BufRead;

const NS_PER_TICK: u64 = 100;

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    for_each_line(input, ctx, |ctx, line_no, line| {
        let loc = Location::Line(line_no);
        if is_blank_or_comment(line) {
            return Ok(());
        }
        if line_no == 1 && line.starts_with(b"Timestamp") {
            return Ok(()); // header
        }
        match parse_record(line) {
            Ok(r) => ctx.push(loc, r),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

type FieldError = (&'static str, String);

fn parse_record(line: &[u8]) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next()
            .ok_or((name, "missing field (expected 7 comma-separated fields)".to_string()))
    };
    let ts = next("timestamp")?;
    let _host = next("hostname")?;
    let disk = next("disk_number")?;
    let ty = next("type")?;
    let offset = next("offset")?;
    let size = next("size")?;
    let resp = next("response_time")?;
    let ticks = parse_u64(ts).map_err(|m| ("timestamp", m))?;
    let arrival_ns = ticks
        .checked_mul(NS_PER_TICK)
        .ok_or(("timestamp", format!("`{}` is too large", show(ts))))?;
    let device = parse_u64(disk).map_err(|m| ("disk_number", m))?;
    let device = u32::try_from(device).map_err(|_| ("disk_number", "too large".to_string()))?;
    let op = parse_op(ty).ok_or_else(|| ("type", format!("`{}` is neither Read nor Write", show(ty))))?;
    let offset_bytes = parse_u64(offset).map_err(|m| ("offset", m))?;
    let size_bytes = parse_u64(size).map_err(|m| ("size", m))?;
    let size_bytes = u32::try_from(size_bytes)
        .map_err(|_| ("size", format!("{size_bytes} bytes is too large for one request")))?;
    let resp_ticks = parse_u64(resp).map_err(|m| ("response_time", m))?;
    let completion_ns = resp_ticks
        .checked_mul(NS_PER_TICK)
        .and_then(|r| r.checked_add(arrival_ns))
        .ok_or(("response_time", format!("`{}` is too large", show(resp))))?;
    Ok(RawRequest {
        arrival_ns,
        completion_ns: Some(completion_ns),
        offset_bytes,
        size_bytes,
        op,
        device,
    })
}

fn parse_op(field: &[u8]) -> Option<Op> {
    let t = super::lines::trim(field);
    if t.eq_ignore_ascii_case(b"read") || t.eq_ignore_ascii_case(b"r") {
        Some(Op::Read)
    } else if t.eq_ignore_ascii_case(b"write") || t.eq_ignore_ascii_case(b"w") {
        Some(Op::Write)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_one_record() {
        let r = parse_record(b"134085312000008510,pgbench,0,Read,138620928,16384,5120").unwrap();
        assert_eq!(r.arrival_ns, 134085312000008510 * 100);
        assert_eq!(r.completion_ns, Some(134085312000008510 * 100 + 512_000));
        assert_eq!((r.offset_bytes, r.size_bytes, r.op, r.device), (138620928, 16384, Op::Read, 0));
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"1,h,0,Erase,0,1,1").unwrap_err().0, "type");
        assert_eq!(parse_record(b"1,h,0,Read,0,1").unwrap_err().0, "response_time");
        assert_eq!(parse_record(b"x,h,0,Read,0,1,1").unwrap_err().0, "timestamp");
        assert_eq!(parse_record(b"1,h,0,Read,-5,1,1").unwrap_err().0, "offset");
    }
}
