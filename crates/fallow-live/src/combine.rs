//! Several monitors as one ([`either`]): busy while any of them is busy,
//! idle when all are. `fallow run --device sda --net eth0` runs its
//! command only when both the disk and the network are idle (a backup
//! reads one and fills the other).
//!
//! [`Merge`] is the pure state machine; [`either`] feeds it from one
//! forwarding thread per monitor.

use crate::error::{Error, Result};
use crate::monitor::{Event, Monitor, MonitorStats};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Events of several sources merged into the events of one that is busy
/// while any source is.
#[derive(Debug, Clone)]
pub struct Merge {
    /// Per source: busy (sources start busy, as the monitors do).
    busy: Vec<bool>,
    /// Per source: its latest idle start and last FG arrival, ns.
    idle_start_ns: Vec<u64>,
    last_arrival_ns: Vec<u64>,
    /// The merged busy period: its start and FG requests so far.
    start_ns: u64,
    requests: u64,
    /// No merged idle interval yet.
    first: bool,
    busy_periods: u64,
    idle_intervals: u64,
}

impl Merge {
    /// A merge of `n` sources, all busy until each says otherwise.
    pub fn new(n: usize) -> Merge {
        Merge {
            busy: vec![true; n],
            idle_start_ns: vec![0; n],
            last_arrival_ns: vec![0; n],
            start_ns: 0,
            requests: 0,
            first: true,
            busy_periods: 0,
            idle_intervals: 0,
        }
    }

    /// Merged busy periods and idle intervals so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.busy_periods, self.idle_intervals)
    }

    /// Source `i` sent `ev`: the merged event, if the merged state changed.
    pub fn observe(&mut self, i: usize, ev: Event) -> Option<Event> {
        let all_idle_before = !self.busy.iter().any(|&b| b);
        match ev {
            Event::Busy { after_ns, .. } => {
                self.busy[i] = true;
                if all_idle_before {
                    self.start_ns = after_ns;
                    self.requests = 0;
                    self.busy_periods += 1;
                    return Some(ev);
                }
                None
            }
            Event::Idle {
                at_ns,
                idle_start_ns,
                fg_requests,
                last_arrival_ns,
                first,
                ..
            } => {
                self.busy[i] = false;
                self.idle_start_ns[i] = idle_start_ns;
                self.last_arrival_ns[i] = last_arrival_ns;
                if !first {
                    self.requests += u64::from(fg_requests);
                }
                if all_idle_before || self.busy.iter().any(|&b| b) {
                    return None;
                }
                let idle_start = self.idle_start_ns.iter().copied().max().unwrap_or(at_ns);
                let first = std::mem::replace(&mut self.first, false);
                self.idle_intervals += 1;
                Some(Event::Idle {
                    at_ns,
                    idle_start_ns: idle_start,
                    busy_ns: if first {
                        0
                    } else {
                        idle_start.saturating_sub(self.start_ns)
                    },
                    fg_requests: self.requests.min(u32::MAX as u64) as u32,
                    last_arrival_ns: self.last_arrival_ns.iter().copied().max().unwrap_or(at_ns),
                    first,
                })
            }
        }
    }
}

/// How long a forwarder waits for an event before looking at the stop flag, ns.
const POLL_NS: u64 = 20_000_000;

/// One monitor made of `monitors`: busy while any is busy. Its statistics
/// are the sum of theirs (samples, CPU time, FG work) with the merged
/// busy periods and idle intervals; an error of any one ends it.
pub fn either(monitors: Vec<Monitor>) -> Result<Monitor> {
    if monitors.is_empty() {
        return Err(Error::invalid("monitor", "nothing to monitor"));
    }
    let n = monitors.len();
    let label = monitors
        .iter()
        .map(|m| m.stats().source)
        .collect::<Vec<_>>()
        .join(" + ");
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Mutex::new(MonitorStats {
        source: label.clone(),
        ..MonitorStats::default()
    }));
    let merge = Arc::new(Mutex::new(Merge::new(n)));
    let parts = Arc::new(Mutex::new(vec![MonitorStats::default(); n]));
    let (stop2, stats2) = (stop.clone(), stats.clone());
    let publish = move |parts: &[MonitorStats], merge: &Merge| {
        let mut s = stats2.lock().unwrap_or_else(|p| p.into_inner());
        *s = MonitorStats {
            source: label.clone(),
            interval_s: parts
                .iter()
                .map(|p| p.interval_s)
                .fold(f64::INFINITY, f64::min),
            samples: parts.iter().map(|p| p.samples).sum(),
            late_samples: parts.iter().map(|p| p.late_samples).sum(),
            skipped_samples: parts.iter().map(|p| p.skipped_samples).sum(),
            busy_periods: merge.counts().0,
            idle_intervals: merge.counts().1,
            fg_requests: parts.iter().map(|p| p.fg_requests).sum(),
            fg_read_bytes: parts.iter().map(|p| p.fg_read_bytes).sum(),
            fg_write_bytes: parts.iter().map(|p| p.fg_write_bytes).sum(),
            cpu_s: parts.iter().map(|p| p.cpu_s).sum(),
            wall_s: parts.iter().map(|p| p.wall_s).fold(0.0, f64::max),
            kind: join(parts.iter().map(|p| p.kind.as_str()), "+"),
            kind_reason: join(parts.iter().map(|p| p.kind_reason.as_str()), "; "),
            wakeups: parts.iter().map(|p| p.wakeups).sum(),
        };
    };
    let handle = std::thread::Builder::new()
        .name("fallow-monitor-either".into())
        .spawn(move || -> Result<()> {
            // one forwarder per monitor; the first error stops them all
            std::thread::scope(|scope| {
                let handles: Vec<_> = monitors
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut m)| {
                        let (tx, stop, merge, parts, publish) =
                            (tx.clone(), &stop2, &merge, &parts, &publish);
                        scope.spawn(move || -> Result<()> {
                            let r = loop {
                                if stop.load(Ordering::SeqCst) {
                                    break Ok(());
                                }
                                match m.recv_timeout(POLL_NS) {
                                    Ok(Some(ev)) => {
                                        let out = {
                                            let mut g =
                                                merge.lock().unwrap_or_else(|p| p.into_inner());
                                            g.observe(i, ev)
                                        };
                                        if let Some(out) = out {
                                            if tx.send(out).is_err() {
                                                break Ok(());
                                            }
                                        }
                                    }
                                    Ok(None) => {}
                                    Err(e) => break Err(e),
                                }
                                let mut p = parts.lock().unwrap_or_else(|p| p.into_inner());
                                p[i] = m.stats();
                                let g = merge.lock().unwrap_or_else(|p| p.into_inner());
                                publish(&p, &g);
                            };
                            if r.is_err() {
                                stop.store(true, Ordering::SeqCst);
                            }
                            let last = m.stop();
                            let mut p = parts.lock().unwrap_or_else(|p| p.into_inner());
                            if let Ok(s) = last {
                                p[i] = s;
                            }
                            let g = merge.lock().unwrap_or_else(|p| p.into_inner());
                            publish(&p, &g);
                            r
                        })
                    })
                    .collect();
                drop(tx);
                let mut result = Ok(());
                for h in handles {
                    let r = h
                        .join()
                        .unwrap_or_else(|_| Err(Error::Monitor("a forwarder panicked".into())));
                    if result.is_ok() {
                        result = r;
                    }
                }
                result
            })
        })
        .map_err(|e| Error::Monitor(format!("cannot start the thread: {e}")))?;
    Ok(Monitor::from_parts(rx, stop, handle, stats))
}

/// The non-empty texts joined by `sep` (the kinds of merged monitors).
fn join<'a>(parts: impl Iterator<Item = &'a str>, sep: &str) -> String {
    parts
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(at: u64, start: u64, reqs: u32, first: bool) -> Event {
        Event::Idle {
            at_ns: at,
            idle_start_ns: start,
            busy_ns: 0,
            fg_requests: reqs,
            last_arrival_ns: start,
            first,
        }
    }

    fn busy(at: u64) -> Event {
        Event::Busy {
            at_ns: at,
            after_ns: at - 1,
        }
    }

    #[test]
    fn busy_while_any_is_busy() {
        let mut m = Merge::new(2);
        // idle only once both are
        assert_eq!(m.observe(0, idle(10, 9, 0, true)), None);
        assert_eq!(
            m.observe(1, idle(12, 11, 0, true)),
            Some(Event::Idle {
                at_ns: 12,
                idle_start_ns: 11,
                busy_ns: 0,
                fg_requests: 0,
                last_arrival_ns: 11,
                first: true
            })
        );
        // source 1 busy: merged busy
        assert_eq!(m.observe(1, busy(20)), Some(busy(20)));
        // source 0 busy too: nothing new
        assert_eq!(m.observe(0, busy(25)), None);
        assert_eq!(m.observe(1, idle(30, 29, 3, false)), None);
        // both idle: the merged period ran from 19 to the later idle start
        assert_eq!(
            m.observe(0, idle(40, 38, 2, false)),
            Some(Event::Idle {
                at_ns: 40,
                idle_start_ns: 38,
                busy_ns: 38 - 19,
                fg_requests: 5,
                last_arrival_ns: 38,
                first: false
            })
        );
        assert_eq!(m.counts(), (1, 2));
    }

    #[test]
    fn either_of_a_quiet_and_a_file_monitor() {
        // a disk in the stat-file format and a device-less monitor
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        let write = |sectors: u64, inflight: u64| {
            let tmp = dir.path().join("stat.tmp");
            std::fs::write(
                &tmp,
                format!(
                    "{} 0 {sectors} 0 0 0 0 0 {inflight} 0 0 0 0 0 0 0 0\n",
                    sectors / 8
                ),
            )
            .unwrap();
            std::fs::rename(&tmp, &stat).unwrap();
        };
        write(0, 0);
        let disk = Monitor::start(
            &crate::StatSource::file(&stat).unwrap(),
            vec![],
            crate::MonitorConfig {
                interval_ns: 500_000,
            },
        )
        .unwrap();
        let mut m = either(vec![disk, Monitor::without_device()]).unwrap();
        let mut next = || {
            m.recv_timeout(2_000_000_000)
                .unwrap()
                .expect("an event in 2 s")
        };
        assert!(matches!(next(), Event::Idle { first: true, .. }));
        write(8, 1);
        assert!(matches!(next(), Event::Busy { .. }));
        write(16, 0);
        assert!(matches!(next(), Event::Idle { first: false, .. }));
        let s = m.stop().unwrap();
        assert_eq!(s.source, format!("{} + none", stat.display()));
        assert_eq!(s.busy_periods, 1);
        assert!(s.samples > 0);
    }

    #[test]
    fn nothing_to_merge_is_an_error() {
        assert!(either(vec![]).is_err());
    }
}
