//! Format detection from the first bytes of the (decompressed) input, with
//! the file name as a tie-breaker. Each reader's entry holds its own rule
//! (`detect`, in the reader's file); this walks them. Each rule is cheap
//! and specific; anything ambiguous is an error asking for `--format`,
//! never a guess.

use super::reader::{Head, Sniff};
use super::{readers, Format};
use crate::error::{Error, Result};
use std::path::Path;

/// Ask every reader, in order of [`super::ReaderEntry::detect_rank`], for
/// its verdict on `head`: the first `Yes` is the format, the first `Refuse`
/// an error with its hint; a `Hint` is the error when no reader says
/// either.
pub(crate) fn detect(head: &[u8], path: &Path) -> Result<Format> {
    let sample = Head::new(head, path);
    let mut by_rank: Vec<_> = readers().iter().collect();
    by_rank.sort_by_key(|e| e.detect_rank);
    let mut deferred = None;
    for entry in by_rank {
        match (entry.detect)(&sample) {
            Sniff::No => {}
            Sniff::Yes => return Ok(Format::of(entry)),
            Sniff::Refuse(hint) => return Err(unknown(path, hint)),
            Sniff::Hint(hint) => {
                deferred.get_or_insert(hint);
            }
        }
    }
    let hint = deferred.unwrap_or_else(|| match sample.first_line {
        Some(l) => format!("first line `{}`", super::lines::show(l)),
        None => format!("{} bytes of binary data", head.len()),
    });
    Err(unknown(path, hint))
}

fn unknown(path: &Path, hint: String) -> Error {
    Error::UnknownFormat {
        path: path.to_path_buf(),
        hint,
        known: Format::names(),
    }
}

/// Number of commas in `line`.
pub(crate) fn commas(line: &[u8]) -> usize {
    line.iter().filter(|&&b| b == b',').count()
}

/// Whether `needle` occurs in `hay`.
pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fio_log_is_refused_naming_format() {
        // fio's default latency log was once read as `plain`.
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
