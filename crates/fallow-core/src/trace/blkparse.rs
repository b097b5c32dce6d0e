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
//! Everything else is ignored and counted in the report's `ignored`: lines
//! that are not events (per-CPU summaries at the end), other actions (Q, G,
//! I, M, A, U, P, m messages…), issues that never complete within the trace
//! and completions whose issue is not in it.
//!
//! Requests are handed on in issue order through a small reorder window, so
//! an in-order trace is not reported as reordered although completions come
//! in a different order than issues.

use super::lines::{for_each_line, parse_time_ns, parse_u64, show, split_ws, trim};
use super::{Op, RawRequest, ReadContext};
use crate::error::{Location, Result};
use std::collections::{HashMap, VecDeque};
use std::io::BufRead;

const SECTOR_BYTES: u64 = 512;
const NS_PER_S: u64 = 1_000_000_000;
/// Issues waiting behind an older, still incomplete one before that one is
/// set aside, so a lost completion cannot make the window grow without end.
const WINDOW: usize = 1 << 16;

pub(crate) fn read(input: &mut dyn BufRead, ctx: &mut ReadContext<'_>) -> Result<()> {
    let mut window = Window::default();
    for_each_line(input, ctx, |ctx, line_no, line| {
        if trim(line).is_empty() {
            return Ok(());
        }
        let loc = Location::Line(line_no);
        match parse_event(line) {
            Ok(Some(ev)) => window.event(ctx, line_no, ev),
            Ok(None) => {
                ctx.report.ignored += 1;
                Ok(())
            }
            Err((field, msg)) => ctx.bad(loc, field, msg),
        }
    })?;
    window.finish(ctx)
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
    parse_dev(dev).is_some()
        && [cpu, seq, pid].iter().all(|x| parse_u64(x).is_ok())
        && time.contains(&b'.')
        && parse_time_ns(time, NS_PER_S).is_ok()
        && (1..=2).contains(&action.len())
        && action.iter().all(u8::is_ascii_alphabetic)
}

/// `maj,min` → `major << 20 | minor` (Linux `MKDEV`), if it is one.
fn parse_dev(field: &[u8]) -> Option<Result<u32, String>> {
    let comma = memchr::memchr(b',', field)?;
    let (maj, min) = (&field[..comma], &field[comma + 1..]);
    let maj = parse_u64(maj).ok()?;
    let min = parse_u64(min).ok()?;
    if maj >= 1 << 12 || min >= 1 << 20 {
        return Some(Err(format!(
            "`{}` does not fit Linux's 12-bit major, 20-bit minor numbering",
            show(field)
        )));
    }
    Some(Ok(((maj as u32) << 20) | min as u32))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Issue,
    Complete,
    Requeue,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    action: Action,
    device: u32,
    time_ns: u64,
    sector: u64,
    /// `None` when the event moves no data (ignored by the window).
    data: Option<(u32, Op)>,
}

type FieldError = (&'static str, String);

/// `Ok(None)` for lines that are not D/C/R events with a device.
fn parse_event(line: &[u8]) -> std::result::Result<Option<Event>, FieldError> {
    let mut f = split_ws(line, false);
    let (Some(dev), Some(_cpu), Some(_seq), Some(time), Some(_pid), Some(action)) =
        (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
    else {
        return Ok(None);
    };
    let action = match action {
        b"D" => Action::Issue,
        b"C" => Action::Complete,
        b"R" => Action::Requeue,
        _ => return Ok(None),
    };
    let Some(device) = parse_dev(dev) else {
        return Ok(None); // not an event line (a summary that happens to have a D)
    };
    let device = device.map_err(|m| ("device", m))?;
    let time_ns = parse_time_ns(time, NS_PER_S).map_err(|m| ("time", m))?;
    let rwbs = f
        .next()
        .ok_or_else(|| ("rwbs", "missing field".to_string()))?;
    let op = if rwbs.contains(&b'W') {
        Some(Op::Write)
    } else if rwbs.contains(&b'R') {
        Some(Op::Read)
    } else {
        None // N, discard, secure erase, flush: no data transferred
    };
    let (sector, plus, sectors) = (f.next(), f.next(), f.next());
    let mut ev = Event {
        action,
        device,
        time_ns,
        sector: 0,
        data: None,
    };
    // Without `sector + n` there is no data (flushes print `sector [err]`).
    let (Some(sector), Some(b"+"), Some(sectors)) = (sector, plus, sectors) else {
        return Ok(Some(ev));
    };
    ev.sector = parse_u64(sector).map_err(|m| ("sector", m))?;
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
    if ev.sector.checked_mul(SECTOR_BYTES).is_none() {
        return Err(("sector", format!("{} overflows a byte offset", ev.sector)));
    }
    if let (Some(op), true) = (op, size > 0) {
        ev.data = Some((size, op));
    }
    Ok(Some(ev))
}

enum Slot {
    /// Issued, not yet completed.
    Waiting(RawRequest),
    /// Completed (line of the C event, for messages).
    Done(RawRequest, u64),
    /// Requeued or issued again before completing.
    Dropped,
}

/// Pending issues in issue order; completed ones leave from the front.
#[derive(Default)]
struct Window {
    slots: VecDeque<Slot>,
    /// Absolute index of `slots[0]`.
    first: u64,
    /// (device, sector) → absolute index of its pending issue.
    by_key: HashMap<(u32, u64), u64>,
    /// Issues pushed out of the window while still waiting, by index.
    stragglers: HashMap<u64, RawRequest>,
}

impl Window {
    fn event(&mut self, ctx: &mut ReadContext<'_>, line_no: u64, ev: Event) -> Result<()> {
        let Some((size_bytes, op)) = ev.data else {
            ctx.report.ignored += 1;
            return Ok(());
        };
        let key = (ev.device, ev.sector);
        match ev.action {
            Action::Issue => {
                if self.by_key.contains_key(&key) {
                    self.drop_pending(ctx, key);
                }
                let idx = self.first + self.slots.len() as u64;
                self.by_key.insert(key, idx);
                self.slots.push_back(Slot::Waiting(RawRequest {
                    arrival_ns: ev.time_ns,
                    completion_ns: None,
                    offset_bytes: ev.sector * SECTOR_BYTES,
                    size_bytes,
                    op,
                    device: ev.device,
                }));
                if self.slots.len() > WINDOW {
                    self.set_aside_front();
                }
            }
            Action::Requeue => {
                ctx.report.ignored += 1;
                if self.by_key.contains_key(&key) {
                    self.drop_pending(ctx, key);
                }
            }
            Action::Complete => {
                let Some(idx) = self.by_key.remove(&key) else {
                    ctx.report.ignored += 1;
                    return Ok(());
                };
                if let Some(mut req) = self.stragglers.remove(&idx) {
                    req.completion_ns = Some(ev.time_ns);
                    return ctx.push(Location::Line(line_no), req);
                }
                if let Some(slot) = self.slot_mut(idx) {
                    if let Slot::Waiting(mut req) = *slot {
                        req.completion_ns = Some(ev.time_ns);
                        *slot = Slot::Done(req, line_no);
                    }
                }
            }
        }
        self.drain(ctx, false)
    }

    /// Forget the pending issue at `key` (requeued or issued again): its
    /// `D` event counts as ignored.
    fn drop_pending(&mut self, ctx: &mut ReadContext<'_>, key: (u32, u64)) {
        if let Some(idx) = self.by_key.remove(&key) {
            ctx.report.ignored += 1;
            if self.stragglers.remove(&idx).is_none() {
                if let Some(slot) = self.slot_mut(idx) {
                    *slot = Slot::Dropped;
                }
            }
        }
    }

    /// The slot of absolute index `idx`, if it is still in the window.
    fn slot_mut(&mut self, idx: u64) -> Option<&mut Slot> {
        let pos = usize::try_from(idx.checked_sub(self.first)?).ok()?;
        self.slots.get_mut(pos)
    }

    fn set_aside_front(&mut self) {
        if let Some(Slot::Waiting(req)) = self.slots.front() {
            self.stragglers.insert(self.first, *req);
            self.slots.pop_front();
            self.first += 1;
        }
    }

    /// Hand completed requests at the front to the builder; at the end
    /// (`all`), the ones still waiting never completed and are ignored.
    fn drain(&mut self, ctx: &mut ReadContext<'_>, all: bool) -> Result<()> {
        while let Some(front) = self.slots.front() {
            match front {
                Slot::Waiting(_) if !all => break,
                Slot::Waiting(_) => ctx.report.ignored += 1,
                Slot::Done(req, line) => {
                    let (req, line) = (*req, *line);
                    ctx.push(Location::Line(line), req)?;
                }
                Slot::Dropped => {}
            }
            self.slots.pop_front();
            self.first += 1;
        }
        Ok(())
    }

    fn finish(mut self, ctx: &mut ReadContext<'_>) -> Result<()> {
        self.drain(ctx, true)?;
        ctx.report.ignored += self.stragglers.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_issue_and_completion() {
        let d = parse_event(
            b"  8,16   5        6     0.000031865 18615  D   R 1444645666 + 256 [java]",
        )
        .unwrap()
        .unwrap();
        assert_eq!(d.action, Action::Issue);
        assert_eq!(d.device, (8 << 20) | 16);
        assert_eq!(d.time_ns, 31_865);
        assert_eq!(d.sector, 1_444_645_666);
        assert_eq!(d.data, Some((256 * 512, Op::Read)));
        let c = parse_event(b"  8,16   1        1     0.000656835     0  C  WS 7 + 8 [0]")
            .unwrap()
            .unwrap();
        assert_eq!(c.action, Action::Complete);
        assert_eq!(c.data, Some((4096, Op::Write)));
    }

    #[test]
    fn data_less_and_other_events() {
        // A flush completion prints no `+ n`.
        let f = parse_event(b"  8,16   5      324     3.832956675     0  C  WS 1950885322 [0]")
            .unwrap()
            .unwrap();
        assert_eq!(f.data, None);
        let n = parse_event(b"  8,0    1        2     0.000000100  1  D   N 0 + 0 [x]")
            .unwrap()
            .unwrap();
        assert_eq!(n.data, None);
        let discard = parse_event(b"8,0 1 2 0.1 1 D DS 80 + 8 [x]")
            .unwrap()
            .unwrap();
        assert_eq!(discard.data, None);
        for other in [
            &b"  8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]"[..],
            b"  8,16   5        0     0.000012990     0  m   N cfq18615S / insert_request",
            b"CPU0 (8,16):",
            b" Reads Queued:          10,       40KiB\t Writes Queued:           0,        0KiB",
            b"Total (8,16):",
        ] {
            assert!(parse_event(other).unwrap().is_none(), "{}", show(other));
        }
    }

    #[test]
    fn names_the_bad_field() {
        let bad = |l: &[u8]| parse_event(l).unwrap_err().0;
        assert_eq!(bad(b"8,0 1 2 x.5 1 D W 8 + 8 [a]"), "time");
        assert_eq!(bad(b"8,0 1 2 -0.5 1 D W 8 + 8 [a]"), "time");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D W 8 + z [a]"), "sectors");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D W q + 8 [a]"), "sector");
        assert_eq!(bad(b"8,0 1 2 0.5 1 D"), "rwbs");
        assert_eq!(bad(b"5000,0 1 2 0.5 1 D W 8 + 8 [a]"), "device");
    }

    fn read_text(text: &str) -> crate::trace::Trace {
        let opts = crate::trace::ReadOptions {
            format: Some(super::super::Format::Blkparse),
            ..Default::default()
        };
        crate::trace::read_from(&mut text.as_bytes(), std::path::Path::new("t"), &opts).unwrap()
    }

    #[test]
    fn a_long_outstanding_issue_leaves_the_window_but_still_completes() {
        // Sector 1 is issued first and completes only after WINDOW + 10
        // other requests, so it is set aside as a straggler; then sector 2
        // is issued and never completes.
        let n = WINDOW as u64 + 10;
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
        assert_eq!(t.report().reordered, 1); // the straggler came out late
    }

    #[test]
    fn recognises_event_lines() {
        assert!(looks_like(b"  8,16   5        1     0.000000000 18615  A   R 1444645666 + 256 <- (8,17) 1444645632"));
        assert!(!looks_like(b"CPU0 (8,16):"));
        assert!(!looks_like(b"0.000 0 11562803200 4096 1"));
    }
}
