//! A kernel tracepoint's id and record layout, read from tracefs
//! (`events/<system>/<name>/id` and `format`), so the event monitor
//! ([`super::event`]) never hard-codes a field offset: the layout of
//! `block_rq_issue` changed in 5.x (the `bytes` and `ioprio` fields) and may
//! change again.
//!
//! `format` lists one field a line (tab-separated):
//!
//! ```text
//!     field:dev_t dev; offset:8; size:4; signed:0;
//!     field:char rwbs[10]; offset:28; size:10; signed:0;
//!     field:__data_loc char[] cmd; offset:60; size:4; signed:0;
//! ```

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// One field of a tracepoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name (`dev`, `rwbs`).
    pub name: String,
    /// Offset in the raw record, bytes.
    pub offset: usize,
    /// Size, bytes (an array's whole size).
    pub size: usize,
    /// Whether an integer field is signed.
    pub signed: bool,
}

impl Field {
    /// The field as an unsigned integer of its size (1, 2, 4 or 8 bytes,
    /// native endian, as the kernel wrote it); `None` if the record is too
    /// short or the size is not an integer's.
    pub fn uint(&self, raw: &[u8]) -> Option<u64> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match self.size {
            1 => u64::from(b[0]),
            2 => u64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// The field as a signed integer (sign-extended from its size).
    pub fn int(&self, raw: &[u8]) -> Option<i64> {
        let v = self.uint(raw)?;
        Some(match self.size {
            1 => i64::from(v as u8 as i8),
            2 => i64::from(v as u16 as i16),
            4 => i64::from(v as u32 as i32),
            _ => v as i64,
        })
    }

    /// A `char[N]` field as text, up to its first NUL.
    pub fn text(&self, raw: &[u8]) -> Option<String> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Some(String::from_utf8_lossy(&b[..end]).into_owned())
    }
}

/// A tracepoint: its id (the `config` of a `PERF_TYPE_TRACEPOINT` perf
/// event, and the `common_type` of each of its records) and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracepoint {
    /// `system/name`, e.g. `block/block_rq_issue`.
    pub name: String,
    /// The id from `id`.
    pub id: u64,
    /// The fields from `format`, `common_*` included.
    pub fields: Vec<Field>,
}

/// Where tracefs is: `/sys/kernel/tracing` or the older
/// `/sys/kernel/debug/tracing` (this does not mount it; `fallow record`
/// does).
pub fn tracefs_root() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

/// Where tracefs is mounted at boot on systemd machines, and where perf
/// and bpftrace mount it when it is not.
pub const TRACEFS_MOUNT: &str = "/sys/kernel/tracing";

/// The block tracepoints' tracefs: where it is mounted, or mounted at
/// [`TRACEFS_MOUNT`] now (as perf and bpftrace do; it stays mounted, as
/// theirs does), with `true` when this call mounted it. `Err`: why it is
/// not there (not root, a kernel without tracefs). Why mount: tracefs is
/// not mounted at boot on every machine, and without it the event
/// monitor cannot run (the daemon polled once a second and named every
/// waker "unknown"; `fallow run --monitor events` refused to start; a
/// btrfs scrub had no brake).
pub fn tracefs_root_mounted() -> std::result::Result<(PathBuf, bool), String> {
    // one mount at a time in this process; another process may mount it
    // between the look and the mount (then EBUSY, and it is there)
    static MOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MOUNTING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(root) = tracefs_root() {
        return Ok((root, false));
    }
    let mounted = rustix::mount::mount(
        "nodev",
        TRACEFS_MOUNT,
        "tracefs",
        rustix::mount::MountFlags::NOSUID
            | rustix::mount::MountFlags::NODEV
            | rustix::mount::MountFlags::NOEXEC,
        None,
    );
    match (mounted, tracefs_root()) {
        (Ok(()), Some(root)) => Ok((root, true)),
        (Err(_), Some(root)) => Ok((root, false)),
        (Ok(()), None) => Err(format!(
            "{TRACEFS_MOUNT} has no events/ after mounting tracefs"
        )),
        (Err(e), None) => Err(format!(
            "tracefs is not mounted and mounting it at {TRACEFS_MOUNT} failed: {e}"
        )),
    }
}

/// Longest `format` file read (the largest in a 6.x kernel is ~6 KiB).
const MAX_FORMAT_BYTES: u64 = 1 << 20;

impl Tracepoint {
    /// Read `events/<system>/<name>/{id,format}` under `root`.
    pub fn load(root: &Path, system: &str, name: &str) -> Result<Tracepoint> {
        let dir = root.join("events").join(system).join(name);
        let id_path = dir.join("id");
        let id_text = std::fs::read_to_string(&id_path)
            .map_err(|e| Error::io(&id_path, "cannot read the tracepoint id", e))?;
        let id = id_text.trim().parse().map_err(|_| Error::Parse {
            path: id_path.clone(),
            message: format!("`{}` is not a tracepoint id", id_text.trim()),
        })?;
        let fmt_path = dir.join("format");
        let len = std::fs::metadata(&fmt_path).map(|m| m.len()).unwrap_or(0);
        if len > MAX_FORMAT_BYTES {
            return Err(Error::Parse {
                path: fmt_path,
                message: format!("{len} bytes: too long for a format file"),
            });
        }
        let text = std::fs::read_to_string(&fmt_path)
            .map_err(|e| Error::io(&fmt_path, "cannot read the tracepoint format", e))?;
        let fields = parse_format(&text).map_err(|message| Error::Parse {
            path: fmt_path,
            message,
        })?;
        Ok(Tracepoint {
            name: format!("{system}/{name}"),
            id,
            fields,
        })
    }

    /// The field `name`, if the tracepoint has it.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field `name`, or an error naming the tracepoint and field (a
    /// kernel whose layout lacks a field the monitor needs).
    pub fn need(&self, name: &str) -> Result<Field> {
        self.field(name).cloned().ok_or_else(|| {
            Error::Unsupported(format!(
                "tracepoint {} has no field `{name}` on this kernel",
                self.name
            ))
        })
    }
}

/// Parse the text of a `format` file into its fields. The error names the
/// line that is wrong.
pub fn parse_format(text: &str) -> std::result::Result<Vec<Field>, String> {
    let mut fields = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let bad = |what: &str| format!("line {}: {what}: `{line}`", i + 1);
        let mut decl = None;
        let (mut offset, mut size, mut signed) = (None, None, None);
        for (j, part) in rest.split(';').enumerate() {
            let part = part.trim();
            if j == 0 {
                decl = Some(part);
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = Some(v.parse::<usize>().map_err(|_| bad("bad offset"))?);
            } else if let Some(v) = part.strip_prefix("size:") {
                size = Some(v.parse::<usize>().map_err(|_| bad("bad size"))?);
            } else if let Some(v) = part.strip_prefix("signed:") {
                signed = Some(v == "1");
            }
        }
        let decl = decl.ok_or_else(|| bad("no declaration"))?;
        // the name is the declaration's last word, less any `[N]`
        let last = decl
            .split_whitespace()
            .last()
            .ok_or_else(|| bad("empty declaration"))?;
        let name = last.split('[').next().unwrap_or(last);
        if name.is_empty() {
            return Err(bad("no field name"));
        }
        fields.push(Field {
            name: name.to_string(),
            offset: offset.ok_or_else(|| bad("no offset"))?,
            size: size.ok_or_else(|| bad("no size"))?,
            signed: signed.unwrap_or(false),
        });
    }
    if fields.is_empty() {
        return Err("no `field:` lines".into());
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_6_18: &str = "name: block_rq_issue
ID: 2104
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;

print fmt: \"%d,%d %s\", REC->dev
";

    #[test]
    fn parses_a_6_18_format_and_reads_a_hand_built_record() {
        let f = parse_format(ISSUE_6_18).unwrap();
        assert_eq!(f.len(), 12);
        let tp = Tracepoint {
            name: "block/block_rq_issue".into(),
            id: 2104,
            fields: f,
        };
        let rwbs = tp.need("rwbs").unwrap();
        assert_eq!((rwbs.offset, rwbs.size), (34, 10));
        assert_eq!(tp.need("cmd").unwrap().offset, 60);
        assert!(tp.need("common_pid").unwrap().signed);
        assert!(tp.need("nope").is_err());
        // a record laid out by hand: dev 7:3, sector 2048, "RS", comm "dd"
        let mut raw = vec![0u8; 64];
        raw[0..2].copy_from_slice(&2104u16.to_ne_bytes());
        raw[8..12].copy_from_slice(&((7u32 << 20) | 3).to_ne_bytes());
        raw[16..24].copy_from_slice(&2048u64.to_ne_bytes());
        raw[28..32].copy_from_slice(&65536u32.to_ne_bytes());
        raw[34..36].copy_from_slice(b"RS");
        raw[44..46].copy_from_slice(b"dd");
        raw[4..8].copy_from_slice(&(-1i32).to_ne_bytes());
        assert_eq!(tp.need("dev").unwrap().uint(&raw), Some((7 << 20) | 3));
        assert_eq!(tp.need("sector").unwrap().uint(&raw), Some(2048));
        assert_eq!(tp.need("bytes").unwrap().uint(&raw), Some(65536));
        assert_eq!(rwbs.text(&raw).as_deref(), Some("RS"));
        assert_eq!(tp.need("comm").unwrap().text(&raw).as_deref(), Some("dd"));
        assert_eq!(tp.need("common_pid").unwrap().int(&raw), Some(-1));
        // a truncated record reads as nothing, not garbage
        assert_eq!(tp.need("comm").unwrap().text(&raw[..50]), None);
    }

    #[test]
    fn bad_lines_are_named() {
        let e = parse_format("\tfield:int x;\toffset:zz;\tsize:4;\tsigned:1;\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("offset"), "{e}");
        assert!(parse_format("name: x\n").is_err());
    }

    #[test]
    fn the_running_kernels_block_tracepoints_load() {
        let Some(root) = tracefs_root() else {
            eprintln!("skip: tracefs is not mounted");
            return;
        };
        let tp = match Tracepoint::load(&root, "block", "block_rq_issue") {
            Ok(tp) => tp,
            Err(e) => {
                eprintln!("skip: {e}");
                return;
            }
        };
        assert!(tp.id > 0);
        for f in ["dev", "sector", "nr_sector", "rwbs"] {
            tp.need(f).unwrap();
        }
    }
}
