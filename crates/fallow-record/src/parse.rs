//! Lines of `trace_pipe` for the two block tracepoints, e.g. (kernel 6.x):
//!
//! ```text
//!   dd-1234  [001] .....  5012.345678: block_rq_issue: 7,0 R 65536 () 2048 + 128 none,0,0 [dd]
//!   <idle>-0 [000] d.h1.  5012.351234: block_rq_complete: 7,0 R () 2048 + 128 none,0,0 [0]
//! ```
//!
//! Older kernels print fewer fields after the sector (no I/O priority), so
//! the parser anchors on what every version has: the event name, then
//! `MAJ,MIN RWBS`, a parenthesised command (empty except for SCSI
//! passthrough), then `SECTOR + NR_SECTORS`.

/// Which tracepoint a line is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `block_rq_issue`: the request went to the driver.
    Issue,
    /// `block_rq_complete`: the driver finished it.
    Complete,
}

/// One block event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Issue or completion.
    pub kind: Kind,
    /// Trace clock time, ns.
    pub ts_ns: u64,
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Whether the flags say read (`R`), write (`W`) or something else.
    pub dir: Dir,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in 512-byte sectors.
    pub nr_sectors: u32,
    /// Completion status (0 = success, else a negative errno); 0 for issues.
    pub error: i32,
}

/// Direction from the `rwbs` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// A read.
    Read,
    /// A write.
    Write,
    /// Discard, secure erase, flush without data or anything else.
    Other,
}

/// What a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// A block event.
    Event(Event),
    /// `CPU:N [LOST M EVENTS]`: the ring buffer overflowed.
    Lost(u64),
    /// Anything else (another event, a malformed line).
    Other,
}

fn dir_of(rwbs: &str) -> Dir {
    // F before the op is a preflush, after it FUA; D discard, E secure
    // erase, N no data
    let op = rwbs.trim_start_matches('F');
    match op.chars().next() {
        Some('R') => Dir::Read,
        Some('W') => Dir::Write,
        _ => Dir::Other,
    }
}

/// `5012.345678` (seconds with up to 9 decimals) as ns.
fn parse_ts(s: &str) -> Option<u64> {
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sec: u64 = sec.parse().ok()?;
    let mut frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    for _ in frac.len()..9 {
        frac_ns *= 10;
    }
    sec.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parse one line of `trace_pipe`.
pub fn parse_line(line: &str) -> Line {
    if let Some(rest) = line.trim().strip_prefix("CPU:") {
        if let Some(i) = rest.find("[LOST ") {
            let n = rest[i + 6..].split_whitespace().next().unwrap_or("");
            return Line::Lost(n.parse().unwrap_or(0));
        }
    }
    parse_event(line).map_or(Line::Other, Line::Event)
}

fn parse_event(line: &str) -> Option<Event> {
    let (kind, at, marker_len) = if let Some(i) = line.find(": block_rq_issue: ") {
        (Kind::Issue, i, ": block_rq_issue: ".len())
    } else if let Some(i) = line.find(": block_rq_complete: ") {
        (Kind::Complete, i, ": block_rq_complete: ".len())
    } else {
        return None;
    };
    let ts_ns = parse_ts(line[..at].split_whitespace().last()?)?;
    let payload = &line[at + marker_len..];
    let mut head = payload.split_whitespace();
    let (maj, min) = head.next()?.split_once(',')?;
    let rwbs = head.next()?;
    // the command in parentheses may hold spaces (SCSI CDB bytes)
    let open = payload.find('(')?;
    let close = open + payload[open..].find(')')?;
    let mut tail = payload[close + 1..].split_whitespace();
    let sector: u64 = tail.next()?.parse().ok()?;
    if tail.next()? != "+" {
        return None;
    }
    let nr_sectors: u32 = tail.next()?.parse().ok()?;
    let error = match kind {
        Kind::Issue => 0,
        Kind::Complete => payload
            .trim_end()
            .rsplit_once('[')
            .and_then(|(_, e)| e.strip_suffix(']'))
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
    };
    Some(Event {
        kind,
        ts_ns,
        major: maj.parse().ok()?,
        minor: min.parse().ok()?,
        dir: dir_of(rwbs),
        sector,
        nr_sectors,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_and_complete_lines_of_kernel_6() {
        let i = "              dd-1234    [001] .....  5012.345678: block_rq_issue: 7,0 R 65536 () 2048 + 128 none,0,0 [dd]";
        let c = "          <idle>-0       [000] d.h1.  5012.351234: block_rq_complete: 7,0 R () 2048 + 128 none,0,0 [0]";
        assert_eq!(
            parse_line(i),
            Line::Event(Event {
                kind: Kind::Issue,
                ts_ns: 5_012_345_678_000,
                major: 7,
                minor: 0,
                dir: Dir::Read,
                sector: 2048,
                nr_sectors: 128,
                error: 0
            })
        );
        let Line::Event(e) = parse_line(c) else {
            panic!()
        };
        assert_eq!(
            (e.kind, e.ts_ns, e.sector, e.error),
            (Kind::Complete, 5_012_351_234_000, 2048, 0)
        );
    }

    #[test]
    fn older_formats_flags_and_errors() {
        // 5.x: no priority field; a failed write with FUA; SCSI command bytes
        let c = "kworker/0:1H-99 [000] ..s1 77.000001: block_rq_complete: 8,16 WFS (28 00 00 00) 8 + 8 [-5]";
        let Line::Event(e) = parse_line(c) else {
            panic!()
        };
        assert_eq!(
            (e.major, e.minor, e.dir, e.sector, e.nr_sectors, e.error),
            (8, 16, Dir::Write, 8, 8, -5)
        );
        let f = "x-1 [000] ..... 1.5: block_rq_issue: 8,0 FWS 0 () 18446744073709551615 + 0 none,0,0 [x]";
        let Line::Event(e) = parse_line(f) else {
            panic!()
        };
        assert_eq!(
            (e.dir, e.nr_sectors, e.ts_ns),
            (Dir::Write, 0, 1_500_000_000)
        );
        let d = "x-1 [000] ..... 1.5: block_rq_issue: 8,0 D 0 () 100 + 8 none,0,0 [x]";
        assert!(matches!(
            parse_line(d),
            Line::Event(Event {
                dir: Dir::Other,
                ..
            })
        ));
        assert_eq!(parse_line("CPU:1 [LOST 42 EVENTS]"), Line::Lost(42));
        assert_eq!(
            parse_line("x-1 [000] ..... 1.5: sched_switch: a b"),
            Line::Other
        );
        assert_eq!(
            parse_line("x-1 [000] ..... 1.5: block_rq_issue: 8,0 R 0 () x + 8"),
            Line::Other
        );
    }
}
