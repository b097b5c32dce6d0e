//! An [`ActivitySource`] from the kernel's block tracepoints (the
//! event-driven [`EventMonitor`], docs/monitor.md): it waits in
//! `poll(2)` until I/O happens instead of polling, and names who issued
//! each request — the process, pid and cgroup of the submitter
//! (`block_bio_queue`), or the flusher and the inode's dirtier for
//! writeback. The device's `stat` counters are still read on each wake-up
//! for the in-flight count and busy time (they are what "nothing in
//! flight" means, and cost one small read per event batch).
//!
//! SG_IO pass-through commands (the daemon's own STANDBY IMMEDIATE and
//! CHECK POWER MODE) pass the block layer too; they are no data I/O
//! (`IoOp::Other`) and are not counted as activity.

use super::activity::{ActivitySource, Issuer, Observation, StatPoll};
use crate::error::Result;
use crate::monitor::stat::StatSource;
use crate::monitor::{DevId, EventMonitor, IoOp, IoPhase, Origin};

/// Block-tracepoint events of one disk, with its counters.
pub struct TracedSource {
    mon: EventMonitor,
    stat: StatPoll,
    label: String,
}

impl std::fmt::Debug for TracedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracedSource")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl TracedSource {
    /// Watch `devs` (a disk and, for a partition, its disk) whose counters
    /// are `source`. Fails when the monitor cannot run here (say why:
    /// [`EventMonitor::available`]).
    pub fn open(source: &StatSource, devs: &[DevId]) -> Result<TracedSource> {
        let mon = EventMonitor::open(devs)?;
        Ok(TracedSource {
            mon,
            stat: StatPoll::new(source)?,
            label: format!(
                "block tracepoints of {} + {}",
                devs.iter()
                    .map(|d| format!("{}:{}", d.major, d.minor))
                    .collect::<Vec<_>>()
                    .join(","),
                source.stat_path.display()
            ),
        })
    }
}

/// Who is behind a submission event.
fn issuer(e: &crate::monitor::IoEvent) -> Issuer {
    match &e.origin {
        Origin::Writeback { inode } => {
            let by = inode.as_ref().and_then(|i| i.dirtied_by.as_ref());
            let what = match inode {
                Some(i) => match (&i.path, by) {
                    (Some(p), _) => format!("writeback:{}", p.display()),
                    (None, Some(t)) => format!("writeback:{}", t.comm),
                    (None, None) => format!("writeback:inode {}", i.ino),
                },
                None => "writeback".to_string(),
            };
            Issuer {
                pid: by.map_or(e.pid, |t| t.pid),
                comm: what,
                cgroup: by.and_then(|t| t.cgroup.clone()).or(e.cgroup.clone()),
            }
        }
        Origin::Process | Origin::Unknown => Issuer {
            pid: e.pid,
            comm: e.comm.clone(),
            cgroup: e.cgroup.clone(),
        },
    }
}

impl ActivitySource for TracedSource {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn next(&mut self, wait_ns: u64) -> Result<Observation> {
        // the daemon has already slept on `wait_fds`: just read
        let events = if wait_ns == 0 {
            self.mon.read_now()
        } else {
            self.mon.wait(Some(wait_ns))?
        };
        let mut obs = self.stat.next(0)?;
        let mut issuers: Vec<Issuer> = Vec::new();
        for e in events.iter().filter(|e| e.op != IoOp::Other) {
            obs.io = true;
            if e.phase == IoPhase::Queue {
                let who = issuer(e);
                if !issuers.contains(&who) {
                    issuers.push(who);
                }
            }
        }
        obs.issuers = issuers;
        Ok(obs)
    }

    fn in_flight(&mut self) -> Result<u64> {
        self.stat.in_flight()
    }

    fn attribution_gap(&self) -> Option<&'static str> {
        None
    }

    fn wait_fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        self.mon.wait_fds()
    }
}
