//! Counters in the format of `/sys/block/<dev>/stat`, and the thread that
//! publishes them to a file.
//!
//! The kernel's format (Documentation/block/stat.rst) is 17 whitespace-
//! separated decimal fields: read I/Os, read merges, read sectors, read
//! ticks (ms); the same four for writes; in_flight, io_ticks (ms with at
//! least one request in flight), time_in_queue (ms, the sum of all
//! completed requests' times, as kernels since 5.0 compute it); the four
//! discard fields; flush I/Os and flush ticks. The emulator never merges
//! and has no discards, so those fields stay 0. A monitor written for
//! sysfs reads the file unchanged.

use crate::error::{Error, Result};
use fallow_core::outpath::Atomic;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Number of fields in a `/sys/block/<dev>/stat` line.
pub const STAT_FIELDS: usize = 17;

/// A snapshot of the emulated disk's counters, in nanoseconds; printed in
/// milliseconds as sysfs does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Reads completed (failed ones included, as the kernel counts them).
    pub read_ios: u64,
    /// 512-byte sectors read.
    pub read_sectors: u64,
    /// Time reads spent from arrival to completion, summed, ns.
    pub read_ns: u64,
    /// Writes completed.
    pub write_ios: u64,
    /// 512-byte sectors written.
    pub write_sectors: u64,
    /// Time writes spent from arrival to completion, summed, ns.
    pub write_ns: u64,
    /// Flushes (fsync) completed.
    pub flush_ios: u64,
    /// Time flushes spent, summed, ns.
    pub flush_ns: u64,
    /// Requests arrived and not yet completed.
    pub in_flight: u64,
    /// Time with at least one request in flight, ns.
    pub io_ns: u64,
}

impl DiskStats {
    /// The 17 sysfs fields, times in whole milliseconds.
    pub fn fields(&self) -> [u64; STAT_FIELDS] {
        let ms = |ns: u64| ns / 1_000_000;
        [
            self.read_ios,
            0,
            self.read_sectors,
            ms(self.read_ns),
            self.write_ios,
            0,
            self.write_sectors,
            ms(self.write_ns),
            self.in_flight,
            ms(self.io_ns),
            ms(self.read_ns + self.write_ns + self.flush_ns),
            0,
            0,
            0,
            0,
            self.flush_ios,
            ms(self.flush_ns),
        ]
    }

    /// One line as sysfs prints it: right-aligned fields, newline-terminated.
    pub fn to_stat_line(&self) -> String {
        let mut s = String::with_capacity(STAT_FIELDS * 9);
        for v in self.fields() {
            s.push_str(&format!("{v:>8} "));
        }
        s.pop();
        s.push('\n');
        s
    }
}

/// Live counters: updated by the server, read by snapshots and the publisher.
#[derive(Debug)]
pub(crate) struct Counters {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    stats: DiskStats,
    /// When the current stretch with requests in flight began.
    busy_since: Option<Instant>,
    /// Bumped on every change, so the publisher knows when to rewrite.
    generation: u64,
    stop: bool,
}

/// What a completed request was, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Write,
    Flush,
}

impl Counters {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Counters {
            state: Mutex::new(State {
                stats: DiskStats::default(),
                busy_since: None,
                generation: 0,
                stop: false,
            }),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere cannot leave the counters inconsistent (each
        // update is a few additions), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn arrive(&self, now: Instant) {
        let mut s = self.lock();
        if s.stats.in_flight == 0 {
            s.busy_since = Some(now);
        }
        s.stats.in_flight += 1;
        s.generation += 1;
        drop(s);
        self.changed.notify_all();
    }

    pub(crate) fn complete(&self, kind: Kind, bytes: u64, arrival: Instant, now: Instant) {
        let ns = now.saturating_duration_since(arrival).as_nanos() as u64;
        let sectors = bytes.div_ceil(crate::fail::SECTOR_BYTES);
        let mut s = self.lock();
        let st = &mut s.stats;
        match kind {
            Kind::Read => {
                st.read_ios += 1;
                st.read_sectors += sectors;
                st.read_ns += ns;
            }
            Kind::Write => {
                st.write_ios += 1;
                st.write_sectors += sectors;
                st.write_ns += ns;
            }
            Kind::Flush => {
                st.flush_ios += 1;
                st.flush_ns += ns;
            }
        }
        st.in_flight = st.in_flight.saturating_sub(1);
        if st.in_flight == 0 {
            if let Some(t) = s.busy_since.take() {
                s.stats.io_ns += now.saturating_duration_since(t).as_nanos() as u64;
            }
        }
        s.generation += 1;
        drop(s);
        self.changed.notify_all();
    }

    /// The counters now, counting the current busy stretch up to now.
    pub(crate) fn snapshot(&self) -> DiskStats {
        let s = self.lock();
        Self::snapshot_of(&s, Instant::now())
    }

    fn snapshot_of(s: &State, now: Instant) -> DiskStats {
        let mut st = s.stats;
        if let Some(t) = s.busy_since {
            st.io_ns += now.saturating_duration_since(t).as_nanos() as u64;
        }
        st
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
}

/// Shortest time between two rewrites of the stat file: a monitor samples
/// at about this rate, and renaming a file per request would cost more
/// than it tells.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The thread that rewrites the stat file after each change, at most once
/// per millisecond; while requests are in flight it keeps rewriting, since
/// io_ticks grows.
#[derive(Debug)]
pub(crate) struct Publisher {
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Write the file once (so it exists when the mount is announced), then
    /// start the thread.
    pub(crate) fn start(counters: Arc<Counters>, path: PathBuf) -> Result<Self> {
        write_atomically(&path, &counters.snapshot())?;
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("fallow-emu-stat".into())
            .spawn(move || publish(&c, &path))
            .map_err(|source| Error::StatFile {
                path: PathBuf::from("(thread)"),
                source,
            })?;
        Ok(Publisher {
            counters,
            thread: Some(thread),
        })
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.counters.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn publish(counters: &Counters, path: &Path) {
    let mut written_gen = 0;
    loop {
        let snap = {
            let mut s = counters.lock();
            while !s.stop && s.generation == written_gen && s.stats.in_flight == 0 {
                s = counters.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            if s.stop {
                let last = Counters::snapshot_of(&s, Instant::now());
                drop(s);
                let _ = write_atomically(path, &last);
                return;
            }
            written_gen = s.generation;
            Counters::snapshot_of(&s, Instant::now())
        };
        // A failed write (disk full, directory removed) must not stop the
        // disk: the next change tries again.
        let _ = write_atomically(path, &snap);
        std::thread::sleep(MIN_PERIOD);
    }
}

/// Replace `path` with the stat line: a temporary file in the same
/// directory renamed over it, so a reader never sees a half-written line.
/// No fsync: the file describes the running process and is worthless after
/// a crash.
pub(crate) fn write_atomically(path: &Path, stats: &DiskStats) -> Result<()> {
    let line = stats.to_stat_line();
    Atomic {
        durable: false,
        ..Atomic::DURABLE
    }
    .write_bytes(path, line.as_bytes())
    .map_err(|source| Error::StatFile {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn line_has_the_sysfs_layout() {
        let s = DiskStats {
            read_ios: 3,
            read_sectors: 24,
            read_ns: 12_900_000,
            write_ios: 1,
            write_sectors: 8,
            write_ns: 4_000_000,
            flush_ios: 2,
            flush_ns: 1_000_000,
            in_flight: 1,
            io_ns: 15_500_000,
        };
        let line = s.to_stat_line();
        assert!(line.ends_with('\n'));
        let v: Vec<u64> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        // read: ios, merges, sectors, ms; write: same; in_flight, io_ticks,
        // time_in_queue = 12 + 4 + 1 (floors of each, summed before the floor: 17.9 -> 17)
        assert_eq!(v, [3, 0, 24, 12, 1, 0, 8, 4, 1, 15, 17, 0, 0, 0, 0, 2, 1]);
    }

    #[test]
    fn busy_time_counts_overlapping_requests_once() {
        let c = Counters::new();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        c.arrive(t0);
        c.arrive(ms(2)); // overlaps the first
        c.complete(Kind::Read, 4096, t0, ms(5));
        c.complete(Kind::Write, 1000, ms(2), ms(9));
        let s = c.snapshot();
        assert_eq!(s.in_flight, 0);
        assert_eq!(s.io_ns, 9_000_000); // 0..9 ms busy, not 5 + 7
        assert_eq!((s.read_ios, s.read_sectors, s.read_ns), (1, 8, 5_000_000));
        assert_eq!(
            (s.write_ios, s.write_sectors, s.write_ns),
            (1, 2, 7_000_000)
        );
    }

    #[test]
    fn file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        let c = Counters::new();
        let publisher = Publisher::start(Arc::clone(&c), p.clone()).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap().split_whitespace().count(),
            17
        );
        let t = Instant::now();
        c.arrive(t);
        c.complete(Kind::Read, 512, t, t);
        drop(publisher); // the last write happens on stop
        let first: u64 = fs::read_to_string(&p)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(first, 1);
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporaries left"
        );
    }
}
