//! MSR Cambridge / SNIA CSV:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with
//! Timestamp and ResponseTime in Windows filetime ticks (100 ns). The
//! response time gives the completion.
//!
//! A device is a (host, disk) pair: `hm,0` and `rsrch,0` in one file are
//! two disks. The device id is the disk number for the first host in the
//! file (so single-host files keep their ids) and `host_index << 24 |
//! disk` for the later ones, hosts numbered in order of first appearance;
//! the trace keeps the hostnames (`hm:0`, see [`super::DeviceSel`]). A
//! line with more than seven fields is an error (a stray comma must not
//! shift columns); a UTF-8 byte-order mark at the start is skipped.

use super::detect::{commas, contains};
use super::lines::{for_each_line, is_blank_or_comment, parse_u64, show, split};
use super::reader::{sniff, Completions, Head, ReaderEntry, Sniff, Writer};
use super::{Op, RawRequest, ReadContext, Trace, MSR_DISK_BITS};
use crate::error::{Error, Location, Result};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

const NS_PER_TICK: u64 = 100;
/// Hosts one file may hold: the bits above the disk number.
const MAX_HOSTS: usize = 1 << (32 - MSR_DISK_BITS);
const MAX_DISK: u64 = (1 << MSR_DISK_BITS) - 1;

/// Detection: the SNIA header, or seven or more fields with `Read`/`Write`.
fn detect(h: &Head<'_>) -> Sniff {
    let Some(line) = h.first_line else {
        return Sniff::No;
    };
    let lower = line.to_ascii_lowercase();
    sniff(
        line.starts_with(b"Timestamp,Hostname")
            || (commas(line) >= 6 && (contains(&lower, b",read,") || contains(&lower, b",write,"))),
    )
}

/// The msr reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "msr",
    aliases: &["snia", "msr-csv"],
    summary: "MSR Cambridge/SNIA CSV",
    code: 1,
    completions: Completions::Recorded,
    splittable: true,
    numbers_devices: false,
    detect_rank: 110,
    detect,
    read,
    // `fallow convert x -o out.csv`
    writers: &[Writer {
        extensions: &["csv"],
        write: |trace, out| write_msr(trace, WRITTEN_HOST, out),
    }],
};

/// The header line of an MSR CSV file (the reader skips it).
pub const MSR_HEADER: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

/// The Hostname [`write_msr`] gives a device whose trace names no host.
pub const WRITTEN_HOST: &str = "fallow";

/// One MSR CSV record, in the file's units (100-ns ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsrRecord<'a> {
    /// Timestamp: Windows filetime ticks, or ticks from any origin (the
    /// reader starts the trace at its first arrival).
    pub timestamp_ticks: u64,
    /// Hostname; commas and whitespace become `_` (it is a CSV field), an
    /// empty one `localhost`.
    pub hostname: &'a str,
    /// DiskNumber.
    pub disk_number: u32,
    /// Type: `Read` or `Write`.
    pub op: Op,
    /// Offset, bytes.
    pub offset_bytes: u64,
    /// Size, bytes.
    pub size_bytes: u64,
    /// ResponseTime, ticks.
    pub response_ticks: u64,
}

/// A hostname as a CSV field: commas and whitespace to `_`, empty to
/// `localhost`.
fn host_field(host: &str) -> Cow<'_, str> {
    if host.is_empty() {
        Cow::Borrowed("localhost")
    } else if host.contains(|c: char| c == ',' || c.is_whitespace()) {
        Cow::Owned(
            host.chars()
                .map(|c| {
                    if c == ',' || c.is_whitespace() {
                        '_'
                    } else {
                        c
                    }
                })
                .collect(),
        )
    } else {
        Cow::Borrowed(host)
    }
}

/// Write the header and `records` as MSR CSV: the one MSR writer, which
/// `fallow convert`, `fallow demo` and `fallow-record` use.
pub fn write_msr_records<'a>(
    out: &mut dyn Write,
    records: impl IntoIterator<Item = MsrRecord<'a>>,
) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    writeln!(w, "{MSR_HEADER}")?;
    for r in records {
        let op = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        writeln!(
            w,
            "{},{},{},{op},{},{},{}",
            r.timestamp_ticks,
            host_field(r.hostname),
            r.disk_number,
            r.offset_bytes,
            r.size_bytes,
            r.response_ticks
        )?;
    }
    w.flush()
}

/// Write `trace` as MSR CSV. Times go to 100-ns ticks from the trace's
/// origin, both ends of a request rounded down to the tick grid, so a
/// completion never precedes its arrival (a trace on the grid reads back
/// exactly). A device keeps the host and disk an MSR trace gave it;
/// otherwise its host is `host` and its disk number its id. Refused: a
/// trace without completion times (MSR records every response time; none
/// is made up) and a device id over MSR's 24-bit disk numbers.
pub fn write_msr(trace: &Trace, host: &str, out: &mut dyn Write) -> Result<()> {
    let path = trace.report().path.display().to_string();
    let Some(completion) = trace.completion_ns() else {
        return Err(Error::Unsupported(format!(
            "{path}: the trace has no completion times, and MSR CSV records each request's \
             response time (a plain trace's may be in a column: --completion-column); write \
             `.fbt` or `.parquet` instead"
        )));
    };
    let mut places: BTreeMap<u32, (String, u32)> = BTreeMap::new();
    let msr_hosts = !trace.numbers_devices() && !trace.names_disks();
    for d in trace.devices() {
        let known = msr_hosts
            .then(|| trace.report().hosts.get((d.id >> MSR_DISK_BITS) as usize))
            .flatten();
        let place = match known {
            Some(h) => (h.clone(), d.id & MAX_DISK as u32),
            None if u64::from(d.id) <= MAX_DISK => (host.to_string(), d.id),
            None => {
                return Err(Error::Unsupported(format!(
                    "{path}: device {} has no MSR disk number (at most {MAX_DISK}): select one \
                     device (--device) to write it as MSR CSV",
                    d.label()
                )))
            }
        };
        places.insert(d.id, place);
    }
    let records = (0..trace.len()).map(|i| {
        let (host, disk_number) = &places[&trace.device()[i]];
        let tick = trace.arrival_ns()[i] / NS_PER_TICK;
        MsrRecord {
            timestamp_ticks: tick,
            hostname: host,
            disk_number: *disk_number,
            op: trace.op()[i],
            offset_bytes: trace.offset_bytes()[i],
            size_bytes: u64::from(trace.size_bytes()[i]),
            response_ticks: (completion[i] / NS_PER_TICK).saturating_sub(tick),
        }
    });
    write_msr_records(out, records).map_err(|e| Error::Io {
        path: trace.report().path.clone(),
        source: e,
    })
}

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    for_each_line(input, ctx, |ctx, line_no, line| {
        let loc = Location::Line(line_no);
        // First, as nearly every line is a well-formed record: the fast path
        // accepts only lines that start with a digit, never a blank line, a
        // comment or the header.
        if let Some((r, host)) = parse_record_fast(line) {
            return match device_id(ctx, host, r.device) {
                Ok(device) => ctx.push(loc, RawRequest { device, ..r }),
                Err((field, msg)) => ctx.bad(loc, field, msg),
            };
        }
        if is_blank_or_comment(line) {
            return Ok(());
        }
        if line_no == 1 && ctx.at_file_start && line.starts_with(b"Timestamp") {
            return Ok(()); // header
        }
        match parse_record(line).and_then(|(r, host)| {
            let device = device_id(ctx, host, r.device)?;
            Ok(RawRequest { device, ..r })
        }) {
            Ok(r) => ctx.push(loc, r),
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })
}

/// The device id of `disk` on `host`: the disk number for the file's first
/// host, `host_index << 24 | disk` for the others.
fn device_id(ctx: &mut ReadContext<'_>, host: &[u8], disk: u32) -> Result<u32, FieldError> {
    if u64::from(disk) > MAX_DISK {
        return Err((
            "disk_number",
            format!("{disk} is above {MAX_DISK}, the largest MSR disk number fallow keeps"),
        ));
    }
    let index = match ctx.hosts.get(ctx.last_host) {
        Some(h) if h.as_slice() == host => ctx.last_host,
        _ => match ctx.hosts.iter().position(|h| h.as_slice() == host) {
            Some(i) => i,
            None if ctx.hosts.len() < MAX_HOSTS => {
                ctx.hosts.push(host.to_vec());
                ctx.hosts.len() - 1
            }
            None => {
                return Err((
                    "hostname",
                    format!(
                        "`{}` would be host {}; one file holds at most {MAX_HOSTS}",
                        show(host),
                        MAX_HOSTS + 1
                    ),
                ))
            }
        },
    };
    ctx.last_host = index;
    Ok((index as u32) << MSR_DISK_BITS | disk)
}

type FieldError = (&'static str, String);

/// Eight bytes of `line` from `i` as a little-endian word (the byte at `i`
/// lowest), zero bytes past the end of the line. Near the end, the line's
/// last eight bytes shifted down: no variable-length copy, which would cost
/// a `memcpy` call on the last field of every line.
#[inline(always)]
fn load8(line: &[u8], i: usize) -> u64 {
    let word = |at: usize| {
        line.get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    if i + 8 <= line.len() {
        word(i)
    } else if i < line.len() && line.len() >= 8 {
        word(line.len() - 8) >> (8 * (i + 8 - line.len()))
    } else {
        let rest = line.get(i..).unwrap_or(&[]);
        rest.iter()
            .enumerate()
            .fold(0, |w, (k, &b)| w | u64::from(b) << (8 * k))
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Powers of ten by exponent, for appending 0..=8 digits.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Digits from `*i` up to the next comma (or the end when `end_ok`), at most
/// 19 so they cannot overflow; leaves `*i` after the comma.
///
/// Eight bytes at a time (SWAR): a byte-by-byte `v = 10 v + d` is a chain of
/// dependent multiplications, and the digits are most of an MSR line.
#[inline(always)]
fn number(line: &[u8], i: &mut usize, end_ok: bool) -> Option<u64> {
    let start = *i;
    let mut v: u64 = 0;
    loop {
        // Each byte minus '0': digits become 0..=9, anything else >= 10
        // (a zero byte past the end included).
        let t = load8(line, *i) ^ (0x30 * ONES);
        // High bit set in each byte that is not a digit; no carry crosses
        // bytes, as (t & 0x7f) + 0x76 < 0x100.
        let not_digit = (((t & (0x7f * ONES)) + 0x76 * ONES) | t) & (0x80 * ONES);
        let n = (not_digit.trailing_zeros() / 8) as usize;
        if n > 0 {
            v = v
                .wrapping_mul(POW10[n])
                .wrapping_add(eight_digits(t << (64 - 8 * n)));
            *i += n;
        }
        if n < 8 {
            break;
        }
    }
    let digits = *i - start;
    if digits == 0 || digits > 19 {
        return None;
    }
    match line.get(*i) {
        Some(b',') => {
            *i += 1; // the comma
            Some(v)
        }
        None if end_ok => Some(v),
        _ => None,
    }
}

/// The value of eight decimal digits, one per byte (values 0..=9), the
/// most significant in the lowest byte: pairs, then fours, then all eight,
/// one multiplication each.
#[inline(always)]
fn eight_digits(t: u64) -> u64 {
    let t = (t.wrapping_mul(1 + (10 << 8))) >> 8 & 0x00ff_00ff_00ff_00ff;
    let t = (t.wrapping_mul(1 + (100 << 16))) >> 16 & 0x0000_ffff_0000_ffff;
    (t.wrapping_mul(1 + (10_000 << 32))) >> 32
}

/// One pass over a well-formed line, no allocation: the request (its
/// device the disk number) and the hostname. `None` sends the line to
/// [`parse_record`], which says exactly what is wrong with it.
#[inline]
fn parse_record_fast(line: &[u8]) -> Option<(RawRequest, &[u8])> {
    let mut i = 0usize;
    let ticks = number(line, &mut i, false)?;
    // hostname: anything up to the next comma
    let host_start = i;
    let host_end = memchr::memchr(b',', &line[i..])?;
    i += host_end + 1;
    let host = &line[host_start..host_start + host_end];
    let device = number(line, &mut i, false)?;
    let op = match line.get(i..i + 5) {
        Some(b"Read,") => {
            i += 5;
            Op::Read
        }
        _ => match line.get(i..i + 6) {
            Some(b"Write,") => {
                i += 6;
                Op::Write
            }
            _ => return None,
        },
    };
    let offset_bytes = number(line, &mut i, false)?;
    let size = number(line, &mut i, false)?;
    let resp = number(line, &mut i, true)?;
    if i < line.len() {
        return None;
    }
    let arrival_ns = ticks.checked_mul(NS_PER_TICK)?;
    let r = RawRequest {
        arrival_ns,
        completion_ns: Some(resp.checked_mul(NS_PER_TICK)?.checked_add(arrival_ns)?),
        offset_bytes,
        size_bytes: u32::try_from(size).ok()?,
        op,
        device: u32::try_from(device).ok()?,
    };
    Some((r, host))
}

/// A record (its device the disk number) and its hostname, or the field at fault.
fn parse_record(line: &[u8]) -> std::result::Result<(RawRequest, &[u8]), FieldError> {
    let mut f = split(line, b',');
    let mut next = |name: &'static str| {
        f.next().ok_or_else(|| {
            (
                name,
                "missing field (expected 7 comma-separated fields)".to_string(),
            )
        })
    };
    let ts = next("timestamp")?;
    let host = next("hostname")?;
    let disk = next("disk_number")?;
    let ty = next("type")?;
    let offset = next("offset")?;
    let size = next("size")?;
    let resp = next("response_time")?;
    let extra = f.count();
    if extra > 0 {
        return Err((
            "fields",
            format!(
                "{} fields, expected 7: a stray comma would shift the columns",
                7 + extra
            ),
        ));
    }
    let ticks = parse_u64(ts).map_err(|m| ("timestamp", m))?;
    let arrival_ns = ticks
        .checked_mul(NS_PER_TICK)
        .ok_or_else(|| ("timestamp", format!("`{}` is too large", show(ts))))?;
    let device = parse_u64(disk).map_err(|m| ("disk_number", m))?;
    let device = u32::try_from(device).map_err(|_| ("disk_number", "too large".to_string()))?;
    let op = parse_op(ty)
        .ok_or_else(|| ("type", format!("`{}` is neither Read nor Write", show(ty))))?;
    let offset_bytes = parse_u64(offset).map_err(|m| ("offset", m))?;
    let size_bytes = parse_u64(size).map_err(|m| ("size", m))?;
    let size_bytes = u32::try_from(size_bytes).map_err(|_| {
        (
            "size",
            format!("{size_bytes} bytes is too large for one request"),
        )
    })?;
    let resp_ticks = parse_u64(resp).map_err(|m| ("response_time", m))?;
    let completion_ns = resp_ticks
        .checked_mul(NS_PER_TICK)
        .and_then(|r| r.checked_add(arrival_ns))
        .ok_or_else(|| ("response_time", format!("`{}` is too large", show(resp))))?;
    let r = RawRequest {
        arrival_ns,
        completion_ns: Some(completion_ns),
        offset_bytes,
        size_bytes,
        op,
        device,
    };
    Ok((r, host))
}

fn parse_op(field: &[u8]) -> Option<Op> {
    let t = super::lines::trim(field);
    if t.eq_ignore_ascii_case(b"read") || t.eq_ignore_ascii_case(b"r") {
        Some(Op::Read)
    } else if t.eq_ignore_ascii_case(b"write") || t.eq_ignore_ascii_case(b"w") {
        Some(Op::Write)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back(bytes: &[u8]) -> Trace {
        let opts = super::super::ReadOptions::default();
        super::super::read_from(&mut &bytes[..], std::path::Path::new("back.csv"), &opts).unwrap()
    }

    /// A trace on the 100-ns grid is read back exactly: times, sizes,
    /// offsets, ops, devices and the hosts of a two-host MSR file.
    #[test]
    fn written_msr_reads_back_exactly() {
        let text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
                    128166372000000000,hm,0,Read,4096,4096,100\n\
                    128166372000000300,rsrch,2,Write,0,512,7\n\
                    128166372000001000,hm,0,Write,8192,65536,0\n";
        let t = read_back(text.as_bytes());
        assert_eq!(t.devices().len(), 2);
        let mut bytes = Vec::new();
        write_msr(&t, WRITTEN_HOST, &mut bytes).unwrap();
        // by hand: ticks from the first arrival, the hosts and disks kept
        let written = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(
            written,
            "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
             0,hm,0,Read,4096,4096,100\n\
             300,rsrch,2,Write,0,512,7\n\
             1000,hm,0,Write,8192,65536,0\n"
        );
        let back = read_back(&bytes);
        assert_eq!(back.arrival_ns(), t.arrival_ns());
        assert_eq!(back.completion_ns(), t.completion_ns());
        assert_eq!(back.offset_bytes(), t.offset_bytes());
        assert_eq!(back.size_bytes(), t.size_bytes());
        assert_eq!(back.op(), t.op());
        assert_eq!(back.device(), t.device());
        assert_eq!(back.devices(), t.devices());
    }

    /// Off the grid, both ends round down: the completion never precedes
    /// the arrival; a device of another trace gets the given host.
    #[test]
    fn times_round_down_to_ticks_and_other_devices_get_the_host() {
        let t = Trace::from_columns(
            vec![0, 250, 1_099],
            Some(vec![150, 399, 1_100]),
            vec![0, 512, 1024],
            vec![512; 3],
            vec![Op::Read, Op::Write, Op::Read],
            vec![3, 3, 3],
        )
        .unwrap();
        let mut bytes = Vec::new();
        write_msr(&t, "my host,x", &mut bytes).unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&bytes).unwrap().lines().collect();
        // 150/100 - 0 = 1; 399/100 - 250/100 = 1; 1100/100 - 1099/100 = 1
        assert_eq!(
            lines[1..],
            [
                "0,my_host_x,3,Read,0,512,1",
                "2,my_host_x,3,Write,512,512,1",
                "10,my_host_x,3,Read,1024,512,1"
            ]
        );
    }

    #[test]
    fn a_trace_without_completions_or_with_wide_device_ids_is_refused() {
        let plain = |device: u32, completion: Option<Vec<u64>>| {
            Trace::from_columns(
                vec![0],
                completion,
                vec![0],
                vec![512],
                vec![Op::Read],
                vec![device],
            )
            .unwrap()
        };
        let err = write_msr(&plain(0, None), "h", &mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no completion times") && err.contains("--completion-column"),
            "{err}"
        );
        let err = write_msr(&plain(1 << 24, Some(vec![5])), "h", &mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no MSR disk number") && err.contains("--device"),
            "{err}"
        );
    }

    /// `-o out.csv` (any case) chooses this writer, never fallow's binary.
    #[test]
    fn a_csv_name_chooses_the_msr_writer() {
        for name in ["out.csv", "OUT.CSV"] {
            let (f, w) = super::super::writer_for(std::path::Path::new(name));
            assert_eq!(f.name(), "msr", "{name}");
            assert_eq!(w.extensions, ["csv"], "{name}");
        }
    }

    #[test]
    fn parses_one_record() {
        let (r, host) =
            parse_record(b"134085312000008510,pgbench,0,Read,138620928,16384,5120").unwrap();
        assert_eq!(host, b"pgbench");
        assert_eq!(r.arrival_ns, 134085312000008510 * 100);
        assert_eq!(r.completion_ns, Some(134085312000008510 * 100 + 512_000));
        assert_eq!(
            (r.offset_bytes, r.size_bytes, r.op, r.device),
            (138620928, 16384, Op::Read, 0)
        );
    }

    #[test]
    fn fast_path_agrees_with_general_parser() {
        for line in [
            &b"134085312000008510,pgbench,0,Read,138620928,16384,5120"[..],
            b"1,h,3,Write,0,512,0",
            b"128166372003061629,usr,0,Write,3154132992,4096,1412",
        ] {
            assert_eq!(parse_record_fast(line), Some(parse_record(line).unwrap()));
        }
        // anything unusual goes to the general parser
        for line in [
            &b"1,h,0,read,0,1,1"[..],
            b"1,h,0,Read,0,1,1,extra",
            b"1,h,0,Read,0,1,",
            b"1,h,0,Read,0,99999999999,1",
            b" 1,h,0,Read,0,1,1",
        ] {
            assert_eq!(
                parse_record_fast(line),
                None,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// The byte-at-a-time digit loop `number` replaced, as the reference.
    fn number_bytewise(line: &[u8], i: &mut usize, end_ok: bool) -> Option<u64> {
        let start = *i;
        let mut v: u64 = 0;
        while *i < line.len() && line[*i] != b',' {
            let d = line[*i].wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v.wrapping_mul(10).wrapping_add(d as u64);
            *i += 1;
            if *i - start > 19 {
                return None;
            }
        }
        if *i == start || (*i == line.len() && !end_ok) {
            return None;
        }
        *i = (*i + 1).min(line.len()); // after the comma, or at the end
        Some(v)
    }

    #[test]
    fn eight_at_a_time_digits_agree_with_bytewise() {
        let mut seed: u64 = 7;
        let mut digit = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b'0' + (seed >> 33) as u8 % 10
        };
        let mut checked = 0;
        for len in 0..=22 {
            for pattern in 0..4 {
                let digits: Vec<u8> = (0..len)
                    .map(|k| match pattern {
                        0 => b'9',
                        1 => b'0',
                        2 if k == len - 1 => b'1',
                        2 => b'0',
                        _ => digit(),
                    })
                    .collect();
                for prefix in [&b""[..], b"1,", b"abc,"] {
                    // '/' and ':' border the digits in ASCII.
                    for tail in [&b""[..], b",", b",7", b"/", b":", b" ", b"x,"] {
                        let line = [prefix, &digits, tail].concat();
                        for end_ok in [false, true] {
                            let (mut i, mut j) = (prefix.len(), prefix.len());
                            let want = number_bytewise(&line, &mut j, end_ok);
                            let got = number(&line, &mut i, end_ok);
                            let show = String::from_utf8_lossy(&line);
                            assert_eq!(got, want, "{show} end_ok={end_ok}");
                            if got.is_some() {
                                assert_eq!(i, j, "{show}");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 3000);
        assert_eq!(
            number(b"9999999999999999999", &mut 0, true),
            Some(9_999_999_999_999_999_999)
        );
        // 20 digits are refused, even those that would fit.
        assert_eq!(number(b"18446744073709551615", &mut 0, true), None);
    }

    #[test]
    fn names_the_bad_field() {
        assert_eq!(parse_record(b"1,h,0,Erase,0,1,1").unwrap_err().0, "type");
        assert_eq!(
            parse_record(b"1,h,0,Read,0,1").unwrap_err().0,
            "response_time"
        );
        assert_eq!(
            parse_record(b"x,h,0,Read,0,1,1").unwrap_err().0,
            "timestamp"
        );
        assert_eq!(parse_record(b"1,h,0,Read,-5,1,1").unwrap_err().0, "offset");
    }

    fn read_with(text: &[u8], skip_bad: bool) -> crate::Result<crate::trace::Trace> {
        let opts = crate::trace::ReadOptions {
            format: Some(crate::trace::Format::Msr),
            skip_bad,
            ..Default::default()
        };
        crate::trace::read_from(&mut &text[..], std::path::Path::new("t.csv"), &opts)
    }

    #[test]
    fn a_device_is_a_host_and_a_disk() {
        // `hm,0` and `rsrch,0` were once one device.
        let t = read_with(
            b"100,hm,0,Read,0,512,10\n\
              200,rsrch,0,Write,4096,512,10\n\
              300,hm,1,Read,0,512,10\n\
              400,rsrch,0,Read,8192,1024,10\n",
            false,
        )
        .unwrap();
        let rsrch0 = 1 << MSR_DISK_BITS;
        assert_eq!(t.device(), &[0, rsrch0, 1, rsrch0]);
        let devices = t.devices();
        let listed: Vec<(u32, u64, Option<&str>)> = devices
            .iter()
            .map(|d| (d.id, d.requests, d.name.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                (0, 1, Some("hm:0")),
                (1, 1, Some("hm:1")),
                (rsrch0, 2, Some("rsrch:0"))
            ]
        );
        use crate::trace::DeviceSel;
        let id = |s: &str| t.resolve_device(&s.parse::<DeviceSel>().unwrap());
        assert_eq!(id("rsrch:0").unwrap(), rsrch0);
        assert_eq!(id("hm:0").unwrap(), 0);
        // A plain disk number works where only one host has it.
        assert_eq!(id("1").unwrap(), 1);
        let e = id("0").unwrap_err().to_string();
        assert!(e.contains("hm:0") && e.contains("rsrch:0"), "{e}");
        let e = id("hm:7").unwrap_err().to_string();
        assert!(
            e.contains("no device hm:7") && e.contains("rsrch:0 (2 requests)"),
            "{e}"
        );
        let one = t.select_device(rsrch0).unwrap();
        assert_eq!(one.offset_bytes(), &[4096, 8192]);
    }

    #[test]
    fn a_single_host_file_keeps_plain_ids_and_no_names() {
        let t = read_with(b"100,hm,3,Read,0,512,10\n200,hm,0,Read,0,512,10\n", false).unwrap();
        assert_eq!(t.device(), &[3, 0]);
        assert!(t.devices().iter().all(|d| d.name.is_none()));
        let json = serde_json::to_string(&t.devices()).unwrap();
        assert_eq!(json, r#"[{"id":0,"requests":1},{"id":3,"requests":1}]"#);
        // Named selection works here too.
        let sel = "hm:3".parse().unwrap();
        assert_eq!(t.resolve_device(&sel).unwrap(), 3);
        assert_eq!(
            t.resolve_device(&crate::trace::DeviceSel::Id(3)).unwrap(),
            3
        );
    }

    #[test]
    fn a_byte_order_mark_is_accepted() {
        let body =
            b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Read,0,512,1\n";
        let with_bom = [super::super::lines::BOM, &body[..]].concat();
        let t = read_with(&with_bom, false).unwrap();
        assert_eq!(t.len(), 1);
        // and detection sees through it
        let t = crate::trace::read_from(
            &mut &with_bom[..],
            std::path::Path::new("t.csv"),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(t.report().format, Some(crate::trace::Format::Msr));
        let headless = [super::super::lines::BOM, b"1,h,0,Read,0,512,1\n"].concat();
        let t = crate::trace::read_from(
            &mut &headless[..],
            std::path::Path::new("t"),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(t.report().format, Some(crate::trace::Format::Msr));
    }

    #[test]
    fn extra_fields_are_an_error_naming_the_line() {
        // A stray comma in the hostname shifts every column after it.
        let text = b"1,h,0,Read,0,512,1\n2,h,x,0,Read,0,512,1\n3,h,0,Read,0,512,1,7\n";
        let e = read_with(text, false).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert_eq!(
            parse_record(b"2,h,x,0,Read,0,512,1").unwrap_err().0,
            "fields"
        );
        let (field, msg) = parse_record(b"3,h,0,Read,0,512,1,7").unwrap_err();
        assert_eq!(field, "fields");
        assert!(msg.contains("8 fields, expected 7"), "{msg}");
        let t = read_with(text, true).unwrap();
        assert_eq!((t.len(), t.report().skipped), (1, 2));
    }

    #[test]
    fn disk_numbers_beyond_the_id_bits_are_an_error() {
        let e = read_with(b"1,h,16777216,Read,0,512,1\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("disk_number"), "{e}");
        assert_eq!(
            read_with(b"1,h,16777215,Read,0,512,1\n", false)
                .unwrap()
                .device(),
            &[16777215]
        );
    }
}
