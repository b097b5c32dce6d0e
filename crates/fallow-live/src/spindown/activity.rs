//! What the daemon learns of a disk's I/O: an [`ActivitySource`].
//! [`StatPoll`] reads the disk's `stat` counters (sysfs, or the emulated
//! disk's `MOUNTPOINT/stat`) every poll interval: it sees that I/O
//! happened and how much is in flight, but not who issued it.
//! [`super::traced::TracedSource`], on the block tracepoints (the
//! event-driven monitor, docs/monitor.md), wakes on I/O and names the
//! process and cgroup of each request in [`Observation::issuers`]; it is
//! used for block devices wherever the monitor can run (the emulated
//! disk's `stat` file has no tracepoints: a loop device over it does).

use crate::error::Result;
use crate::monitor::stat::{StatReader, StatSource};
use crate::monitor::DiskStat;
use serde::Serialize;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Who issued a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Issuer {
    /// Process id.
    pub pid: u32,
    /// Command name (`comm`, 15 characters at most).
    pub comm: String,
    /// cgroup v2 path, when known.
    pub cgroup: Option<String>,
}

/// What one look at the disk found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observation {
    /// Requests completed or started since the previous look.
    pub io: bool,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Busy time since the previous look, ns (from `io_ticks`; 0 when unknown).
    pub busy_ns: u64,
    /// Who issued the requests since the previous look, when the source knows.
    pub issuers: Vec<Issuer>,
}

/// A disk's I/O as the daemon sees it.
pub trait ActivitySource: Send {
    /// What it reads, for messages.
    fn describe(&self) -> String;

    /// Wait up to `wait_ns` (a poller waits it out) and report what
    /// happened since the previous call.
    fn next(&mut self, wait_ns: u64) -> Result<Observation>;

    /// Requests in flight now (checked again right before a spin-down).
    fn in_flight(&mut self) -> Result<u64>;

    /// Why this source cannot name the issuer of a request, if it cannot.
    fn attribution_gap(&self) -> Option<&'static str>;

    /// Descriptors that turn readable (`POLLIN`) when the disk has I/O to
    /// report: an event-driven source's. The daemon sleeps on them until
    /// its next deadline and then calls [`ActivitySource::next`] with no
    /// wait. Empty (the default) for a source that must be polled: the
    /// daemon reads it every poll interval.
    fn wait_fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
}

/// Polls a `stat`-format file.
#[derive(Debug)]
pub struct StatPoll {
    reader: StatReader,
    last: Option<DiskStat>,
}

fn total_ios(s: &DiskStat) -> u64 {
    s.read_ios + s.write_ios + s.discard_ios + s.flush_ios
}

impl StatPoll {
    /// Poll `source`; the first call to [`ActivitySource::next`] only
    /// sets the baseline (reports no I/O unless requests are in flight).
    pub fn new(source: &StatSource) -> Result<StatPoll> {
        let mut reader = source.open()?;
        let first = reader.read()?;
        Ok(StatPoll {
            reader,
            last: Some(first.stat),
        })
    }

    fn sample(&mut self) -> Result<(DiskStat, u64)> {
        let s = self.reader.read()?;
        let in_flight = s.inflight.map_or(s.stat.in_flight, |f| f.reads + f.writes);
        Ok((s.stat, in_flight))
    }
}

impl ActivitySource for StatPoll {
    fn describe(&self) -> String {
        format!("{} (polled)", self.reader.source().stat_path.display())
    }

    fn next(&mut self, wait_ns: u64) -> Result<Observation> {
        if wait_ns > 0 {
            std::thread::sleep(Duration::from_nanos(wait_ns));
        }
        let (stat, in_flight) = self.sample()?;
        let (io, busy_ns) = match &self.last {
            Some(prev) => (
                total_ios(prev) != total_ios(&stat),
                stat.io_ticks_ms.saturating_sub(prev.io_ticks_ms) * 1_000_000,
            ),
            None => (false, 0),
        };
        self.last = Some(stat);
        Ok(Observation {
            io,
            in_flight,
            busy_ns,
            issuers: Vec::new(),
        })
    }

    fn in_flight(&mut self) -> Result<u64> {
        Ok(self.sample()?.1)
    }

    fn attribution_gap(&self) -> Option<&'static str> {
        Some("sysfs counters name no process (the block-tracepoint monitor does)")
    }
}
