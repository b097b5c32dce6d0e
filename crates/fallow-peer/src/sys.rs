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

/// `struct sched_attr` (include/uapi/linux/sched/types.h), its first
/// version (`SCHED_ATTR_SIZE_VER1`, 56 bytes with the utilisation clamps).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// The slice the read path's threads ask for: the smallest the kernel
/// takes (0.1 ms).
pub const READ_PATH_SLICE_NS: u64 = 100_000;

/// Ask the kernel for a short time slice for the calling thread, keeping
/// its policy (`SCHED_OTHER`) and nice value: under EEVDF (Linux ≥ 6.12) a
/// task's `sched_runtime` is its slice, and a woken task with a shorter
/// slice than the running one gets the CPU at once (`PREEMPT_SHORT`)
/// instead of waiting out the other's slice (0.75–3 ms). It gives the
/// thread no more CPU time, only an earlier turn; older kernels ignore the
/// field. The calling thread only: `pid` 0.
pub fn request_short_slice(slice_ns: u64) -> io::Result<()> {
    let nice = rustix::process::getpriority_process(None).unwrap_or(0);
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_nice: nice,
        sched_runtime: slice_ns,
        ..SchedAttr::default()
    };
    // SAFETY: `attr` is a live, aligned `repr(C)` struct with the kernel's
    // layout and `size` set to its size; the kernel only reads it during
    // the call. pid 0 is the calling thread; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's `sched_runtime` (its slice under EEVDF, ns).
#[cfg(test)]
pub fn thread_slice_ns() -> io::Result<u64> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a live, aligned, writable `repr(C)` struct of the
    // size passed; the kernel writes at most that many bytes into it and
    // keeps no pointer. pid 0 is the calling thread; flags 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if r == 0 {
        Ok(attr.sched_runtime)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's version as (major, minor), from /proc.
    fn kernel() -> Option<(u32, u32)> {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        let mut it = r.trim().split(['.', '-']);
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    }

    #[test]
    fn a_thread_gets_the_short_slice_it_asks_for_and_keeps_its_nice() {
        std::thread::spawn(|| {
            let nice = rustix::process::getpriority_process(None).unwrap();
            request_short_slice(READ_PATH_SLICE_NS).unwrap();
            assert_eq!(rustix::process::getpriority_process(None).unwrap(), nice);
            let got = thread_slice_ns().unwrap();
            match kernel() {
                Some(v) if v >= (6, 12) => assert_eq!(got, 100_000),
                v => {
                    println!("skip: kernel {v:?} before 6.12 keeps no slice of a fair task ({got})")
                }
            }
        })
        .join()
        .unwrap();
    }
}
