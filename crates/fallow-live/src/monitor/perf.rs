//! Tracepoint samples through `perf_event_open(2)`: one ring buffer per
//! CPU (the other events of that CPU write into it through
//! `PERF_EVENT_IOC_SET_OUTPUT`), read without copying through `mmap`, and a
//! `poll` that sleeps until the kernel wakes it. The kernel wakes the
//! reader after each sample of an event opened with `wake: true`
//! (`wakeup_events = 1`), and only when the buffer is half full for the
//! others, so an idle disk costs no CPU at all.
//!
//! All of fallow-live's `unsafe` for this monitor is in this file: the
//! system call, the `mmap` of the ring and the reads of its head and tail.
//! Samples are timestamped with `CLOCK_MONOTONIC` (`use_clockid`), the
//! clock of the rest of fallow-live, so the time from an event to its
//! sight in user space can be measured.

#![allow(unsafe_code)]

use crate::error::{Error, Result};
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags};
use rustix::time::Timespec;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_CPU: u64 = 1 << 7;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
const PERF_SAMPLE_CGROUP: u64 = 1 << 21;
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_WATERMARK: u64 = 1 << 14;
const ATTR_USE_CLOCKID: u64 = 1 << 25;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
// _IOW('$', 6, char *)
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong =
    0x4000_0000 | ((std::mem::size_of::<usize>() as libc::c_ulong) << 16) | 0x2406;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes; the
/// kernel accepts any size it knows and zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

/// One tracepoint to open on every CPU.
#[derive(Debug, Clone)]
pub struct TpOpen {
    /// Its id (`events/<sys>/<name>/id`).
    pub id: u64,
    /// Wake the reader after each sample (else only at half a buffer).
    pub wake: bool,
    /// An ftrace filter (`dev == 7340032`), or none. A filter the kernel
    /// refuses is dropped (the reader filters again).
    pub filter: Option<String>,
}

/// One sample as the kernel wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// Process (thread group) id of the task on the CPU.
    pub pid: u32,
    /// Its thread id.
    pub tid: u32,
    /// `CLOCK_MONOTONIC`, ns.
    pub time_ns: u64,
    /// The CPU.
    pub cpu: u32,
    /// The cgroup (v2) id of the task, when the kernel gives it.
    pub cgroup_id: Option<u64>,
    /// The tracepoint record (starting with `common_type`).
    pub raw: &'a [u8],
}

fn sys_err(what: &str, e: std::io::Error) -> Error {
    Error::io("perf_event_open", what.to_string(), e)
}

/// The system's page size, bytes.
fn page_bytes() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize
}

/// Open `tp` on `cpu`. Without `tp.wake` the reader is woken when its ring
/// holds `watermark_bytes` (for the ring's owner; the others write into
/// the owner's ring and its watermark counts).
fn open_one(tp: &TpOpen, cpu: i32, cgroup: bool, watermark_bytes: u32) -> std::io::Result<OwnedFd> {
    let mut attr = PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: tp.id,
        sample_period: 1,
        sample_type: PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_RAW
            | if cgroup { PERF_SAMPLE_CGROUP } else { 0 },
        flags: ATTR_DISABLED | ATTR_USE_CLOCKID,
        clockid: libc::CLOCK_MONOTONIC,
        ..PerfEventAttr::default()
    };
    if tp.wake {
        attr.wakeup = 1; // wakeup_events
    } else {
        // wakeup_watermark: no wakeup per sample; half a ring wakes the
        // reader before it overflows (a watermark past the ring's size is
        // the whole ring to the kernel: samples would be lost first)
        attr.flags |= ATTR_WATERMARK;
        attr.wakeup = watermark_bytes.max(1);
    }
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr whose
    // `size` field is its true size; the kernel reads it and nothing else.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, arg: libc::c_ulong) -> std::io::Result<()> {
    // SAFETY: a perf ioctl on a perf descriptor we own; `arg` is an integer
    // or a pointer to a NUL-terminated string that outlives the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The shortest time slice EEVDF grants (`sched_setattr(2)`'s
/// `sched_runtime` for a fair-class task, Linux 6.12+, clamped by the
/// kernel to 0.1–100 ms), ns.
pub const PROMPT_SLICE_NS: u64 = 100_000;

/// Ask the scheduler to run the calling thread promptly when it wakes:
/// the fair class with its nice value unchanged and a time slice of
/// [`PROMPT_SLICE_NS`] instead of the default 3 ms. Under EEVDF a shorter
/// slice gives a waking task an earlier virtual deadline, and
/// `PREEMPT_SHORT` lets it preempt a running task with a longer slice, so
/// a monitor woken by a block event runs within its wakeup latency even on
/// a loaded machine, without a real-time class or privileges (the goal:
/// an FG arrival seen within 1 ms; docs/monitor.md). Returns why not where the
/// kernel refuses (older than 6.12: `EINVAL`, the default slice stays).
pub fn prefer_prompt_wakeups() -> std::result::Result<(), String> {
    // SAFETY: getpriority reads the calling thread's nice value (who 0 =
    // the caller; it cannot fail for the caller itself).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: PROMPT_SLICE_NS,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: `attr` is a valid sched_attr whose `size` is its true size;
    // pid 0 is the calling thread; the kernel only reads it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0 as libc::pid_t,
            &attr as *const libc::sched_attr,
            0 as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(format!(
            "sched_setattr: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The CPUs online, from `/sys/devices/system/cpu/online` (`0-3,5`).
pub fn online_cpus() -> Result<Vec<i32>> {
    let p = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, "cannot read", e))?;
    parse_cpu_list(&text).ok_or_else(|| Error::Parse {
        path: p.into(),
        message: format!("`{}` is not a CPU list", text.trim()),
    })
}

fn parse_cpu_list(text: &str) -> Option<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (i32, i32) = (a.parse().ok()?, b.parse().ok()?);
        if b < a || b > 65_535 {
            return None;
        }
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// A ring buffer mapped from one CPU's first event.
struct Ring {
    base: *mut u8,
    len: usize,
    data_off: usize,
    data_size: usize,
    tail: u64,
}

// SAFETY: the mapping belongs to this Ring alone (no other copy of the
// pointer exists), so moving it to another thread is sound.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: &OwnedFd, data_pages: usize) -> std::io::Result<Ring> {
        let page = page_bytes();
        let len = (1 + data_pages) * page;
        // SAFETY: a shared read-write mapping of a perf descriptor, the
        // layout perf_event_open(2) documents; checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // data_offset and data_size (kernel 4.1+); 0 before, where the
        // data starts at the second page
        // SAFETY: both u64 lie inside the first (header) page just mapped.
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(1040) as *const u64),
                std::ptr::read_volatile(base.add(1048) as *const u64),
            )
        };
        let (data_off, data_size) = if size == 0 {
            (page, len - page)
        } else {
            (off as usize, size as usize)
        };
        Ok(Ring {
            base,
            len,
            data_off,
            data_size,
            tail: 0,
        })
    }

    fn head(&self) -> u64 {
        // SAFETY: data_head is an aligned u64 at byte 1024 of the header
        // page; the kernel writes it, so it is read atomically with acquire
        // order (the data it covers is visible after it).
        unsafe { (*(self.base.add(1024) as *const AtomicU64)).load(Ordering::Acquire) }
    }

    fn set_tail(&mut self, tail: u64) {
        self.tail = tail;
        // SAFETY: data_tail is an aligned u64 at byte 1032, written by the
        // reader only; release order so the kernel reuses the space only
        // after our reads of it.
        unsafe { (*(self.base.add(1032) as *const AtomicU64)).store(tail, Ordering::Release) }
    }

    /// Copy `out.len()` bytes from ring position `pos` (wrapping).
    fn copy(&self, pos: u64, out: &mut [u8]) {
        let start = (pos % self.data_size as u64) as usize;
        let first = out.len().min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area
        // [data_off, data_off + data_size) of the mapping (start <
        // data_size, first <= data_size - start, the rest <= start since
        // a record is never longer than the ring).
        unsafe {
            let data = self.base.add(self.data_off);
            std::ptr::copy_nonoverlapping(data.add(start), out.as_mut_ptr(), first);
            if first < out.len() {
                std::ptr::copy_nonoverlapping(data, out[first..].as_mut_ptr(), out.len() - first);
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`, once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// Wakes a [`PerfRings::wait`] from another thread (an `eventfd`).
#[derive(Debug, Clone)]
pub struct Kick(Arc<OwnedFd>);

impl Kick {
    fn new() -> Result<Kick> {
        eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map(|fd| Kick(Arc::new(fd)))
            .map_err(|e| Error::io("eventfd", "cannot create", e.into()))
    }

    /// Make the waiting (or next) `wait` return at once.
    pub fn kick(&self) {
        let _ = rustix::io::write(self.0.as_fd(), &1u64.to_ne_bytes());
    }

    fn reset(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(self.0.as_fd(), &mut b);
    }
}

/// Why [`PerfRings::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// The kernel woke a ring (samples are waiting, or at least were).
    Ring,
    /// A [`Kick`].
    Kick,
    /// The time ran out (or a signal interrupted the wait).
    Timeout,
}

/// The perf events of a set of tracepoints on every online CPU and their
/// per-CPU ring buffers.
pub struct PerfRings {
    /// Every event's descriptor (kept open; closing one ends its event).
    _fds: Vec<OwnedFd>,
    /// The descriptor owning each ring, for `poll`.
    ring_fds: Vec<OwnedFd>,
    rings: Vec<Ring>,
    kick: Kick,
    /// Whether samples carry the cgroup id (kernel 5.7+).
    pub with_cgroup: bool,
    /// Whether each filter was accepted.
    pub filtered: bool,
    buf: Vec<u8>,
    /// Samples lost to full buffers (`PERF_RECORD_LOST`).
    pub lost: u64,
    /// Records too short or malformed, skipped.
    pub malformed: u64,
}

impl std::fmt::Debug for PerfRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfRings")
            .field("rings", &self.rings.len())
            .field("with_cgroup", &self.with_cgroup)
            .field("lost", &self.lost)
            .finish()
    }
}

impl PerfRings {
    /// Open `tps` on every online CPU with `data_pages` pages (a power of
    /// two) of ring per CPU, and enable them; with `cgroup`, samples carry
    /// the cgroup id where the kernel can (probed by one extra open: each
    /// open and close of a tracepoint's first event registers and
    /// unregisters its probe, tens of ms on a loaded machine, so callers
    /// that need no cgroup skip it).
    pub fn open(tps: &[TpOpen], data_pages: usize, cgroup: bool) -> Result<PerfRings> {
        if tps.is_empty() || !data_pages.is_power_of_two() {
            return Err(Error::invalid(
                "perf rings",
                "want at least one tracepoint and a power-of-two number of pages",
            ));
        }
        let cpus = online_cpus()?;
        // PERF_SAMPLE_CGROUP is 5.7+: try it, fall back without
        let with_cgroup = cgroup
            && match open_one(&tps[0], cpus[0], true, 1) {
                Ok(_) => true,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => false,
                Err(e) => return Err(sys_err("cannot open a tracepoint event", e)),
            };
        let mut fds = Vec::new();
        let mut ring_fds = Vec::new();
        let mut rings = Vec::new();
        let mut filtered = true;
        // the watermark of a ring whose events do not wake its reader
        let half = u32::try_from(data_pages * page_bytes() / 2).unwrap_or(u32::MAX);
        for &cpu in &cpus {
            let mut owner: Option<OwnedFd> = None;
            for tp in tps {
                let fd = open_one(tp, cpu, with_cgroup, half)
                    .map_err(|e| sys_err(&format!("cpu {cpu}, tracepoint {}", tp.id), e))?;
                if let Some(f) = &tp.filter {
                    let c = std::ffi::CString::new(f.as_str())
                        .map_err(|_| Error::invalid("perf filter", f.clone()))?;
                    if ioctl(&fd, PERF_EVENT_IOC_SET_FILTER, c.as_ptr() as libc::c_ulong).is_err() {
                        filtered = false;
                    }
                }
                match &owner {
                    None => {
                        rings.push(
                            Ring::map(&fd, data_pages)
                                .map_err(|e| sys_err("cannot mmap the ring buffer", e))?,
                        );
                        owner = Some(fd);
                        continue;
                    }
                    Some(o) => ioctl(&fd, PERF_EVENT_IOC_SET_OUTPUT, o.as_raw_fd() as _)
                        .map_err(|e| sys_err("PERF_EVENT_IOC_SET_OUTPUT", e))?,
                }
                fds.push(fd);
            }
            ring_fds.extend(owner);
        }
        for fd in fds.iter().chain(&ring_fds) {
            ioctl(fd, PERF_EVENT_IOC_ENABLE, 0).map_err(|e| sys_err("cannot enable", e))?;
        }
        Ok(PerfRings {
            _fds: fds,
            ring_fds,
            rings,
            kick: Kick::new()?,
            with_cgroup,
            filtered,
            buf: Vec::new(),
            lost: 0,
            malformed: 0,
        })
    }

    /// A handle that interrupts [`PerfRings::wait`] from another thread.
    pub fn kick(&self) -> Kick {
        self.kick.clone()
    }

    /// The descriptors that turn readable when the kernel wakes a ring,
    /// for a caller that waits on them together with others of its own
    /// (`poll(2)` them for `POLLIN`, then [`PerfRings::drain`]).
    pub fn wait_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.ring_fds.iter().map(AsFd::as_fd).collect()
    }

    /// Sleep until the kernel wakes a ring, a [`Kick`], or `timeout_ns`
    /// (`None`: no limit).
    pub fn wait(&mut self, timeout_ns: Option<u64>) -> Result<Woke> {
        let ts = timeout_ns.map(|t| Timespec {
            tv_sec: (t / 1_000_000_000) as _,
            tv_nsec: (t % 1_000_000_000) as _,
        });
        let mut pfds: Vec<PollFd<'_>> = self
            .ring_fds
            .iter()
            .map(|f| PollFd::new(f, PollFlags::IN))
            .collect();
        pfds.push(PollFd::new(&*self.kick.0, PollFlags::IN));
        let n = match poll(&mut pfds, ts.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(e) => return Err(Error::io("perf ring", "poll failed", e.into())),
        };
        let kicked = pfds.last().is_some_and(|p| !p.revents().is_empty());
        drop(pfds);
        Ok(if kicked {
            self.kick.reset();
            Woke::Kick
        } else if n > 0 {
            Woke::Ring
        } else {
            Woke::Timeout
        })
    }

    /// Hand every waiting sample to `f` (in ring order per CPU) and free
    /// the space. Returns the number of samples.
    pub fn drain(&mut self, mut f: impl FnMut(Sample<'_>)) -> u64 {
        let mut n = 0;
        let with_cgroup = self.with_cgroup;
        let mut buf = std::mem::take(&mut self.buf);
        for ring in &mut self.rings {
            let head = ring.head();
            let mut tail = ring.tail;
            while tail + 8 <= head {
                let mut h = [0u8; 8];
                ring.copy(tail, &mut h);
                let ty = u32::from_ne_bytes(h[0..4].try_into().unwrap_or_default());
                let size = u16::from_ne_bytes(h[6..8].try_into().unwrap_or_default()) as u64;
                if size < 8 || tail + size > head || size as usize > ring.data_size {
                    // a torn header: skip what is there rather than loop
                    self.malformed += 1;
                    tail = head;
                    break;
                }
                buf.resize(size as usize - 8, 0);
                ring.copy(tail + 8, &mut buf);
                match ty {
                    PERF_RECORD_SAMPLE => match parse_sample(&buf, with_cgroup) {
                        Some(s) => {
                            n += 1;
                            f(s)
                        }
                        None => self.malformed += 1,
                    },
                    PERF_RECORD_LOST => {
                        // id, then the number lost
                        if let Some(l) = buf.get(8..16) {
                            self.lost += u64::from_ne_bytes(l.try_into().unwrap_or_default());
                        }
                    }
                    _ => {}
                }
                tail += size;
            }
            ring.set_tail(tail);
        }
        self.buf = buf;
        n
    }

    /// Drop every waiting sample unread (the poller, while busy, needs only
    /// the wakeups).
    pub fn discard(&mut self) {
        for ring in &mut self.rings {
            let head = ring.head();
            ring.set_tail(head);
        }
    }
}

/// The sample body for TID | TIME | CPU | RAW [| CGROUP], in the order
/// perf_event_open(2) gives.
fn parse_sample(b: &[u8], with_cgroup: bool) -> Option<Sample<'_>> {
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_ne_bytes(s.try_into().unwrap_or_default()))
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .map(|s| u64::from_ne_bytes(s.try_into().unwrap_or_default()))
    };
    let pid = u32_at(0)?;
    let tid = u32_at(4)?;
    let time_ns = u64_at(8)?;
    let cpu = u32_at(16)?;
    let raw_size = u32_at(24)? as usize;
    let raw = b.get(28..28usize.checked_add(raw_size)?)?;
    let cgroup_id = if with_cgroup {
        // the raw block (its u32 size included) is padded to 8 bytes
        let after = (24 + 4 + raw_size).next_multiple_of(8);
        Some(u64_at(after)?)
    } else {
        None
    };
    Some(Sample {
        pid,
        tid,
        time_ns,
        cpu,
        cgroup_id,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-3,7"), Some(vec![0, 2, 3, 7]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list(""), None);
    }

    #[test]
    fn a_hand_built_sample_body_parses_with_and_without_cgroup() {
        // pid 10, tid 11, time 12, cpu 1, raw 6 bytes (+2 pad to 8 with the size), cgroup 99
        let mut b = Vec::new();
        b.extend(10u32.to_ne_bytes());
        b.extend(11u32.to_ne_bytes());
        b.extend(12u64.to_ne_bytes());
        b.extend(1u32.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(4u32.to_ne_bytes());
        b.extend([1, 2, 3, 4]);
        b.extend(99u64.to_ne_bytes());
        let s = parse_sample(&b, true).unwrap();
        assert_eq!(
            (s.pid, s.tid, s.time_ns, s.cpu, s.cgroup_id, s.raw),
            (10, 11, 12, 1, Some(99), &[1u8, 2, 3, 4][..])
        );
        assert_eq!(parse_sample(&b, false).unwrap().cgroup_id, None);
        assert!(parse_sample(&b[..30], false).is_none());
    }
}
