//! fallow's own binary trace cache, written by `fallow convert` so that a
//! large text trace is parsed once; the layout is documented on
//! [`write_fallow_bin`], the public side of this module.
//!
//! Reading decodes each column straight from the input's buffer into the
//! builder's vectors, without going through rows: it runs at about 1 GB/s,
//! against 100–300 MB/s for the text readers.

use super::bytes::{le_u32, le_u64, read_full};
use super::reader::{sniff, Completions, ReaderEntry, Writer};
use super::{Format, Op, ReadContext, ReadReport, Trace, TraceBuilder, MSR_DISK_BITS};
use crate::error::{Error, Location, Result};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

pub(crate) const MAGIC: &[u8] = b"FALLOWT\x01";
/// Version written: 2 adds the MSR host names after the columns. Version 1
/// (no host names; the header's `hosts` word was a reserved 0) still reads.
const VERSION: u32 = 2;
const OLDEST_VERSION: u32 = 1;
/// Host names one file may hold: the device id's bits above the disk number.
const MAX_HOSTS: u32 = 1 << (32 - MSR_DISK_BITS);
/// Longest host name, bytes: a name comes from one text line (at most
/// 1 MiB) with its control characters escaped (at most 7 bytes for 1).
const MAX_HOST_BYTES: u32 = 8 << 20;
const HEADER: usize = 64;
const FLAG_COMPLETION: u32 = 1;
const CHUNK: usize = 1 << 16;

/// The number stored for a source format (0 = unknown): its entry's
/// [`code`](super::ReaderEntry::code), fixed forever.
pub(crate) fn format_code(f: Option<Format>) -> u32 {
    f.map_or(0, |f| f.entry().code)
}

/// The format a trace was first read from: a cache of a cache keeps the
/// original source (or "unknown"); a Parquet/Arrow file fallow wrote
/// names its source, one from elsewhere is the source.
pub(crate) fn original_source(r: &ReadReport) -> Option<Format> {
    match r.format {
        Some(f) if f == Format::Fallow => r.source_format,
        Some(f) if f == Format::Arrow || f == Format::Parquet => r.source_format.or(r.format),
        other => other,
    }
}

fn format_of(code: u32) -> Option<Format> {
    (code != 0)
        .then(|| Format::all().find(|f| f.entry().code == code))
        .flatten()
}

/// Write a trace in fallow's binary column format, which [`read_trace`]
/// detects by its magic bytes and reads back unchanged (columns, origin and
/// the counts of the original read). It is the [`Trace`] columns as they sit
/// in memory, little-endian, after a fixed 64-byte header:
///
/// | offset | field | type | meaning |
/// |---|---|---|---|
/// | 0 | `magic` | 8 bytes | `FALLOWT\x01` |
/// | 8 | `version` | u32 | 2 (1: before host names; still read) |
/// | 12 | `flags` | u32 | bit 0: a completion column is present |
/// | 16 | `count` | u64 | requests, n |
/// | 24 | `origin_ns` | u64 | absolute time of the first arrival in the source's clock |
/// | 32 | `source_format` | u32 | format read originally: 0 unknown, 1 msr, 2 spc, 3 hp-srt, 4 blkparse, 5 vscsi, 6 plain, 8 biosnoop, 9 bpftrace, 10 blktrace, 11 fio-iolog, 12 fio-lat, 13 arrow, 14 parquet |
/// | 36 | `hosts` | u32 | MSR host names after the columns, h (0 for other formats; version 1: a reserved 0) |
/// | 40 | `skipped` | u64 | malformed records skipped when the source was read |
/// | 48 | `reordered` | u64 | out-of-order records sorted when the source was read |
/// | 56 | `ignored` | u64 | records ignored by design when the source was read |
///
/// Then the columns one after another, n values each: `arrival_ns` u64
/// (since the first arrival, sorted), `completion_ns` u64 (only with flag
/// bit 0), `offset_bytes` u64, `size_bytes` u32, `op` u8 (0 read, 1 write),
/// `device` u32. Then the h host names of an MSR trace, each a u32 byte
/// length and that many bytes of UTF-8, in the order of the device id's
/// high bits (`host_index << 24 | disk`, see [`Trace::device_name`]), so
/// `hm:0` and `rsrch:0` stay apart and named through a convert. Nothing
/// follows.
///
/// [`read_trace`]: super::read_trace
pub fn write_fallow_bin(trace: &Trace, out: &mut dyn Write) -> Result<()> {
    let r = &trace.report;
    let source = original_source(r);
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&VERSION.to_le_bytes());
    let flags = if trace.completion_ns.is_some() {
        FLAG_COMPLETION
    } else {
        0
    };
    h.extend_from_slice(&flags.to_le_bytes());
    h.extend_from_slice(&(trace.len() as u64).to_le_bytes());
    h.extend_from_slice(&r.origin_ns.to_le_bytes());
    h.extend_from_slice(&format_code(source).to_le_bytes());
    let hosts = &r.hosts;
    let n_hosts = u32::try_from(hosts.len())
        .ok()
        .filter(|&n| n <= MAX_HOSTS)
        .ok_or_else(|| {
            Error::invalid(
                "hosts",
                format!("{} MSR hosts, at most {MAX_HOSTS} fit", hosts.len()),
            )
        })?;
    h.extend_from_slice(&n_hosts.to_le_bytes());
    for v in [r.skipped, r.reordered, r.ignored] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    let io = |source| Error::Io {
        path: PathBuf::from("<fallow binary output>"),
        source,
    };
    out.write_all(&h).map_err(io)?;
    // Encode a chunk of values at a time: one write per 64 KiB, no
    // per-byte iterator.
    fn put<T: Copy, const W: usize>(
        values: &[T],
        enc: fn(T) -> [u8; W],
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(CHUNK);
        for chunk in values.chunks(CHUNK / W) {
            buf.clear();
            for &v in chunk {
                buf.extend_from_slice(&enc(v));
            }
            out.write_all(&buf)?;
        }
        Ok(())
    }
    put(&trace.arrival_ns, u64::to_le_bytes, out).map_err(io)?;
    if let Some(c) = &trace.completion_ns {
        put(c, u64::to_le_bytes, out).map_err(io)?;
    }
    put(&trace.offset_bytes, u64::to_le_bytes, out).map_err(io)?;
    put(&trace.size_bytes, u32::to_le_bytes, out).map_err(io)?;
    put(&trace.op, |o: Op| [o as u8], out).map_err(io)?;
    put(&trace.device, u32::to_le_bytes, out).map_err(io)?;
    for host in hosts {
        let len = u32::try_from(host.len())
            .ok()
            .filter(|&n| n <= MAX_HOST_BYTES)
            .ok_or_else(|| {
                Error::invalid(
                    "hosts",
                    format!(
                        "a host name of {} bytes, at most {MAX_HOST_BYTES}",
                        host.len()
                    ),
                )
            })?;
        out.write_all(&len.to_le_bytes()).map_err(io)?;
        out.write_all(host.as_bytes()).map_err(io)?;
    }
    out.flush().map_err(io)
}

/// The fallow reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "fallow",
    aliases: &[],
    summary: "fallow's binary cache, written by `fallow convert`",
    code: 7,
    completions: Completions::InFile,
    splittable: false,
    numbers_devices: false,
    detect_rank: 10,
    detect: |h| sniff(h.bytes.starts_with(MAGIC)),
    read,
    writers: &[Writer {
        // Also every extension no other writer claims (`writer_for`).
        extensions: &["fbt"],
        write: write_fallow_bin,
    }],
};

/// An error at byte `at` of the file, in `field`.
fn fatal(ctx: &ReadContext<'_>, at: u64, field: &'static str, message: String) -> Error {
    Error::Record {
        path: ctx.path.to_path_buf(),
        location: Location::Offset(at),
        field,
        message,
    }
}

/// The fixed 64-byte header, checked (the layout is on [`write_fallow_bin`]).
struct Header {
    /// Requests: the length of every column.
    n: u64,
    /// Whether a `completion_ns` column follows `arrival_ns`.
    has_completion: bool,
    origin_ns: u64,
    /// MSR host names after the columns (version 2 on).
    n_hosts: u32,
    /// The source format's code ([`format_code`]).
    source_code: u32,
    /// The original read's counts: skipped, reordered, ignored.
    skipped: u64,
    reordered: u64,
    ignored: u64,
}

fn read_header(input: &mut dyn BufRead, ctx: &ReadContext<'_>) -> Result<Header> {
    let mut h = [0u8; HEADER];
    let got = read_full(input, &mut h).map_err(|e| ctx.io(e))?;
    if !h.starts_with(MAGIC) {
        let msg = "not a fallow binary trace (no `FALLOWT\\x01` magic)";
        return Err(fatal(ctx, 0, "magic", msg.into()));
    }
    if got < HEADER {
        let msg = format!("truncated header: {got} of {HEADER} bytes");
        return Err(fatal(ctx, got as u64, "header", msg));
    }
    let version = le_u32(&h, 8);
    if !(OLDEST_VERSION..=VERSION).contains(&version) {
        let msg = format!("version {version}, this fallow reads {OLDEST_VERSION} to {VERSION}");
        return Err(fatal(ctx, 8, "version", msg));
    }
    // version 1 wrote 0 here and nothing after the columns
    let n_hosts = if version >= 2 { le_u32(&h, 36) } else { 0 };
    if n_hosts > MAX_HOSTS {
        let msg = format!("{n_hosts} MSR hosts, at most {MAX_HOSTS}");
        return Err(fatal(ctx, 36, "hosts", msg));
    }
    let flags = le_u32(&h, 12);
    if flags & !FLAG_COMPLETION != 0 {
        return Err(fatal(
            ctx,
            12,
            "flags",
            format!("unknown flags 0x{flags:08x}"),
        ));
    }
    Ok(Header {
        n: le_u64(&h, 16),
        has_completion: flags & FLAG_COMPLETION != 0,
        origin_ns: le_u64(&h, 24),
        n_hosts,
        source_code: le_u32(&h, 32),
        skipped: le_u64(&h, 40),
        reordered: le_u64(&h, 48),
        ignored: le_u64(&h, 56),
    })
}

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let head = read_header(input, ctx)?;
    let n = head.n;
    let mut at = HEADER as u64;
    let truncated = |ctx: &ReadContext<'_>, name, (off, got, e): ColumnError| match e {
        Some(io) => ctx.io(io),
        None => fatal(
            ctx,
            off,
            name,
            format!("truncated column: {got} of {n} values before the end of the file"),
        ),
    };
    let arrival_ns = read_column(input, n, &mut at, u64::from_le_bytes)
        .map_err(|e| truncated(ctx, "arrival_ns", e))?;
    let completion_ns = if head.has_completion {
        let c_at = at;
        let c = read_column(input, n, &mut at, u64::from_le_bytes)
            .map_err(|e| truncated(ctx, "completion_ns", e))?;
        Some((c_at, c))
    } else {
        None
    };
    let offset_bytes = read_column(input, n, &mut at, u64::from_le_bytes)
        .map_err(|e| truncated(ctx, "offset_bytes", e))?;
    let size_bytes = read_column(input, n, &mut at, u32::from_le_bytes)
        .map_err(|e| truncated(ctx, "size_bytes", e))?;
    let op_at = at;
    let op_raw =
        read_column(input, n, &mut at, |[b]: [u8; 1]| b).map_err(|e| truncated(ctx, "op", e))?;
    let device_at = at;
    let device = read_column(input, n, &mut at, u32::from_le_bytes)
        .map_err(|e| truncated(ctx, "device", e))?;
    let hosts = read_hosts(input, head.n_hosts, &mut at).map_err(|(off, e)| match e {
        HostError::Io(io) => ctx.io(io),
        HostError::Bad(msg) => fatal(ctx, off, "hosts", msg),
    })?;
    let mut extra = [0u8; 1];
    if read_full(input, &mut extra).map_err(|e| ctx.io(e))? != 0 {
        let msg = format!("data after the last of {n} requests (count too small?)");
        return Err(fatal(ctx, at, "count", msg));
    }
    let origin_ns = head.origin_ns;
    if let Some(&max) = arrival_ns.iter().max() {
        if origin_ns.checked_add(max).is_none() {
            let msg = format!("{origin_ns} plus arrival {max} ns overflows");
            return Err(fatal(ctx, 24, "origin_ns", msg));
        }
    }

    let rows = Rows {
        arrival_ns: &arrival_ns,
        completion_ns: completion_ns
            .as_ref()
            .map(|(c_at, c)| (*c_at, c.as_slice())),
        op_at,
        op_raw: &op_raw,
        device_at,
        device: &device,
        n_hosts: hosts.len(),
    };
    let (op, keep) = rows.check(ctx)?;
    let mut t = Trace {
        arrival_ns,
        completion_ns: completion_ns.map(|(_, c)| c),
        offset_bytes,
        size_bytes,
        op,
        device,
        report: ReadReport::default(),
    };
    if let Some(keep) = keep {
        let idx: Vec<usize> = (0..t.len())
            .filter(|&i| keep.get(i) == Some(&true))
            .collect();
        t = t.take(&idx);
    }
    ctx.builder = TraceBuilder::from_columns(t);
    // `finish` turns these into the report's host names
    ctx.hosts = hosts.into_iter().map(String::into_bytes).collect();
    let r = &mut ctx.report;
    r.origin_ns = origin_ns;
    r.source_format = format_of(head.source_code);
    // The header's counts come from the file: saturate rather than wrap (a
    // corrupt header must not turn "many skipped" into "none skipped").
    r.skipped = r.skipped.saturating_add(head.skipped);
    r.reordered = r.reordered.saturating_add(head.reordered);
    r.ignored = r.ignored.saturating_add(head.ignored);
    Ok(())
}

/// The columns a row check reads, with where each starts in the file (an
/// error names the byte of the bad value).
struct Rows<'a> {
    arrival_ns: &'a [u64],
    completion_ns: Option<(u64, &'a [u64])>,
    op_at: u64,
    op_raw: &'a [u8],
    device_at: u64,
    device: &'a [u32],
    /// Host names in the file (0: devices are not host-numbered).
    n_hosts: usize,
}

impl Rows<'_> {
    /// Row checks, as `TraceBuilder::push` would make them: the decoded
    /// ops, and which rows to keep when a bad one was dropped (`skip_bad`;
    /// without it the first bad row is the error). `None`: keep all.
    fn check(&self, ctx: &mut ReadContext<'_>) -> Result<(Vec<Op>, Option<Vec<bool>>)> {
        let mut keep: Option<Vec<bool>> = None;
        let mut op = Vec::with_capacity(self.op_raw.len());
        for (i, &b) in self.op_raw.iter().enumerate() {
            let mut bad: Option<(u64, &'static str, String)> = None;
            op.push(match b {
                0 => Op::Read,
                1 => Op::Write,
                _ => {
                    let msg = format!("{b} is neither 0 (read) nor 1 (write)");
                    bad = Some((self.op_at + i as u64, "op", msg));
                    Op::Read
                }
            });
            if let Some((c_at, c)) = self.completion_ns {
                if let (Some(&ci), Some(&ai)) = (c.get(i), self.arrival_ns.get(i)) {
                    if ci < ai && bad.is_none() {
                        let msg = format!("completes {} ns before it arrives", ai - ci);
                        bad = Some((c_at + 8 * i as u64, "completion_ns", msg));
                    }
                }
            }
            // a trace with host names names every device's host
            if let Some(&d) = self.device.get(i).filter(|_| self.n_hosts > 0) {
                let host = d >> MSR_DISK_BITS;
                if host as usize >= self.n_hosts && bad.is_none() {
                    let msg = format!("host index {host}, but the file names {}", self.n_hosts);
                    bad = Some((self.device_at + 4 * i as u64, "device", msg));
                }
            }
            if let Some((off, field, msg)) = bad {
                ctx.bad(Location::Offset(off), field, msg)?;
                let keep = keep.get_or_insert_with(|| vec![true; self.op_raw.len()]);
                if let Some(k) = keep.get_mut(i) {
                    *k = false;
                }
            }
        }
        Ok((op, keep))
    }
}

/// Why the host names could not be read: the input failed, or a name is
/// not one fallow writes.
enum HostError {
    Io(std::io::Error),
    Bad(String),
}

/// The `n` host names after the columns (version 2). Lengths come from the
/// file, so nothing is reserved for a name before its bytes are there.
fn read_hosts(
    input: &mut dyn BufRead,
    n: u32,
    at: &mut u64,
) -> std::result::Result<Vec<String>, (u64, HostError)> {
    let mut hosts: Vec<String> = Vec::new();
    for i in 0..n {
        let start = *at;
        let mut len = [0u8; 4];
        let got = read_full(input, &mut len).map_err(|e| (start, HostError::Io(e)))?;
        if got < 4 {
            let msg = format!("truncated: {i} of {n} host names before the end of the file");
            return Err((start + got as u64, HostError::Bad(msg)));
        }
        let len = u32::from_le_bytes(len);
        if len > MAX_HOST_BYTES {
            let msg = format!("host name {i} of {len} bytes, at most {MAX_HOST_BYTES}");
            return Err((start, HostError::Bad(msg)));
        }
        *at += 4;
        let mut name = Vec::new();
        // `take`: the buffer grows with the bytes read, not with the claim
        (&mut *input)
            .take(u64::from(len))
            .read_to_end(&mut name)
            .map_err(|e| (*at, HostError::Io(e)))?;
        if name.len() < len as usize {
            let msg = format!("truncated host name {i}: {} of {len} bytes", name.len());
            return Err((*at + name.len() as u64, HostError::Bad(msg)));
        }
        let name = String::from_utf8(name)
            .map_err(|_| (*at, HostError::Bad(format!("host name {i} is not UTF-8"))))?;
        // fallow escapes control characters when it reads a host name, so
        // a name it wrote never holds one; echoed raw, one could forge output.
        // Two names may be equal: hosts that differ only in bytes that are
        // not UTF-8 read as the same text (U+FFFD), yet are two devices.
        if name.chars().any(char::is_control) {
            let msg = format!(
                "host name {i} `{}` holds a control character",
                super::lines::escape_controls(&name)
            );
            return Err((*at, HostError::Bad(msg)));
        }
        *at += u64::from(len);
        hosts.push(name);
    }
    Ok(hosts)
}

/// Where a column ended early: byte offset of the end, whole values read,
/// and the I/O error if that was the cause.
type ColumnError = (u64, u64, Option<std::io::Error>);

/// Decode `n` values of `W` bytes straight from the input's buffer (no
/// intermediate copy); `at` advances by the bytes consumed.
fn read_column<T, const W: usize>(
    input: &mut dyn BufRead,
    n: u64,
    at: &mut u64,
    decode: fn([u8; W]) -> T,
) -> std::result::Result<Vec<T>, ColumnError> {
    // The count is not trusted for allocation: a corrupt header must not
    // make us reserve terabytes before the data runs out.
    let mut out: Vec<T> = Vec::with_capacity(n.min(1 << 16) as usize);
    // A value split across two buffer fills.
    let mut carry = [0u8; W];
    let mut have = 0;
    while (out.len() as u64) < n {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((*at, out.len() as u64, Some(e))),
        };
        if buf.is_empty() {
            return Err((*at, out.len() as u64, None));
        }
        let mut used = 0;
        if have > 0 {
            let k = (W - have).min(buf.len());
            carry[have..have + k].copy_from_slice(&buf[..k]);
            have += k;
            used = k;
            if have == W {
                out.push(decode(carry));
                have = 0;
            }
        }
        let left = n - out.len() as u64;
        let whole = ((buf.len() - used) / W).min(usize::try_from(left).unwrap_or(usize::MAX));
        for c in buf[used..used + whole * W].chunks_exact(W) {
            let mut v = [0u8; W];
            v.copy_from_slice(c);
            out.push(decode(v));
        }
        used += whole * W;
        if (out.len() as u64) < n && have == 0 && buf.len() - used < W {
            let tail = &buf[used..];
            carry[..tail.len()].copy_from_slice(tail);
            have = tail.len();
            used = buf.len();
        }
        input.consume(used);
        *at += used as u64;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{read_from, ReadOptions};
    use std::path::Path;

    fn sample() -> Trace {
        let mut t = Trace::from_columns(
            vec![5_000, 7_000, 9_000],
            Some(vec![6_000, 12_000, 9_500]),
            vec![0, 4096, 1 << 40],
            vec![4096, 512, 65536],
            vec![Op::Read, Op::Write, Op::Read],
            vec![0, 1, 0],
        )
        .unwrap();
        t.report.skipped = 2;
        t.report.ignored = 3;
        t.report.format = Some(Format::HpSrt);
        t
    }

    fn read_bytes(b: &[u8], skip_bad: bool) -> Result<Trace> {
        let opts = ReadOptions {
            skip_bad,
            ..Default::default()
        };
        read_from(&mut &b[..], Path::new("t.fallow"), &opts)
    }

    #[test]
    fn header_layout_by_hand() {
        let mut out = Vec::new();
        write_fallow_bin(&sample(), &mut out).unwrap();
        assert_eq!(&out[..8], b"FALLOWT\x01");
        assert_eq!(out.len(), 64 + 3 * (8 + 8 + 8 + 4 + 1 + 4));
        assert_eq!(le_u32(&out, 12), 1); // completion present
        assert_eq!(le_u64(&out, 16), 3);
        assert_eq!(le_u64(&out, 24), 5_000); // origin: first arrival
        assert_eq!(le_u32(&out, 32), 3); // hp-srt
        assert_eq!(le_u64(&out, 64 + 8), 2_000); // second arrival, rebased
        assert_eq!(out[64 + 3 * 28 + 1], 1); // second op: write
    }

    #[test]
    fn round_trip() {
        let t = sample();
        let mut out = Vec::new();
        write_fallow_bin(&t, &mut out).unwrap();
        let back = read_bytes(&out, false).unwrap();
        assert_eq!(back.arrival_ns(), t.arrival_ns());
        assert_eq!(back.completion_ns(), t.completion_ns());
        assert_eq!(back.offset_bytes(), t.offset_bytes());
        assert_eq!(back.size_bytes(), t.size_bytes());
        assert_eq!(back.op(), t.op());
        assert_eq!(back.device(), t.device());
        let r = back.report();
        assert_eq!((r.origin_ns, r.skipped, r.ignored), (5_000, 2, 3));
        assert_eq!(r.format, Some(Format::Fallow));
        assert_eq!(r.source_format, Some(Format::HpSrt));
    }

    #[test]
    fn values_split_across_buffer_fills() {
        // A 5-byte buffer splits most values over two fills (and is too
        // short for detection, hence the forced format).
        let opts = ReadOptions {
            format: Some(Format::Fallow),
            ..Default::default()
        };
        let t = sample();
        let mut out = Vec::new();
        write_fallow_bin(&t, &mut out).unwrap();
        let mut input = std::io::BufReader::with_capacity(5, &out[..]);
        let back = read_from(&mut input, Path::new("t"), &opts).unwrap();
        assert_eq!(back.completion_ns(), t.completion_ns());
        assert_eq!(back.offset_bytes(), t.offset_bytes());
        assert_eq!(back.device(), t.device());
        let mut cut = std::io::BufReader::with_capacity(3, &out[..out.len() - 2]);
        let e = read_from(&mut cut, Path::new("t"), &opts).unwrap_err();
        let at = out.len() - 2;
        assert!(
            e.to_string()
                .contains(&format!("byte offset {at}: field `device`")),
            "{e}"
        );
    }

    #[test]
    fn bad_op_byte_is_an_error_or_a_skip() {
        let mut out = Vec::new();
        write_fallow_bin(&sample(), &mut out).unwrap();
        let op_at = 64 + 3 * (8 + 8 + 8 + 4) + 1;
        out[op_at] = 9;
        let e = read_bytes(&out, false).unwrap_err().to_string();
        assert!(
            e.contains(&format!("byte offset {op_at}")) && e.contains("`op`"),
            "{e}"
        );
        let t = read_bytes(&out, true).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.report().skipped, 2 + 1);
    }

    #[test]
    fn truncation_names_the_column() {
        let mut out = Vec::new();
        write_fallow_bin(&sample(), &mut out).unwrap();
        let e = read_bytes(&out[..64 + 3 * 8 + 5], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("byte offset 93") && e.contains("`completion_ns`"),
            "{e}"
        );
        let e = read_bytes(&out[..40], false).unwrap_err().to_string();
        assert!(e.contains("`header`"), "{e}");
        out.push(0);
        let e = read_bytes(&out, false).unwrap_err().to_string();
        assert!(e.contains("data after the last"), "{e}");
    }

    /// Three requests on `hm:0`, `rsrch:0` and `hm:2` of an MSR file.
    fn msr_sample() -> Trace {
        let text = b"1,hm,0,Read,0,512,1\n2,rsrch,0,Write,512,512,1\n3,hm,2,Read,1024,512,1\n";
        let opts = ReadOptions {
            format: Some(Format::Msr),
            ..Default::default()
        };
        read_from(&mut &text[..], Path::new("t.csv"), &opts).unwrap()
    }

    #[test]
    fn msr_host_names_survive_and_are_laid_out_as_documented() {
        let t = msr_sample();
        assert_eq!(t.report().hosts, ["hm", "rsrch"]);
        let mut out = Vec::new();
        write_fallow_bin(&t, &mut out).unwrap();
        // by hand: version 2, two hosts in the header, the names after the
        // device column as (u32 length, bytes)
        assert_eq!(le_u32(&out, 8), 2);
        assert_eq!(le_u32(&out, 36), 2);
        let names_at = 64 + 3 * (8 + 8 + 8 + 4 + 1 + 4);
        assert_eq!(out.len(), names_at + 4 + 2 + 4 + 5);
        assert_eq!(le_u32(&out, names_at), 2);
        assert_eq!(&out[names_at + 4..names_at + 6], b"hm");
        assert_eq!(le_u32(&out, names_at + 6), 5);
        assert_eq!(&out[names_at + 10..], b"rsrch");
        let back = read_bytes(&out, false).unwrap();
        assert_eq!(back.report().hosts, t.report().hosts);
        assert_eq!(back.device(), t.device());
        for (name, id) in [("hm:0", 0), ("rsrch:0", 1 << MSR_DISK_BITS), ("hm:2", 2)] {
            let sel = name.parse().unwrap();
            assert_eq!(back.resolve_device(&sel).unwrap(), id, "{name}");
            assert_eq!(back.device_name(id).as_deref(), Some(name));
        }
        // `0` is ambiguous in the cache as in the CSV
        let e = back.resolve_device(&"0".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("several hosts"), "{e}");
    }

    #[test]
    fn version_1_files_still_read() {
        // The fixture was written by the version-1 writer.
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/traces/small.fallow"
        );
        let v1 = std::fs::read(fixture).unwrap();
        assert_eq!(le_u32(&v1, 8), 1);
        let t = read_bytes(&v1, false).unwrap();
        assert_eq!(t.len(), 3);
        assert!(t.report().hosts.is_empty());
        // Written again it is version 2 and reads back the same.
        let mut v2 = Vec::new();
        write_fallow_bin(&t, &mut v2).unwrap();
        assert_eq!(le_u32(&v2, 8), 2);
        let back = read_bytes(&v2, false).unwrap();
        assert_eq!(back.arrival_ns(), t.arrival_ns());
        assert_eq!(back.device(), t.device());
        // A version-1 header's word 36 is not a host count (it was reserved).
        let mut odd = v1.clone();
        odd[36] = 7;
        assert_eq!(read_bytes(&odd, false).unwrap().len(), 3);
        // Versions beyond are refused by name.
        let mut v3 = v2.clone();
        v3[8] = 3;
        let e = read_bytes(&v3, false).unwrap_err().to_string();
        assert!(e.contains("`version`") && e.contains("reads 1 to 2"), "{e}");
    }

    #[test]
    fn bad_host_tables_are_errors_naming_the_field() {
        let mut out = Vec::new();
        write_fallow_bin(&msr_sample(), &mut out).unwrap();
        let names_at = 64 + 3 * (8 + 8 + 8 + 4 + 1 + 4);
        let err = |b: &[u8]| read_bytes(b, true).unwrap_err().to_string();
        // truncated in a name, and before a length
        let e = err(&out[..out.len() - 2]);
        assert!(e.contains("`hosts`") && e.contains("3 of 5 bytes"), "{e}");
        let e = err(&out[..names_at + 7]);
        assert!(
            e.contains("`hosts`") && e.contains("1 of 2 host names"),
            "{e}"
        );
        // a length beyond the bound is refused before anything is reserved
        let mut huge = out.clone();
        huge[names_at..names_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&huge).contains("at most"));
        // more hosts than device ids can index
        let mut many = out.clone();
        many[36..40].copy_from_slice(&257u32.to_le_bytes());
        let e = err(&many);
        assert!(e.contains("byte offset 36") && e.contains("257"), "{e}");
        // a control character (names are escaped when read)
        let mut ctl = out.clone();
        ctl[names_at + 4] = 0x1b;
        assert!(err(&ctl).contains("control character"));
        // a device whose host index is past the names: a bad row
        let mut orphan = out.clone();
        let dev_at = names_at - 3 * 4;
        orphan[dev_at..dev_at + 4].copy_from_slice(&(5u32 << MSR_DISK_BITS).to_le_bytes());
        let e = read_bytes(&orphan, false).unwrap_err().to_string();
        assert!(e.contains("`device`") && e.contains("host index 5"), "{e}");
        let t = read_bytes(&orphan, true).unwrap();
        assert_eq!((t.len(), t.report().skipped), (2, 1));
    }

    #[test]
    fn header_counts_saturate_instead_of_wrapping() {
        // `skipped`/`reordered` near u64::MAX once wrapped to small
        // numbers (and panicked with overflow checks on; fuzz/README.md).
        let mut out = Vec::new();
        write_fallow_bin(&sample(), &mut out).unwrap();
        for at in [40, 48, 56] {
            out[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        }
        out[12] = 1;
        // A bad op makes the reader count one more skip on top of the header's.
        let op_at = 64 + 3 * (8 + 8 + 8 + 4) + 1;
        out[op_at] = 9;
        let t = read_bytes(&out, true).unwrap();
        let r = t.report();
        assert_eq!(
            (r.skipped, r.reordered, r.ignored),
            (u64::MAX, u64::MAX, u64::MAX)
        );
    }
}
