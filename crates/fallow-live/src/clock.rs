//! Time for the live runtime: `CLOCK_MONOTONIC` in ns (the clock every
//! event, policy context and log line uses, comparable across processes
//! on the same boot, unlike [`std::time::Instant`]), and the calling
//! thread's CPU time (how the monitor measures its own cost).

use rustix::time::{clock_gettime, ClockId, Timespec};
use std::time::Duration;

fn ns(t: Timespec) -> u64 {
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` now, ns since boot (not counting suspend).
pub fn monotonic_ns() -> u64 {
    ns(clock_gettime(ClockId::Monotonic))
}

/// CPU time (user + system) the calling thread has used, ns.
///
/// `CLOCK_THREAD_CPUTIME_ID` is the same account as
/// `getrusage(RUSAGE_THREAD)`'s user + system time, at ns rather than
/// tick resolution, so a short run of a cheap loop still measures.
pub fn thread_cpu_ns() -> u64 {
    ns(clock_gettime(ClockId::ThreadCPUTime))
}

/// Sleep until `deadline_ns` on the monotonic clock (returns at once if
/// it has passed).
pub fn sleep_until(deadline_ns: u64) {
    let now = monotonic_ns();
    if deadline_ns > now {
        std::thread::sleep(Duration::from_nanos(deadline_ns - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_advances_with_sleep() {
        let a = monotonic_ns();
        sleep_until(a + 2_000_000);
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} {b}");
    }

    #[test]
    fn thread_cpu_grows_with_work_not_with_sleep() {
        let c0 = thread_cpu_ns();
        std::thread::sleep(Duration::from_millis(20));
        let c1 = thread_cpu_ns();
        // sleeping costs (almost) no CPU
        assert!(c1 - c0 < 10_000_000, "{}", c1 - c0);
        // spinning costs CPU: the clock reaches 5 ms of it (within 5 s of
        // wall time, however loaded the machine)
        let mut x = 0u64;
        let give_up = monotonic_ns() + 5_000_000_000;
        while thread_cpu_ns() - c1 < 5_000_000 && monotonic_ns() < give_up {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let c2 = thread_cpu_ns();
        assert!(c2 - c1 >= 5_000_000, "{}", c2 - c1);
    }
}
