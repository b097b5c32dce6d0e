//! fallow's own binary trace cache, written by `fallow convert` so that a
//! large text trace is parsed once; the layout is documented on
//! [`write_fallow_bin`], the public side of this module.
//!
//! Reading decodes each column straight from the input's buffer into the
//! builder's vectors, without going through rows: it runs at about 1 GB/s,
//! against 100–300 MB/s for the text readers.

use super::bytes::{le_u32, le_u64, read_full};
use super::{Format, Op, ReadContext, ReadReport, Trace, TraceBuilder};
use crate::error::{Error, Location, Result};
use std::io::{BufRead, Write};
use std::path::PathBuf;

pub(crate) const MAGIC: &[u8] = b"FALLOWT\x01";
const VERSION: u32 = 1;
const HEADER: usize = 64;
const FLAG_COMPLETION: u32 = 1;
const CHUNK: usize = 1 << 16;

/// The number stored for a source format (0 = unknown). Fixed forever:
/// files written today must read the same tomorrow.
pub(crate) fn format_code(f: Option<Format>) -> u32 {
    match f {
        None => 0,
        Some(Format::Msr) => 1,
        Some(Format::Spc) => 2,
        Some(Format::HpSrt) => 3,
        Some(Format::Blkparse) => 4,
        Some(Format::Vscsi) => 5,
        Some(Format::Plain) => 6,
        // Never written (see `write_fallow_bin`); kept so the match is total.
        Some(Format::Fallow) => 7,
        Some(Format::Biosnoop) => 8,
        Some(Format::Bpftrace) => 9,
        Some(Format::Blktrace) => 10,
        Some(Format::FioIolog) => 11,
        Some(Format::FioLat) => 12,
    }
}

fn format_of(code: u32) -> Option<Format> {
    Format::ALL
        .into_iter()
        .find(|&f| format_code(Some(f)) == code)
}

/// Write a trace in fallow's binary column format, which [`read_trace`]
/// detects by its magic bytes and reads back unchanged (columns, origin and
/// the counts of the original read). It is the [`Trace`] columns as they sit
/// in memory, little-endian, after a fixed 64-byte header:
///
/// | offset | field | type | meaning |
/// |---|---|---|---|
/// | 0 | `magic` | 8 bytes | `FALLOWT\x01` |
/// | 8 | `version` | u32 | 1 |
/// | 12 | `flags` | u32 | bit 0: a completion column is present |
/// | 16 | `count` | u64 | requests, n |
/// | 24 | `origin_ns` | u64 | absolute time of the first arrival in the source's clock |
/// | 32 | `source_format` | u32 | format read originally: 0 unknown, 1 msr, 2 spc, 3 hp-srt, 4 blkparse, 5 vscsi, 6 plain, 8 biosnoop, 9 bpftrace, 10 blktrace, 11 fio-iolog, 12 fio-lat |
/// | 36 | `reserved` | u32 | 0 |
/// | 40 | `skipped` | u64 | malformed records skipped when the source was read |
/// | 48 | `reordered` | u64 | out-of-order records sorted when the source was read |
/// | 56 | `ignored` | u64 | records ignored by design when the source was read |
///
/// Then the columns one after another, n values each: `arrival_ns` u64
/// (since the first arrival, sorted), `completion_ns` u64 (only with flag
/// bit 0), `offset_bytes` u64, `size_bytes` u32, `op` u8 (0 read, 1 write),
/// `device` u32. Nothing follows the last column.
///
/// [`read_trace`]: super::read_trace
pub fn write_fallow_bin(trace: &Trace, out: &mut dyn Write) -> Result<()> {
    let r = &trace.report;
    // A cache of a cache keeps the original source (or "unknown").
    let source = match r.format {
        Some(Format::Fallow) => r.source_format,
        other => other,
    };
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
    h.extend_from_slice(&0u32.to_le_bytes());
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
    out.flush().map_err(io)
}

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let fatal =
        |ctx: &ReadContext<'_>, at: u64, field: &'static str, message: String| Error::Record {
            path: ctx.path.to_path_buf(),
            location: Location::Offset(at),
            field,
            message,
        };
    let mut h = [0u8; HEADER];
    let got = read_full(input, &mut h).map_err(|e| ctx.io(e))?;
    if !h.starts_with(MAGIC) {
        let field = "magic";
        return Err(fatal(
            ctx,
            0,
            field,
            "not a fallow binary trace (no `FALLOWT\\x01` magic)".into(),
        ));
    }
    if got < HEADER {
        let msg = format!("truncated header: {got} of {HEADER} bytes");
        return Err(fatal(ctx, got as u64, "header", msg));
    }
    let version = le_u32(&h, 8);
    if version != VERSION {
        return Err(fatal(
            ctx,
            8,
            "version",
            format!("version {version}, this fallow reads {VERSION}"),
        ));
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
    let n = le_u64(&h, 16);
    let origin_ns = le_u64(&h, 24);

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
    let completion_ns = if flags & FLAG_COMPLETION != 0 {
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
    let device = read_column(input, n, &mut at, u32::from_le_bytes)
        .map_err(|e| truncated(ctx, "device", e))?;
    let mut extra = [0u8; 1];
    if read_full(input, &mut extra).map_err(|e| ctx.io(e))? != 0 {
        return Err(fatal(
            ctx,
            at,
            "count",
            format!("data after the last of {n} requests (count too small?)"),
        ));
    }
    if let Some(&max) = arrival_ns.iter().max() {
        if origin_ns.checked_add(max).is_none() {
            return Err(fatal(
                ctx,
                24,
                "origin_ns",
                format!("{origin_ns} plus arrival {max} ns overflows"),
            ));
        }
    }

    // Row checks, as `TraceBuilder::push` would make them; bad rows are
    // errors or (with skip_bad) dropped.
    let mut keep: Vec<bool> = Vec::new();
    let mut op = Vec::with_capacity(op_raw.len());
    for (i, &b) in op_raw.iter().enumerate() {
        let mut bad: Option<(u64, &'static str, String)> = None;
        op.push(match b {
            0 => Op::Read,
            1 => Op::Write,
            _ => {
                bad = Some((
                    op_at + i as u64,
                    "op",
                    format!("{b} is neither 0 (read) nor 1 (write)"),
                ));
                Op::Read
            }
        });
        if let Some((c_at, c)) = &completion_ns {
            if let (Some(&ci), Some(&ai)) = (c.get(i), arrival_ns.get(i)) {
                if ci < ai && bad.is_none() {
                    let msg = format!("completes {} ns before it arrives", ai - ci);
                    bad = Some((c_at + 8 * i as u64, "completion_ns", msg));
                }
            }
        }
        if let Some((off, field, msg)) = bad {
            ctx.bad(Location::Offset(off), field, msg)?;
            if keep.is_empty() {
                keep = vec![true; op_raw.len()];
            }
            if let Some(k) = keep.get_mut(i) {
                *k = false;
            }
        }
    }
    let mut t = Trace {
        arrival_ns,
        completion_ns: completion_ns.map(|(_, c)| c),
        offset_bytes,
        size_bytes,
        op,
        device,
        report: ReadReport::default(),
    };
    if !keep.is_empty() {
        let idx: Vec<usize> = (0..t.len())
            .filter(|&i| keep.get(i) == Some(&true))
            .collect();
        t = t.take(&idx);
    }
    ctx.builder = TraceBuilder::from_columns(t);
    let r = &mut ctx.report;
    r.origin_ns = origin_ns;
    r.source_format = format_of(le_u32(&h, 32));
    // The header's counts come from the file: saturate rather than wrap (a
    // corrupt header must not turn "many skipped" into "none skipped").
    r.skipped = r.skipped.saturating_add(le_u64(&h, 40));
    r.reordered = r.reordered.saturating_add(le_u64(&h, 48));
    r.ignored = r.ignored.saturating_add(le_u64(&h, 56));
    Ok(())
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

    #[test]
    fn header_counts_saturate_instead_of_wrapping() {
        // Issue 12: `skipped`/`reordered` near u64::MAX wrapped to small
        // numbers (and panicked with overflow checks on).
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
