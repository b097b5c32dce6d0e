//! A scrub's progress while it runs, the same for the block scrubber and
//! the native executors: bytes done of the total, the pass, this run's
//! rate and the time left at it, bad ranges and the tool's error counts.
//!
//! A session publishes a [`Progress`] into a [`ProgressProbe`] when it
//! opens, after BG requests (at most every [`PUBLISH_EVERY_NS`]) and when
//! it ends; a front end reads the probe from another thread (the metrics
//! endpoint, `--json` progress lines). Reading a native tool's status
//! costs a process or a sysfs read, so it is done between requests, on
//! the driver's thread, never while one is in service.

use crate::driver::{BgExecutor, Step};
use crate::error::Result;
use serde::Serialize;
use std::sync::{Arc, Mutex};

/// Least time between two progress readings during a run, ns.
pub const PUBLISH_EVERY_NS: u64 = 250_000_000;

/// Where a scrub is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Progress {
    /// Bytes done in this pass (scrubbed, or FITRIM ranges covered).
    pub scrubbed_bytes: u64,
    /// Bytes the pass covers, where known.
    pub target_bytes: Option<u64>,
    /// The pass, counting from 1 (the block scrubber's; native tools keep
    /// no pass count).
    pub pass: Option<u64>,
    /// Bytes done in this run.
    pub run_bytes: u64,
    /// Wall time of this run so far, s.
    pub run_elapsed_s: f64,
    /// This run's rate over its wall time (idle waits included), bytes/s.
    pub rate_bytes_per_s: Option<f64>,
    /// Time left at this run's rate, s: `(target − done) / rate`; 0 when
    /// complete, none before the first byte or without a known total.
    pub eta_s: Option<f64>,
    /// Unreadable ranges found in this pass (block scrubber).
    pub bad_ranges: u64,
    /// Bytes in them.
    pub bad_bytes: u64,
    /// Errors the tool corrected, where it reports them.
    pub errors_corrected: Option<u64>,
    /// Errors the tool could not correct, where it reports them.
    pub errors_uncorrectable: Option<u64>,
    /// The pass is complete.
    pub complete: bool,
}

impl Progress {
    /// Fill in the rate and the time left from the other fields.
    pub(crate) fn with_eta(mut self) -> Progress {
        self.rate_bytes_per_s = (self.run_bytes > 0 && self.run_elapsed_s > 0.0)
            .then(|| self.run_bytes as f64 / self.run_elapsed_s);
        self.eta_s = if self.complete {
            Some(0.0)
        } else {
            match (self.target_bytes, self.rate_bytes_per_s) {
                (Some(t), Some(r)) => Some(t.saturating_sub(self.scrubbed_bytes) as f64 / r),
                _ => None,
            }
        };
        self
    }
}

/// The latest [`Progress`], shared between the session and its readers.
/// Cheap to clone: clones share it.
#[derive(Debug, Clone, Default)]
pub struct ProgressProbe(Arc<Mutex<Option<Progress>>>);

impl ProgressProbe {
    /// The latest progress (none before the session published any).
    pub fn get(&self) -> Option<Progress> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Publish `p`.
    pub fn set(&self, p: Progress) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
    }
}

/// An executor whose progress is published after its requests.
pub(crate) struct Publishing<'a, E: ?Sized> {
    pub inner: &'a mut E,
    pub probe: ProgressProbe,
    /// Reads the executor's progress (none: could not be read now).
    pub read: fn(&mut E) -> Option<Progress>,
    pub last_ns: u64,
}

impl<E: BgExecutor + ?Sized> Publishing<'_, E> {
    /// Read and publish now.
    pub fn publish(&mut self) {
        if let Some(p) = (self.read)(self.inner) {
            self.probe.set(p);
        }
        self.last_ns = crate::clock::monotonic_ns();
    }
}

impl<E: BgExecutor + ?Sized> BgExecutor for Publishing<'_, E> {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        self.inner.ready_in_ns(size_bytes, now_ns)
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        let step = self.inner.run_one(size_bytes)?;
        let now = crate::clock::monotonic_ns();
        if step == Step::Finished || now.saturating_sub(self.last_ns) >= PUBLISH_EVERY_NS {
            self.publish();
        }
        Ok(step)
    }

    fn pause(&mut self) -> Result<()> {
        self.inner.pause()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::NativeReport;
    use crate::scrub::ScrubReport;

    #[test]
    fn eta_is_what_is_left_at_this_runs_rate() {
        let r = ScrubReport {
            target: "t".into(),
            target_kind: "file".into(),
            target_bytes: 1000,
            scrubbed_bytes: 400,
            requests: 4,
            bad_ranges: vec![[10, 19], [100, 100]],
            elapsed_s: 9.0,
            complete: false,
            pass: 2,
            resumed_from_bytes: 200,
            run_bytes: 200,
            run_requests: 2,
            run_elapsed_s: 4.0,
            run_retries: 0,
            order: "sequential".into(),
            regions: None,
            request_size_bytes: 100,
            method: "read".into(),
            direct_io: true,
            checkpoint: "ck".into(),
        };
        let p = Progress::of_scrub(&r);
        // 200 bytes in 4 s: 50 B/s; 600 bytes left: 12 s
        assert_eq!(p.rate_bytes_per_s, Some(50.0));
        assert_eq!(p.eta_s, Some(12.0));
        assert_eq!((p.pass, p.bad_ranges, p.bad_bytes), (Some(2), 2, 11));
        let done = Progress::of_scrub(&ScrubReport {
            complete: true,
            scrubbed_bytes: 1000,
            ..r.clone()
        });
        assert_eq!(done.eta_s, Some(0.0));
        let none_yet = Progress::of_scrub(&ScrubReport { run_bytes: 0, ..r });
        assert_eq!((none_yet.rate_bytes_per_s, none_yet.eta_s), (None, None));
        // a native job without a known total has a rate but no ETA
        let n = Progress::of_native(&NativeReport {
            scrubbed_bytes: 300,
            run_bytes: 300,
            run_elapsed_s: 3.0,
            errors_corrected: Some(1),
            ..NativeReport::default()
        });
        assert_eq!(
            (n.rate_bytes_per_s, n.eta_s, n.pass),
            (Some(100.0), None, None)
        );
        assert_eq!(n.errors_corrected, Some(1));
    }
}
