//! A native job's own I/O, as the monitor must see it.
//!
//! A kernel scrub's reads carry no mark fallow can count at issue (they are
//! not fallow's syscalls, nor in a cgroup of fallow's: btrfs workers do
//! them). Counting "bytes scrubbed" from the tool would need a status call
//! per sample and still miss what the kernel reads beyond them (both
//! copies of DUP metadata, re-reads of a chunk after a resume). So the
//! executor opens a [`Gate`] just before it lets the job run and closes it
//! once the job has stopped (`btrfs scrub cancel` returned and the scrub
//! process exited; the FITRIM ioctl returned); while it is open, every
//! sector a watched device reads and every write, flush or discard it does
//! is counted as the job's own ([`GateIo`], one per device).
//!
//! The monitor takes the own snapshot *after* it reads the device's
//! counters, and [`GateIo`] reads the same counters in its snapshot, so
//! own ≥ device within a sample: the job's I/O is never taken for FG work.
//! The price: FG reads that complete while the gate is open are counted as
//! the job's too, like an FG request that finds a disk request in service
//! (it is served after the slice, not seen during it). Once the gate is
//! closed the count is frozen at the device's value when the job stopped,
//! and FG reads (and FG requests in flight) show as they are.

use crate::error::Result;
use crate::monitor::own::{OwnIo, OwnIoSource};
use crate::monitor::stat::{StatReader, StatSource};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
struct State {
    reader: StatReader,
    open: bool,
    /// Device read / write+discard sectors when the gate last opened.
    start: (u64, u64),
    /// Own sectors counted in earlier openings.
    acc: (u64, u64),
    events: u64,
}

/// One watched device's share of the gate; the monitor's [`OwnIoSource`].
#[derive(Debug)]
pub struct GateIo {
    source: StatSource,
    state: Mutex<State>,
}

fn counters(r: &mut StatReader) -> Result<(u64, u64)> {
    let s = r.read()?.stat;
    Ok((
        s.read_sectors,
        s.write_sectors.wrapping_add(s.discard_sectors),
    ))
}

impl GateIo {
    fn new(source: &StatSource) -> Result<GateIo> {
        let mut reader = source.open()?;
        let now = counters(&mut reader)?;
        Ok(GateIo {
            source: source.clone(),
            state: Mutex::new(State {
                reader,
                open: false,
                start: now,
                acc: (0, 0),
                events: 0,
            }),
        })
    }

    /// The device it counts.
    pub fn source(&self) -> &StatSource {
        &self.source
    }

    /// Own sectors (read, written or discarded) counted so far.
    pub fn own_sectors(&self) -> (u64, u64) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (open, start, acc) = (st.open, st.start, st.acc);
        if !open {
            return acc;
        }
        let now = counters(&mut st.reader).unwrap_or(start);
        (
            acc.0 + now.0.wrapping_sub(start.0),
            acc.1 + now.1.wrapping_sub(start.1),
        )
    }

    fn set(&self, open: bool) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.open == open {
            return;
        }
        // an unreadable sample keeps the last reading: at worst a little
        // FG I/O is taken for the job's, never the other way round
        let now = counters(&mut st.reader).unwrap_or(st.start);
        if open {
            st.start = now;
        } else {
            st.acc.0 += now.0.wrapping_sub(st.start.0);
            st.acc.1 += now.1.wrapping_sub(st.start.1);
        }
        st.open = open;
        st.events += 1;
    }
}

impl OwnIoSource for GateIo {
    fn snapshot(&self) -> OwnIo {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (mut r, mut w) = st.acc;
        if st.open {
            let start = st.start;
            let now = counters(&mut st.reader).unwrap_or(start);
            r += now.0.wrapping_sub(start.0);
            w += now.1.wrapping_sub(start.1);
        }
        OwnIo {
            read_sectors: r,
            write_sectors: w,
            ios: 0,
            reads_in_flight: st.open,
            writes_in_flight: st.open,
            // open: a shield is open (odd count); the detector also absorbs
            // the writes of the sample in which it closed
            shield_events: st.events,
        }
    }
}

/// The gate over every device a native job touches.
#[derive(Debug, Default)]
pub struct Gate {
    ios: Mutex<Vec<Arc<GateIo>>>,
}

impl Gate {
    /// A closed gate over `sources` (none: a job whose devices are not
    /// watched).
    pub fn new(sources: &[StatSource]) -> Result<Arc<Gate>> {
        Ok(Arc::new(Gate {
            ios: Mutex::new(
                sources
                    .iter()
                    .map(|s| GateIo::new(s).map(Arc::new))
                    .collect::<Result<_>>()?,
            ),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<GateIo>>> {
        self.ios.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The per-device sources, for the monitors.
    pub fn ios(&self) -> Vec<Arc<GateIo>> {
        self.lock().clone()
    }

    /// Also count `source` (a monitor named by the user: an emulated
    /// disk's counters); the same source twice gives the same counter.
    pub fn watch(&self, source: &StatSource) -> Result<Arc<GateIo>> {
        let mut ios = self.lock();
        if let Some(g) = ios.iter().find(|g| g.source.stat_path == source.stat_path) {
            return Ok(g.clone());
        }
        let g = Arc::new(GateIo::new(source)?);
        if ios
            .first()
            .is_some_and(|f| f.state.lock().unwrap_or_else(|p| p.into_inner()).open)
        {
            g.set(true);
        }
        ios.push(g.clone());
        Ok(g)
    }

    /// The job is about to run.
    pub fn open(&self) {
        for g in self.lock().iter() {
            g.set(true);
        }
    }

    /// The job has stopped (nothing of it is in flight any more).
    pub fn close(&self) {
        for g in self.lock().iter() {
            g.set(false);
        }
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.lock()
            .first()
            .is_some_and(|g| g.state.lock().unwrap_or_else(|p| p.into_inner()).open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::{Detector, Event, Sample};

    fn stat_line(read: u64, write: u64, in_flight: u64) -> String {
        format!("1 0 {read} 0 1 0 {write} 0 {in_flight} 0 0 0 0 0 0 0 0\n")
    }

    fn publish(p: &std::path::Path, read: u64, write: u64, in_flight: u64) {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, stat_line(read, write, in_flight)).unwrap();
        std::fs::rename(&tmp, p).unwrap();
    }

    #[test]
    fn counts_what_the_device_does_while_open_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stat");
        publish(&p, 100, 10, 0);
        let gate = Gate::new(&[StatSource::file(&p).unwrap()]).unwrap();
        let io = gate.ios()[0].clone();
        publish(&p, 150, 10, 0); // FG before: not ours
        assert_eq!(io.snapshot().read_sectors, 0);
        gate.open();
        assert!(gate.is_open() && io.snapshot().reads_in_flight);
        publish(&p, 1150, 18, 1);
        let s = io.snapshot();
        assert_eq!((s.read_sectors, s.write_sectors), (1000, 8));
        assert!(s.shield_open());
        publish(&p, 2150, 18, 0);
        gate.close();
        publish(&p, 2158, 18, 0); // FG after: not ours
        let s = io.snapshot();
        assert_eq!((s.read_sectors, s.write_sectors), (2000, 8));
        assert!(!s.reads_in_flight && !s.shield_open());
        assert_eq!(io.own_sectors(), (2000, 8));
    }

    /// The detector, fed as the monitor feeds it (own snapshots around the
    /// device's), takes nothing the gate covers for FG work, and sees FG
    /// reads after it closes.
    #[test]
    fn the_detector_sees_no_fg_while_open_and_fg_after() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("stat");
        publish(&p, 0, 0, 0);
        let src = StatSource::file(&p).unwrap();
        let gate = Gate::new(std::slice::from_ref(&src)).unwrap();
        let io = gate.ios()[0].clone();
        let mut reader = src.open().unwrap();
        let mut det = Detector::new();
        let mut t = 0u64;
        let mut step = |det: &mut Detector| -> Option<Event> {
            t += 1_000_000;
            let before = io.snapshot();
            let s: Sample = reader.read().unwrap();
            let after = io.snapshot();
            det.observe(t, &s, before, after)
        };
        // quiet: idle
        for _ in 0..5 {
            step(&mut det);
        }
        assert!(!det.busy());
        gate.open();
        let mut sectors = 0;
        for _ in 0..50 {
            sectors += 2048;
            publish(&p, sectors, 0, 3);
            assert!(
                !matches!(step(&mut det), Some(Event::Busy { .. })),
                "the job's reads were taken for FG"
            );
        }
        publish(&p, sectors, 0, 0);
        gate.close();
        for _ in 0..30 {
            assert_eq!(step(&mut det), None);
        }
        assert!(!det.busy());
        // an FG read after the job stopped
        publish(&p, sectors + 8, 0, 1);
        assert!(matches!(step(&mut det), Some(Event::Busy { .. })));
    }
}
