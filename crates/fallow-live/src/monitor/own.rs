//! fallow's own I/O, which the monitor must not mistake for foreground
//! work: the requests fallow issues itself ([`OwnCounters`]) and those of
//! a managed command ([`CgroupIo`], [`ProcIo`]), behind one trait
//! ([`OwnIoSource`]).
//!
//! The monitor subtracts them from the device's counters. To never take
//! its own request for an FG one, a source counts a request as soon as
//! it is *issued* (before the kernel sees it): the kernel's counters then
//! never run ahead of fallow's, and while a request is in flight the
//! difference is only an under-count of FG work that is made up when the
//! request completes (see [`super::detect`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;

use super::stat::STAT_SECTOR_BYTES;

/// What one source knows of its I/O, cumulative since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnIo {
    /// 512-byte sectors of reads issued (at least what the kernel has
    /// counted of them).
    pub read_sectors: u64,
    /// 512-byte sectors of writes issued.
    pub write_sectors: u64,
    /// Estimated kernel requests completed (a large request may be split
    /// into several); only used to count FG requests per busy period.
    pub ios: u64,
    /// Some of its reads may be in flight now.
    pub reads_in_flight: bool,
    /// Some of its writes may be in flight now.
    pub writes_in_flight: bool,
    /// Counts openings and closings of write shields (odd: one is open).
    /// While a shield is open, or if one opened or closed since the last
    /// sample, every write, flush and discard of the sample is taken as
    /// fallow's own: fallow cannot count the journal writes an `fsync` of
    /// its checkpoint causes, but it knows when it is doing one.
    pub shield_events: u64,
}

impl OwnIo {
    /// The sum of two sources.
    pub fn plus(self, o: OwnIo) -> OwnIo {
        OwnIo {
            read_sectors: self.read_sectors.wrapping_add(o.read_sectors),
            write_sectors: self.write_sectors.wrapping_add(o.write_sectors),
            ios: self.ios.wrapping_add(o.ios),
            reads_in_flight: self.reads_in_flight || o.reads_in_flight,
            writes_in_flight: self.writes_in_flight || o.writes_in_flight,
            shield_events: self.shield_events.wrapping_add(o.shield_events),
        }
    }

    /// A write shield is open.
    pub fn shield_open(&self) -> bool {
        self.shield_events % 2 == 1
    }
}

/// Anything that knows part of fallow's own I/O on the monitored device.
pub trait OwnIoSource: Send + Sync {
    /// The cumulative counts now.
    fn snapshot(&self) -> OwnIo;

    /// True when `reads_in_flight` comes from state (set before a request
    /// is issued, cleared after it completes); false when it is inferred
    /// from the counters moving between two snapshots, which means
    /// something only at the poller's fixed interval: the event-driven
    /// monitor, which samples only around I/O, then leaves the device to
    /// the poller (a managed command's cgroup or `/proc` counters) unless
    /// the source offers [`OwnIoSource::bio_attribution`].
    fn in_flight_is_exact(&self) -> bool {
        true
    }

    /// The managed command's bios, for the event-driven monitor to count
    /// by cgroup ([`super::cgroup_bios`]); with it the monitor need not
    /// fall back to the poller for a source whose in-flight state is
    /// inferred.
    fn bio_attribution(&self) -> Option<std::sync::Arc<super::cgroup_bios::BioAttribution>> {
        None
    }
}

/// A shared source is the source (a native job's gate, wrapped by the
/// attribution that replaces it on the event monitor).
impl<T: OwnIoSource + ?Sized> OwnIoSource for std::sync::Arc<T> {
    fn snapshot(&self) -> OwnIo {
        (**self).snapshot()
    }
    fn in_flight_is_exact(&self) -> bool {
        (**self).in_flight_is_exact()
    }
    fn bio_attribution(&self) -> Option<std::sync::Arc<super::cgroup_bios::BioAttribution>> {
        (**self).bio_attribution()
    }
}

/// Counters the scrubber (or any in-process BG worker) bumps around each
/// request it issues; shared with the monitor through an `Arc`.
#[derive(Debug, Default)]
pub struct OwnCounters {
    read_sectors: AtomicU64,
    reads_issued: AtomicU64,
    reads_done: AtomicU64,
    ios: AtomicU64,
    shield_events: AtomicU64,
    /// Kernel requests one read of this many bytes becomes (0: unknown).
    max_request_bytes: AtomicU64,
}

impl OwnCounters {
    /// New counters; `max_request_bytes` is the device queue's largest
    /// request (`queue/max_sectors_kb`), used to estimate how many kernel
    /// requests one read becomes.
    pub fn new(max_request_bytes: Option<u64>) -> OwnCounters {
        let c = OwnCounters::default();
        c.max_request_bytes
            .store(max_request_bytes.unwrap_or(0), SeqCst);
        c
    }

    /// Count a read of `bytes` as issued; call [`ReadGuard::done`] (or
    /// drop the guard) when it has returned, failed or not.
    pub fn begin_read(&self, bytes: u64) -> ReadGuard<'_> {
        // sectors first: a sampler that sees the read in flight must also
        // see its sectors
        self.read_sectors
            .fetch_add(bytes.div_ceil(STAT_SECTOR_BYTES), SeqCst);
        self.reads_issued.fetch_add(1, SeqCst);
        ReadGuard { c: self, bytes }
    }

    /// Open a write shield for the duration of the guard (see
    /// [`OwnIo::shield_events`]): for fallow's own metadata writes, such as
    /// the checkpoint's write, fsync and rename.
    pub fn shield_writes(&self) -> ShieldGuard<'_> {
        self.shield_events.fetch_add(1, SeqCst);
        ShieldGuard { c: self }
    }

    /// Reads issued so far.
    pub fn reads_issued(&self) -> u64 {
        self.reads_issued.load(SeqCst)
    }

    /// Bytes of reads issued so far (rounded up to 512-byte sectors).
    pub fn read_bytes(&self) -> u64 {
        self.read_sectors.load(SeqCst) * STAT_SECTOR_BYTES
    }
}

impl OwnIoSource for OwnCounters {
    fn snapshot(&self) -> OwnIo {
        let issued = self.reads_issued.load(SeqCst);
        let done = self.reads_done.load(SeqCst);
        OwnIo {
            read_sectors: self.read_sectors.load(SeqCst),
            write_sectors: 0,
            ios: self.ios.load(SeqCst),
            reads_in_flight: issued != done,
            writes_in_flight: false,
            shield_events: self.shield_events.load(SeqCst),
        }
    }
}

/// A read in flight; completes on [`ReadGuard::done`] or drop.
#[derive(Debug)]
pub struct ReadGuard<'a> {
    c: &'a OwnCounters,
    bytes: u64,
}

impl ReadGuard<'_> {
    /// The read has returned.
    pub fn done(self) {}
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        let max = self.c.max_request_bytes.load(SeqCst);
        let split = if max == 0 {
            1
        } else {
            self.bytes.div_ceil(max).max(1)
        };
        self.c.ios.fetch_add(split, SeqCst);
        self.c.reads_done.fetch_add(1, SeqCst);
    }
}

/// An open write shield; closes on drop.
#[derive(Debug)]
pub struct ShieldGuard<'a> {
    c: &'a OwnCounters,
}

impl Drop for ShieldGuard<'_> {
    fn drop(&mut self) {
        self.c.shield_events.fetch_add(1, SeqCst);
    }
}

/// The I/O of a managed command's cgroup (v2 `io.stat`) on one device.
///
/// The cgroup's bytes are counted when its requests are submitted, so like
/// [`OwnCounters`] they never trail the device's counters. Whether its
/// requests are in flight is not known: the source says "maybe" when its
/// counters moved since its previous snapshot.
#[derive(Debug)]
pub struct CgroupIo {
    path: PathBuf,
    dev: (u32, u32),
    last: Mutex<(u64, u64, u64)>,
}

impl CgroupIo {
    /// `cgroup_dir` is the cgroup's directory (holding `io.stat`); `dev`
    /// is the monitored disk's `major:minor`.
    pub fn new(cgroup_dir: &Path, dev: (u32, u32)) -> CgroupIo {
        CgroupIo {
            path: cgroup_dir.join("io.stat"),
            dev,
            last: Mutex::new((0, 0, 0)),
        }
    }

    /// `(rbytes, wbytes, rios + wios)` of `dev` in the text of an `io.stat`
    /// file (zero when the device has no line: the cgroup did no I/O there).
    pub fn parse(text: &str, dev: (u32, u32)) -> std::result::Result<(u64, u64, u64), String> {
        let key = format!("{}:{}", dev.0, dev.1);
        for line in text.lines() {
            let mut words = line.split_ascii_whitespace();
            if words.next() != Some(key.as_str()) {
                continue;
            }
            let (mut r, mut w, mut ios) = (0u64, 0u64, 0u64);
            for kv in words {
                let Some((k, v)) = kv.split_once('=') else {
                    return Err(format!("`{kv}` is not key=value in `{line}`"));
                };
                let v: u64 = v
                    .parse()
                    .map_err(|_| format!("{k}: `{v}` is not an unsigned integer"))?;
                match k {
                    "rbytes" => r = v,
                    "wbytes" => w = v,
                    "rios" | "wios" => ios += v,
                    _ => {}
                }
            }
            return Ok((r, w, ios));
        }
        Ok((0, 0, 0))
    }
}

impl OwnIoSource for CgroupIo {
    fn in_flight_is_exact(&self) -> bool {
        false // inferred from movement
    }

    fn snapshot(&self) -> OwnIo {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        // a cgroup that is gone or unreadable did no more I/O: keep the last count
        let now = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| Self::parse(&t, self.dev).ok())
            .unwrap_or(*last);
        let moved = now != *last;
        *last = now;
        OwnIo {
            read_sectors: now.0.div_ceil(STAT_SECTOR_BYTES),
            write_sectors: now.1.div_ceil(STAT_SECTOR_BYTES),
            ios: now.2,
            reads_in_flight: moved,
            writes_in_flight: moved,
            shield_events: 0,
        }
    }
}

/// The storage I/O of one process from `/proc/<pid>/io` (`read_bytes`,
/// `write_bytes`), for a managed command without a cgroup.
///
/// Coarser than a cgroup: `write_bytes` is counted when pages are
/// dirtied, not when the device writes them back, and children's I/O is
/// not included while they run.
#[derive(Debug)]
pub struct ProcIo {
    path: PathBuf,
    last: Mutex<(u64, u64)>,
}

impl ProcIo {
    /// The process `pid`.
    pub fn new(pid: u32) -> ProcIo {
        ProcIo {
            path: PathBuf::from(format!("/proc/{pid}/io")),
            last: Mutex::new((0, 0)),
        }
    }

    /// `(read_bytes, write_bytes)` in the text of a `/proc/<pid>/io` file.
    pub fn parse(text: &str) -> std::result::Result<(u64, u64), String> {
        let mut r = None;
        let mut w = None;
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v = || {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{k}: `{}` is not an unsigned integer", v.trim()))
            };
            match k.trim() {
                "read_bytes" => r = Some(v()?),
                "write_bytes" => w = Some(v()?),
                _ => {}
            }
        }
        match (r, w) {
            (Some(r), Some(w)) => Ok((r, w)),
            _ => Err("no read_bytes and write_bytes lines".into()),
        }
    }
}

impl OwnIoSource for ProcIo {
    fn in_flight_is_exact(&self) -> bool {
        false // inferred from movement
    }

    fn snapshot(&self) -> OwnIo {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| Self::parse(&t).ok())
            .unwrap_or(*last);
        let moved = now != *last;
        *last = now;
        OwnIo {
            read_sectors: now.0.div_ceil(STAT_SECTOR_BYTES),
            write_sectors: now.1.div_ceil(STAT_SECTOR_BYTES),
            ios: 0,
            reads_in_flight: moved,
            writes_in_flight: moved,
            shield_events: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_track_issue_completion_and_splits() {
        let c = OwnCounters::new(Some(128 * 1024));
        let g = c.begin_read(1 << 20);
        let s = c.snapshot();
        assert_eq!(s.read_sectors, 2048);
        assert!(s.reads_in_flight);
        assert_eq!(s.ios, 0);
        g.done();
        let s = c.snapshot();
        assert!(!s.reads_in_flight);
        // 1 MiB in 128 KiB requests
        assert_eq!(s.ios, 8);
        // a partial sector counts as a whole one (the kernel reads whole sectors)
        c.begin_read(100).done();
        assert_eq!(c.snapshot().read_sectors, 2049);
        assert_eq!(c.reads_issued(), 2);
    }

    #[test]
    fn shield_is_open_only_inside_the_guard() {
        let c = OwnCounters::new(None);
        assert!(!c.snapshot().shield_open());
        {
            let _g = c.shield_writes();
            assert!(c.snapshot().shield_open());
        }
        let s = c.snapshot();
        assert!(!s.shield_open());
        assert_eq!(s.shield_events, 2);
    }

    #[test]
    fn parses_cgroup_io_stat() {
        let text = "8:0 rbytes=1024 wbytes=4096 rios=1 wios=2 dbytes=0 dios=0\n\
                    7:3 rbytes=1048576 wbytes=0 rios=8 wios=0 dbytes=0 dios=0\n";
        assert_eq!(CgroupIo::parse(text, (7, 3)).unwrap(), (1048576, 0, 8));
        assert_eq!(CgroupIo::parse(text, (8, 0)).unwrap(), (1024, 4096, 3));
        assert_eq!(CgroupIo::parse(text, (9, 9)).unwrap(), (0, 0, 0));
        assert!(CgroupIo::parse("7:3 rbytes=x", (7, 3)).is_err());
    }

    #[test]
    fn cgroup_source_reports_movement_as_maybe_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let src = CgroupIo::new(dir.path(), (7, 3));
        std::fs::write(
            dir.path().join("io.stat"),
            "7:3 rbytes=512 wbytes=0 rios=1 wios=0\n",
        )
        .unwrap();
        let a = src.snapshot();
        assert_eq!(a.read_sectors, 1);
        assert!(a.reads_in_flight);
        let b = src.snapshot();
        assert!(!b.reads_in_flight);
        // gone: the last count stays
        std::fs::remove_file(dir.path().join("io.stat")).unwrap();
        assert_eq!(src.snapshot().read_sectors, 1);
    }

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 100\nwchar: 200\nsyscr: 3\nsyscw: 4\nread_bytes: 8192\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(ProcIo::parse(text).unwrap(), (8192, 4096));
        assert!(ProcIo::parse("rchar: 1\n").is_err());
        // our own process has an io file
        let me = ProcIo::new(std::process::id());
        let _ = me.snapshot();
    }
}
