//! Small helpers shared by the binary readers: filling a record buffer from
//! a stream while telling a clean end of file from a truncated record, and
//! naming the field a truncation fell in.

use std::io::{BufRead, ErrorKind};

/// Read into `buf` until it is full or the input ends; returns the bytes
/// read (less than `buf.len()` only at the end of the input).
pub(crate) fn read_full(input: &mut dyn BufRead, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The field of a fixed layout (`(name, offset)` in ascending offsets) that
/// holds byte `at` of the record.
pub(crate) fn field_at(layout: &[(&'static str, usize)], at: usize) -> &'static str {
    layout
        .iter()
        .rev()
        .find(|&&(_, off)| off <= at)
        .map_or("record", |&(name, _)| name)
}

/// A little-endian `u16` at `at` (the caller guarantees the bounds).
pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

/// A little-endian `u32` at `at`.
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// A little-endian `u64` at `at`.
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A big-endian `u32` at `at`.
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_short_reads_and_stops_at_eof() {
        // A chained reader hands out its parts in separate reads.
        let data: &[u8] = b"abc";
        let mut input = std::io::BufReader::new(std::io::Read::chain(data, &b"defg"[..]));
        let mut buf = [0u8; 5];
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 5);
        assert_eq!(&buf, b"abcde");
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 2);
        assert_eq!(read_full(&mut input, &mut buf).unwrap(), 0);
    }

    #[test]
    fn names_fields_by_offset() {
        let layout = [("a", 0), ("b", 4), ("c", 6)];
        assert_eq!(field_at(&layout, 0), "a");
        assert_eq!(field_at(&layout, 5), "b");
        assert_eq!(field_at(&layout, 99), "c");
        assert_eq!(be_u32(&[0, 0, 1, 2], 0), 258);
        assert_eq!(le_u16(&[2, 1], 0), 258);
        assert_eq!(le_u32(&[2, 1, 0, 0], 0), 258);
        assert_eq!(le_u64(&[2, 1, 0, 0, 0, 0, 0, 0], 0), 258);
    }
}
