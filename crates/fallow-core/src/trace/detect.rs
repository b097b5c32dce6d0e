//! Format detection from the first bytes of the (decompressed) input, with
//! the file name as a tie-breaker. Each rule is cheap and specific; anything
//! ambiguous is an error asking for `--format`, never a guess.

use super::Format;
use crate::error::{Error, Result};
use std::path::Path;

pub(crate) fn detect(head: &[u8], path: &Path) -> Result<Format> {
    if head.starts_with(super::fallow_bin::MAGIC) {
        return Ok(Format::Fallow);
    }
    if super::hp_srt::looks_like(head) {
        return Ok(Format::HpSrt);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.contains(".vscsi") || super::vscsi::looks_like(head) {
        return Ok(Format::Vscsi);
    }
    let first_line = first_data_line(head.strip_prefix(super::lines::BOM).unwrap_or(head));
    if let Some(line) = first_line {
        if super::blkparse::looks_like(line) {
            return Ok(Format::Blkparse);
        }
        let commas = line.iter().filter(|&&b| b == b',').count();
        let lower = line.to_ascii_lowercase();
        if line.starts_with(b"Timestamp,Hostname") {
            return Ok(Format::Msr);
        }
        if commas >= 6 && (contains(&lower, b",read,") || contains(&lower, b",write,")) {
            return Ok(Format::Msr);
        }
        if commas >= 4 && super::spc::looks_like(line) {
            return Ok(Format::Spc);
        }
        if looks_like_fio_log(line) {
            // Five integers that `plain` would take for `time dev offset
            // size op`: latencies would become device ids. Refuse.
            return Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                hint: format!(
                    "first line `{}` looks like a fio log (`time, value, ddir, bs, offset[, prio]`), \
                     not a block trace; `--format plain` would read its columns as `time dev offset size op`",
                    super::lines::show(line)
                ),
                known: Format::names(),
            });
        }
        if super::plain::looks_like(line) {
            return Ok(Format::Plain);
        }
    }
    let hint = match first_line {
        Some(l) => format!("first line `{}`", super::lines::show(l)),
        None => format!("{} bytes of binary data", head.len()),
    };
    Err(Error::UnknownFormat {
        path: path.to_path_buf(),
        hint,
        known: Format::names(),
    })
}

/// A fio latency, bandwidth or IOPS log line (fio(1), "log file
/// formats"): `time, value, ddir, bs, offset[, prio]`, integers separated
/// by a comma and a space, ddir 0 (read), 1 (write) or 2 (trim).
fn looks_like_fio_log(line: &[u8]) -> bool {
    let fields: Vec<&[u8]> = line.split(|&b| b == b',').collect();
    (5..=6).contains(&fields.len())
        && fields[1..].iter().all(|f| f.first() == Some(&b' '))
        && fields
            .iter()
            .all(|f| super::lines::parse_u64(super::lines::trim(f)).is_ok())
        && matches!(super::lines::trim(fields[2]), b"0" | b"1" | b"2")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The first non-blank, non-comment line, if the head looks like text.
fn first_data_line(head: &[u8]) -> Option<&[u8]> {
    let text_like = head
        .iter()
        .take(4096)
        .all(|&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b));
    if !text_like {
        return None;
    }
    head.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .find(|l| !super::lines::is_blank_or_comment(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fio_log_is_refused_naming_format() {
        // Issue 12: fio's default latency log was read as `plain`.
        for log in [
            &b"1, 523, 0, 4096, 0\n2, 611, 1, 4096, 8192\n"[..],
            b"3, 1024, 0, 4096, 0, 0\n",
            b"100, 88, 2, 65536, 1048576, 4\r\n",
        ] {
            let e = detect(log, Path::new("job_lat.1.log"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("fio log") && e.contains("--format"), "{e}");
        }
        // What `plain` looks like is still plain, commas or not.
        for plain in [
            &b"0.5 0 4096 4096 1\n"[..],
            b"1,0,4096,512,0\n",
            b"1, 0, 4096, 512, r\n",
        ] {
            assert_eq!(detect(plain, Path::new("t")).unwrap(), Format::Plain);
        }
    }
}
