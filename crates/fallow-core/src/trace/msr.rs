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
        // First, as nearly every line is a well-formed record: the fast path
        // accepts only lines that start with a digit, never a blank line, a
        // comment or the header.
        if let Some(r) = parse_record_fast(line) {
            return ctx.push(loc, r);
        }
        if is_blank_or_comment(line) {
            return Ok(());
        }
        if line_no == 1 && ctx.at_file_start && line.starts_with(b"Timestamp") {
            return Ok(()); // header
        }
        match parse_record(line) {
            Ok(r) => ctx.push(loc, r),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

type FieldError = (&'static str, String);

/// Eight bytes of `line` from `i` as a little-endian word (the byte at `i`
/// lowest), zero bytes past the end of the line. Near the end, the line's
/// last eight bytes shifted down: no variable-length copy, which would cost
/// a `memcpy` call on the last field of every line.
#[inline(always)]
fn load8(line: &[u8], i: usize) -> u64 {
    let word = |at: usize| {
        line.get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    if i + 8 <= line.len() {
        word(i)
    } else if i < line.len() && line.len() >= 8 {
        word(line.len() - 8) >> (8 * (i + 8 - line.len()))
    } else {
        let rest = line.get(i..).unwrap_or(&[]);
        rest.iter()
            .enumerate()
            .fold(0, |w, (k, &b)| w | u64::from(b) << (8 * k))
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Powers of ten by exponent, for appending 0..=8 digits.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Digits from `*i` up to the next comma (or the end when `end_ok`), at most
/// 19 so they cannot overflow; leaves `*i` after the comma.
///
/// Eight bytes at a time (SWAR): a byte-by-byte `v = 10 v + d` is a chain of
/// dependent multiplications, and the digits are most of an MSR line.
#[inline(always)]
fn number(line: &[u8], i: &mut usize, end_ok: bool) -> Option<u64> {
    let start = *i;
    let mut v: u64 = 0;
    loop {
        // Each byte minus '0': digits become 0..=9, anything else >= 10
        // (a zero byte past the end included).
        let t = load8(line, *i) ^ (0x30 * ONES);
        // High bit set in each byte that is not a digit; no carry crosses
        // bytes, as (t & 0x7f) + 0x76 < 0x100.
        let not_digit = (((t & (0x7f * ONES)) + 0x76 * ONES) | t) & (0x80 * ONES);
        let n = (not_digit.trailing_zeros() / 8) as usize;
        if n > 0 {
            v = v
                .wrapping_mul(POW10[n])
                .wrapping_add(eight_digits(t << (64 - 8 * n)));
            *i += n;
        }
        if n < 8 {
            break;
        }
    }
    let digits = *i - start;
    if digits == 0 || digits > 19 {
        return None;
    }
    match line.get(*i) {
        Some(b',') => {
            *i += 1; // the comma
            Some(v)
        }
        None if end_ok => Some(v),
        _ => None,
    }
}

/// The value of eight decimal digits, one per byte (values 0..=9), the
/// most significant in the lowest byte: pairs, then fours, then all eight,
/// one multiplication each.
#[inline(always)]
fn eight_digits(t: u64) -> u64 {
    let t = (t.wrapping_mul(1 + (10 << 8))) >> 8 & 0x00ff_00ff_00ff_00ff;
    let t = (t.wrapping_mul(1 + (100 << 16))) >> 16 & 0x0000_ffff_0000_ffff;
    (t.wrapping_mul(1 + (10_000 << 32))) >> 32
}

/// One pass over a well-formed line, no allocation; `None` sends the line
/// to [`parse_record`], which says exactly what is wrong with it.
#[inline]
fn parse_record_fast(line: &[u8]) -> Option<RawRequest> {
    let mut i = 0usize;
    let ticks = number(line, &mut i, false)?;
    // hostname: anything up to the next comma
    let host_end = memchr::memchr(b',', &line[i..])?;
    i += host_end + 1;
    let device = number(line, &mut i, false)?;
    let op = match line.get(i..i + 5) {
        Some(b"Read,") => {
            i += 5;
            Op::Read
        }
        _ => match line.get(i..i + 6) {
            Some(b"Write,") => {
                i += 6;
                Op::Write
            }
            _ => return None,
        },
    };
    let offset_bytes = number(line, &mut i, false)?;
    let size = number(line, &mut i, false)?;
    let resp = number(line, &mut i, true)?;
    if i < line.len() {
        return None;
    }
    let arrival_ns = ticks.checked_mul(NS_PER_TICK)?;
    Some(RawRequest {
        arrival_ns,
        completion_ns: Some(resp.checked_mul(NS_PER_TICK)?.checked_add(arrival_ns)?),
        offset_bytes,
        size_bytes: u32::try_from(size).ok()?,
        op,
        device: u32::try_from(device).ok()?,
    })
}

fn parse_record(line: &[u8]) -> std::result::Result<RawRequest, FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected 7 comma-separated fields)".to_string(),
            )
        })
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
        .ok_or_else(|| ("timestamp", format!("`{}` is too large", show(ts))))?;
    let device = parse_u64(disk).map_err(|m| ("disk_number", m))?;
    let device = u32::try_from(device).map_err(|_| ("disk_number", "too large".to_string()))?;
    let op = parse_op(ty)
        .ok_or_else(|| ("type", format!("`{}` is neither Read nor Write", show(ty))))?;
    let offset_bytes = parse_u64(offset).map_err(|m| ("offset", m))?;
    let size_bytes = parse_u64(size).map_err(|m| ("size", m))?;
    let size_bytes = u32::try_from(size_bytes).map_err(|_| {
        (
            "size",
            format!("{size_bytes} bytes is too large for one request"),
        )
    })?;
    let resp_ticks = parse_u64(resp).map_err(|m| ("response_time", m))?;
    let completion_ns = resp_ticks
        .checked_mul(NS_PER_TICK)
        .and_then(|r| r.checked_add(arrival_ns))
        .ok_or_else(|| ("response_time", format!("`{}` is too large", show(resp))))?;
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
        assert_eq!(
            (r.offset_bytes, r.size_bytes, r.op, r.device),
            (138620928, 16384, Op::Read, 0)
        );
    }

    #[test]
    fn fast_path_agrees_with_general_parser() {
        for line in [
            &b"134085312000008510,pgbench,0,Read,138620928,16384,5120"[..],
            b"1,h,3,Write,0,512,0",
            b"128166372003061629,usr,0,Write,3154132992,4096,1412",
        ] {
            assert_eq!(parse_record_fast(line), Some(parse_record(line).unwrap()));
        }
        // anything unusual goes to the general parser
        for line in [
            &b"1,h,0,read,0,1,1"[..],
            b"1,h,0,Read,0,1,1,extra",
            b"1,h,0,Read,0,1,",
            b"1,h,0,Read,0,99999999999,1",
            b" 1,h,0,Read,0,1,1",
        ] {
            assert_eq!(
                parse_record_fast(line),
                None,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// The byte-at-a-time digit loop `number` replaced, as the reference.
    fn number_bytewise(line: &[u8], i: &mut usize, end_ok: bool) -> Option<u64> {
        let start = *i;
        let mut v: u64 = 0;
        while *i < line.len() && line[*i] != b',' {
            let d = line[*i].wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v.wrapping_mul(10).wrapping_add(d as u64);
            *i += 1;
            if *i - start > 19 {
                return None;
            }
        }
        if *i == start || (*i == line.len() && !end_ok) {
            return None;
        }
        *i = (*i + 1).min(line.len()); // after the comma, or at the end
        Some(v)
    }

    #[test]
    fn eight_at_a_time_digits_agree_with_bytewise() {
        let mut seed: u64 = 7;
        let mut digit = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b'0' + (seed >> 33) as u8 % 10
        };
        let mut checked = 0;
        for len in 0..=22 {
            for pattern in 0..4 {
                let digits: Vec<u8> = (0..len)
                    .map(|k| match pattern {
                        0 => b'9',
                        1 => b'0',
                        2 if k == len - 1 => b'1',
                        2 => b'0',
                        _ => digit(),
                    })
                    .collect();
                for prefix in [&b""[..], b"1,", b"abc,"] {
                    // '/' and ':' border the digits in ASCII.
                    for tail in [&b""[..], b",", b",7", b"/", b":", b" ", b"x,"] {
                        let line = [prefix, &digits, tail].concat();
                        for end_ok in [false, true] {
                            let (mut i, mut j) = (prefix.len(), prefix.len());
                            let want = number_bytewise(&line, &mut j, end_ok);
                            let got = number(&line, &mut i, end_ok);
                            let show = String::from_utf8_lossy(&line);
                            assert_eq!(got, want, "{show} end_ok={end_ok}");
                            if got.is_some() {
                                assert_eq!(i, j, "{show}");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 3000);
        assert_eq!(
            number(b"9999999999999999999", &mut 0, true),
            Some(9_999_999_999_999_999_999)
        );
        // 20 digits are refused, even those that would fit.
        assert_eq!(number(b"18446744073709551615", &mut 0, true), None);
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"1,h,0,Erase,0,1,1").unwrap_err().0, "type");
        assert_eq!(
            parse_record(b"1,h,0,Read,0,1").unwrap_err().0,
            "response_time"
        );
        assert_eq!(
            parse_record(b"x,h,0,Read,0,1,1").unwrap_err().0,
            "timestamp"
        );
        assert_eq!(parse_record(b"1,h,0,Read,-5,1,1").unwrap_err().0, "offset");
    }
}
