//! Fast line splitting and exact number parsing shared by the text readers.
//!
//! Lines are handed out as byte slices straight from a large buffer (no
//! `String` per line, no UTF-8 check): the MSR reader must keep up with
//! polars. Decimal times are parsed exactly in integer arithmetic so that
//! `0.000001` seconds is 1000 ns, not 999.

use super::ReadContext;
use crate::error::Result;
use std::io::BufRead;

/// Call `f(line_number, line)` for every line (1-based, without `\n`/`\r\n`);
/// the number of lines ends up in `ctx.lines`.
pub(crate) fn for_each_line(
    input: &mut dyn BufRead,
    ctx: &mut ReadContext<'_>,
    mut f: impl FnMut(&mut ReadContext<'_>, u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut line_no: u64 = 0;
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
        if !carry.is_empty() {
            match memchr::memchr(b'\n', buf) {
                Some(nl) => {
                    carry.extend_from_slice(&buf[..nl]);
                    line_no += 1;
                    f(ctx, line_no, trim_cr(&carry))?;
                    carry.clear();
                    start = nl + 1;
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
            f(ctx, line_no, trim_cr(&buf[pos..end]))?;
            pos = end + 1;
        }
        carry.extend_from_slice(&buf[pos..]);
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

/// Printable excerpt of a field for messages.
pub(crate) fn show(field: &[u8]) -> String {
    let s = String::from_utf8_lossy(&field[..field.len().min(40)]).into_owned();
    if field.len() > 40 {
        format!("{s}…")
    } else {
        s
    }
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
            ns += d * scale;
        } else if rem_num == 0 {
            // first digit below 1 ns decides rounding
            rem_num = d + 1;
        }
    }
    if rem_num > 5 {
        ns += 1;
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
}
