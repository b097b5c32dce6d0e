//! From counter samples to FG events: a pure state machine ([`Detector`])
//! fed with the device's counters and fallow's own counts, so it is tested
//! without a device or a clock.
//!
//! Each sample finds *FG activity* when, after subtracting fallow's own
//! I/O, the device
//! - read sectors beyond what fallow issued,
//! - wrote, discarded or flushed (outside a write shield), or
//! - has FG requests in flight (reads only when none of fallow's are in
//!   flight: the kernel cannot tell whose a read in flight is).
//!
//! Own reads are counted when issued, before the kernel counts them, so
//! `kernel − own` never overstates FG sectors; while a read of fallow's is
//! in flight it understates them, and FG work hidden that way shows as
//! soon as the read completes. The detector keeps the running maximum of
//! that estimate and reports growth beyond it; when nothing of fallow's is
//! in flight the estimate is exact and the maximum is reset to it, so a
//! read of fallow's that the device never saw (a hole in a sparse file, a
//! page-cache hit) does not blind it.
//!
//! The device is *busy* from the first sample with FG activity and *idle*
//! at the first sample without any (no FG in flight, no new FG
//! completions, no completion still being counted). A blk-mq device stops
//! counting a request as in flight when it marks it complete, *before* it
//! adds the request's sectors and then its I/O count (`blk_mq_complete_request`,
//! then `blk_update_request`, then `blk_account_io_done`), so one sample
//! can see a request gone from the in-flight count with nothing counted
//! yet, or its sectors without its I/O: measured here on a loop device
//! with a sampler beside 4 KiB direct reads, 327 of 3,098 requests seen
//! leaving the in-flight count had neither counted yet, and 663 of 617,028
//! samples had sectors without their I/O. Such a sample keeps the device
//! busy (a *completion pending*) until the counters catch up, for at most
//! [`COMPLETION_HOLD_SAMPLES`] samples and [`COMPLETION_HOLD_NS`]:
//! otherwise the read ends one busy period in the sample that sees it leave
//! and starts another in the next (the poller's 6 busy periods for 5 reads),
//! or its I/O count lands after the event-driven monitor went to sleep (a
//! read counted in bytes but not as a request). Times have the resolution of the sampling interval: an
//! arrival is known to lie between two samples, an idle interval to start
//! at or before the last busy sample.

use super::own::OwnIo;
use super::stat::{Sample, STAT_SECTOR_BYTES};

/// What the monitor tells the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// FG activity after an idle interval: an FG arrival, between
    /// `after_ns` (the previous sample) and `at_ns`.
    Busy {
        /// When it was seen, monotonic ns.
        at_ns: u64,
        /// The previous sample: the arrival came after it, monotonic ns.
        after_ns: u64,
    },
    /// The device fell idle: no FG request in flight and no new FG
    /// completion since the previous sample.
    Idle {
        /// When it was seen, monotonic ns.
        at_ns: u64,
        /// The last sample with FG activity: the idle interval started at
        /// or before it, monotonic ns.
        idle_start_ns: u64,
        /// Length of the busy period that ended, ns.
        busy_ns: u64,
        /// FG requests completed in it (estimated: a request the device
        /// split counts more than once).
        fg_requests: u32,
        /// The last sample at which a new FG request appeared, monotonic ns.
        last_arrival_ns: u64,
        /// The first idle of a run: the busy period before it is only the
        /// monitor's starting assumption, not one it measured.
        first: bool,
    },
}

impl Event {
    /// When the event was seen, monotonic ns.
    pub fn at_ns(&self) -> u64 {
        match *self {
            Event::Busy { at_ns, .. } | Event::Idle { at_ns, .. } => at_ns,
        }
    }
}

/// Totals of what the detector saw, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DetectorTotals {
    /// Samples observed.
    pub samples: u64,
    /// Samples with FG activity.
    pub busy_samples: u64,
    /// Busy periods seen (FG arrivals after idleness).
    pub busy_periods: u64,
    /// Idle intervals seen.
    pub idle_intervals: u64,
    /// FG bytes read (beyond fallow's own).
    pub fg_read_bytes: u64,
    /// FG bytes written or discarded.
    pub fg_write_bytes: u64,
    /// FG requests completed (estimated).
    pub fg_requests: u64,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Busy {
        start_ns: u64,
        last_active_ns: u64,
        requests: u64,
        last_arrival_ns: u64,
        first: bool,
    },
    Idle,
}

#[derive(Debug, Clone, Copy)]
struct Prev {
    t_ns: u64,
    sample: Sample,
    own: OwnIo,
    fg_in_flight: u64,
}

/// The state machine; see the module documentation.
#[derive(Debug, Clone)]
pub struct Detector {
    /// The first sample's kernel and own counters (the zero of the estimates).
    base: Option<(Sample, OwnIo)>,
    prev: Option<Prev>,
    read_max: i128,
    write_max: i128,
    /// When fallow's own reads last moved, ns: the running maximum is only
    /// lowered once they have been still for [`OWN_SETTLE_NS`].
    own_reads_moved_ns: u64,
    state: State,
    totals: DetectorTotals,
    /// When the event-driven monitor last reported a bio queued on the
    /// device that the counters do not show yet ([`Detector::announce`]).
    announced_ns: Option<u64>,
    /// The announced bio is known not to be fallow's
    /// ([`Detector::announce_foreground`]).
    announced_fg: bool,
    /// FG requests that left the in-flight count, or whose sectors were
    /// counted, without their I/O count yet (see the module documentation).
    pending_completions: u64,
    /// When the pending completions were first seen, ns, and samples since.
    pending_since_ns: u64,
    pending_samples: u32,
}

/// How many samples after a completion pending (see the module
/// documentation) the device stays busy waiting for its count, at least:
/// the kernel adds it microseconds after, so the next sample normally
/// sees it; a request the kernel never counts (a passthrough command, a
/// device with `iostats` off) ends its busy period this much later.
pub const COMPLETION_HOLD_SAMPLES: u32 = 2;

/// ... and for at least this long, ns (two 1 ms ticks: the event-driven
/// monitor may take its next sample microseconds after the one before).
pub const COMPLETION_HOLD_NS: u64 = 2_000_000;

/// How long an announced bio counts as FG activity while the counters do
/// not show it, ns: a blk-mq device counts a request only once it is
/// dispatched to the driver, which under plugging or an I/O scheduler
/// comes from a kworker, a millisecond or more after the bio on a loaded
/// machine (BFQ may hold a queue for its 8 ms idle slice).
pub const ANNOUNCE_HOLD_NS: u64 = 20_000_000;

/// How long the device's counters may lag fallow's own after a read has
/// returned, ns. The kernel accounts a request before it wakes the reader,
/// but a published stat file (the emulated disk's) is rewritten up to a
/// millisecond later, and a loaded machine delays that further: lowering
/// the running maximum in that window would make the device catching up
/// look like FG reads.
const OWN_SETTLE_NS: u64 = 20_000_000;

impl Default for Detector {
    fn default() -> Self {
        Self::new()
    }
}

impl Detector {
    /// A detector that assumes the device busy until a first quiet sample.
    pub fn new() -> Detector {
        Detector {
            base: None,
            prev: None,
            read_max: 0,
            write_max: 0,
            own_reads_moved_ns: 0,
            state: State::Busy {
                start_ns: 0,
                last_active_ns: 0,
                requests: 0,
                last_arrival_ns: 0,
                first: true,
            },
            totals: DetectorTotals::default(),
            announced_ns: None,
            announced_fg: false,
            pending_completions: 0,
            pending_since_ns: 0,
            pending_samples: 0,
        }
    }

    /// A bio was queued on the device at `t_ns` (the block tracepoint that
    /// woke the event-driven monitor, docs/monitor.md). At the next sample
    /// it is FG activity if fallow's own I/O stood still since the sample
    /// before (then the bio was someone else's), and stays so for up to
    /// [`ANNOUNCE_HOLD_NS`] until the counters show it: the arrival is seen
    /// at the wake-up, not when the kernel gets round to dispatching it.
    pub fn announce(&mut self, t_ns: u64) {
        self.announced_ns.get_or_insert(t_ns);
    }

    /// A bio known to be someone else's was queued on the device at
    /// `t_ns` (told apart by the cgroup that queued it,
    /// [`super::cgroup_bios`]): as [`Detector::announce`], but FG activity
    /// whether fallow's own I/O moved or not.
    pub fn announce_foreground(&mut self, t_ns: u64) {
        self.announce(t_ns);
        self.announced_fg = true;
    }

    /// Totals so far.
    pub fn totals(&self) -> DetectorTotals {
        self.totals
    }

    /// True while the device is busy with FG work (or not yet known idle).
    pub fn busy(&self) -> bool {
        matches!(self.state, State::Busy { .. })
    }

    /// Feed one sample taken at `t_ns`, with fallow's own counts read just
    /// before (`own_before`) and just after (`own_after`) the device's.
    pub fn observe(
        &mut self,
        t_ns: u64,
        sample: &Sample,
        own_before: OwnIo,
        own_after: OwnIo,
    ) -> Option<Event> {
        let base = *self.base.get_or_insert((*sample, own_after));
        let Some(prev) = self.prev else {
            self.first_sample(t_ns, sample, own_after);
            return None;
        };
        self.totals.samples += 1;
        let own = OwnMotion::of(own_before, own_after, &prev);
        let fg = self.fg_seen(t_ns, sample, base, own_after, &own, &prev);
        let (awaited, new_pending) = self.settle_pending(t_ns, &fg, &prev);

        let counted_active = fg.new_read > 0
            || fg.new_write > 0
            || fg.new_flush > 0
            || fg.in_flight > 0
            || awaited > 0
            || new_pending > 0;
        // a bio announced since the sample before is someone else's if it
        // is known to be, or if nothing of fallow's moved meanwhile
        let someone_elses = self.announced_fg || own_still(&own, own_after, &prev);
        // the arrival of a busy period that starts here: such a bio, known
        // to the tracepoint's time, before `announced_still` forgets it
        // because the counters show it now
        let arrival_ns = self.announced_ns.filter(|_| someone_elses);
        let announced = self.announced_still(t_ns, counted_active, someone_elses);
        let active = counted_active || announced;
        let arrived = fg.new_read > 0
            || fg.new_write > 0
            || fg.new_flush > 0
            || fg.in_flight > prev.fg_in_flight
            || announced;
        self.totals.fg_read_bytes += fg.new_read * STAT_SECTOR_BYTES;
        self.totals.fg_write_bytes += fg.new_write * STAT_SECTOR_BYTES;
        let counted = if active {
            fg.ios.max(u64::from(fg.new_flush > 0))
        } else {
            0
        };
        self.totals.fg_requests += counted;
        self.prev = Some(Prev {
            t_ns,
            sample: *sample,
            own: own_after,
            fg_in_flight: fg.in_flight,
        });
        self.advance(t_ns, prev.t_ns, arrival_ns, active, arrived, counted)
    }

    /// The first sample only sets the zero, and the start of the busy
    /// period the detector assumes.
    fn first_sample(&mut self, t_ns: u64, sample: &Sample, own_after: OwnIo) {
        self.prev = Some(Prev {
            t_ns,
            sample: *sample,
            own: own_after,
            fg_in_flight: 0,
        });
        if let State::Busy {
            start_ns,
            last_active_ns,
            last_arrival_ns,
            ..
        } = &mut self.state
        {
            (*start_ns, *last_active_ns, *last_arrival_ns) = (t_ns, t_ns, t_ns);
        }
    }

    /// The FG work `sample` shows beyond fallow's own (`own_after`), from
    /// the zero `base`; moves the running maxima of the estimates.
    fn fg_seen(
        &mut self,
        t_ns: u64,
        sample: &Sample,
        (base, base_own): (Sample, OwnIo),
        own_after: OwnIo,
        own: &OwnMotion,
        prev: &Prev,
    ) -> FgSeen {
        let (b, k) = (own_after, &sample.stat);
        // FG sectors read: kernel − own since the start, reported as growth
        // beyond the running maximum
        let read_est = (k.read_sectors.wrapping_sub(base.stat.read_sectors) as i128)
            - (b.read_sectors.wrapping_sub(base_own.read_sectors) as i128);
        let new_read = (read_est - self.read_max).max(0) as u64;
        if own.reads_moving {
            self.own_reads_moved_ns = t_ns;
        }
        let settled = t_ns.saturating_sub(self.own_reads_moved_ns) >= OWN_SETTLE_NS;
        self.read_max = if !settled {
            self.read_max.max(read_est)
        } else {
            read_est
        };

        let writes = |s: &Sample| {
            s.stat
                .write_sectors
                .wrapping_add(s.stat.discard_sectors)
                .wrapping_sub(base.stat.write_sectors)
                .wrapping_sub(base.stat.discard_sectors)
        };
        let write_est =
            writes(sample) as i128 - (b.write_sectors.wrapping_sub(base_own.write_sectors) as i128);
        let (new_write, new_flush) = if own.shield {
            // every write of the sample is ours: absorb it
            self.write_max = write_est;
            (0, 0)
        } else {
            let n = (write_est - self.write_max).max(0) as u64;
            self.write_max = if own.writes_moving {
                self.write_max.max(write_est)
            } else {
                write_est
            };
            (n, k.flush_ios.wrapping_sub(prev.sample.stat.flush_ios))
        };

        let in_flight = match sample.inflight {
            Some(i) => {
                (if own.reads_moving { 0 } else { i.reads })
                    + (if own.shield || own.writes_moving {
                        0
                    } else {
                        i.writes
                    })
            }
            None if own.reads_moving || own.writes_moving || own.shield => 0,
            None => k.in_flight,
        };

        // FG requests completed: device requests minus fallow's estimate
        let p = &prev.sample.stat;
        let dev_ios = if own.shield {
            k.read_ios.wrapping_sub(p.read_ios)
        } else {
            k.read_ios
                .wrapping_add(k.modifying_ios())
                .wrapping_sub(p.read_ios)
                .wrapping_sub(p.modifying_ios())
        };
        let ios = dev_ios.saturating_sub(b.ios.wrapping_sub(prev.own.ios));
        FgSeen {
            new_read,
            new_write,
            new_flush,
            in_flight,
            ios,
        }
    }

    /// Completions the kernel has not finished counting (module docs):
    /// earlier ones still awaited keep this sample busy, and late counts
    /// settle them first. Returns (awaited, newly pending).
    fn settle_pending(&mut self, t_ns: u64, fg: &FgSeen, prev: &Prev) -> (u64, u64) {
        let was_pending = self.pending_completions > 0
            && (self.pending_samples < COMPLETION_HOLD_SAMPLES
                || t_ns.saturating_sub(self.pending_since_ns) < COMPLETION_HOLD_NS);
        let awaited = if was_pending {
            self.pending_completions
        } else {
            0
        };
        let left_uncounted = prev
            .fg_in_flight
            .saturating_sub(fg.in_flight)
            .saturating_sub(fg.ios + fg.new_flush);
        let sectors_without_ios = u64::from((fg.new_read > 0 || fg.new_write > 0) && fg.ios == 0);
        let new_pending = left_uncounted.max(sectors_without_ios);
        self.pending_completions = awaited.saturating_sub(fg.ios) + new_pending;
        if new_pending > 0 {
            (self.pending_since_ns, self.pending_samples) = (t_ns, 0);
        } else {
            self.pending_samples = self.pending_samples.saturating_add(1);
        }
        (awaited, new_pending)
    }

    /// Whether an announced bio still counts as FG activity: if it is
    /// `someone_elses` (nothing of fallow's moved since the last sample, or
    /// it is known to be someone else's), until the counters take over or
    /// the hold runs out. Forgets the announcement otherwise.
    fn announced_still(&mut self, t_ns: u64, counted_active: bool, someone_elses: bool) -> bool {
        let announced = self.announced_ns.is_some_and(|a| {
            someone_elses && !counted_active && t_ns.saturating_sub(a) < ANNOUNCE_HOLD_NS
        });
        if !announced {
            self.announced_ns = None;
            self.announced_fg = false;
        }
        announced
    }

    /// The busy/idle state after a sample at `t_ns` (the one before at
    /// `prev_t_ns`) that was `active`, saw an FG arrival (`arrived`) and
    /// `counted` FG requests: the event of a change, if any. `arrival_ns`:
    /// when an announced bio that was not fallow's was queued.
    fn advance(
        &mut self,
        t_ns: u64,
        prev_t_ns: u64,
        arrival_ns: Option<u64>,
        active: bool,
        arrived: bool,
        counted: u64,
    ) -> Option<Event> {
        match &mut self.state {
            State::Busy {
                start_ns,
                last_active_ns,
                requests,
                last_arrival_ns,
                first,
            } => {
                if active {
                    self.totals.busy_samples += 1;
                    *last_active_ns = t_ns;
                    *requests += counted;
                    if arrived {
                        *last_arrival_ns = t_ns;
                    }
                    return None;
                }
                let ev = Event::Idle {
                    at_ns: t_ns,
                    idle_start_ns: *last_active_ns,
                    busy_ns: last_active_ns.saturating_sub(*start_ns),
                    fg_requests: (*requests).min(u32::MAX as u64) as u32,
                    last_arrival_ns: *last_arrival_ns,
                    first: *first,
                };
                self.state = State::Idle;
                self.totals.idle_intervals += 1;
                Some(ev)
            }
            State::Idle => {
                if !active {
                    return None;
                }
                self.totals.busy_samples += 1;
                self.totals.busy_periods += 1;
                // The arrival lies between the two samples. The
                // event-driven monitor sleeps through an idle interval,
                // so the sample before can be the last before it slept,
                // the whole interval back: the announced bio that woke it
                // is the arrival itself. Without that, the driver took
                // the arrival halfway through the interval, and a budgeted
                // run refitted on idle intervals half their length (mean
                // 51 ms for a 92 ms FG gap on the emulated HDD, so at a
                // given wait the model saw a third to a half of the
                // collisions there were; docs/live.md).
                let after_ns = arrival_ns.map_or(prev_t_ns, |a| a.clamp(prev_t_ns, t_ns));
                self.state = State::Busy {
                    start_ns: after_ns,
                    last_active_ns: t_ns,
                    requests: counted,
                    last_arrival_ns: t_ns,
                    first: false,
                };
                Some(Event::Busy {
                    at_ns: t_ns,
                    after_ns,
                })
            }
        }
    }
}

/// Fallow's own I/O stood still from the sample before to this one's
/// snapshot after (`own_after`): a bio queued meanwhile was someone else's.
fn own_still(own: &OwnMotion, own_after: OwnIo, prev: &Prev) -> bool {
    let b = own_after;
    !own.reads_moving
        && !own.writes_moving
        && !own.shield
        && b.read_sectors == prev.own.read_sectors
        && b.write_sectors == prev.own.write_sectors
        && b.ios == prev.own.ios
}

/// What fallow's own I/O did around one sample, from its counts just
/// before and just after the device's and at the sample before.
struct OwnMotion {
    /// Its reads were in flight or moved while the device was read.
    reads_moving: bool,
    /// Its writes were in flight or moved while the device was read.
    writes_moving: bool,
    /// A write shield was open, or opened or closed since the sample before.
    shield: bool,
}

impl OwnMotion {
    fn of(before: OwnIo, after: OwnIo, prev: &Prev) -> OwnMotion {
        let (a, b) = (before, after);
        OwnMotion {
            reads_moving: a.reads_in_flight
                || b.reads_in_flight
                || a.read_sectors != b.read_sectors,
            writes_moving: a.writes_in_flight
                || b.writes_in_flight
                || a.write_sectors != b.write_sectors,
            shield: a.shield_open() || b.shield_open() || prev.own.shield_events != b.shield_events,
        }
    }
}

/// The FG work one sample shows beyond fallow's own.
struct FgSeen {
    /// New FG sectors read, beyond the running maximum.
    new_read: u64,
    /// New FG sectors written or discarded.
    new_write: u64,
    /// New flushes (0 under a write shield).
    new_flush: u64,
    /// FG requests in flight.
    in_flight: u64,
    /// FG requests completed since the sample before (estimated).
    ios: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::stat::{DiskStat, Inflight};

    /// A scripted device: cumulative counters moved by hand.
    #[derive(Default, Clone, Copy)]
    struct Dev {
        s: DiskStat,
        inflight: Inflight,
    }

    impl Dev {
        fn sample(&self) -> Sample {
            Sample {
                stat: DiskStat {
                    in_flight: self.inflight.reads + self.inflight.writes,
                    ..self.s
                },
                inflight: Some(self.inflight),
            }
        }
        fn read(&mut self, sectors: u64) {
            self.s.read_ios += 1;
            self.s.read_sectors += sectors;
        }
        fn write(&mut self, sectors: u64) {
            self.s.write_ios += 1;
            self.s.write_sectors += sectors;
        }
    }

    fn own(read_sectors: u64, in_flight: bool) -> OwnIo {
        OwnIo {
            read_sectors,
            reads_in_flight: in_flight,
            ..OwnIo::default()
        }
    }

    /// Feed with identical own counts before and after.
    fn feed(d: &mut Detector, t: u64, dev: &Dev, o: OwnIo) -> Option<Event> {
        d.observe(t, &dev.sample(), o, o)
    }

    /// The idle start and FG requests of an `Idle` event; panics on any
    /// other.
    fn idle_of(e: Option<Event>) -> (u64, u32) {
        match e {
            Some(Event::Idle {
                idle_start_ns,
                fg_requests,
                ..
            }) => (idle_start_ns, fg_requests),
            e => panic!("not an idle event: {e:?}"),
        }
    }

    /// A detector fed two quiet samples (at 0 and 1 ms) of a fresh device:
    /// idle, with nothing of fallow's.
    fn idle_at_1ms() -> (Detector, Dev) {
        let mut d = Detector::new();
        let dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        feed(&mut d, 1_000_000, &dev, own(0, false));
        assert!(!d.busy());
        (d, dev)
    }

    #[test]
    fn starts_busy_and_falls_idle_on_the_first_quiet_sample() {
        let mut d = Detector::new();
        let dev = Dev::default();
        assert_eq!(feed(&mut d, 0, &dev, own(0, false)), None);
        match feed(&mut d, 1_000_000, &dev, own(0, false)) {
            Some(Event::Idle {
                first: true, at_ns, ..
            }) => assert_eq!(at_ns, 1_000_000),
            e => panic!("{e:?}"),
        }
        assert!(!d.busy());
    }

    #[test]
    fn an_announced_bio_is_busy_before_the_counters_show_it_unless_it_may_be_ours() {
        let ms = 1_000_000;
        let mut d = Detector::new();
        let mut dev = Dev::default();
        let o = own(0, false);
        feed(&mut d, 0, &dev, o);
        feed(&mut d, ms, &dev, o); // idle
                                   // a bio queued at 2 ms, not yet dispatched: the counters stand still
        d.announce(2 * ms);
        assert_eq!(
            feed(&mut d, 2 * ms, &dev, o),
            Some(Event::Busy {
                at_ns: 2 * ms,
                after_ns: 2 * ms
            })
        );
        // still not counted 1 ms later: busy on the announcement
        assert_eq!(feed(&mut d, 3 * ms, &dev, o), None);
        // dispatched and completed: the counters take over
        dev.read(8);
        assert_eq!(feed(&mut d, 4 * ms, &dev, o), None);
        assert_eq!(idle_of(feed(&mut d, 5 * ms, &dev, o)), (4 * ms, 1));
        // a bio the counters never show: busy for the hold, then idle
        d.announce(10 * ms);
        assert!(matches!(
            feed(&mut d, 10 * ms, &dev, o),
            Some(Event::Busy { .. })
        ));
        assert_eq!(feed(&mut d, 10 * ms + ANNOUNCE_HOLD_NS - 1, &dev, o), None);
        assert!(matches!(
            feed(&mut d, 10 * ms + ANNOUNCE_HOLD_NS, &dev, o),
            Some(Event::Idle { .. })
        ));
        // fallow's own read moved since the last sample: the bio may be
        // its own, so no arrival
        let t = 40 * ms;
        d.announce(t);
        assert_eq!(feed(&mut d, t, &dev, own(8, false)), None);
        assert!(!d.busy());
        // and an own read in flight during the sample: no arrival either
        d.announce(t + ms);
        assert_eq!(feed(&mut d, t + ms, &dev, own(8, true)), None);
        assert!(!d.busy());
    }

    /// The event-driven monitor sleeps through an idle interval: its
    /// sample before an arrival is the last before it slept. The announced
    /// bio dates the arrival and starts the busy period, whether the
    /// counters show the read by the next sample or not; a bio that may be
    /// fallow's own dates nothing.
    #[test]
    fn an_arrival_after_a_sleep_is_dated_by_its_bio_not_by_the_sample_before() {
        let ms = 1_000_000;
        let (mut d, mut dev) = idle_at_1ms();
        // asleep from 1 ms; a bio at 90 ms wakes it, sampled at 90.2 ms
        d.announce(90 * ms);
        assert_eq!(
            feed(&mut d, 90 * ms + 200_000, &dev, own(0, false)),
            Some(Event::Busy {
                at_ns: 90 * ms + 200_000,
                after_ns: 90 * ms
            })
        );
        dev.read(8);
        assert_eq!(feed(&mut d, 95 * ms, &dev, own(0, false)), None);
        // the busy period ran from the bio (90 ms) to the last busy sample
        match feed(&mut d, 96 * ms, &dev, own(0, false)) {
            Some(Event::Idle {
                idle_start_ns,
                busy_ns,
                ..
            }) => assert_eq!((idle_start_ns, busy_ns), (95 * ms, 5 * ms)),
            e => panic!("{e:?}"),
        }
        // asleep again; the read is counted by the sample that the bio
        // woke (dispatched and done within the wake-up): dated by the bio
        d.announce(300 * ms);
        dev.read(8);
        assert_eq!(
            feed(&mut d, 301 * ms, &dev, own(0, false)),
            Some(Event::Busy {
                at_ns: 301 * ms,
                after_ns: 300 * ms
            })
        );
        assert!(matches!(
            feed(&mut d, 302 * ms, &dev, own(0, false)),
            Some(Event::Idle { .. })
        ));
        // fallow's own read moved too, so the bio may have been its own:
        // an FG read the counters show is known only to lie after the
        // sample before
        d.announce(500 * ms);
        dev.read(8 + 16);
        assert_eq!(
            feed(&mut d, 501 * ms, &dev, own(16, false)),
            Some(Event::Busy {
                at_ns: 501 * ms,
                after_ns: 302 * ms
            })
        );
    }

    #[test]
    fn a_bio_known_to_be_foreground_is_busy_while_our_reads_move() {
        let ms = 1_000_000;
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        feed(&mut d, ms, &dev, own(0, false)); // idle
                                               // our reads move and are in flight, and a bio of someone else's is
                                               // queued (its cgroup says so): an arrival all the same
        d.announce_foreground(2 * ms);
        dev.read(64); // ours, counted by the device
        assert_eq!(
            feed(&mut d, 2 * ms, &dev, own(64, true)),
            Some(Event::Busy {
                at_ns: 2 * ms,
                after_ns: 2 * ms
            })
        );
        // it stays busy on the announcement for the hold while our reads
        // go on, then falls idle: our reads alone are never FG
        dev.read(64);
        assert_eq!(feed(&mut d, 3 * ms, &dev, own(128, true)), None);
        assert!(d.busy());
        let late = 2 * ms + ANNOUNCE_HOLD_NS;
        dev.read(64);
        assert!(matches!(
            feed(&mut d, late, &dev, own(192, true)),
            Some(Event::Idle { .. })
        ));
        assert_eq!(d.totals().fg_read_bytes, 0);
        // a plain announcement while our reads move is no arrival
        d.announce(late + ms);
        dev.read(64);
        assert_eq!(feed(&mut d, late + ms, &dev, own(256, true)), None);
        assert!(!d.busy());
    }

    /// A request the kernel has taken off the in-flight count but not yet
    /// counted (module documentation): one busy period, and the request
    /// counted once, whether the counts come in one step or two.
    #[test]
    fn a_completion_counted_after_it_left_the_in_flight_count_ends_no_busy_period() {
        let ms = 1_000_000;
        let o = own(0, false);
        // (a) gone from in flight with nothing counted, then all counted
        let (mut d, mut dev) = idle_at_1ms();
        dev.inflight.reads = 1;
        assert!(matches!(
            feed(&mut d, 2 * ms, &dev, o),
            Some(Event::Busy { .. })
        ));
        dev.inflight.reads = 0;
        assert_eq!(feed(&mut d, 3 * ms, &dev, o), None, "idle before the count");
        dev.read(8);
        assert_eq!(feed(&mut d, 4 * ms, &dev, o), None);
        assert_eq!(idle_of(feed(&mut d, 5 * ms, &dev, o)), (4 * ms, 1));
        assert_eq!(d.totals().busy_periods, 1);
        // (b) the sectors first, the I/O count a sample later
        dev.inflight.reads = 1;
        assert!(matches!(
            feed(&mut d, 6 * ms, &dev, o),
            Some(Event::Busy { .. })
        ));
        dev.inflight.reads = 0;
        dev.s.read_sectors += 8;
        assert_eq!(feed(&mut d, 7 * ms, &dev, o), None);
        dev.s.read_ios += 1;
        assert_eq!(
            feed(&mut d, 8 * ms, &dev, o),
            None,
            "its count ends nothing"
        );
        assert_eq!(idle_of(feed(&mut d, 9 * ms, &dev, o)).1, 1);
        // (c) sectors of a request never seen in flight, its count later
        dev.s.read_sectors += 8;
        assert!(matches!(
            feed(&mut d, 10 * ms, &dev, o),
            Some(Event::Busy { .. })
        ));
        dev.s.read_ios += 1;
        assert_eq!(feed(&mut d, 11 * ms, &dev, o), None);
        assert!(matches!(
            feed(&mut d, 12 * ms, &dev, o),
            Some(Event::Idle { .. })
        ));
        let t = d.totals();
        assert_eq!(
            (t.busy_periods, t.fg_requests, t.fg_read_bytes),
            (3, 3, 3 * 4096)
        );
    }

    /// A request that leaves the in-flight count and is never counted (a
    /// passthrough command, `iostats` off) holds the busy period only for
    /// the hold: two more samples and 2 ms.
    #[test]
    fn a_completion_never_counted_is_awaited_only_for_the_hold() {
        let ms = 1_000_000;
        let o = own(0, false);
        let (mut d, mut dev) = idle_at_1ms();
        dev.inflight.reads = 1;
        feed(&mut d, 2 * ms, &dev, o); // busy
        dev.inflight.reads = 0;
        let gone = 3 * ms;
        assert_eq!(feed(&mut d, gone, &dev, o), None);
        // two samples at once: still awaited (under 2 ms)
        assert_eq!(feed(&mut d, gone + 10, &dev, o), None);
        assert_eq!(feed(&mut d, gone + 20, &dev, o), None);
        // a third sample still under 2 ms: awaited
        assert_eq!(feed(&mut d, gone + COMPLETION_HOLD_NS - 1, &dev, o), None);
        // two samples and 2 ms after: idle, the busy period ending where
        // the device was last seen waiting for the count
        assert_eq!(
            idle_of(feed(&mut d, gone + COMPLETION_HOLD_NS, &dev, o)),
            (gone + COMPLETION_HOLD_NS - 1, 0)
        );
        // and over a long gap one sample is enough for the 2 ms, the two
        // samples still hold
        dev.inflight.reads = 1;
        feed(&mut d, 10 * ms, &dev, o);
        dev.inflight.reads = 0;
        feed(&mut d, 11 * ms, &dev, o);
        assert_eq!(feed(&mut d, 20 * ms, &dev, o), None);
        assert_eq!(feed(&mut d, 30 * ms, &dev, o), None);
        assert!(matches!(
            feed(&mut d, 40 * ms, &dev, o),
            Some(Event::Idle { .. })
        ));
    }

    #[test]
    fn fg_reads_make_a_busy_period_with_its_length_and_requests() {
        let mut d = Detector::new();
        let mut dev = Dev::default();
        let o = own(0, false);
        feed(&mut d, 0, &dev, o);
        feed(&mut d, 1, &dev, o); // idle
                                  // an FG read in flight at t=2, completes by t=3, another one by t=4
        dev.inflight.reads = 1;
        assert_eq!(
            feed(&mut d, 2, &dev, o),
            Some(Event::Busy {
                at_ns: 2,
                after_ns: 1
            })
        );
        dev.inflight.reads = 0;
        dev.read(8);
        assert_eq!(feed(&mut d, 3, &dev, o), None);
        dev.read(8);
        assert_eq!(feed(&mut d, 4, &dev, o), None);
        assert_eq!(
            feed(&mut d, 5, &dev, o),
            Some(Event::Idle {
                at_ns: 5,
                idle_start_ns: 4,
                busy_ns: 3,
                fg_requests: 2,
                last_arrival_ns: 4,
                first: false
            })
        );
        let t = d.totals();
        assert_eq!((t.busy_periods, t.idle_intervals, t.fg_requests), (1, 2, 2));
        assert_eq!(t.fg_read_bytes, 16 * 512);
    }

    #[test]
    fn own_reads_are_never_fg_whatever_the_timing() {
        // Own read of 2048 sectors: issued (counted) before the kernel sees
        // it, in flight at the next sample, counted by the kernel before the
        // scrubber marks it done.
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        assert!(matches!(
            feed(&mut d, 1, &dev, own(0, false)),
            Some(Event::Idle { .. })
        ));
        // issued, not yet in the kernel
        assert_eq!(feed(&mut d, 2, &dev, own(2048, true)), None);
        // in flight in the kernel (split into 8 requests)
        dev.inflight.reads = 8;
        assert_eq!(feed(&mut d, 3, &dev, own(2048, true)), None);
        // completed in the kernel, pread not yet returned
        dev.inflight.reads = 0;
        dev.s.read_ios += 8;
        dev.s.read_sectors += 2048;
        assert_eq!(feed(&mut d, 4, &dev, own(2048, true)), None);
        // returned, with the next read already issued between the two own snapshots
        assert_eq!(
            d.observe(5, &dev.sample(), own(2048, false), own(4096, true)),
            None
        );
        assert!(!d.busy());
        assert_eq!(d.totals().fg_read_bytes, 0);
    }

    #[test]
    fn fg_reads_hidden_behind_an_own_read_show_when_it_completes() {
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        feed(&mut d, 1, &dev, own(0, false));
        // own read issued; an FG read of 8 sectors completes meanwhile,
        // but the kernel has not counted ours yet: 8 − 2048 < 0, hidden
        dev.read(8);
        assert_eq!(feed(&mut d, 2, &dev, own(2048, true)), None);
        // ours completes: kernel 2056 − own 2048 = 8 FG sectors
        dev.s.read_ios += 1;
        dev.s.read_sectors += 2048;
        assert_eq!(
            feed(&mut d, 3, &dev, own(2048, false)),
            Some(Event::Busy {
                at_ns: 3,
                after_ns: 2
            })
        );
        assert_eq!(d.totals().fg_read_bytes, 8 * 512);
    }

    #[test]
    fn an_own_read_the_device_never_saw_does_not_blind_the_detector() {
        // a hole in a sparse file: fallow counts 2048 sectors, the device reads none
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        feed(&mut d, 1, &dev, own(0, false));
        assert_eq!(feed(&mut d, 2, &dev, own(2048, false)), None);
        // once our counters have been still for the settle time, the
        // estimate is re-based: a later FG read of 8 sectors is seen at once
        let settled = 2 + OWN_SETTLE_NS;
        assert_eq!(feed(&mut d, settled, &dev, own(2048, false)), None);
        dev.read(8);
        assert!(matches!(
            feed(&mut d, settled + 1, &dev, own(2048, false)),
            Some(Event::Busy { .. })
        ));
    }

    #[test]
    fn a_device_that_counts_our_read_late_is_not_taken_for_fg() {
        // the emulated disk publishes its stat file up to ~1 ms after a
        // request completes: samples in between see our read and not the device's
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, own(0, false));
        feed(&mut d, 1, &dev, own(0, false));
        assert_eq!(feed(&mut d, 2, &dev, own(2048, true)), None);
        assert_eq!(feed(&mut d, 3, &dev, own(2048, false)), None);
        assert_eq!(feed(&mut d, 1_000_003, &dev, own(2048, false)), None);
        dev.s.read_ios += 1;
        dev.s.read_sectors += 2048;
        assert_eq!(feed(&mut d, 2_000_003, &dev, own(2048, false)), None);
        assert_eq!(d.totals().fg_read_bytes, 0);
    }

    #[test]
    fn writes_are_fg_except_under_a_shield() {
        let mut d = Detector::new();
        let mut dev = Dev::default();
        let quiet = own(0, false);
        feed(&mut d, 0, &dev, quiet);
        feed(&mut d, 1, &dev, quiet);
        // our checkpoint: shield opened and closed between two samples
        dev.write(16);
        dev.s.flush_ios += 1;
        let shielded = OwnIo {
            shield_events: 2,
            ..quiet
        };
        assert_eq!(feed(&mut d, 2, &dev, shielded), None);
        // next sample, nothing new: still idle
        assert_eq!(feed(&mut d, 3, &dev, shielded), None);
        // an FG write
        dev.write(8);
        assert!(matches!(
            feed(&mut d, 4, &dev, shielded),
            Some(Event::Busy { .. })
        ));
        assert_eq!(d.totals().fg_write_bytes, 8 * 512);
        // an FG flush alone is activity too
        let mut d = Detector::new();
        let mut dev = Dev::default();
        feed(&mut d, 0, &dev, quiet);
        feed(&mut d, 1, &dev, quiet);
        dev.s.flush_ios += 1;
        assert!(matches!(
            feed(&mut d, 2, &dev, quiet),
            Some(Event::Busy { .. })
        ));
    }

    #[test]
    fn without_an_inflight_file_the_total_counts_only_when_we_have_nothing_in_flight() {
        let mut d = Detector::new();
        let mut s = Sample::default();
        feed_raw(&mut d, 0, &s, own(0, false));
        feed_raw(&mut d, 1, &s, own(0, false));
        s.stat.in_flight = 1;
        // ours in flight: ambiguous, not FG
        assert_eq!(feed_raw(&mut d, 2, &s, own(8, true)), None);
        s.stat.read_sectors = 8;
        s.stat.in_flight = 1;
        // ours done, one still in flight: FG
        assert!(matches!(
            feed_raw(&mut d, 3, &s, own(8, false)),
            Some(Event::Busy { .. })
        ));
    }

    fn feed_raw(d: &mut Detector, t: u64, s: &Sample, o: OwnIo) -> Option<Event> {
        d.observe(t, s, o, o)
    }

    #[test]
    fn counters_that_started_before_the_monitor_are_its_zero() {
        // the kernel counted 1e9 sectors and fallow 1e6 before monitoring began
        let mut d = Detector::new();
        let mut dev = Dev::default();
        dev.s.read_sectors = 1_000_000_000;
        feed(&mut d, 0, &dev, own(1_000_000, false));
        assert!(matches!(
            feed(&mut d, 1, &dev, own(1_000_000, false)),
            Some(Event::Idle { .. })
        ));
        dev.s.read_sectors += 16;
        assert_eq!(feed(&mut d, 2, &dev, own(1_000_016, false)), None);
    }
}
