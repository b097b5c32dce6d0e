//! The page cache: which files are resident (to advertise them) and reads
//! that never touch the disk (to serve peers, and to serve the overlay's own
//! reads while the local disk sleeps).
//!
//! Serving only from memory is SARD's premise (§III): a peer
//! helps with data it already holds in memory and must not spin up its own
//! disk to do so. `preadv2(RWF_NOWAIT)` returns what the page cache holds
//! and `EAGAIN` instead of waiting for the disk.

use crate::sys;
use rustix::io::{Errno, ReadWriteFlags};
use std::fs::File;
use std::io::{self, IoSliceMut};
use std::os::fd::AsFd;

/// How much of a file is in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    /// Pages in the page cache.
    pub cached_pages: u64,
    /// Pages the file spans.
    pub total_pages: u64,
}

impl Residency {
    /// Share of the file's pages in memory (1 for an empty file).
    pub fn fraction(&self) -> f64 {
        if self.total_pages == 0 {
            1.0
        } else {
            self.cached_pages as f64 / self.total_pages as f64
        }
    }
}

/// The page-cache residency of an open file: `cachestat(2)` where the
/// kernel has it (6.5), else `mincore(2)` over a mapping.
pub fn residency(f: &File, size_bytes: u64) -> io::Result<Residency> {
    let page = sys::page_size() as u64;
    let total_pages = size_bytes.div_ceil(page);
    if size_bytes == 0 {
        return Ok(Residency {
            cached_pages: 0,
            total_pages: 0,
        });
    }
    let cached = cached_pages(f, 0, size_bytes)?;
    Ok(Residency {
        cached_pages: cached.min(total_pages),
        total_pages,
    })
}

/// Pages of `offset..offset + len` in the page cache.
fn cached_pages(f: &File, offset: u64, len: u64) -> io::Result<u64> {
    match sys::cachestat_pages(f.as_fd(), offset, len) {
        Ok(n) => Ok(n),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            sys::mincore_pages(f.as_fd(), offset, len)
        }
        Err(e) => Err(e),
    }
}

/// Read `buf.len()` bytes at `offset` from the page cache only. Returns the
/// bytes read: fewer than asked when the end of the file comes first, 0
/// when a page of the range is not cached (nothing waits for the disk).
///
/// Residency is checked first because `RWF_NOWAIT` alone is not enough: on
/// a miss it returns `EAGAIN` but still starts readahead, which would send
/// I/O to (and spin up) the disk. A page evicted between the check and the
/// read still makes the read stop short.
pub fn read_cached(f: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    let size = f.metadata()?.len();
    let want = (buf.len() as u64).min(size.saturating_sub(offset));
    if want == 0 {
        return Ok(0);
    }
    let page = sys::page_size() as u64;
    let first = offset / page;
    let pages = (offset + want).div_ceil(page) - first;
    if cached_pages(f, first * page, pages * page)? < pages {
        return Ok(0);
    }
    let mut done = 0;
    while done < buf.len() {
        let mut iov = [IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(
            f.as_fd(),
            &mut iov,
            offset + done as u64,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::AGAIN) => break,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

/// Ask the kernel to drop a file's clean pages from the page cache
/// (`POSIX_FADV_DONTNEED`): tests and the benchmark use it to make a file
/// cold.
pub fn drop_cached(f: &File) -> io::Result<()> {
    rustix::fs::fadvise(f.as_fd(), 0, None, rustix::fs::Advice::DontNeed).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn cold_and_warm_files() {
        // on tmpfs nothing is ever evicted: the cold half is then skipped
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let mut f = File::create(&p).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&p).unwrap();
        drop_cached(&f).unwrap();
        let r = residency(&f, data.len() as u64).unwrap();
        assert_eq!(r.total_pages, 300_000u64.div_ceil(sys::page_size() as u64));
        if r.cached_pages > 0 {
            eprintln!("skipped: cold-file checks (pages stay cached on this file system)");
        } else {
            let mut buf = vec![0u8; 8192];
            assert_eq!(
                read_cached(&f, 0, &mut buf).unwrap(),
                0,
                "cold file read from memory"
            );
            // the mincore fallback agrees
            assert_eq!(
                sys::mincore_pages(f.as_fd(), 0, data.len() as u64).unwrap(),
                0
            );
            // a miss must not start readahead: the file stays cold
            std::thread::sleep(std::time::Duration::from_millis(50));
            let r = residency(&f, data.len() as u64).unwrap();
            assert_eq!(r.cached_pages, 0, "a cache-only read caused disk I/O");
        }
        // warm it: every page cached, reads come back whole
        let back = std::fs::read(&p).unwrap();
        assert_eq!(back, data);
        let r = residency(&f, data.len() as u64).unwrap();
        assert_eq!(r.cached_pages, r.total_pages);
        assert_eq!(r.fraction(), 1.0);
        assert_eq!(
            sys::mincore_pages(f.as_fd(), 0, data.len() as u64).unwrap(),
            r.total_pages
        );
        let mut buf = vec![0u8; 10_000];
        assert_eq!(
            read_cached(&f, 295_000, &mut buf).unwrap(),
            5_000,
            "stops at end of file"
        );
        assert_eq!(&buf[..5_000], &data[295_000..]);
        // an unaligned range in the middle, by both residency methods
        assert_eq!(sys::mincore_pages(f.as_fd(), 5000, 10_000).unwrap(), 3);
        assert_eq!(sys::cachestat_pages(f.as_fd(), 4096, 12_288).unwrap(), 3);
        // drop one page: a read spanning it returns nothing
        rustix::fs::fadvise(
            f.as_fd(),
            8192,
            std::num::NonZeroU64::new(4096),
            rustix::fs::Advice::DontNeed,
        )
        .unwrap();
        if residency(&f, data.len() as u64).unwrap().cached_pages + 1 == r.total_pages {
            assert_eq!(read_cached(&f, 4096, &mut buf).unwrap(), 0);
            assert_eq!(read_cached(&f, 12_288, &mut buf[..4096]).unwrap(), 4096);
        }
    }

    #[test]
    fn power_mode_query_fails_cleanly_on_a_non_ata_file() {
        let f = File::open("/dev/null").unwrap();
        assert!(sys::ata_check_power_mode(f.as_fd()).is_err());
    }
}
