//! `blkparse` default text output (blktrace, Linux), for example
//!
//! ```text
//!   8,16   5        6     0.000031865 18615  D   R 1444645666 + 256 [java]
//!   8,16   5       15     0.000356669     0  C   R 1444645666 + 256 [0]
//! ```
//!
//! Fields: `maj,min cpu seq seconds pid action RWBS sector + sectors [...]`
//! (blkparse(1), "default output format"). A request's arrival is its `D`
//! (issue to the driver) event and its completion the `C` event with the
//! same device and start sector. Offset and size are `sector·512` and
//! `sectors·512` bytes; the time is seconds since the trace started, parsed
//! exactly. The device id is `major << 20 | minor`, the kernel's own
//! `MKDEV` encoding (20 minor bits), so `8,16` is 8388624.
//!
//! The RWBS field gives the direction: containing `W` is a write, `R` a
//! read. Requests that move no data are not requests for fallow and are
//! ignored: no `+ sectors` part or 0 sectors (flushes, `N`), discards (`D`)
//! and secure erases (`E`), which transfer nothing. A requeue (`R` action)
//! cancels the pending issue; the request's next `D` is its arrival.
//!
//! Everything else is ignored and counted in the report's `ignored`, by
//! reason in `ignored_by_reason`: lines that are not events (per-CPU
//! summaries at the end), other actions (Q, G, I, M, A, U, P, m
//! messages…), events that move no data, requeued issues, issues that
//! never complete within the trace and completions whose issue is not in
//! it. A line that has the shape of an event (numeric cpu, sequence, time
//! and pid) but a device, action, RWBS, sector, `+` or size field that
//! cannot be read is a bad record naming the line and field (an error, or
//! counted under `--skip-bad`), never a silent drop.
//!
//! Matching: a completion belongs to the oldest pending issue with the same
//! device and start sector (FIFO per (device, sector)), so two requests in
//! flight to one sector (`D D C C`) are both kept. A requeue cancels the
//! newest pending issue of its sector (the one the driver just refused);
//! the request's next `D` is its arrival. Events are matched in time order:
//! lines out of time order (blkparse of several CPUs, edited files) are
//! sorted first, stably, and counted in the report's `reordered`; the
//! requests are then handed on in issue order.

use super::lines::{for_each_line, parse_time_ns, parse_u64, show, split_ws, trim};
use super::reader::{sniff, Completions, ReaderEntry};
use super::{fifo, Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::io::BufRead;

const SECTOR_BYTES: u64 = 512;
const NS_PER_S: u64 = 1_000_000_000;

/// Reasons for ignored lines, as counted in `ReadReport::ignored_by_reason`.
pub(crate) const NOT_AN_EVENT: &str = "blkparse: not an event line (summary)";
pub(crate) const OTHER_ACTION: &str = "blkparse: action other than D, C or R";
pub(crate) const NO_DATA: &str = "blkparse: event moving no data (flush, discard, 0 sectors)";
pub(crate) const REQUEUE: &str = "blkparse: requeue event";
pub(crate) const REQUEUED_ISSUE: &str = "blkparse: issue requeued before completing";
pub(crate) const NEVER_COMPLETED: &str = "blkparse: issue without a completion";
pub(crate) const UNMATCHED_COMPLETION: &str = "blkparse: completion without a pending issue";

/// Actions blkparse(1) prints ("trace actions"); anything else in that
/// column of an event line is corruption.
const ACTIONS: [&[u8]; 17] = [
    b"A", b"B", b"BS", b"C", b"D", b"F", b"G", b"I", b"M", b"P", b"Q", b"R", b"S", b"T", b"U",
    b"UT", b"X",
];

/// The blkparse reader's registry entry.
pub(crate) const READER: ReaderEntry = ReaderEntry {
    name: "blkparse",
    aliases: &[],
    summary: "`blkparse` default text output",
    code: 4,
    completions: Completions::Recorded,
    splittable: false,
    numbers_devices: true,
    detect_rank: 80,
    detect: |h| sniff(h.first_line.is_some_and(looks_like)),
    read,
    writers: &[],
};

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut events: Vec<Event> = Vec::new();
    for_each_line(input, ctx, |ctx, line_no, line| {
        if trim(line).is_empty() {
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse_event(line) {
            Ok(Parsed::Event(mut ev)) => {
                if ev.data.is_none() {
                    ctx.report.ignore(NO_DATA);
                } else {
                    ev.line = line_no;
                    events.push(ev);
                }
                Ok(())
            }
            Ok(Parsed::Other) => {
                ctx.report.ignore(OTHER_ACTION);
                Ok(())
            }
            Ok(Parsed::NotAnEvent) => {
                ctx.report.ignore(NOT_AN_EVENT);
                Ok(())
            }
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })?;
    // Lines out of time order: counted like any reader's late records,
    // then sorted (stably, so equal times keep their order apart from an
    // issue going before a completion at the same instant).
    let mut latest = 0;
    let mut late = 0u64;
    for ev in &events {
        if ev.time_ns < latest {
            late += 1;
        } else {
            latest = ev.time_ns;
        }
    }
    let key = |ev: &Event| (ev.time_ns, ev.action as u8);
    if events.windows(2).any(|w| key(&w[0]) > key(&w[1])) {
        events.sort_by_key(key);
    }
    ctx.report.reordered = ctx.report.reordered.saturating_add(late);
    match_events(ctx, &events)
}

/// Pair completions with issues (FIFO per device and sector, `fifo.rs`)
/// and hand the completed requests to the builder in issue order.
fn match_events(ctx: &mut ReadContext<'_>, events: &[Event]) -> Result<()> {
    const REASONS: fifo::Reasons = fifo::Reasons {
        requeue: REQUEUE,
        requeued_issue: REQUEUED_ISSUE,
        never_completed: NEVER_COMPLETED,
        unmatched_completion: UNMATCHED_COMPLETION,
    };
    let moving = events.iter().filter(|ev| ev.data.is_some());
    let step = |ev: &&Event| {
        let step = match ev.action {
            Action::Issue => fifo::Step::Issue,
            Action::Requeue => fifo::Step::Requeue,
            Action::Complete => fifo::Step::Complete,
        };
        (step, (ev.device, ev.sector))
    };
    for (issue, done) in fifo::pair(moving, step, &mut ctx.report, &REASONS) {
        let Some((size_bytes, op)) = issue.data else {
            continue; // filtered above
        };
        let req = RawRequest {
            arrival_ns: issue.time_ns,
            completion_ns: Some(done.time_ns),
            offset_bytes: issue.sector * SECTOR_BYTES,
            size_bytes,
            op,
            device: issue.device,
        };
        // reported at the completion's line, as before
        ctx.push(Location::Line(done.line), req)?;
    }
    Ok(())
}

/// True when `line` is a blkparse event line (`maj,min cpu seq time pid action …`).
pub(crate) fn looks_like(line: &[u8]) -> bool {
    let mut f = split_ws(line, false);
    let (Some(dev), Some(cpu), Some(seq), Some(time), Some(pid), Some(action), Some(_rwbs)) = (
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
        f.next(),
    ) else {
        return false;
    };
    matches!(parse_dev(dev), Some(Ok(_)))
        && [cpu, seq, pid].iter().all(|x| parse_u64(x).is_ok())
        && time.contains(&b'.')
        && parse_time_ns(time, NS_PER_S).is_ok()
        && (1..=2).contains(&action.len())
        && action.iter().all(u8::is_ascii_alphabetic)
}

/// `maj,min` → `major << 20 | minor` (Linux `MKDEV`), if it is one.
fn parse_dev(field: &[u8]) -> Option<Result<u32, String>> {
    super::devnum::parse(field)
}

/// Event order at equal times: an issue before a requeue before a
/// completion, since a request completes only after it was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Action {
    Issue = 0,
    Requeue = 1,
    Complete = 2,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    action: Action,
    device: u32,
    time_ns: u64,
    sector: u64,
    /// `None` when the event moves no data (ignored).
    data: Option<(u32, Op)>,
    /// Line of the event, for messages.
    line: u64,
}

/// What a line is.
#[derive(Debug)]
enum Parsed {
    /// A D, C or R event.
    Event(Event),
    /// An event line with another action.
    Other,
    /// Not an event line at all (summaries).
    NotAnEvent,
}

type FieldError = (&'static str, String);

fn parse_event(line: &[u8]) -> std::result::Result<Parsed, FieldError> {
    let mut f = split_ws(line, false);
    let (Some(dev), Some(cpu), Some(seq), Some(time), Some(pid)) =
        (f.next(), f.next(), f.next(), f.next(), f.next())
    else {
        // Too short for an event; a device-like first field makes it a
        // truncated one.
        return match parse_dev(split_ws(line, false).next().unwrap_or_default()) {
            Some(_) => Err(("action", "missing field (line ends early)".into())),
            None => Ok(Parsed::NotAnEvent),
        };
    };
    let device = match parse_dev(dev) {
        Some(d) => d.map_err(|m| ("device", m))?,
        // An event's other leading fields with a broken device is a
        // corrupt event, not a summary line.
        None if [cpu, seq, pid].iter().all(|x| parse_u64(x).is_ok())
            && parse_time_ns(time, NS_PER_S).is_ok() =>
        {
            return Err(("device", format!("`{}` is not `major,minor`", show(dev))))
        }
        None => return Ok(Parsed::NotAnEvent),
    };
    let time_ns = parse_time_ns(time, NS_PER_S).map_err(|m| ("time", m))?;
    let action = f
        .next()
        .ok_or_else(|| ("action", "missing field".to_string()))?;
    let action = match action {
        b"D" => Action::Issue,
        b"C" => Action::Complete,
        b"R" => Action::Requeue,
        a if ACTIONS.contains(&a) || a == b"m" => return Ok(Parsed::Other),
        a => return Err(("action", format!("`{}` is not a blkparse action", show(a)))),
    };
    let rwbs = f
        .next()
        .ok_or_else(|| ("rwbs", "missing field".to_string()))?;
    // blkparse's RWBS letters: Flush/FUA, Write, Read, Discard, sEcure
    // erase, None, Sync, Meta, readAhead, Barrier.
    if let Some(&bad) = rwbs.iter().find(|b| !b"FWRDENSMAB".contains(b)) {
        return Err((
            "rwbs",
            format!(
                "`{}` has `{}`, not an RWBS letter (F W R D E N S M A B)",
                show(rwbs),
                show(&[bad])
            ),
        ));
    }
    let op = if rwbs.contains(&b'W') {
        Some(Op::Write)
    } else if rwbs.contains(&b'R') {
        Some(Op::Read)
    } else {
        None // N, discard, secure erase, flush: no data transferred
    };
    let mut ev = Event {
        action,
        device,
        time_ns,
        sector: 0,
        data: None,
        line: 0,
    };
    // Flushes print no sector, or `sector [proc]` without `+ n`.
    let sector = match f.next() {
        None => return Ok(Parsed::Event(ev)),
        Some(s) if s.starts_with(b"[") => return Ok(Parsed::Event(ev)),
        Some(s) => s,
    };
    ev.sector = parse_u64(sector).map_err(|m| ("sector", m))?;
    if ev.sector.checked_mul(SECTOR_BYTES).is_none() {
        return Err(("sector", format!("{} overflows a byte offset", ev.sector)));
    }
    match f.next() {
        None => return Ok(Parsed::Event(ev)),
        Some(p) if p.starts_with(b"[") => return Ok(Parsed::Event(ev)),
        Some(b"+") => {}
        Some(p) => {
            return Err((
                "+",
                format!("`{}` where `+ sectors` or `[process]` belongs", show(p)),
            ))
        }
    }
    let sectors = f
        .next()
        .ok_or_else(|| ("sectors", "missing field after `+`".to_string()))?;
    let n = parse_u64(sectors).map_err(|m| ("sectors", m))?;
    let size = n
        .checked_mul(SECTOR_BYTES)
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(|| {
            (
                "sectors",
                format!("{n} sectors is too large for one request"),
            )
        })?;
    if let (Some(op), true) = (op, size > 0) {
        ev.data = Some((size, op));
    }
    Ok(Parsed::Event(ev))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &[u8]) -> Event {
        match parse_event(line) {
            Ok(Parsed::Event(ev)) => ev,
            other => panic!("{}: {other:?}", show(line)),
        }
    }

    #[test]
    fn parses_issue_and_completion() {
        let d = event(b"  8,16   5        6     0.000031865 18615  D   R 1444645666 + 256 [java]");
        assert_eq!(d.action, Action::Issue);
        assert_eq!(d.device, (8 << 20) | 16);
        assert_eq!(d.time_ns, 31_865);
        assert_eq!(d.sector, 1_444_645_666);
        assert_eq!(d.data, Some((256 * 512, Op::Read)));
        let c = event(b"  8,16   1        1     0.000656835     0  C  WS 7 + 8 [0]");
        assert_eq!(c.action, Action::Complete);
        assert_eq!(c.data, Some((4096, Op::Write)));
    }

    #[test]
    fn data_less_and_other_events() {
        // A flush completion prints no `+ n`.
        let f = event(b"  8,16   5      324     3.832956675     0  C  WS 1950885322 [0]");
        assert_eq!(f.data, None);
        assert_eq!(
            event(b"  8,16   1        2     0.002000500   200  D FWS [db]").data,
            None
        );
        let n = event(b"  8,0    1        2     0.000000100  1  D   N 0 + 0 [x]");
        assert_eq!(n.data, None);
        let discard = event(b"8,0 1 2 0.1 1 D DS 80 + 8 [x]");
        assert_eq!(discard.data, None);
        for other in [
            &b"  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]"[..],
            b"  8,16   5        0     0.000012990     0  m   N cfq18615S / insert_request",
            b"  8,16   5        3     0.000012990     0  UT   N [java] 1",
        ] {
            assert!(
                matches!(parse_event(other), Ok(Parsed::Other)),
                "{}",
                show(other)
            );
        }
        for summary in [
            &b"CPU0 (8,16):"[..],
            b" Reads Queued:          10,       40KiB\t Writes Queued:           0,        0KiB",
            b"Total (8,16):",
            b"Events (8,16): 6,123 entries",
        ] {
            assert!(
                matches!(parse_event(summary), Ok(Parsed::NotAnEvent)),
                "{}",
                show(summary)
            );
        }
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| match parse_event(l) {
            Err((field, _)) => field,
            other => panic!("{}: {other:?}", show(l)),
        };
        assert_eq!(bad(b"8,0 1 2 x.5 1 D W 8 + 8 [a]"), "time");
        assert_eq!(bad(b"8,0 1 2 -0.5 1 D W 8 + 8 [a]"), "time");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D W 8 + z [a]"), "sectors");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D W 8 + [a]"), "sectors");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D W q + 8 [a]"), "sector");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D"), "rwbs");
        assert_eq!(bad(b"5000,0 1 2 0.5 1 D W 8 + 8 [a]"), "device");
        // Corrupt fields: device, action, RWBS and `+`.
        assert_eq!(bad(b"8;0 1 2 0.5 1 D W 8 + 8 [a]"), "device");
        assert_eq!(bad(b"8,0 1 2 0.5 1 Z W 8 + 8 [a]"), "action");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D Q 8 + 8 [a]"), "rwbs");
        assert_eq!(bad(b"8,0 1 2 0.5 1 C W 8 - 8 [a]"), "+");
        assert_eq!(bad(b"8,0 1 2"), "action");
    }

    fn read_with(text: &str, skip_bad: bool) -> crate::Result<crate::trace::Trace> {
        let opts = crate::trace::ReadOptions {
            format: Some(super::super::Format::Blkparse),
            skip_bad,
            ..Default::default()
        };
        crate::trace::read_from(&mut text.as_bytes(), std::path::Path::new("t"), &opts)
    }

    fn read_text(text: &str) -> crate::trace::Trace {
        read_with(text, false).unwrap()
    }

    #[test]
    fn a_long_outstanding_issue_still_completes() {
        // Sector 1 is issued first and completes only after 70 000 other
        // requests; then sector 2 is issued and never completes.
        let n = 70_000u64;
        let mut text = String::from("8,0 0 1 0.000000001 1 D R 1 + 8 [a]\n");
        for i in 0..n {
            let t = 2 + 2 * i; // ns
            text += &format!("8,0 0 1 0.{t:09} 1 D W {} + 8 [a]\n", 100 + i);
            text += &format!("8,0 0 1 0.{:09} 1 C W {} + 8 [0]\n", t + 1, 100 + i);
        }
        text += "8,0 0 1 0.900000000 1 D R 2 + 8 [a]\n";
        text += "8,0 0 1 0.999999999 1 C R 1 + 8 [0]\n";
        let t = read_text(&text);
        assert_eq!(t.len() as u64, n + 1);
        assert_eq!(t.arrival_ns()[0], 0);
        assert_eq!(t.offset_bytes()[0], 512);
        assert_eq!(t.completion_ns().unwrap()[0], 999_999_998);
        assert_eq!(t.report().ignored, 1); // sector 2 never completed
        assert_eq!(t.report().ignored_by_reason[NEVER_COMPLETED], 1);
        // The file is in time order: nothing was reordered.
        assert_eq!(t.report().reordered, 0);
    }

    #[test]
    fn concurrent_requests_to_one_sector_both_survive() {
        // `D D C C` on one sector once kept one request. FIFO: the
        // first completion is the first issue's.
        let t = read_text(
            "8,0 0 1 0.000001000 1 D R 64 + 8 [a]\n\
             8,0 0 2 0.000002000 1 D R 64 + 8 [a]\n\
             8,0 0 3 0.000005000 0 C R 64 + 8 [0]\n\
             8,0 0 4 0.000009000 0 C R 64 + 8 [0]\n",
        );
        assert_eq!(t.arrival_ns(), &[0, 1000]);
        assert_eq!(t.completion_ns().unwrap(), &[4000, 8000]);
        assert_eq!(t.offset_bytes(), &[64 * 512, 64 * 512]);
        assert_eq!(t.report().ignored, 0);
    }

    #[test]
    fn lines_out_of_time_order_are_sorted_not_dropped() {
        // A completion listed before its issue, and an issue listed after
        // a later one: three requests, all kept, two lines late.
        let t = read_text(
            "8,0 0 1 0.000005000 0 C W 8 + 8 [0]\n\
             8,0 0 2 0.000003000 1 D R 16 + 8 [a]\n\
             8,0 0 3 0.000001000 1 D W 8 + 8 [a]\n\
             8,0 0 4 0.000004000 0 C R 16 + 8 [0]\n\
             8,0 0 5 0.000006000 1 D R 24 + 8 [a]\n\
             8,0 0 6 0.000007000 0 C R 24 + 8 [0]\n",
        );
        assert_eq!(t.len(), 3);
        assert_eq!(t.arrival_ns(), &[0, 2000, 5000]);
        assert_eq!(t.completion_ns().unwrap(), &[4000, 3000, 6000]);
        assert_eq!(t.op(), &[Op::Write, Op::Read, Op::Read]);
        // Lines 2, 3 and 4 are earlier than line 1's time.
        assert_eq!(t.report().reordered, 3);
        assert_eq!(t.report().ignored, 0);
    }

    #[test]
    fn every_drop_is_counted_by_reason() {
        let text = "8,0 0 1 0.000001000 1 Q R 8 + 8 [a]\n\
                    8,0 0 2 0.000002000 1 D R 8 + 8 [a]\n\
                    8,0 0 3 0.000003000 1 R R 8 + 8 [a]\n\
                    8,0 0 4 0.000004000 1 D R 8 + 8 [a]\n\
                    8,0 0 5 0.000005000 0 C R 8 + 8 [0]\n\
                    8,0 0 6 0.000006000 0 C R 99 + 8 [0]\n\
                    8,0 0 7 0.000007000 1 D FWS [a]\n\
                    8,0 0 8 0.000008000 1 D W 50 + 8 [a]\n\
                    CPU0 (8,0):\n";
        let t = read_text(text);
        assert_eq!(t.len(), 1);
        let r = t.report();
        let want: [(&str, u64); 7] = [
            (OTHER_ACTION, 1),
            (REQUEUE, 1),
            (REQUEUED_ISSUE, 1),
            (UNMATCHED_COMPLETION, 1),
            (NO_DATA, 1),
            (NEVER_COMPLETED, 1),
            (NOT_AN_EVENT, 1),
        ];
        for (reason, n) in want {
            assert_eq!(r.ignored_by_reason.get(reason), Some(&n), "{reason}");
        }
        assert_eq!(r.ignored, 7);
    }

    #[test]
    fn a_corrupt_event_is_an_error_or_a_counted_skip() {
        let text = "8,0 0 1 0.000001000 1 D R 8 + 8 [a]\n\
                    8,0 0 2 0.000002000 1 D R 16 x 8 [a]\n\
                    8,0 0 3 0.000003000 0 C R 8 + 8 [0]\n";
        let e = read_with(text, false).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("field `+`"), "{e}");
        let t = read_with(text, true).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t.report().skipped, 1);
    }

    #[test]
    fn recognises_event_lines() {
        assert!(looks_like(b"  8,16   5        1     0.000000000 18615  A   R 1444645666 + 256 <- (8,17) 1444645632"));
        assert!(!looks_like(b"CPU0 (8,16):"));
        assert!(!looks_like(b"0.000 0 11562803200 4096 1"));
    }
}
