//! Fast line splitting and exact number parsing shared by the text readers.
//!
//! Lines are handed out as byte slices straight from a large buffer (no
//! `String` per line, no UTF-8 check): the MSR reader must keep up with
//! polars. Decimal times are parsed exactly in integer arithmetic so that
//! `0.000001` seconds is 1000 ns, not 999.

use super::ReadContext;
use crate::error::{Location, Result};
use std::io::BufRead;

/// Longest line the text readers accept, bytes. Trace records are under
/// 200 bytes; the bound keeps a file without newlines (or a corrupt one)
/// from growing the line buffer until the process aborts.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// The UTF-8 byte-order mark.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A record parsed from one line, or the field at fault and why.
pub(crate) type LineRecord = std::result::Result<super::RawRequest, (&'static str, String)>;

/// Read a format of one request per line (spc, alibaba, tencent): blank
/// and comment lines skipped, every other line `parse`d into a request, or
/// a bad record naming its line and field.
pub(crate) fn read_line_records(
    input: &mut dyn BufRead,
    ctx: &mut ReadContext<'_>,
    parse: fn(&[u8]) -> LineRecord,
) -> Result<()> {
    for_each_line(input, ctx, |ctx, line_no, line| {
        if is_blank_or_comment(line) {
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse(line) {
            Ok(r) => ctx.push(loc, r),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

/// Call `f(line_number, line)` for every line (1-based, without `\n`/`\r\n`);
/// the number of lines ends up in `ctx.lines`. A line longer than
/// [`MAX_LINE_BYTES`] is a bad record (field `line`): an error, or with
/// `skip_bad` skipped to its end without being buffered.
pub(crate) fn for_each_line(
    input: &mut dyn BufRead,
    ctx: &mut ReadContext<'_>,
    mut f: impl FnMut(&mut ReadContext<'_>, u64, &[u8]) -> Result<()>,
) -> Result<()> {
    // A UTF-8 byte-order mark (spreadsheet exports) is not part of line 1.
    let mut f = |ctx: &mut ReadContext<'_>, n: u64, line: &[u8]| {
        let line = match line.strip_prefix(BOM) {
            Some(rest) if n == 1 && ctx.at_file_start => rest,
            _ => line,
        };
        f(ctx, n, line)
    };
    let mut carry: Vec<u8> = Vec::new();
    let mut line_no: u64 = 0;
    // Inside an overlong line already reported: drop bytes up to its end.
    let mut skipping = false;
    let too_long = |ctx: &mut ReadContext<'_>, line_no: u64| {
        ctx.bad(
            Location::Line(line_no),
            "line",
            format!("longer than {MAX_LINE_BYTES} bytes; no trace record is that long"),
        )
    };
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ctx.io(e)),
        };
        if buf.is_empty() {
            break;
        }
        let len = buf.len();
        let mut start = 0;
        // Finish a line that straddled the previous buffer.
        if skipping || !carry.is_empty() {
            match memchr::memchr(b'\n', buf) {
                Some(nl) if skipping => {
                    skipping = false;
                    start = nl + 1;
                }
                Some(nl) if carry.len() + nl > MAX_LINE_BYTES => {
                    line_no += 1;
                    too_long(ctx, line_no)?;
                    carry.clear();
                    start = nl + 1;
                }
                Some(nl) => {
                    carry.extend_from_slice(&buf[..nl]);
                    line_no += 1;
                    f(ctx, line_no, trim_cr(&carry))?;
                    carry.clear();
                    start = nl + 1;
                }
                None if skipping => {
                    input.consume(len);
                    continue;
                }
                None if carry.len() + len > MAX_LINE_BYTES => {
                    line_no += 1;
                    too_long(ctx, line_no)?;
                    carry = Vec::new();
                    skipping = true;
                    input.consume(len);
                    continue;
                }
                None => {
                    carry.extend_from_slice(buf);
                    input.consume(len);
                    continue;
                }
            }
        }
        let mut pos = start;
        for nl in memchr::memchr_iter(b'\n', &buf[start..]) {
            let end = start + nl;
            line_no += 1;
            if end - pos > MAX_LINE_BYTES {
                too_long(ctx, line_no)?;
            } else {
                f(ctx, line_no, trim_cr(&buf[pos..end]))?;
            }
            pos = end + 1;
        }
        if len - pos > MAX_LINE_BYTES {
            line_no += 1;
            too_long(ctx, line_no)?;
            skipping = true;
        } else {
            carry.extend_from_slice(&buf[pos..]);
        }
        input.consume(len);
    }
    if !carry.is_empty() {
        line_no += 1;
        f(ctx, line_no, trim_cr(&carry))?;
    }
    ctx.lines = line_no;
    Ok(())
}

fn trim_cr(line: &[u8]) -> &[u8] {
    match line.last() {
        Some(b'\r') => &line[..line.len() - 1],
        _ => line,
    }
}

/// Trim ASCII spaces and tabs at both ends.
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// True for a blank line or a `#` comment.
pub(crate) fn is_blank_or_comment(line: &[u8]) -> bool {
    let t = trim(line);
    t.is_empty() || t[0] == b'#'
}

/// Printable excerpt of a field for messages: at most 40 bytes, control
/// characters escaped (`\r`, `\u{1b}`, …) so that echoed input cannot
/// move the cursor or hide the rest of the message.
pub(crate) fn show(field: &[u8]) -> String {
    let s = String::from_utf8_lossy(&field[..field.len().min(40)]);
    let mut out = escape_controls(&s);
    if field.len() > 40 {
        out.push('…');
    }
    out
}

/// `s` with control characters written as Rust escapes.
pub fn escape_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Parse an unsigned decimal integer (surrounding blanks allowed).
#[inline]
pub(crate) fn parse_u64(field: &[u8]) -> std::result::Result<u64, String> {
    // Fast path: 1..=19 plain digits cannot overflow u64.
    if !field.is_empty() && field.len() <= 19 {
        let mut v: u64 = 0;
        let mut ok = true;
        for &b in field {
            let d = b.wrapping_sub(b'0');
            ok &= d < 10;
            v = v.wrapping_mul(10).wrapping_add(d as u64);
        }
        if ok {
            return Ok(v);
        }
    }
    parse_u64_slow(field)
}

#[cold]
fn parse_u64_slow(field: &[u8]) -> std::result::Result<u64, String> {
    let t = trim(field);
    if t.is_empty() {
        return Err("empty field".into());
    }
    if t[0] == b'-' {
        return Err(format!("negative value `{}`", show(t)));
    }
    let digits = if t[0] == b'+' { &t[1..] } else { t };
    if digits.is_empty() {
        return Err(format!("`{}` is not a number", show(t)));
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(format!("`{}` is not a whole number", show(t)));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or_else(|| format!("`{}` is too large", show(t)))?;
    }
    Ok(v)
}

/// Parse a non-negative decimal number (`12`, `12.5`, `1e-3`, `.5`) and scale
/// it by `unit_ns` into integer nanoseconds, exactly for plain decimals.
pub(crate) fn parse_time_ns(field: &[u8], unit_ns: u64) -> std::result::Result<u64, String> {
    let t = trim(field);
    if t.is_empty() {
        return Err("empty field".into());
    }
    if t[0] == b'-' {
        return Err(format!("negative time `{}`", show(t)));
    }
    let t = if t[0] == b'+' { &t[1..] } else { t };
    if t.iter().any(|&b| b == b'e' || b == b'E') {
        return parse_f64_scaled(t, unit_ns as f64);
    }
    let (int, frac) = match memchr::memchr(b'.', t) {
        Some(p) => (&t[..p], &t[p + 1..]),
        None => (t, &t[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return Err(format!("`{}` is not a number", show(t)));
    }
    let mut whole: u64 = 0;
    for &b in int {
        if !b.is_ascii_digit() {
            return Err(format!("`{}` is not a number", show(t)));
        }
        whole = whole
            .checked_mul(10)
            .and_then(|v| v.checked_add((b - b'0') as u64))
            .ok_or_else(|| format!("`{}` is too large", show(t)))?;
    }
    let mut ns = whole
        .checked_mul(unit_ns)
        .ok_or_else(|| format!("`{}` is too large", show(t)))?;
    // Fraction: accumulate digits while they still contribute whole ns.
    let mut scale = unit_ns; // ns per unit of the current digit position ×10
    let mut rem_num: u64 = 0; // sub-ns remainder numerator, for rounding
    for &b in frac {
        if !b.is_ascii_digit() {
            return Err(format!("`{}` is not a number", show(t)));
        }
        let d = (b - b'0') as u64;
        if scale >= 10 {
            scale /= 10;
            ns = ns
                .checked_add(d * scale)
                .ok_or_else(|| format!("`{}` is too large", show(t)))?;
        } else if rem_num == 0 {
            // first digit below 1 ns decides rounding
            rem_num = d + 1;
        }
    }
    if rem_num > 5 {
        ns = ns
            .checked_add(1)
            .ok_or_else(|| format!("`{}` is too large", show(t)))?;
    }
    Ok(ns)
}

fn parse_f64_scaled(t: &[u8], unit_ns: f64) -> std::result::Result<u64, String> {
    let s = std::str::from_utf8(t).map_err(|_| format!("`{}` is not a number", show(t)))?;
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{}` is not a number", show(t)))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{}` is not a non-negative finite number", show(t)));
    }
    let ns = v * unit_ns;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(format!("`{}` is too large", show(t)));
    }
    Ok(ns.round() as u64)
}

/// Split on one separator byte, yielding raw fields.
pub(crate) fn split(line: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    line.split(move |&b| b == sep)
}

/// Split on runs of spaces/tabs (and commas when `commas`), skipping empties.
pub(crate) fn split_ws(line: &[u8], commas: bool) -> impl Iterator<Item = &[u8]> {
    line.split(move |&b| b == b' ' || b == b'\t' || (commas && b == b','))
        .filter(|f| !f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_decimal_times() {
        assert_eq!(parse_time_ns(b"0.000001", 1_000_000_000), Ok(1000));
        assert_eq!(parse_time_ns(b"223.412", 1_000_000), Ok(223_412_000));
        assert_eq!(parse_time_ns(b"1.5", 1000), Ok(1500));
        assert_eq!(parse_time_ns(b"7", 1_000_000_000), Ok(7_000_000_000));
        assert_eq!(parse_time_ns(b".5", 10), Ok(5));
        // below-ns digits round half up
        assert_eq!(parse_time_ns(b"0.0000000016", 1_000_000_000), Ok(2));
        assert_eq!(parse_time_ns(b"0.0000000014", 1_000_000_000), Ok(1));
        assert_eq!(parse_time_ns(b"1e-3", 1_000_000_000), Ok(1_000_000));
        assert!(parse_time_ns(b"-1", 1).unwrap_err().contains("negative"));
        assert!(parse_time_ns(b"1.2.3", 1).is_err());
        assert!(parse_time_ns(b"", 1).is_err());
        assert!(parse_time_ns(b"abc", 1).is_err());
        assert!(parse_time_ns(b".", 1).is_err());
    }

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b" 42 "), Ok(42));
        assert!(parse_u64(b"-3").unwrap_err().contains("negative"));
        assert!(parse_u64(b"99999999999999999999")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_u64(b"4x").is_err());
        assert!(parse_u64(b"+").is_err());
    }

    #[test]
    fn time_with_a_fraction_that_overflows_is_an_error() {
        // Found with overflow checks on: the whole part fits, the fraction
        // pushes it past u64::MAX.
        assert!(parse_time_ns(b"18446744073709551615.9", 1)
            .unwrap_err()
            .contains("too large"));
        assert!(parse_time_ns(b"18446744073.709551615999", 1_000_000_000)
            .unwrap_err()
            .contains("too large"));
        assert_eq!(
            parse_time_ns(b"18446744073.709551615", 1_000_000_000),
            Ok(u64::MAX)
        );
    }

    #[test]
    fn echoed_input_has_control_characters_escaped() {
        assert_eq!(show(b"12\r34"), "12\\r34");
        assert_eq!(show(b"\x1b[2Jx"), "\\u{1b}[2Jx");
        assert_eq!(show(b"tab\there"), "tab\\there");
        assert_eq!(show("é".as_bytes()), "é");
    }

    fn lines_of(input: &[u8], cap: usize, skip_bad: bool) -> crate::Result<Vec<(u64, usize)>> {
        let opts = crate::trace::ReadOptions {
            skip_bad,
            ..Default::default()
        };
        let path = std::path::Path::new("t");
        let mut ctx = ReadContext::new(path, &opts, crate::trace::Format::Plain);
        let mut seen = Vec::new();
        let mut input = std::io::BufReader::with_capacity(cap, input);
        for_each_line(&mut input, &mut ctx, |_, n, l| {
            seen.push((n, l.len()));
            Ok(())
        })?;
        assert_eq!(ctx.report.skipped, u64::from(skip_bad) * 2);
        Ok(seen)
    }

    #[test]
    fn an_endless_line_is_an_error_naming_it_not_an_unbounded_buffer() {
        let long = vec![b'7'; MAX_LINE_BYTES + 1];
        for cap in [1 << 16, MAX_LINE_BYTES * 2 + 100] {
            // Line 2 is too long, in one buffer or across many.
            let input = [&b"a\n"[..], &long, b"\nbb\n", &long].concat();
            let e = lines_of(&input, cap, false).unwrap_err().to_string();
            assert!(e.contains("line 2") && e.contains("field `line`"), "{e}");
            // Skipped: lines 1 and 3 come through, 2 and 4 are counted.
            let seen = lines_of(&input, cap, true).unwrap();
            assert_eq!(seen, [(1, 1), (3, 2)], "cap {cap}");
        }
        // Exactly the limit is fine.
        let ok = [&vec![b'1'; MAX_LINE_BYTES][..], b"\n"].concat();
        assert_eq!(
            lines_of(&ok, 1 << 16, false).unwrap(),
            [(1, MAX_LINE_BYTES)]
        );
    }
}
