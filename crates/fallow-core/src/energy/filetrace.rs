//! File-level traces: which file each request touched and whether that
//! file is an application file (a binary or library, the same on every
//! machine, so a peer may hold it in memory) or user data. SARD decides
//! per request from exactly this (SARD §III-E): "application file, disk
//! asleep, a peer holds it".
//!
//! The format is a simple CSV, one request per line, optionally gzipped:
//!
//! ```text
//! # time_s,path,offset,size,op,kind
//! 0.000,/usr/lib/firefox/libxul.so,0,65536,R,app
//! 0.013,/home/ana/notes.txt,4096,4096,W,user
//! ```
//!
//! `time_s` in seconds (decimals exact to the ns), `offset` and `size` in
//! bytes, `op` `R`/`read` or `W`/`write`, `kind` `app` (`a`,
//! `application`, `bin`) or `user` (`u`, `data`). A path may contain
//! commas: the time is the first field and the last four fields are taken
//! from the right. Blank lines and lines starting with `#` are skipped; a
//! first line whose time is not a number is a header. Times are relative
//! to the first request; out-of-order lines are sorted into place.

use crate::error::{Error, Location, Result};
use crate::trace::lines::{parse_time_ns, parse_u64, show, trim};
use crate::trace::Op;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Whose file a request touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// An application file: identical on peers, may be in their memory.
    App,
    /// User data: only this machine (or the file server) has it.
    User,
}

/// A file-level trace as columns, sorted by arrival.
#[derive(Debug, Clone, Default)]
pub struct FileTrace {
    /// Arrival of each request, ns since the first.
    pub arrival_ns: Vec<u64>,
    /// Index into [`FileTrace::paths`].
    pub path_id: Vec<u32>,
    /// Offset within the file, bytes.
    pub offset_bytes: Vec<u64>,
    /// Request size, bytes.
    pub size_bytes: Vec<u32>,
    /// Direction.
    pub op: Vec<Op>,
    /// Application file or user data.
    pub kind: Vec<FileKind>,
    /// Distinct paths, in order of first appearance.
    pub paths: Vec<String>,
    /// The file read (for messages).
    pub source: PathBuf,
    /// Lines that arrived before a line above them and were sorted into place.
    pub reordered: u64,
}

impl FileTrace {
    /// Number of requests.
    pub fn len(&self) -> usize {
        self.arrival_ns.len()
    }

    /// True when there are no requests.
    pub fn is_empty(&self) -> bool {
        self.arrival_ns.is_empty()
    }

    /// Path of request `i`.
    pub fn path_of(&self, i: usize) -> &str {
        &self.paths[self.path_id[i] as usize]
    }
}

/// Read a file-level trace (gzip is decompressed transparently).
pub fn read_file_trace(path: &Path) -> Result<FileTrace> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut raw = BufReader::with_capacity(1 << 16, file);
    let gz = raw.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
    if gz {
        let mut input = BufReader::new(flate2::bufread::MultiGzDecoder::new(raw));
        read_file_trace_from(&mut input, path)
    } else {
        read_file_trace_from(&mut raw, path)
    }
}

/// Read a file-level trace from any input; `path` names it in errors.
pub fn read_file_trace_from(input: &mut dyn BufRead, path: &Path) -> Result<FileTrace> {
    let mut t = FileTrace {
        source: path.to_path_buf(),
        ..FileTrace::default()
    };
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut raw_time: Vec<u64> = Vec::new();
    let mut line = Vec::new();
    let mut lineno = 0u64;
    let mut seen_data = false;
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })?;
        if n == 0 {
            break;
        }
        lineno += 1;
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        let l = trim(&line);
        if l.is_empty() || l[0] == b'#' {
            continue;
        }
        let bad = |field: &'static str, message: String| Error::Record {
            path: path.to_path_buf(),
            location: Location::Line(lineno),
            field,
            message,
        };
        let Some(comma) = l.iter().position(|&b| b == b',') else {
            return Err(bad(
                "line",
                format!(
                    "`{}`: expected 6 comma-separated fields time_s,path,offset,size,op,kind",
                    show(l)
                ),
            ));
        };
        let time = parse_time_ns(&l[..comma], 1_000_000_000);
        if !seen_data && time.is_err() {
            // a header line
            seen_data = true;
            continue;
        }
        seen_data = true;
        let time = time.map_err(|m| bad("time_s", m))?;
        let mut right = l[comma + 1..].rsplitn(5, |&b| b == b',');
        let kind = right.next().map(trim);
        let op = right.next().map(trim);
        let size = right.next().map(trim);
        let offset = right.next().map(trim);
        let file = right.next().map(trim);
        let (Some(kind), Some(op), Some(size), Some(offset), Some(file)) =
            (kind, op, size, offset, file)
        else {
            return Err(bad(
                "line",
                format!(
                    "`{}`: expected 6 comma-separated fields time_s,path,offset,size,op,kind",
                    show(l)
                ),
            ));
        };
        if file.is_empty() {
            return Err(bad("path", "empty path".into()));
        }
        let offset = parse_u64(offset).map_err(|m| bad("offset", m))?;
        let size = parse_u64(size).map_err(|m| bad("size", m))?;
        let size = u32::try_from(size)
            .map_err(|_| bad("size", format!("{size} bytes is larger than 4 GiB")))?;
        let op = match std::str::from_utf8(op)
            .unwrap_or("")
            .to_ascii_lowercase()
            .as_str()
        {
            "r" | "read" => Op::Read,
            "w" | "write" => Op::Write,
            _ => return Err(bad("op", format!("`{}` is not R or W", show(op)))),
        };
        let kind = match std::str::from_utf8(kind)
            .unwrap_or("")
            .to_ascii_lowercase()
            .as_str()
        {
            "app" | "a" | "application" | "bin" => FileKind::App,
            "user" | "u" | "data" => FileKind::User,
            _ => return Err(bad("kind", format!("`{}` is not app or user", show(kind)))),
        };
        let name = String::from_utf8_lossy(file).into_owned();
        let next = ids.len() as u32;
        let id = *ids.entry(name).or_insert_with_key(|k| {
            t.paths.push(k.clone());
            next
        });
        raw_time.push(time);
        t.path_id.push(id);
        t.offset_bytes.push(offset);
        t.size_bytes.push(size);
        t.op.push(op);
        t.kind.push(kind);
    }
    if raw_time.is_empty() {
        return Err(Error::Empty {
            path: path.to_path_buf(),
            detail: " (a file-level trace needs lines time_s,path,offset,size,op,kind)".into(),
        });
    }
    t.reordered = raw_time.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    if t.reordered > 0 {
        let mut idx: Vec<usize> = (0..raw_time.len()).collect();
        idx.sort_by_key(|&i| raw_time[i]); // stable: ties keep file order
        raw_time = idx.iter().map(|&i| raw_time[i]).collect();
        t.path_id = idx.iter().map(|&i| t.path_id[i]).collect();
        t.offset_bytes = idx.iter().map(|&i| t.offset_bytes[i]).collect();
        t.size_bytes = idx.iter().map(|&i| t.size_bytes[i]).collect();
        t.op = idx.iter().map(|&i| t.op[i]).collect();
        t.kind = idx.iter().map(|&i| t.kind[i]).collect();
    }
    let t0 = raw_time[0];
    t.arrival_ns = raw_time.into_iter().map(|x| x - t0).collect();
    Ok(t)
}

/// Parse a whole file-level trace held in memory (tests, Python).
pub fn parse_file_trace(text: &str, path: &Path) -> Result<FileTrace> {
    let mut input = BufReader::new(text.as_bytes());
    read_file_trace_from(&mut input as &mut dyn BufRead, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FileTrace> {
        parse_file_trace(text, Path::new("f.csv"))
    }

    #[test]
    fn reads_header_comments_commas_in_paths_and_sorts() {
        let t = parse(
            "time_s,path,offset,size,op,kind\n# a comment\n\n10.5,/usr/bin/vi,0,4096,R,app\n10.25,/home/a,b.txt,8192,512,w,user\n11,/usr/bin/vi,4096,4096,read,application\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.reordered, 1);
        assert_eq!(t.arrival_ns, vec![0, 250_000_000, 750_000_000]);
        assert_eq!(t.path_of(0), "/home/a,b.txt");
        assert_eq!(t.path_of(1), "/usr/bin/vi");
        assert_eq!(t.path_id[1], t.path_id[2]);
        assert_eq!(t.offset_bytes, vec![8192, 0, 4096]);
        assert_eq!(t.size_bytes, vec![512, 4096, 4096]);
        assert_eq!(t.op, vec![Op::Write, Op::Read, Op::Read]);
        assert_eq!(t.kind, vec![FileKind::User, FileKind::App, FileKind::App]);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let e = parse("0,/a,0,10,R,app\n1,/a,0,10,X,app\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("f.csv") && e.contains("line 2") && e.contains("`op`"),
            "{e}"
        );
        let e = parse("0,/a,0,10,R,app\n1,/a,0,-3,R,app\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("`size`"), "{e}");
        let e = parse("0,/a,0,10,R,system\n").unwrap_err().to_string();
        assert!(e.contains("`kind`"), "{e}");
        let e = parse("0,/a,0,10\n").unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("6 comma-separated"),
            "{e}"
        );
        let e = parse("0,/a,0,10,R,app\nsoon,/a,0,10,R,app\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("time_s"), "{e}");
        let e = parse("# nothing\n").unwrap_err().to_string();
        assert!(e.contains("no requests"), "{e}");
        let e = parse("0,,0,10,R,app\n").unwrap_err().to_string();
        assert!(e.contains("empty path"), "{e}");
    }
}
