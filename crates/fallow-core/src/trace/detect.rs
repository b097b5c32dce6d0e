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
