//! `fallow record`: a block trace of one device from the kernel's block
//! tracepoints, written in the MSR Cambridge CSV format that `fallow
//! analyze` reads, so users can characterise their own disks.
//!
//! blktrace needs the `BLKTRACESETUP` ioctl, which containers and some
//! hardened kernels block; the `block_rq_issue` and `block_rq_complete`
//! tracepoints work through tracefs wherever root can mount it. The
//! recorder works in a private trace instance (`instances/fallow-<pid>`)
//! with a `dev ==` filter, so other users of tracefs are undisturbed and
//! only the chosen device's events are buffered.
//!
//! The tour:
//! - [`Device::resolve`]: `/dev/sda` or `sda` to major:minor.
//! - [`Recorder::start`]: set up the instance and turn the events on;
//!   [`Recorder::run`] reads `trace_pipe` until a duration passes or a stop
//!   flag is set, and pairs each issue with its completion by (device,
//!   sector) into a [`Recording`].
//! - [`write_msr`]: the recording as MSR CSV (Timestamp and ResponseTime in
//!   Windows 100 ns ticks, Offset and Size in bytes).
//!
//! ```no_run
//! use fallow_record::{Device, Recorder, write_msr};
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! let dev = Device::resolve("/dev/loop0")?;
//! let rec = Recorder::start(&dev)?.run(Some(Duration::from_secs(10)), &AtomicBool::new(false))?;
//! let mut out = std::fs::File::create("trace.csv").unwrap();
//! write_msr(&rec, "myhost", 0, &mut out).unwrap();
//! # Ok::<(), fallow_record::Error>(())
//! ```

#![deny(missing_docs)]

mod device;
mod error;
mod msr;
pub mod parse;
pub mod tracefs;

pub use device::Device;
pub use error::{Error, Result};
pub use msr::{write_msr, FILETIME_UNIX_EPOCH_TICKS};

use parse::{Dir, Kind, Line};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Request direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// One request: issue to the driver until completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Issue time, ns since the Unix epoch (the trace's monotonic clock
    /// shifted by the wall-clock offset taken at start).
    pub issue_unix_ns: u64,
    /// Completion minus issue, ns.
    pub latency_ns: u64,
    /// Byte offset on the device.
    pub offset_bytes: u64,
    /// Bytes.
    pub size_bytes: u32,
    /// Direction.
    pub op: Op,
    /// 0, or the negative errno the request completed with.
    pub error: i32,
}

/// What a recording holds, and what it had to leave out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// The device recorded.
    pub device: String,
    /// Completed reads and writes, by issue time.
    pub requests: Vec<Request>,
    /// Issued but not completed before the end (in flight at the stop).
    pub unfinished: u64,
    /// Completions whose issue came before the start.
    pub unmatched_completions: u64,
    /// Discards, flushes without data and other requests that are neither
    /// reads nor writes.
    pub skipped_other: u64,
    /// Events the ring buffer dropped (a busy device outran the reader).
    pub lost_events: u64,
    /// Recording time, ns.
    pub duration_ns: u64,
}

/// Per-CPU ring buffer of the instance: 8 MiB holds ~100 000 events, half
/// a second of a very busy NVMe device, far more than the reader needs
/// between two reads.
const BUFFER_KB: u32 = 8192;

/// How long to keep reading after the stop for completions of requests
/// already issued; a disk's worst case is well under this.
const GRACE: Duration = Duration::from_millis(500);

/// A started recording of one device.
#[derive(Debug)]
pub struct Recorder {
    device: Device,
    pipe: File,
    pipe_path: PathBuf,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC at start, ns.
    wall_offset_ns: i128,
    /// CLOCK_MONOTONIC when the events were turned on, ns.
    start_mono_ns: u64,
    // dropped last: the instance goes away after the pipe is closed
    instance: tracefs::Instance,
}

impl Recorder {
    /// Check permissions, find tracefs, create the instance, filter and
    /// enable the two block events. Recording has begun when this returns.
    pub fn start(device: &Device) -> Result<Recorder> {
        if !rustix::process::geteuid().is_root() {
            return Err(Error::NotRoot);
        }
        let root = tracefs::root()?;
        let events = root.join("events/block/block_rq_issue");
        if !events.is_dir() {
            return Err(Error::NoBlockEvents { path: events });
        }
        tracefs::remove_stale(&root);
        let instance = tracefs::Instance::create(&root, &format!("fallow-{}", std::process::id()))?;
        instance.set("tracing_on", "0")?;
        instance.set("buffer_size_kb", &BUFFER_KB.to_string())?;
        // Monotonic across CPUs (the default `local` clock is per CPU, and
        // a request often completes on another CPU than it was issued on).
        instance.set("trace_clock", "mono")?;
        let filter = format!("dev == {}", device.trace_dev());
        for ev in ["block_rq_issue", "block_rq_complete"] {
            instance.set(&format!("events/block/{ev}/filter"), &filter)?;
            instance.set(&format!("events/block/{ev}/enable"), "1")?;
        }
        let pipe_path = instance.dir().join("trace_pipe");
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(&pipe_path)
            .map_err(|source| Error::Tracefs {
                path: pipe_path.clone(),
                source,
            })?;
        let wall_offset_ns = clock_ns(rustix::time::ClockId::Realtime) as i128
            - clock_ns(rustix::time::ClockId::Monotonic) as i128;
        let start_mono_ns = clock_ns(rustix::time::ClockId::Monotonic);
        instance.set("tracing_on", "1")?;
        Ok(Recorder {
            start_mono_ns,
            device: device.clone(),
            pipe,
            pipe_path,
            wall_offset_ns,
            instance,
        })
    }

    /// Read events until `duration` has passed (if given) or `stop` is set,
    /// then for a short grace period collect completions of requests issued
    /// before the end, and return the paired requests. The instance is
    /// removed when the recorder is dropped.
    pub fn run(mut self, duration: Option<Duration>, stop: &AtomicBool) -> Result<Recording> {
        let t0 = Instant::now();
        let start_mono = self.start_mono_ns;
        let mut pairer = Pairer::default();
        let mut buf = vec![0u8; 1 << 20];
        let mut pending = Vec::new();
        let mut stop_mono: Option<(u64, Instant)> = None;
        loop {
            let got = self.read_some(&mut buf, &mut pending, &mut pairer)?;
            let now = Instant::now();
            if stop_mono.is_none()
                && (stop.load(Ordering::Relaxed) || duration.is_some_and(|d| now - t0 >= d))
            {
                stop_mono = Some((clock_ns(rustix::time::ClockId::Monotonic), now));
            }
            if let Some((_, at)) = stop_mono {
                if now - at >= GRACE || pairer.in_flight() == 0 {
                    break;
                }
            }
            if !got {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.instance.set("tracing_on", "0")?;
        while self.read_some(&mut buf, &mut pending, &mut pairer)? {}
        let (end_mono, _) = stop_mono.expect("loop leaves only after the stop");
        let mut rec = pairer.finish(start_mono, end_mono, self.wall_offset_ns);
        rec.device = self.device.name.clone();
        rec.duration_ns = end_mono.saturating_sub(start_mono);
        Ok(rec)
    }

    /// Read what `trace_pipe` has; `false` when it had nothing.
    fn read_some(
        &mut self,
        buf: &mut [u8],
        pending: &mut Vec<u8>,
        pairer: &mut Pairer,
    ) -> Result<bool> {
        match self.pipe.read(buf) {
            Ok(0) => Ok(false),
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                let last_nl = pending.iter().rposition(|&b| b == b'\n');
                if let Some(end) = last_nl {
                    for line in pending[..end].split(|&b| b == b'\n') {
                        pairer.feed(parse::parse_line(&String::from_utf8_lossy(line)));
                    }
                    pending.drain(..=end);
                }
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(true),
            Err(source) => Err(Error::Tracefs {
                path: self.pipe_path.clone(),
                source,
            }),
        }
    }
}

fn clock_ns(id: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(id);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// Issues waiting for their completions, by (device, sector).
#[derive(Debug, Default)]
struct Pairer {
    waiting: HashMap<(u32, u32, u64), VecDeque<parse::Event>>,
    done: Vec<(parse::Event, parse::Event)>,
    unmatched_completions: u64,
    skipped_other: u64,
    lost_events: u64,
}

impl Pairer {
    fn feed(&mut self, line: Line) {
        let e = match line {
            Line::Event(e) => e,
            Line::Lost(n) => {
                self.lost_events += n;
                return;
            }
            Line::Other => return,
        };
        if e.dir == Dir::Other || e.nr_sectors == 0 {
            if e.kind == Kind::Issue {
                self.skipped_other += 1;
            }
            return;
        }
        let key = (e.major, e.minor, e.sector);
        match e.kind {
            Kind::Issue => self.waiting.entry(key).or_default().push_back(e),
            Kind::Complete => match self.waiting.get_mut(&key).and_then(VecDeque::pop_front) {
                Some(issue) => self.done.push((issue, e)),
                None => self.unmatched_completions += 1,
            },
        }
    }

    fn in_flight(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }

    /// Requests issued in `[start, end]` (monotonic ns), on the wall clock.
    fn finish(self, start_mono: u64, end_mono: u64, wall_offset_ns: i128) -> Recording {
        let in_window = |ts: u64| ts >= start_mono && ts <= end_mono;
        let mut requests: Vec<Request> = self
            .done
            .iter()
            .filter(|(i, _)| in_window(i.ts_ns))
            .map(|(i, c)| Request {
                issue_unix_ns: (i.ts_ns as i128 + wall_offset_ns).max(0) as u64,
                latency_ns: c.ts_ns.saturating_sub(i.ts_ns),
                offset_bytes: i.sector * 512,
                size_bytes: i.nr_sectors.saturating_mul(512),
                op: if i.dir == Dir::Write {
                    Op::Write
                } else {
                    Op::Read
                },
                error: c.error,
            })
            .collect();
        requests.sort_by_key(|r| (r.issue_unix_ns, r.offset_bytes));
        let unfinished = self
            .waiting
            .values()
            .flatten()
            .filter(|e| in_window(e.ts_ns))
            .count() as u64;
        Recording {
            device: String::new(),
            requests,
            unfinished,
            unmatched_completions: self.unmatched_completions,
            skipped_other: self.skipped_other,
            lost_events: self.lost_events,
            duration_ns: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, ts_ns: u64, sector: u64, dir: Dir) -> Line {
        Line::Event(parse::Event {
            kind,
            ts_ns,
            major: 7,
            minor: 0,
            dir,
            sector,
            nr_sectors: 8,
            error: 0,
        })
    }

    #[test]
    fn pairs_by_sector_in_issue_order() {
        let mut p = Pairer::default();
        p.feed(ev(Kind::Complete, 5, 0, Dir::Read)); // issued before the start
        p.feed(ev(Kind::Issue, 10, 100, Dir::Read));
        p.feed(ev(Kind::Issue, 12, 200, Dir::Write));
        p.feed(ev(Kind::Issue, 14, 100, Dir::Read)); // same sector again
        p.feed(ev(Kind::Complete, 20, 200, Dir::Write));
        p.feed(ev(Kind::Complete, 25, 100, Dir::Read));
        p.feed(ev(Kind::Issue, 30, 300, Dir::Other)); // a discard
        p.feed(ev(Kind::Issue, 40, 400, Dir::Read)); // never completes
        p.feed(Line::Lost(3));
        assert_eq!(p.in_flight(), 2);
        let r = p.finish(0, 100, 1_000);
        let got: Vec<_> = r
            .requests
            .iter()
            .map(|q| (q.issue_unix_ns, q.latency_ns, q.offset_bytes, q.op))
            .collect();
        assert_eq!(
            got,
            [
                (1_010, 15, 51_200, Op::Read), // the first issue at 100 gets the first completion
                (1_012, 8, 102_400, Op::Write),
            ]
        );
        assert_eq!(
            (
                r.unfinished,
                r.unmatched_completions,
                r.skipped_other,
                r.lost_events
            ),
            (2, 1, 1, 3)
        );
    }
}
