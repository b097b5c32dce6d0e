//! The MSR Cambridge / SNIA CSV that `fallow-core`'s reader takes:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with
//! Timestamp in Windows filetime (100 ns ticks since 1601-01-01) and
//! ResponseTime in 100 ns ticks, Type `Read` or `Write`, Offset and Size in
//! bytes. A header line names the columns (the reader skips it).

use crate::{Op, Recording};
use fallow_core::trace::{write_msr_records, MsrRecord};
use std::io::{self, Write};

/// 1970-01-01 in Windows filetime ticks.
pub const FILETIME_UNIX_EPOCH_TICKS: u64 = 116_444_736_000_000_000;

/// Write `rec` as MSR CSV through the core's one MSR writer
/// ([`fallow_core::trace::write_msr_records`]): Timestamp in filetime
/// ticks, ResponseTime rounded up to a tick (a response of less than one
/// still took time). `hostname` loses any commas and whitespace (it is a
/// CSV field); `disk_number` is the DiskNumber column.
pub fn write_msr(
    rec: &Recording,
    hostname: &str,
    disk_number: u32,
    out: &mut dyn Write,
) -> io::Result<()> {
    let records = rec.requests.iter().map(|r| MsrRecord {
        timestamp_ticks: r.issue_unix_ns / 100 + FILETIME_UNIX_EPOCH_TICKS,
        hostname,
        disk_number,
        op: match r.op {
            Op::Read => fallow_core::trace::Op::Read,
            Op::Write => fallow_core::trace::Op::Write,
        },
        offset_bytes: r.offset_bytes,
        size_bytes: u64::from(r.size_bytes),
        response_ticks: r.latency_ns.div_ceil(100),
    });
    write_msr_records(out, records)
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
