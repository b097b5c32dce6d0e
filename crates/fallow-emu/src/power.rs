//! Power states of the emulated disk: spinning (active while serving,
//! idle otherwise), spinning down, standby and spinning up, with the
//! times, transition delays and energy of `fallow-core`'s
//! [`PowerModel`] (SARD's WD2500JD, Table III, unless
//! overridden), so that a live spin-down daemon can be run and measured
//! against the same model `fallow energy` simulates.
//!
//! The rules are the simulation's (crates/fallow-core/src/energy/sim.rs,
//! after SARD's Figure 1):
//! - A standby command takes the disk from spinning to *spinning down*
//!   for `shutdown_ns`, then to *standby*. It waits for the requests
//!   queued before it (it takes a place in the server's FIFO queue, as a
//!   drive completes its queue before STANDBY IMMEDIATE).
//! - The first request that finds the disk in standby starts a spin-up
//!   and waits `spinup_ns` for it; one that finds it spinning down waits
//!   for the shutdown to end and then for a whole spin-up. Requests queued
//!   behind it wait too (FIFO). The waking request's wait, from its
//!   arrival, is the *exposed spin-up delay*.
//! - Energy: serving at `read_write_w` (the emulator does not split a
//!   service time into seek and transfer, so the model's `seek_w` is not
//!   used), spinning idle at `idle_w`, standby at `standby_w`, and
//!   `spinup_j` / `shutdown_j` per transition (the transition times draw
//!   nothing more, as in the simulation). The always-on reference is the
//!   same service time at `read_write_w` and all the rest at `idle_w`.
//!
//! Reading the counters never wakes the disk: they are a snapshot of this
//! bookkeeping, not a request.

use fallow_core::energy::PowerModel;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the disk is in its power cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    /// Spinning and serving a request.
    Active,
    /// Spinning with nothing to do.
    Idle,
    /// Spinning down after a standby command.
    SpinningDown,
    /// Spun down.
    Standby,
    /// Spinning up for a request.
    SpinningUp,
}

impl PowerState {
    /// The name in the counters file: `active`, `idle`, `spinning-down`,
    /// `standby`, `spinning-up`.
    pub fn name(self) -> &'static str {
        match self {
            PowerState::Active => "active",
            PowerState::Idle => "idle",
            PowerState::SpinningDown => "spinning-down",
            PowerState::Standby => "standby",
            PowerState::SpinningUp => "spinning-up",
        }
    }

    /// Parse [`PowerState::name`].
    pub fn from_name(s: &str) -> Option<PowerState> {
        [
            PowerState::Active,
            PowerState::Idle,
            PowerState::SpinningDown,
            PowerState::Standby,
            PowerState::SpinningUp,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }

    /// True while the platters turn at speed (a request is served at once).
    pub fn spinning(self) -> bool {
        matches!(self, PowerState::Active | PowerState::Idle)
    }
}

/// A snapshot of the power bookkeeping. Times in ns, energy in J.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerCounters {
    /// The state now.
    pub state: PowerState,
    /// Spin-ups (each paid by a request).
    pub spinups: u64,
    /// Spin-downs (standby commands that found the disk spinning).
    pub spindowns: u64,
    /// Standby commands in all (those that found it down or going down too).
    pub standby_commands: u64,
    /// Time serving requests, ns.
    pub active_ns: u64,
    /// Time spinning with nothing to do, ns.
    pub idle_ns: u64,
    /// Time spinning down, ns.
    pub spindown_ns: u64,
    /// Time in standby, ns.
    pub standby_ns: u64,
    /// Time spinning up, ns.
    pub spinup_ns: u64,
    /// Requests that waited for a spin-up (the waking one and those queued behind it).
    pub delayed_requests: u64,
    /// Sum of the waking requests' waits from arrival until the disk was ready, ns.
    pub exposed_delay_ns: u64,
    /// Since the emulator started, ns.
    pub elapsed_ns: u64,
    /// Energy serving, J.
    pub active_j: f64,
    /// Energy spinning idle, J.
    pub idle_j: f64,
    /// Energy of the transitions (spin-ups and spin-downs), J.
    pub cycle_j: f64,
    /// Energy in standby, J.
    pub standby_j: f64,
    /// All of it, J.
    pub total_j: f64,
    /// What the same service would have cost on a disk that never spins down, J.
    pub always_on_j: f64,
}

impl PowerCounters {
    /// `key value` lines, one per field (the file `MOUNTPOINT/power`).
    pub fn to_text(&self) -> String {
        format!(
            "state {}\nspinups {}\nspindowns {}\nstandby_commands {}\nactive_ns {}\nidle_ns {}\n\
             spindown_ns {}\nstandby_ns {}\nspinup_ns {}\ndelayed_requests {}\nexposed_delay_ns {}\n\
             elapsed_ns {}\nactive_j {:.6}\nidle_j {:.6}\ncycle_j {:.6}\nstandby_j {:.6}\n\
             total_j {:.6}\nalways_on_j {:.6}\n",
            self.state.name(),
            self.spinups,
            self.spindowns,
            self.standby_commands,
            self.active_ns,
            self.idle_ns,
            self.spindown_ns,
            self.standby_ns,
            self.spinup_ns,
            self.delayed_requests,
            self.exposed_delay_ns,
            self.elapsed_ns,
            self.active_j,
            self.idle_j,
            self.cycle_j,
            self.standby_j,
            self.total_j,
            self.always_on_j,
        )
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Spinning,
    SpinningDown { until: Instant },
    Standby,
    SpinningUp { until: Instant },
}

#[derive(Debug)]
struct Book {
    phase: Phase,
    /// Start of the current phase's unaccounted time.
    since: Instant,
    spinning_ns: u64,
    spindown_ns: u64,
    standby_ns: u64,
    spinup_ns: u64,
    active_ns: u64,
    serving: bool,
    spinups: u64,
    spindowns: u64,
    standby_commands: u64,
    delayed_requests: u64,
    exposed_delay_ns: u64,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl Book {
    /// Account time up to `now`, taking the timed transitions that are due.
    fn settle(&mut self, now: Instant) {
        loop {
            match self.phase {
                Phase::SpinningDown { until } if until <= now => {
                    self.spindown_ns += ns(until.saturating_duration_since(self.since));
                    self.since = until;
                    self.phase = Phase::Standby;
                }
                Phase::SpinningUp { until } if until <= now => {
                    self.spinup_ns += ns(until.saturating_duration_since(self.since));
                    self.since = until;
                    self.phase = Phase::Spinning;
                }
                _ => break,
            }
        }
        let d = ns(now.saturating_duration_since(self.since));
        match self.phase {
            Phase::Spinning => self.spinning_ns += d,
            Phase::SpinningDown { .. } => self.spindown_ns += d,
            Phase::Standby => self.standby_ns += d,
            Phase::SpinningUp { .. } => self.spinup_ns += d,
        }
        self.since = self.since.max(now);
    }
}

/// The power bookkeeping of one emulated disk.
#[derive(Debug)]
pub(crate) struct Power {
    model: PowerModel,
    start: Instant,
    book: Mutex<Book>,
}

impl Power {
    pub(crate) fn new(model: PowerModel) -> Power {
        let now = Instant::now();
        Power {
            model,
            start: now,
            book: Mutex::new(Book {
                phase: Phase::Spinning,
                since: now,
                spinning_ns: 0,
                spindown_ns: 0,
                standby_ns: 0,
                spinup_ns: 0,
                active_ns: 0,
                serving: false,
                spinups: 0,
                spindowns: 0,
                standby_commands: 0,
                delayed_requests: 0,
                exposed_delay_ns: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        // each update is a few assignments: a poisoned lock is consistent
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn model(&self) -> &PowerModel {
        &self.model
    }

    /// A request that arrived at `arrival` has its turn at `now`: when the
    /// disk will be ready to serve it (`now` when spinning). A spin-up is
    /// started if the disk is down or going down.
    pub(crate) fn ready_at(&self, arrival: Instant, now: Instant) -> Instant {
        let mut b = self.lock();
        b.settle(now);
        let up = Duration::from_nanos(self.model.spinup_ns);
        let ready = match b.phase {
            Phase::Spinning => return now,
            Phase::SpinningUp { until } => {
                // queued behind the request that woke it: it waits too
                b.delayed_requests += 1;
                return until;
            }
            Phase::Standby => {
                let until = now + up;
                b.phase = Phase::SpinningUp { until };
                until
            }
            Phase::SpinningDown { until } => {
                // the shutdown runs to its end, then the spin-up
                b.spindown_ns += ns(until.saturating_duration_since(b.since));
                b.since = until;
                let ready = until + up;
                b.phase = Phase::SpinningUp { until: ready };
                ready
            }
        };
        b.spinups += 1;
        b.delayed_requests += 1;
        b.exposed_delay_ns += ns(ready.saturating_duration_since(arrival));
        ready
    }

    /// Service of a request starts / ends (the disk is spinning).
    pub(crate) fn serving(&self, on: bool, service: Duration) {
        let mut b = self.lock();
        b.serving = on;
        if !on {
            b.active_ns += ns(service);
        }
    }

    /// The standby command, in its turn in the queue. Returns true if the
    /// disk was spinning and now spins down.
    pub(crate) fn standby(&self, now: Instant) -> bool {
        let mut b = self.lock();
        b.settle(now);
        b.standby_commands += 1;
        match b.phase {
            Phase::Spinning => {
                b.phase = Phase::SpinningDown {
                    until: now + Duration::from_nanos(self.model.shutdown_ns),
                };
                b.spindowns += 1;
                true
            }
            // STANDBY IMMEDIATE during a spin-up: the drive finishes the
            // spin-up first; the queue order already made the command wait
            // for the request that woke it, so this is a spinning disk
            // whose spin-up has not been accounted yet — settle did that.
            _ => false,
        }
    }

    pub(crate) fn counters(&self, in_flight: bool) -> PowerCounters {
        let now = Instant::now();
        let mut b = self.lock();
        b.settle(now);
        let state = match b.phase {
            Phase::Spinning if b.serving || in_flight => PowerState::Active,
            Phase::Spinning => PowerState::Idle,
            Phase::SpinningDown { .. } => PowerState::SpinningDown,
            Phase::Standby => PowerState::Standby,
            Phase::SpinningUp { .. } => PowerState::SpinningUp,
        };
        let m = &self.model;
        let s = |ns: u64| ns as f64 / 1e9;
        let active_ns = b.active_ns.min(b.spinning_ns);
        let idle_ns = b.spinning_ns - active_ns;
        let elapsed_ns = ns(now.saturating_duration_since(self.start));
        let active_j = s(active_ns) * m.read_write_w;
        let idle_j = s(idle_ns) * m.idle_w;
        let cycle_j = b.spinups as f64 * m.spinup_j + b.spindowns as f64 * m.shutdown_j;
        let standby_j = s(b.standby_ns) * m.standby_w;
        PowerCounters {
            state,
            spinups: b.spinups,
            spindowns: b.spindowns,
            standby_commands: b.standby_commands,
            active_ns,
            idle_ns,
            spindown_ns: b.spindown_ns,
            standby_ns: b.standby_ns,
            spinup_ns: b.spinup_ns,
            delayed_requests: b.delayed_requests,
            exposed_delay_ns: b.exposed_delay_ns,
            elapsed_ns,
            active_j,
            idle_j,
            cycle_j,
            standby_j,
            total_j: active_j + idle_j + cycle_j + standby_j,
            always_on_j: active_j + s(elapsed_ns.saturating_sub(active_ns)) * m.idle_w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> PowerModel {
        PowerModel {
            spinup_ns: 50_000_000,
            shutdown_ns: 20_000_000,
            ..PowerModel::default()
        }
    }

    #[test]
    fn a_cycle_by_hand() {
        // virtual instants: t0 + x ms; nothing here sleeps
        let p = Power::new(model());
        let t0 = p.start;
        let ms = |x: u64| t0 + Duration::from_millis(x);
        // spinning 0..100, standby command at 100: down 100..120, standby 120..200
        assert!(p.standby(ms(100)));
        assert!(!p.standby(ms(110)), "already going down");
        // a request at 200 waits for the spin-up: ready at 250
        assert_eq!(p.ready_at(ms(200), ms(200)), ms(250));
        // one queued behind it at 210 also waits until 250, no second spin-up
        assert_eq!(p.ready_at(ms(210), ms(220)), ms(250));
        // standby again at 300, a request at 310 during the shutdown:
        // shutdown ends at 320, ready at 370, waits 60
        assert!(p.standby(ms(300)));
        assert_eq!(p.ready_at(ms(310), ms(310)), ms(370));
        let mut b = p.lock();
        b.settle(ms(400));
        assert_eq!(b.spinups, 2);
        assert_eq!(b.spindowns, 2);
        assert_eq!(b.standby_commands, 3);
        assert_eq!(b.delayed_requests, 3);
        assert_eq!(b.exposed_delay_ns, 50_000_000 + 60_000_000);
        assert_eq!(b.spindown_ns, 40_000_000);
        assert_eq!(b.standby_ns, 80_000_000);
        assert_eq!(b.spinup_ns, 100_000_000);
        // spinning: 0..100, 250..300, 370..400
        assert_eq!(b.spinning_ns, 180_000_000);
        assert_eq!(
            b.spinning_ns + b.spindown_ns + b.standby_ns + b.spinup_ns,
            400_000_000
        );
    }

    #[test]
    fn energy_follows_the_model() {
        let p = Power::new(model());
        let t0 = p.start;
        p.serving(true, Duration::ZERO);
        p.serving(false, Duration::from_millis(10));
        assert!(p.standby(t0 + Duration::from_millis(100)));
        std::thread::sleep(Duration::from_millis(200));
        let c = p.counters(false);
        assert_eq!(c.state, PowerState::Standby);
        let m = model();
        // hand: 10 ms serving, 90 ms idle, one shutdown, standby since 120 ms
        assert!((c.active_j - 0.010 * m.read_write_w).abs() < 1e-9);
        assert!((c.idle_j - 0.090 * m.idle_w).abs() < 1e-9);
        assert_eq!(c.cycle_j, m.shutdown_j);
        assert!((c.standby_j - c.standby_ns as f64 / 1e9 * m.standby_w).abs() < 1e-9);
        assert_eq!(
            c.idle_ns + c.active_ns + c.spindown_ns + c.standby_ns + c.spinup_ns,
            c.elapsed_ns
        );
        let text = c.to_text();
        assert!(
            text.starts_with("state standby\nspinups 0\nspindowns 1\n"),
            "{text}"
        );
    }
}
