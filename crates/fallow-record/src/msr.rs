//! The MSR Cambridge / SNIA CSV that `fallow-core`'s reader takes:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with
//! Timestamp in Windows filetime (100 ns ticks since 1601-01-01) and
//! ResponseTime in 100 ns ticks, Type `Read` or `Write`, Offset and Size in
//! bytes. A header line names the columns (the reader skips it).

use crate::{Op, Recording};
use std::io::{self, Write};

/// 1970-01-01 in Windows filetime ticks.
pub const FILETIME_UNIX_EPOCH_TICKS: u64 = 116_444_736_000_000_000;

/// Write `rec` as MSR CSV. `hostname` loses any commas (it is a CSV field);
/// `disk_number` is the DiskNumber column.
pub fn write_msr(
    rec: &Recording,
    hostname: &str,
    disk_number: u32,
    out: &mut dyn Write,
) -> io::Result<()> {
    let host: String = hostname
        .chars()
        .map(|c| {
            if c == ',' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let host = if host.is_empty() {
        "localhost".to_string()
    } else {
        host
    };
    writeln!(
        out,
        "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"
    )?;
    for r in &rec.requests {
        let ticks = r.issue_unix_ns / 100 + FILETIME_UNIX_EPOCH_TICKS;
        let op = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        // a response of less than one tick still took time: round up
        let resp = r.latency_ns.div_ceil(100);
        writeln!(
            out,
            "{ticks},{host},{disk_number},{op},{},{},{resp}",
            r.offset_bytes, r.size_bytes
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    #[test]
    fn lines_in_filetime_ticks() {
        let rec = Recording {
            requests: vec![Request {
                // 2009-02-13 23:31:30.000001234 UTC
                issue_unix_ns: 1_234_567_890_000_001_234,
                latency_ns: 8_250_050,
                offset_bytes: 1_048_576,
                size_bytes: 65_536,
                op: Op::Write,
                error: 0,
            }],
            ..Recording::default()
        };
        let mut out = Vec::new();
        write_msr(&rec, "my,host", 3, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"
        );
        // 12345678900000012 ticks since 1970 + the 1601..1970 offset
        assert_eq!(
            lines[1],
            "128790414900000012,my_host,3,Write,1048576,65536,82501"
        );
    }
}
