//! The system calls that rustix does not wrap safely: `cachestat(2)`,
//! `mincore(2)` over a shared read-only mapping (for kernels before 6.5),
//! and the ATA CHECK POWER MODE command through `HDIO_DRIVE_CMD` (what
//! `hdparm -C` sends). Each `unsafe` block is one call with its own SAFETY
//! note; everything else in the crate stays safe.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `cachestat(2)`'s syscall number: 451 in the unified table every Linux
/// architecture but alpha uses.
const SYS_CACHESTAT: libc::c_long = 451;

/// `struct cachestat_range` (include/uapi/linux/mman.h).
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `struct cachestat` (include/uapi/linux/mman.h).
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Pages of the file's bytes `off..off + len` (len 0: to the end) in the
/// page cache, by `cachestat(2)` (Linux 6.5). `ENOSYS` on older kernels.
pub fn cachestat_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<u64> {
    let range = CachestatRange { off, len };
    let mut cs = Cachestat::default();
    // SAFETY: `range` and `cs` are live, aligned `repr(C)` structs with the
    // kernel's layout; the kernel reads `range`, writes `cs`, and keeps
    // neither pointer after returning. A closed or wrong fd is EBADF.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut cs as *mut Cachestat,
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cs.nr_cache)
}

/// Pages of the file's bytes `off..off + len` in the page cache, by
/// `mincore(2)` over a shared read-only mapping (which reports the page
/// cache of the file's pages without faulting them in).
pub fn mincore_pages(fd: BorrowedFd<'_>, off: u64, len: u64) -> io::Result<u64> {
    if len == 0 {
        return Ok(0);
    }
    let page = page_size();
    // mappings start on a page boundary
    let start = off / page as u64 * page as u64;
    let len = usize::try_from(off + len - start)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let off = start;
    // SAFETY: a new read-only shared mapping of `fd` chosen by the kernel
    // (addr NULL): it aliases no Rust object, is never dereferenced here,
    // and is unmapped below on every path.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            off as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: `addr..addr+len` is the mapping made above; `vec` has one
    // byte per page of it, as mincore requires.
    let r = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmaps exactly the mapping made above, which nothing uses.
    unsafe { libc::munmap(addr, len) };
    if r != 0 {
        return Err(err);
    }
    Ok(vec.iter().filter(|b| **b & 1 == 1).count() as u64)
}

/// The page size, bytes.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// `HDIO_DRIVE_CMD` (include/uapi/linux/hdreg.h).
const HDIO_DRIVE_CMD: libc::c_ulong = 0x031f;
/// ATA CHECK POWER MODE (E5h), and the older 98h opcode hdparm tries next.
const ATA_CHECK_POWER_MODE: [u8; 2] = [0xe5, 0x98];

/// Send ATA CHECK POWER MODE to the drive open at `fd` and return the
/// sector count register: 0x00 standby, 0x40/0x41 NV cache spun down/up,
/// 0x80 idle, 0xff active or idle. The command does not spin the drive up.
pub fn ata_check_power_mode(fd: BorrowedFd<'_>) -> io::Result<u8> {
    let mut last = io::Error::from(io::ErrorKind::Unsupported);
    for cmd in ATA_CHECK_POWER_MODE {
        // args: command, sector number, feature, sector count; on return
        // status, error, sector count (drivers/ata/libata-scsi.c).
        let mut args = [cmd, 0u8, 0, 0];
        // SAFETY: HDIO_DRIVE_CMD with no data phase reads and writes
        // exactly the 4-byte `args` array, which lives across the call.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), HDIO_DRIVE_CMD as _, args.as_mut_ptr()) };
        if r == 0 {
            return Ok(args[2]);
        }
        last = io::Error::last_os_error();
    }
    Err(last)
}
