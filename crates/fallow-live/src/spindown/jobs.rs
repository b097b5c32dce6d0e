//! Maintenance that rides on spin-ups (Mi et al. §6, "spin-down
//! coordinated with BG work", done live): a registered job — any command,
//! `fallow scrub …`, `smartctl -t short` — is due every `every`; once due
//! it starts the next time the disk is spinning anyway, and only when the
//! disk has slept past `deadline` after the due time does the daemon spend
//! a spin-up on it (the job's own I/O wakes the disk). While a job runs
//! the disk is held spinning. A run that starts on a disk that was asleep
//! at its due time and was woken by someone else saved a spin-up.

use crate::error::{Error, Result};
use serde::Serialize;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A registered job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The command, run with `sh -c`.
    pub command: String,
    /// How often it is due, ns; the first time one period after the start.
    pub every_ns: u64,
    /// How long past its due time it waits for a spin-up before spending one, ns.
    pub deadline_ns: u64,
}

/// Why a run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The disk was spinning when the job was due.
    Spinning,
    /// The disk was asleep when it was due and another process woke it:
    /// the run rode that spin-up (one saved).
    RodeSpinUp,
    /// The deadline passed with the disk asleep: a spin-up was spent.
    Deadline,
}

/// One run of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRun {
    /// The command.
    pub command: String,
    /// Started, s since the daemon started.
    pub started_s: f64,
    /// Ended, s since the daemon started (`None` while running).
    pub ended_s: Option<f64>,
    /// Why it started.
    pub trigger: Trigger,
    /// Exit code (`None` while running or when killed by a signal).
    pub exit_code: Option<i32>,
    /// The daemon stopped it when it was itself stopped (SIGTERM, SIGINT,
    /// `--duration`): the job did not finish.
    pub stopped: bool,
}

#[derive(Debug)]
struct Job {
    spec: JobSpec,
    due_ns: u64,
    asleep_at_due: bool,
    child: Option<(Child, usize)>,
}

/// The jobs of one disk.
#[derive(Debug, Default)]
pub struct Jobs {
    jobs: Vec<Job>,
    runs: Vec<JobRun>,
}

/// Something a job did, for the event log.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEvent {
    /// A run started (index into [`Jobs::runs`]).
    Started(usize),
    /// A run ended (index into [`Jobs::runs`]).
    Ended(usize),
}

impl Jobs {
    /// The jobs of `specs`, the first due one period after `now_ns`.
    pub fn new(specs: &[JobSpec], now_ns: u64) -> Result<Jobs> {
        for s in specs {
            if s.command.trim().is_empty() {
                return Err(Error::invalid("job", "empty command"));
            }
            if s.every_ns == 0 {
                return Err(Error::invalid("job-every", "must be positive"));
            }
        }
        Ok(Jobs {
            jobs: specs
                .iter()
                .map(|s| Job {
                    spec: s.clone(),
                    due_ns: now_ns.saturating_add(s.every_ns),
                    asleep_at_due: false,
                    child: None,
                })
                .collect(),
            runs: Vec::new(),
        })
    }

    /// True while a run is under way (the disk is held spinning).
    pub fn running(&self) -> bool {
        self.jobs.iter().any(|j| j.child.is_some())
    }

    /// When [`Jobs::poll`] next has something to decide, ns: the earliest
    /// due time of a job not running, or its deadline once it found the
    /// disk asleep at its due time (`None`: no job, or all running, which
    /// the caller reaps at its poll interval).
    pub fn next_due_ns(&self) -> Option<u64> {
        self.jobs
            .iter()
            .filter(|j| j.child.is_none())
            .map(|j| {
                if j.asleep_at_due {
                    j.due_ns.saturating_add(j.spec.deadline_ns)
                } else {
                    j.due_ns
                }
            })
            .min()
    }

    /// Every run so far.
    pub fn runs(&self) -> &[JobRun] {
        &self.runs
    }

    /// Spin-ups saved: runs that rode a spin-up someone else caused.
    pub fn saved(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| r.trigger == Trigger::RodeSpinUp)
            .count()
    }

    /// Start what is due, reap what ended. `spinning`: the disk spins now.
    pub fn poll(&mut self, now_ns: u64, start_ns: u64, spinning: bool) -> Result<Vec<JobEvent>> {
        let s = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e9;
        let mut events = Vec::new();
        for j in &mut self.jobs {
            if let Some((child, idx)) = &mut j.child {
                let status = child.try_wait().map_err(|e| {
                    Error::io("job", format!("waiting for `{}`", j.spec.command), e)
                })?;
                if let Some(st) = status {
                    let r = &mut self.runs[*idx];
                    r.ended_s = Some(s(now_ns));
                    r.exit_code = st.code();
                    events.push(JobEvent::Ended(*idx));
                    j.child = None;
                }
                continue;
            }
            if now_ns < j.due_ns {
                continue;
            }
            let trigger = if spinning {
                if j.asleep_at_due {
                    Trigger::RodeSpinUp
                } else {
                    Trigger::Spinning
                }
            } else if now_ns >= j.due_ns.saturating_add(j.spec.deadline_ns) {
                Trigger::Deadline
            } else {
                j.asleep_at_due = true;
                continue;
            };
            // its own process group, so that stopping it reaches what the
            // shell started too
            let child = Command::new("sh")
                .arg("-c")
                .arg(&j.spec.command)
                .stdin(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| Error::io("sh", format!("starting job `{}`", j.spec.command), e))?;
            self.runs.push(JobRun {
                command: j.spec.command.clone(),
                started_s: s(now_ns),
                ended_s: None,
                trigger,
                exit_code: None,
                stopped: false,
            });
            let idx = self.runs.len() - 1;
            events.push(JobEvent::Started(idx));
            j.child = Some((child, idx));
            j.due_ns = now_ns.saturating_add(j.spec.every_ns);
            j.asleep_at_due = false;
        }
        Ok(events)
    }

    /// Stop every running job (the daemon is stopping; SIGTERM once
    /// orphaned them and the status still called them running): SIGTERM
    /// to its process group, SIGKILL after `grace`; each run is recorded
    /// as ended and `stopped`.
    pub fn stop_all(&mut self, start_ns: u64, grace: std::time::Duration) -> Vec<JobEvent> {
        use rustix::process::{kill_process_group, Pid, Signal};
        let mut events = Vec::new();
        for j in &mut self.jobs {
            let Some((mut child, idx)) = j.child.take() else {
                continue;
            };
            let pgid = Pid::from_raw(child.id() as i32);
            if let Some(pgid) = pgid {
                let _ = kill_process_group(pgid, Signal::TERM);
            }
            let t0 = std::time::Instant::now();
            let status = loop {
                match child.try_wait() {
                    Ok(Some(st)) => break Some(st),
                    Ok(None) if t0.elapsed() < grace => {
                        std::thread::sleep(std::time::Duration::from_millis(20))
                    }
                    Ok(None) => {
                        if let Some(pgid) = pgid {
                            let _ = kill_process_group(pgid, Signal::KILL);
                        }
                        break child.wait().ok();
                    }
                    Err(_) => break None,
                }
            };
            let r = &mut self.runs[idx];
            r.ended_s = Some(crate::clock::monotonic_ns().saturating_sub(start_ns) as f64 / 1e9);
            r.exit_code = status.and_then(|s| s.code());
            r.stopped = true;
            events.push(JobEvent::Ended(idx));
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn wait_end(jobs: &mut Jobs, now: u64) -> Vec<JobEvent> {
        for _ in 0..500 {
            let ev = jobs.poll(now, 0, true).unwrap();
            if !ev.is_empty() {
                return ev;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("job did not end");
    }

    #[test]
    fn a_due_job_waits_for_a_spin_up_then_the_deadline_spends_one() {
        let spec = JobSpec {
            command: "exit 3".into(),
            every_ns: 10 * S,
            deadline_ns: 5 * S,
        };
        let mut jobs = Jobs::new(&[spec], 0).unwrap();
        assert_eq!(jobs.next_due_ns(), Some(10 * S));
        // not due yet
        assert!(jobs.poll(9 * S, 0, true).unwrap().is_empty());
        // due at 10 s with the disk asleep: waits
        assert!(jobs.poll(10 * S, 0, false).unwrap().is_empty());
        // now the deadline is the next thing to wake for
        assert_eq!(jobs.next_due_ns(), Some(15 * S));
        // woken by someone else at 12 s: rides it
        assert_eq!(jobs.poll(12 * S, 0, true).unwrap(), [JobEvent::Started(0)]);
        assert!(jobs.running());
        assert_eq!(
            jobs.next_due_ns(),
            None,
            "the running job is reaped by polling"
        );
        assert_eq!(wait_end(&mut jobs, 13 * S), [JobEvent::Ended(0)]);
        assert_eq!(jobs.runs()[0].exit_code, Some(3));
        assert_eq!(jobs.runs()[0].trigger, Trigger::RodeSpinUp);
        // next due at 22 s; asleep through 26.9 s; the deadline at 27 s spends a spin-up
        assert!(jobs.poll(22 * S, 0, false).unwrap().is_empty());
        assert!(jobs.poll(27 * S - 1, 0, false).unwrap().is_empty());
        assert_eq!(jobs.poll(27 * S, 0, false).unwrap(), [JobEvent::Started(1)]);
        wait_end(&mut jobs, 28 * S);
        assert_eq!(jobs.runs()[1].trigger, Trigger::Deadline);
        assert_eq!(jobs.saved(), 1);
        assert!(Jobs::new(
            &[JobSpec {
                command: " ".into(),
                every_ns: 1,
                deadline_ns: 0
            }],
            0
        )
        .is_err());
    }
}
