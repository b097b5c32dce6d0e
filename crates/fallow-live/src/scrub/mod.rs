//! The scrubber: read-only verification of a block device or file, one
//! request at a time, as a [`BgExecutor`] that a [`crate::driver::Driver`]
//! runs in the idle time its policy picks.
//!
//! - [`target`]: opening read-only with `O_DIRECT`, sizes, the read path.
//! - [`order`]: sequential or staggered visiting order.
//! - [`checkpoint`]: progress that survives `kill -9` and reboots.
//! - [`narrow`]: retries and bisection down to the failing sectors.
//! - [`pace`]: rate ceiling and time windows.
//! - [`sgio`]: SCSI VERIFY through `SG_IO`, where the device takes it.
//! - [`session`]: plan → scrubber → driver loop → checkpoint → report, so
//!   a front end only converts its settings and prints.
//!
//! After every request the checkpoint is replaced atomically (by default;
//! see [`ScrubConfig::checkpoint_interval_ns`]), so a resumed scrub skips
//! nothing and repeats at most the one request that was in service.

pub mod checkpoint;
pub mod narrow;
pub mod session;
pub mod sgio;
pub mod target;

// order and pace are top-level modules (below the settings that hold
// their values); their old paths stay
pub use crate::scrub_order as order;
pub use crate::scrub_pace as pace;
pub use crate::scrub_verify::VerifyMode;
pub use checkpoint::{Checkpoint, TargetId};
pub use narrow::{verify_range, BadRange, Verifier};
pub use order::{Order, Plan};
pub use pace::{parse_rate, TokenBucket, Window, Windows};
pub use session::{ScrubOutcome, ScrubPlan, ScrubSession};
pub use sgio::SgVerifier;
pub use target::{Target, TargetKind};

use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::OwnCounters;
use fallow_core::outpath::{OutputGuard, OutputKind};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Largest request (segment) a scrub reads at once, bytes: a read needs a
/// buffer of its size, so `--size 1TiB` on a large target would otherwise
/// allocate until the process aborts. 1 GiB is far above useful sizes
/// (Practical Scrubbing Fig. 4 measures up to 4 MiB).
pub const MAX_REQUEST_BYTES: u64 = 1 << 30;

/// Settings of a scrub.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrubConfig {
    /// Request (segment) size, bytes; a multiple of the target's sector size.
    pub request_size_bytes: u64,
    /// Visiting order.
    pub order: Order,
    /// Extra attempts of a failing request, and of a failing sector.
    pub retries: u32,
    /// Most bytes per second, if any.
    pub max_rate_bytes_per_s: Option<f64>,
    /// Daily windows in which to read (none: always).
    pub windows: Windows,
    /// Stop this run after this many bytes (the checkpoint keeps the rest).
    pub max_bytes: Option<u64>,
    /// The checkpoint file.
    pub checkpoint_path: PathBuf,
    /// Least time between checkpoint writes, ns. 0 (the default) writes
    /// after every request: a crash then repeats at most one request; with
    /// an interval it repeats at most that much work.
    pub checkpoint_interval_ns: u64,
    /// Append one JSON line per completed request to this file.
    pub log_path: Option<PathBuf>,
    /// The command's other inputs (config, tune result) and whether the
    /// user forces replacing files; the target is added here. The
    /// checkpoint and the log pass it before anything is written
    /// ([`fallow_core::outpath`]).
    pub outputs: OutputGuard,
}

/// How to treat an existing checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Start a new pass; an unfinished checkpoint is an error (it would be lost).
    No,
    /// Continue the checkpoint's pass (or start one if there is none, or
    /// the next one if it is complete).
    Yes,
    /// Start a new pass, discarding any checkpoint.
    Restart,
}

/// What the scrubber tells its caller as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum ScrubEvent {
    /// A request completed: bytes scrubbed in the pass so far.
    Progress {
        /// Bytes verified in this pass.
        scrubbed_bytes: u64,
        /// The target's size.
        target_bytes: u64,
    },
    /// An unreadable range was found.
    Bad(BadRange),
    /// Outside every time window: reading resumes in this many seconds.
    WindowClosed {
        /// Seconds until a window opens.
        opens_in_s: u32,
    },
}

/// The end-of-run summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScrubReport {
    /// The target's path.
    pub target: String,
    /// `block` or `file`.
    pub target_kind: String,
    /// The target's size, bytes.
    pub target_bytes: u64,
    /// Bytes verified in this pass, over all runs.
    pub scrubbed_bytes: u64,
    /// Requests issued in this pass, over all runs (retries and narrowing included).
    pub requests: u64,
    /// Unreadable ranges, `[first_byte, last_byte]`, merged.
    pub bad_ranges: Vec<[u64; 2]>,
    /// Wall time the runs of this pass have taken, s.
    pub elapsed_s: f64,
    /// The pass is complete.
    pub complete: bool,
    /// Which pass this is (1 for the first).
    pub pass: u64,
    /// Bytes the pass had verified when this run started.
    pub resumed_from_bytes: u64,
    /// This run's bytes.
    pub run_bytes: u64,
    /// This run's requests.
    pub run_requests: u64,
    /// This run's wall time, s.
    pub run_elapsed_s: f64,
    /// Retries this run.
    pub run_retries: u64,
    /// `sequential` or `staggered`.
    pub order: String,
    /// Regions of a staggered order.
    pub regions: Option<u64>,
    /// Request size, bytes.
    pub request_size_bytes: u64,
    /// `read` (O_DIRECT or buffered) or `scsi-verify`.
    pub method: String,
    /// Reads bypass the page cache.
    pub direct_io: bool,
    /// The checkpoint file.
    pub checkpoint: String,
}

/// Scrubs one target; a [`BgExecutor`].
pub struct Scrubber {
    target_path: String,
    target_kind: String,
    plan: Plan,
    granule: u64,
    verifier: Box<dyn Verifier + Send>,
    method: String,
    direct: bool,
    cfg: ScrubConfig,
    ck: Checkpoint,
    own: Arc<OwnCounters>,
    bucket: Option<TokenBucket>,
    log: Option<File>,
    on_event: Box<dyn FnMut(&ScrubEvent) + Send>,
    resumed_from_bytes: u64,
    active_base_s: f64,
    run_start_ns: u64,
    run_bytes: u64,
    run_requests: u64,
    run_retries: u64,
    last_save_ns: u64,
    dirty: bool,
    window_reported: bool,
    _lock: checkpoint::Lock,
}

impl Scrubber {
    /// A scrubber of `target` reading through `verifier`, which counts its
    /// reads in `own` (see [`Target::reader`]). Loads, checks and (for a
    /// fresh pass) writes the checkpoint.
    pub fn new(
        target: &Target,
        verifier: Box<dyn Verifier + Send>,
        method: &str,
        own: Arc<OwnCounters>,
        cfg: ScrubConfig,
        resume: Resume,
    ) -> Result<Scrubber> {
        let size = cfg.request_size_bytes;
        if size == 0 || size % target.granule_bytes != 0 {
            return Err(Error::invalid(
                "--size",
                format!(
                    "{size} bytes: the request size must be a positive multiple of {}'s sector size, {} bytes",
                    target.path.display(),
                    target.granule_bytes
                ),
            ));
        }
        if size > MAX_REQUEST_BYTES {
            return Err(Error::invalid(
                "--size",
                format!(
                    "{size} bytes: a request is read into a buffer of its size; at most {MAX_REQUEST_BYTES} bytes (1 GiB)"
                ),
            ));
        }
        if let Order::Staggered { regions: 0 } = cfg.order {
            return Err(Error::invalid("--regions", "must be at least 1"));
        }
        let plan = Plan::new(target.size_bytes, size, cfg.order);
        // nothing is written (not even the lock) before the outputs pass:
        // never the target or another input, a device node, a directory,
        // or a file that is not a checkpoint (a log) unless forced
        let guard = cfg.outputs.clone().input(&target.path);
        guard.check(&cfg.checkpoint_path, OutputKind::Checkpoint, "--checkpoint")?;
        // and the files beside it that a save creates and replaces (any
        // regular file is theirs, but never an input or a device)
        for p in [
            checkpoint::lock_path(&cfg.checkpoint_path),
            checkpoint::temp_path(&cfg.checkpoint_path),
        ] {
            guard.check(&p, OutputKind::AppendedLog, "--checkpoint")?;
        }
        if let Some(log) = &cfg.log_path {
            guard
                .clone()
                .input(&cfg.checkpoint_path)
                .check(log, OutputKind::ScrubLog, "--log")?;
            if std::path::absolute(log).ok() == std::path::absolute(&cfg.checkpoint_path).ok() {
                return Err(Error::invalid(
                    "--log",
                    format!(
                        "{}: is the checkpoint too; give them different paths",
                        log.display()
                    ),
                ));
            }
        }
        let lock = checkpoint::lock(&cfg.checkpoint_path)?;
        let existing = match resume {
            Resume::Restart => None,
            _ => Checkpoint::load(&cfg.checkpoint_path)?,
        };
        let ck = match (existing, resume) {
            (Some(c), Resume::Yes) => {
                c.check_matches(&cfg.checkpoint_path, &target.id, cfg.order, size)?;
                let mut c = c;
                if c.complete {
                    c.next_pass();
                }
                c
            }
            (Some(c), Resume::No) if !c.complete => {
                return Err(Error::CheckpointMismatch {
                    path: cfg.checkpoint_path.clone(),
                    message: format!(
                        "an unfinished scrub of {} is checkpointed here ({:.1} % done): pass --resume to continue it or --restart to discard it",
                        c.target.path,
                        100.0 * c.scrubbed_bytes as f64 / c.target.size_bytes.max(1) as f64
                    ),
                })
            }
            _ => Checkpoint::new(target.id.clone(), cfg.order, size, plan.segments),
        };
        let log = cfg
            .log_path
            .as_ref()
            .map(|p| {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| Error::io(p, "cannot open the log for appending", e))
            })
            .transpose()?;
        let bucket = cfg
            .max_rate_bytes_per_s
            .map(|r| TokenBucket::new(r, size))
            .transpose()?;
        let now = monotonic_ns();
        let mut s = Scrubber {
            target_path: target.id.path.clone(),
            target_kind: target.id.kind.clone(),
            plan,
            granule: target.granule_bytes,
            verifier,
            method: method.to_string(),
            direct: target.direct,
            resumed_from_bytes: ck.scrubbed_bytes,
            active_base_s: ck.active_s,
            ck,
            cfg,
            own,
            bucket,
            log,
            on_event: Box::new(|_| {}),
            run_start_ns: now,
            run_bytes: 0,
            run_requests: 0,
            run_retries: 0,
            last_save_ns: now,
            dirty: false,
            window_reported: false,
            _lock: lock,
        };
        s.ck.runs = s.ck.runs.saturating_add(1);
        if s.ck.segments == 0 {
            s.ck.complete = true;
        }
        // written now: a checkpoint that cannot be written fails before any work
        s.save()?;
        Ok(s)
    }

    /// Call `f` on progress, bad ranges and window waits.
    pub fn on_event(&mut self, f: impl FnMut(&ScrubEvent) + Send + 'static) {
        self.on_event = Box::new(f);
    }

    /// The current checkpoint.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.ck
    }

    /// Bytes the pass had done when this run started.
    pub fn resumed_from_bytes(&self) -> u64 {
        self.resumed_from_bytes
    }

    fn save(&mut self) -> Result<()> {
        self.ck.active_s = self.active_base_s + (monotonic_ns() - self.run_start_ns) as f64 / 1e9;
        // the checkpoint's own writes are not FG work
        let _shield = self.own.shield_writes();
        self.ck.save(&self.cfg.checkpoint_path)?;
        self.last_save_ns = monotonic_ns();
        self.dirty = false;
        Ok(())
    }

    /// Write the checkpoint if anything is unsaved (call at the end of a run).
    pub fn flush(&mut self) -> Result<()> {
        if self.dirty {
            self.save()?;
        }
        Ok(())
    }

    /// `--max-bytes` is a hard cap: spent once the next segment would
    /// take the run past it (a segment is the smallest request; before,
    /// adaptive-size's larger requests overshot 16 MiB by 2 MiB).
    fn budget_spent(&self) -> bool {
        self.cfg.max_bytes.is_some_and(|m| {
            let (_, _, one) = self.plan.contiguous_from(self.ck.next_visit, 1);
            self.run_bytes.saturating_add(one) > m
        })
    }

    /// The summary so far.
    pub fn report(&self) -> ScrubReport {
        let run_s = (monotonic_ns() - self.run_start_ns) as f64 / 1e9;
        ScrubReport {
            target: self.target_path.clone(),
            target_kind: self.target_kind.clone(),
            target_bytes: self.plan.target_bytes,
            scrubbed_bytes: self.ck.scrubbed_bytes,
            requests: self.ck.requests,
            bad_ranges: self.ck.bad_ranges.clone(),
            elapsed_s: self.active_base_s + run_s,
            complete: self.ck.complete,
            pass: self.ck.passes_completed + 1,
            resumed_from_bytes: self.resumed_from_bytes,
            run_bytes: self.run_bytes,
            run_requests: self.run_requests,
            run_elapsed_s: run_s,
            run_retries: self.run_retries,
            order: match self.plan.order {
                Order::Sequential => "sequential".into(),
                Order::Staggered { .. } => "staggered".into(),
            },
            regions: match self.plan.order {
                Order::Sequential => None,
                Order::Staggered { regions } => Some(regions),
            },
            request_size_bytes: self.plan.segment_bytes,
            method: self.method.clone(),
            direct_io: self.direct,
            checkpoint: self.cfg.checkpoint_path.display().to_string(),
        }
    }
}

impl BgExecutor for Scrubber {
    fn ready_in_ns(&mut self, size_bytes: u64, now_ns: u64) -> Result<u64> {
        if self.ck.complete || self.budget_spent() {
            return Ok(0); // run_one says finished
        }
        let window_s = self.cfg.windows.wait_now_s();
        if window_s > 0 {
            if !self.window_reported {
                let opens_in_s = self
                    .cfg
                    .windows
                    .until_open_s(chrono_now_s())
                    .unwrap_or(window_s);
                (self.on_event)(&ScrubEvent::WindowClosed { opens_in_s });
                self.window_reported = true;
            }
            return Ok(u64::from(window_s) * 1_000_000_000);
        }
        self.window_reported = false;
        let (_, _, len) = self.next_range(size_bytes);
        Ok(self
            .bucket
            .as_mut()
            .map_or(0, |b| b.ready_in_ns(len, now_ns)))
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.ck.complete || self.budget_spent() {
            return Ok(Step::Finished);
        }
        let (n, off, len) = self.next_range(size_bytes);
        if let Some(b) = &mut self.bucket {
            b.take(len, monotonic_ns());
        }
        let v = verify_range(
            self.verifier.as_mut(),
            off,
            len,
            self.granule,
            self.cfg.retries,
        );
        self.ck.next_visit += n;
        self.ck.scrubbed_bytes += len;
        self.ck.requests = self.ck.requests.saturating_add(v.requests);
        self.run_bytes += len;
        self.run_requests += v.requests;
        self.run_retries += v.retries;
        for b in &v.bad {
            checkpoint::add_range(&mut self.ck.bad_ranges, b.first_byte, b.last_byte);
        }
        if self.ck.next_visit >= self.ck.segments {
            self.ck.complete = true;
        }
        if let Some(log) = &mut self.log {
            let bad: Vec<[u64; 2]> = v.bad.iter().map(|b| [b.first_byte, b.last_byte]).collect();
            let line = serde_json::json!({
                "t_ns": monotonic_ns(),
                "pid": std::process::id(),
                "first_byte": off,
                "last_byte": off + len - 1,
                "bad": bad,
            });
            // one write per line: O_APPEND keeps concurrent lines whole
            let text = format!("{line}\n");
            log.write_all(text.as_bytes()).map_err(|e| {
                Error::io(
                    self.cfg.log_path.clone().unwrap_or_default(),
                    "cannot append to the log",
                    e,
                )
            })?;
        }
        self.dirty = true;
        let now = monotonic_ns();
        if self.ck.complete
            || self.budget_spent()
            || now.saturating_sub(self.last_save_ns) >= self.cfg.checkpoint_interval_ns
        {
            self.save()?;
        }
        for b in v.bad {
            (self.on_event)(&ScrubEvent::Bad(b));
        }
        (self.on_event)(&ScrubEvent::Progress {
            scrubbed_bytes: self.ck.scrubbed_bytes,
            target_bytes: self.plan.target_bytes,
        });
        Ok(if self.ck.complete || self.budget_spent() {
            Step::Finished
        } else {
            Step::More
        })
    }
}

impl Scrubber {
    /// The next request for a policy asking `size_bytes`: segments, offset, length.
    fn next_range(&self, size_bytes: u64) -> (u64, u64, u64) {
        // a policy's larger request reads several segments, but never more
        // than MAX_REQUEST_BYTES at once
        let mut want = (size_bytes.min(MAX_REQUEST_BYTES) / self.plan.segment_bytes).max(1);
        if let Some(m) = self.cfg.max_bytes {
            // and never past --max-bytes (budget_spent says when not even
            // one segment fits)
            let left = m.saturating_sub(self.run_bytes) / self.plan.segment_bytes;
            want = want.min(left.max(1));
        }
        self.plan.contiguous_from(self.ck.next_visit, want)
    }
}

fn chrono_now_s() -> u32 {
    use chrono::Timelike;
    chrono::Local::now().num_seconds_from_midnight()
}

#[cfg(test)]
mod tests {
    use super::narrow::faulty::Faulty;
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        target: Target,
        cfg: ScrubConfig,
        log: PathBuf,
    }

    fn fixture(size: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.bin");
        std::fs::write(&p, vec![0x5au8; size]).unwrap();
        let target = Target::open(&p, true).unwrap();
        let log = dir.path().join("log.jsonl");
        let cfg = ScrubConfig {
            request_size_bytes: 64 * 1024,
            order: Order::Sequential,
            retries: 1,
            max_rate_bytes_per_s: None,
            windows: Windows::default(),
            max_bytes: None,
            checkpoint_path: dir.path().join("ck.json"),
            checkpoint_interval_ns: 0,
            log_path: Some(log.clone()),
            outputs: OutputGuard::default(),
        };
        Fixture {
            _dir: dir,
            target,
            cfg,
            log,
        }
    }

    fn real(f: &Fixture, own: &Arc<OwnCounters>) -> Box<dyn Verifier + Send> {
        Box::new(f.target.reader(own.clone()).unwrap())
    }

    fn drain(s: &mut Scrubber, size: u64) -> u64 {
        let mut n = 0;
        while s.run_one(size).unwrap() == Step::More {
            n += 1;
        }
        n + 1
    }

    fn logged(log: &std::path::Path) -> Vec<(u64, u64)> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["first_byte"].as_u64().unwrap(),
                    v["last_byte"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_full_sequential_pass_covers_the_file_once() {
        let f = fixture(1_000_000);
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(drain(&mut s, 64 * 1024), 16);
        let r = s.report();
        assert!(r.complete);
        assert_eq!((r.scrubbed_bytes, r.requests), (1_000_000, 16));
        let l = logged(&f.log);
        assert_eq!(l.first(), Some(&(0, 65535)));
        assert_eq!(l.last(), Some(&(15 * 65536, 999_999)));
        let ck = Checkpoint::load(&f.cfg.checkpoint_path).unwrap().unwrap();
        assert!(ck.complete);
        assert_eq!(ck.next_visit, 16);
        // reads counted as fallow's own, rounded up to the sector
        assert!(own.read_bytes() >= 1_000_000);
    }

    #[test]
    fn a_larger_policy_size_reads_several_sequential_segments_at_once() {
        let f = fixture(1 << 20);
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(drain(&mut s, 256 * 1024), 4);
        assert_eq!(logged(&f.log)[1], (256 * 1024, 512 * 1024 - 1));
    }

    #[test]
    fn staggered_pass_visits_each_segment_once_in_staggered_order() {
        let mut f = fixture(1 << 20);
        f.cfg.order = Order::Staggered { regions: 4 };
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        // a policy's larger size does not merge staggered segments
        assert_eq!(drain(&mut s, 1 << 20), 16);
        let l = logged(&f.log);
        let starts: Vec<u64> = l.iter().map(|r| r.0 / 65536).collect();
        assert_eq!(&starts[..5], &[0, 4, 8, 12, 1]);
        let mut sorted = starts.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
    }

    /// `--max-bytes` is a hard cap whatever size the policy asks
    /// (adaptive-size asked for more and overshot 16 MiB by 2 MiB): 5.5
    /// segments' budget with 4-segment requests reads 4 + 1 segments, and
    /// a budget below one segment reads nothing.
    #[test]
    fn max_bytes_caps_requests_larger_than_what_is_left() {
        let mut f = fixture(1 << 20);
        f.cfg.max_bytes = Some(5 * 65536 + 32768);
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(drain(&mut s, 4 * 65536), 2);
        assert_eq!(s.report().scrubbed_bytes, 5 * 65536);
        assert_eq!(
            logged(&f.log),
            [(0, 4 * 65536 - 1), (4 * 65536, 5 * 65536 - 1)]
        );
        let mut f = fixture(1 << 20);
        f.cfg.max_bytes = Some(1000);
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(s.run_one(65536).unwrap(), Step::Finished);
        assert_eq!(s.report().scrubbed_bytes, 0);
    }

    #[test]
    fn resume_continues_where_the_budget_stopped_and_restart_discards() {
        let mut f = fixture(1 << 20);
        f.cfg.max_bytes = Some(5 * 65536);
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(drain(&mut s, 65536), 5);
        assert!(!s.report().complete);
        drop(s);
        // a new pass without --resume would lose the progress: refused
        let e = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::No,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("--resume") && e.contains("% done"), "{e}");
        f.cfg.max_bytes = None;
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::Yes,
        )
        .unwrap();
        assert_eq!(s.resumed_from_bytes(), 5 * 65536);
        assert_eq!(drain(&mut s, 65536), 11);
        let r = s.report();
        assert!(r.complete);
        assert_eq!((r.scrubbed_bytes, r.run_bytes), (1 << 20, 11 * 65536));
        // coverage: every segment exactly once over both runs
        let l = logged(&f.log);
        assert_eq!(l.len(), 16);
        assert!(l.windows(2).all(|w| w[0].1 + 1 == w[1].0));
        drop(s);
        // resuming a complete pass starts the next one
        let s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            f.cfg.clone(),
            Resume::Yes,
        )
        .unwrap();
        assert_eq!(
            (s.checkpoint().passes_completed, s.checkpoint().next_visit),
            (1, 0)
        );
        drop(s);
        let s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own,
            f.cfg.clone(),
            Resume::Restart,
        )
        .unwrap();
        assert_eq!(s.checkpoint().passes_completed, 0);
    }

    #[test]
    fn bad_sectors_are_narrowed_and_reported_merged() {
        let f = fixture(1 << 20);
        let own = Arc::new(OwnCounters::new(None));
        let mut faulty = Faulty::new(1 << 20, f.target.granule_bytes);
        let g = f.target.granule_bytes;
        // two adjacent bad sectors straddling a segment boundary, and one more
        faulty.bad = vec![
            [65536 - g, 65536 + g - 1],
            [300_000 / g * g, 300_000 / g * g],
        ];
        let mut s = Scrubber::new(
            &f.target,
            Box::new(faulty),
            "read",
            own,
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        let found = Arc::new(std::sync::Mutex::new(Vec::new()));
        let f2 = found.clone();
        s.on_event(move |e| {
            if let ScrubEvent::Bad(b) = e {
                f2.lock().unwrap().push(b.clone());
            }
        });
        drain(&mut s, 65536);
        let r = s.report();
        assert_eq!(
            r.bad_ranges,
            vec![
                [65536 - g, 65536 + g - 1],
                [300_000 / g * g, 300_000 / g * g + g - 1]
            ]
        );
        // reported as found: three pieces (the boundary range in two requests)
        assert_eq!(found.lock().unwrap().len(), 3);
        assert!(r.run_retries > 0);
        let ck = Checkpoint::load(&f.cfg.checkpoint_path).unwrap().unwrap();
        assert_eq!(ck.bad_ranges, r.bad_ranges);
    }

    #[test]
    fn requests_larger_than_the_bound_are_refused_before_any_buffer() {
        let f = fixture(64 * 1024);
        let own = Arc::new(OwnCounters::new(None));
        let mut cfg = f.cfg.clone();
        cfg.request_size_bytes = 1 << 40; // 1 TiB, whole sectors
        let e = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own.clone(),
            cfg,
            Resume::No,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("--size") && e.contains("at most 1073741824"),
            "{e}"
        );
        // a policy asking for more than the bound per request reads at most
        // the bound: a sparse 3 GiB target, 1 MiB segments
        let big = f._dir.path().join("sparse.img");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let target = Target::open(&big, false).unwrap();
        let mut cfg = f.cfg.clone();
        cfg.request_size_bytes = 1 << 20;
        cfg.checkpoint_path = f._dir.path().join("big.json");
        let reader = Box::new(target.reader(own.clone()).unwrap());
        let s = Scrubber::new(&target, reader, "read", own, cfg, Resume::No).unwrap();
        assert_eq!(s.next_range(u64::MAX), (1024, 0, MAX_REQUEST_BYTES));
    }

    #[test]
    fn request_sizes_must_be_whole_sectors() {
        let mut f = fixture(8192);
        f.cfg.request_size_bytes = 1000;
        let own = Arc::new(OwnCounters::new(None));
        let e = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own,
            f.cfg.clone(),
            Resume::No,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("multiple of"), "{e}");
    }

    #[test]
    fn an_empty_target_is_complete_at_once() {
        let f = fixture(0);
        let own = Arc::new(OwnCounters::new(None));
        let mut s = Scrubber::new(
            &f.target,
            real(&f, &own),
            "read",
            own,
            f.cfg.clone(),
            Resume::No,
        )
        .unwrap();
        assert_eq!(s.run_one(65536).unwrap(), Step::Finished);
        assert!(s.report().complete);
    }
}
