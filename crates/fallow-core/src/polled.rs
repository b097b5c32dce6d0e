//! A long core call on a worker thread while the calling thread keeps
//! polling for a reason to stop (Python's signal handlers: Ctrl-C), so a
//! front end can cancel a search without the core knowing about it.

use crate::error::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// Run `f` on a scoped worker thread and call `poll` every `every` until
/// it returns; returns as soon as `f` does (a call shorter than `every`
/// never polls). The first `Err` of `poll` sets `cancel` (`f` is expected to
/// notice and return soon after, with [`crate::Error::Interrupted`]) and
/// is returned instead of `f`'s result; `poll` is not called again. A
/// panic in `f` is resumed on this thread.
pub fn run_polled<T, E, F, P>(
    cancel: &AtomicBool,
    every: Duration,
    f: F,
    mut poll: P,
) -> std::result::Result<Result<T>, E>
where
    F: FnOnce() -> Result<T> + Send,
    T: Send,
    P: FnMut() -> std::result::Result<(), E>,
{
    let (out, raised) = std::thread::scope(|s| {
        // The worker says it is done through a channel, so the wait ends
        // when `f` does, not at the next tick: sleeping `every` between
        // checks made each call last at least `every` (50 ms from Python,
        // whatever the trace: 1,000 small volumes of a fleet sweep spent
        // 50 s doing nothing). A panic drops the sender, which also ends
        // the wait.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = s.spawn(move || {
            let out = f();
            let _ = done_tx.send(());
            out
        });
        let mut raised: Option<E> = None;
        while let Err(RecvTimeoutError::Timeout) = done_rx.recv_timeout(every) {
            if raised.is_none() {
                if let Err(e) = poll() {
                    cancel.store(true, Ordering::Relaxed);
                    raised = Some(e);
                }
            }
        }
        (worker.join(), raised)
    });
    match (out, raised) {
        (_, Some(e)) => Err(e),
        (Ok(r), None) => Ok(r),
        (Err(p), None) => std::panic::resume_unwind(p),
    }
}

/// Requests between two reads of a cancel flag in the linear passes that
/// prepare a trace (completions, periods, baselines): well under a
/// millisecond of work in a release build (a few ms in a debug one), so
/// Ctrl-C on a trace of tens of millions of requests is answered within
/// the 0.5 s that tests/python/test_interrupt.py allows even on a loaded
/// machine; one relaxed load per 64 Ki requests costs nothing measurable.
pub const CANCEL_EVERY_REQUESTS: usize = 1 << 16;

/// Whether an optional cancel flag is set.
pub fn cancelled(cancel: Option<&AtomicBool>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// `work(i)` for every `i` in `0..n` on `threads` scoped threads (at most
/// `n`, at least one), each taking the next index as it finishes one, so
/// long and short items balance; the results in index order. The one
/// worker pool of the workspace: `fallow compare`'s line-up, `pareto`'s
/// settings. A panic in `work` is resumed on this thread.
pub fn map_indexed<T, F>(n: usize, threads: usize, work: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        (0..n).map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(i) else { break };
                let r = work(i);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every index ran (a panic would have been resumed)")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn map_indexed_keeps_the_order_on_any_number_of_threads() {
        for threads in [0, 1, 2, 7, 100] {
            // uneven work: later items finish first on several threads
            let out = map_indexed(20, threads, |i| {
                std::thread::sleep(Duration::from_micros(((20 - i) * 50) as u64));
                i * i
            });
            assert_eq!(out, (0..20).map(|i| i * i).collect::<Vec<_>>(), "{threads}");
        }
        assert!(map_indexed(0, 2, |i| i).is_empty());
    }

    #[test]
    fn a_quiet_poll_returns_the_result() {
        let cancel = AtomicBool::new(false);
        let polls = std::cell::Cell::new(0);
        let out = run_polled(
            &cancel,
            Duration::from_millis(1),
            || {
                std::thread::sleep(Duration::from_millis(20));
                Ok(6 * 7)
            },
            || -> std::result::Result<(), ()> {
                polls.set(polls.get() + 1);
                Ok(())
            },
        );
        assert_eq!(out.unwrap().unwrap(), 42);
        assert!(!cancel.load(Ordering::Relaxed));
        assert!(polls.get() >= 1);
    }

    #[test]
    fn a_short_call_returns_when_it_ends_not_at_the_next_tick() {
        // With a one-minute tick, waiting for the tick would take a minute
        // and poll once; ending with the worker polls never.
        let cancel = AtomicBool::new(false);
        let mut polls = 0;
        let out = run_polled(
            &cancel,
            Duration::from_secs(60),
            || Ok(7),
            || -> std::result::Result<(), ()> {
                polls += 1;
                Ok(())
            },
        );
        assert_eq!(out.unwrap().unwrap(), 7);
        assert_eq!(polls, 0);
    }

    #[test]
    fn a_panic_in_the_worker_ends_the_wait_and_is_resumed() {
        let cancel = AtomicBool::new(false);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_polled(
                &cancel,
                Duration::from_secs(60),
                || -> Result<u32> { panic!("worker failed") },
                || -> std::result::Result<(), ()> { Ok(()) },
            )
        }));
        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"worker failed"));
    }

    #[test]
    fn the_first_poll_error_cancels_the_worker_and_wins() {
        let cancel = AtomicBool::new(false);
        let mut polls = 0;
        let out = run_polled(
            &cancel,
            Duration::from_millis(1),
            || -> Result<u32> {
                // a search that only stops when cancelled
                while !cancel.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(Error::Interrupted)
            },
            || {
                polls += 1;
                if polls >= 3 {
                    Err(polls)
                } else {
                    Ok(())
                }
            },
        );
        // the third poll failed and no later one ran
        assert_eq!(out.unwrap_err(), 3);
        assert!(cancel.load(Ordering::Relaxed));
    }
}
