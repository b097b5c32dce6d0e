//! Linux device numbers written `major,minor` (blkparse's first field,
//! `--device 8,16`) and the one `u32` id fallow keeps for them: the
//! kernel's `MKDEV`, `major << 20 | minor` (include/linux/kdev_t.h,
//! `MINORBITS` 20, the encoding blktrace itself records), so `8,16` is
//! 8388624. Parsed and printed here only, for every reader and front end.

use super::lines::{parse_u64, show};

/// Bits of the minor number in an id.
pub const MINOR_BITS: u32 = 20;
/// Bits of the major number in an id (the rest of the `u32`).
pub const MAJOR_BITS: u32 = 32 - MINOR_BITS;

/// `major,minor` → `major << 20 | minor`; `None` when `field` is not two
/// whole numbers around a comma, an error naming it when one does not fit
/// the 12-bit major, 20-bit minor numbering.
pub fn parse(field: &[u8]) -> Option<Result<u32, String>> {
    let comma = memchr::memchr(b',', field)?;
    let (maj, min) = (&field[..comma], &field[comma + 1..]);
    let maj = parse_u64(maj).ok()?;
    let min = parse_u64(min).ok()?;
    if maj >= 1 << MAJOR_BITS || min >= 1 << MINOR_BITS {
        return Some(Err(format!(
            "`{}` does not fit Linux's 12-bit major, 20-bit minor numbering",
            show(field)
        )));
    }
    Some(Ok(((maj as u32) << MINOR_BITS) | min as u32))
}

/// `major,minor` of an id, as blkparse prints it (`8,16`).
pub fn format(id: u32) -> String {
    format!("{},{}", id >> MINOR_BITS, id & ((1 << MINOR_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_devices_and_bounds() {
        // sdb is 8,16; its id as the kernel's new_encode_dev does not
        // matter here, MKDEV's does: 8 * 2^20 + 16
        assert_eq!(parse(b"8,16"), Some(Ok(8 * 1_048_576 + 16)));
        assert_eq!(parse(b"259,0"), Some(Ok(259 * 1_048_576)));
        assert_eq!(format(8 * 1_048_576 + 16), "8,16");
        assert_eq!(format(0), "0,0");
        assert_eq!(parse(b"4095,1048575"), Some(Ok(u32::MAX)));
        assert_eq!(format(u32::MAX), "4095,1048575");
        assert!(matches!(parse(b"4096,0"), Some(Err(_))));
        assert!(matches!(parse(b"8,1048576"), Some(Err(_))));
        for not in [&b"8"[..], b"8,", b",16", b"8;16", b"a,b", b"8,16,1"] {
            assert_eq!(parse(not), None, "{}", String::from_utf8_lossy(not));
        }
    }

    #[test]
    fn format_inverts_parse() {
        for (maj, min) in [
            (0u32, 0u32),
            (8, 0),
            (8, 16),
            (253, 7),
            (4095, 1048575),
            (1, 999_999),
        ] {
            let text = format!("{maj},{min}");
            let id = parse(text.as_bytes()).unwrap().unwrap();
            assert_eq!(format(id), text);
        }
    }
}
