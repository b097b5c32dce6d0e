//! What a trace reader says about itself: the [`ReaderEntry`] every reader
//! file exports, so that adding a format is its file plus one line in the
//! `readers!` list of `trace/mod.rs` (the shape of the policy registry,
//! [`crate::registry`]). Parsing `--format`, the list of names in messages
//! and `--help`, detection, whether a read records completions, whether a
//! large file may be split between threads and the code a fallow binary
//! cache stores for its source format all come from the entries; a field
//! left out of an entry is a compile error.

use super::{lines, Format, ReadContext, ReadOptions, Trace};
use crate::error::Result;
use std::io::{BufRead, Write};
use std::path::Path;

/// Whether a format's records carry completion times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completions {
    /// Always (a completion or response time per record).
    Recorded,
    /// Never: busy and idle periods need a service model.
    Absent,
    /// When [`super::PlainOptions::completion`] asks for a completion column.
    IfAsked,
    /// When the file says so (a header flag, a `completion_ns` column); the
    /// reader sets up its builder itself.
    InFile,
}

/// What detection sees of an input: its first bytes (decompressed) and its
/// path, with the first data line picked out for the text formats.
pub struct Head<'a> {
    /// The first bytes of the input, up to a buffer's worth.
    pub bytes: &'a [u8],
    /// The path, for formats recognised partly by name.
    pub path: &'a Path,
    /// The file name, lower case (empty when there is none).
    pub file_name: String,
    /// The first non-blank, non-comment line when the head is text, without
    /// a UTF-8 byte-order mark or line end.
    pub first_line: Option<&'a [u8]>,
}

impl<'a> Head<'a> {
    /// The head of `bytes` read from `path`.
    pub fn new(bytes: &'a [u8], path: &'a Path) -> Self {
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let first_line = first_data_line(bytes.strip_prefix(lines::BOM).unwrap_or(bytes));
        Head {
            bytes,
            path,
            file_name,
            first_line,
        }
    }
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
        .find(|l| !lines::is_blank_or_comment(l))
}

/// A reader's verdict on a [`Head`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sniff {
    /// Not this format; detection asks the next reader.
    No,
    /// This format.
    Yes,
    /// Almost this format, but reading it would be a guess (a fio
    /// bandwidth log, a `plain` file with a sixth column): detection stops
    /// with an error whose hint (the text here) names the `--format` to pass.
    Refuse(String),
    /// Like [`Sniff::Refuse`], but only when no later reader takes the input.
    Hint(String),
}

/// One trace format: everything fallow needs to know about it, exported as
/// `READER` by its reader file and listed once in `trace/mod.rs`.
#[derive(Debug, Clone, Copy)]
pub struct ReaderEntry {
    /// Name on the command line (`--format`), in Python and in JSON reports.
    pub name: &'static str,
    /// Other accepted names (`snia` for `msr`).
    pub aliases: &'static [&'static str],
    /// A few words for `--help` and error messages.
    pub summary: &'static str,
    /// The number a fallow binary cache stores for a trace read from this
    /// format (its `source_format`). Fixed forever, unique, never 0 (which
    /// means unknown): files written today must read the same tomorrow.
    pub code: u32,
    /// Whether its records carry completion times.
    pub completions: Completions,
    /// Whether its records are independent lines, so a large file may be
    /// split at any line end and read by several threads.
    pub splittable: bool,
    /// Whether its device ids are Linux device numbers (`major << 20 |
    /// minor`, see [`super::devnum`]), shown as `major,minor`.
    pub numbers_devices: bool,
    /// Where detection asks this reader, lower first: magic numbers before
    /// record shapes, specific shapes before loose ones. Unique.
    pub detect_rank: u16,
    /// This reader's verdict on an input's head.
    pub detect: fn(&Head<'_>) -> Sniff,
    /// Read every record of `input` into the context's builder.
    pub read: fn(&mut dyn BufRead, &mut ReadContext<'_>) -> Result<()>,
    /// Ways to write a trace in this format (`fallow convert -o`), if any.
    pub writers: &'static [Writer],
}

/// A way to write a trace in a format, chosen by the output's extension.
#[derive(Debug, Clone, Copy)]
pub struct Writer {
    /// Output file extensions (lower case, without the dot) that choose it.
    pub extensions: &'static [&'static str],
    /// Write `trace` to the output.
    pub write: fn(&Trace, &mut dyn Write) -> Result<()>,
}

impl ReaderEntry {
    /// Whether a read of this format with `opts` records completions.
    pub fn has_completion(&self, opts: &ReadOptions) -> bool {
        match self.completions {
            Completions::Recorded => true,
            Completions::Absent | Completions::InFile => false,
            Completions::IfAsked => opts.plain.completion,
        }
    }

    /// This entry as a [`Format`] (for [`super::ReadOptions::format`]).
    pub const fn format(&'static self) -> Format {
        Format::of(self)
    }
}

crate::registry::describe_by_fields!(ReaderEntry);

/// [`Sniff::Yes`] when `yes`, else [`Sniff::No`].
pub(crate) fn sniff(yes: bool) -> Sniff {
    if yes {
        Sniff::Yes
    } else {
        Sniff::No
    }
}
