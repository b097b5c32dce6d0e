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
    // Parquet and Arrow IPC by their magic bytes, even in a build without
    // the `arrow` feature, so the error says it is the build.
    if head.starts_with(b"PAR1") {
        return Ok(Format::Parquet);
    }
    if columnar_arrow_like(head) {
        return Ok(Format::Arrow);
    }
    // A magic number: more specific than the record-shape checks below.
    if super::blktrace::looks_like(head) {
        return Ok(Format::Blktrace);
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
    if super::bpftrace::looks_like(head) {
        return Ok(Format::Bpftrace);
    }
    let first_line = first_data_line(head.strip_prefix(super::lines::BOM).unwrap_or(head));
    if let Some(line) = first_line {
        if super::blkparse::looks_like(line) {
            return Ok(Format::Blkparse);
        }
        if super::biosnoop::looks_like(line) {
            return Ok(Format::Biosnoop);
        }
        if super::fio_iolog::looks_like(line) {
            return Ok(Format::FioIolog);
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
            // A latency log by its name and with offsets is one; anything
            // else (bandwidth, IOPS, a renamed file) is refused, since
            // `plain` would take five of its integers for `time dev offset
            // size op`: latencies would become device ids.
            if super::fio_lat::named_like(path) && super::fio_lat::refused_kind(path).is_none() {
                return Ok(Format::FioLat);
            }
            return Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                hint: format!(
                    "first line `{}` looks like a fio log (`time, value, ddir, bs, offset[, prio]`), \
                     not a block trace; a latency log recorded with log_offset=1 reads with \
                     `--format fio-lat` (detected when named `*_clat.N.log` or `*_lat.N.log`), \
                     while `--format plain` would read its columns as `time dev offset size op`",
                    super::lines::show(line)
                ),
                known: Format::names(),
            });
        }
        if super::plain::looks_like(line) {
            return Ok(Format::Plain);
        }
        if super::plain::looks_like_with_completion(line) {
            return Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                hint: format!(
                    "first line `{}` has six fields; if the sixth is each request's completion time, \
                     pass `--format plain --completion-column`",
                    super::lines::show(line)
                ),
                known: Format::names(),
            });
        }
        if super::biosnoop::looks_like_event(line) {
            return Err(Error::UnknownFormat {
                path: path.to_path_buf(),
                hint: format!(
                    "first line `{}` looks like biosnoop output without its `TIME(s) ... LAT(ms)` \
                     header; pass `--format biosnoop`",
                    super::lines::show(line)
                ),
                known: Format::names(),
            });
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
    // Seven with `log_issue_time=1`; the priority is hex with `log_prio=1`.
    let hex = |f: &[u8]| {
        f.strip_prefix(b"0x")
            .is_some_and(|h| !h.is_empty() && h.iter().all(u8::is_ascii_hexdigit))
    };
    (5..=7).contains(&fields.len())
        && fields[1..].iter().all(|f| f.first() == Some(&b' '))
        && fields.iter().enumerate().all(|(i, f)| {
            let f = super::lines::trim(f);
            super::lines::parse_u64(f).is_ok() || (i >= 4 && hex(f))
        })
        && matches!(super::lines::trim(fields[2]), b"0" | b"1" | b"2")
}

/// An Arrow IPC file (`ARROW1`) or stream (the continuation marker, then a
/// schema message's length: positive, a multiple of 8, small).
fn columnar_arrow_like(head: &[u8]) -> bool {
    if head.starts_with(b"ARROW1") {
        return true;
    }
    head.len() >= 8
        && head[..4] == [0xff; 4]
        && usize::try_from(i32::from_le_bytes([head[4], head[5], head[6], head[7]]))
            .is_ok_and(|n| n > 0 && n % 8 == 0 && n < 1 << 24)
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
            // (Named `job_lat.1.log` with offsets, it is a latency log:
            // `fio_latency_logs_are_detected_by_name`.)
            let e = detect(log, Path::new("job.log")).unwrap_err().to_string();
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

    #[test]
    fn fio_latency_logs_are_detected_by_name() {
        let log = &b"3, 1024, 0, 4096, 0, 0\n"[..];
        for name in ["job_lat.1.log", "x/job_clat.2.log"] {
            assert_eq!(detect(log, Path::new(name)).unwrap(), Format::FioLat);
        }
        let with_issue = b"13, 280361, 1, 4096, 0, 0x2004, 12719639\n";
        assert_eq!(
            detect(with_issue, Path::new("j_clat.1.log")).unwrap(),
            Format::FioLat
        );
        for name in ["job_slat.1.log", "job_bw.1.log", "job.log"] {
            let e = detect(log, Path::new(name)).unwrap_err().to_string();
            assert!(e.contains("--format fio-lat"), "{e}");
        }
    }

    #[test]
    fn new_text_formats_are_detected_or_refused_naming_format() {
        let cases: [(&[u8], Format); 4] = [
            (
                b"TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n0.000004 a 1 sda W 8 4096 0.74\n",
                Format::Biosnoop,
            ),
            (b"Attaching 3 probes...\nfallow-io 1 2 8 0 0 512 R\n", Format::Bpftrace),
            (b"fio version 2 iolog\n/dev/sda add\n", Format::FioIolog),
            (b"fio version 3 iolog\n0 /dev/sda add\n", Format::FioIolog),
        ];
        for (head, want) in cases {
            assert_eq!(detect(head, Path::new("t")).unwrap(), want);
        }
        for (head, flag) in [
            (
                &b"0.000004 a 1 sda W 8 4096 0.74\n"[..],
                "--format biosnoop",
            ),
            (
                b"0.5 0 4096 4096 1 0.9\n",
                "--format plain --completion-column",
            ),
        ] {
            let e = detect(head, Path::new("t")).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
    }
}
