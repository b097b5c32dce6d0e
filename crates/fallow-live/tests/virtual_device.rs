//! The simulator and the live driver tell a policy the same busy periods
//! and idle intervals (docs/simulation.md, "The model").
//!
//! A fake device replays a FCFS trace in virtual time: FG requests arrive
//! at their trace times and take their trace service times, BG requests
//! take a constant time and are not preempted, so an FG arrival during one
//! waits for it and, through it, may run into the next busy period. The
//! device's counters feed the real [`Detector`] at every instant they
//! change (the state just before, just after, and a second look after, so
//! the Detector's sample resolution is exact), and its events drive the
//! real [`Driver`] through [`EventSource`] on the same virtual clock. The
//! counters are the FG's alone: a monitor that subtracts fallow's own I/O
//! exactly. On a FCFS trace the simulator's busy-period shift is exact, so
//! the two runs must agree to the ns.

use fallow_core::policy::{self, Ctx, Decision, Policy};
use fallow_core::sim::{simulate, BgService, BgWork, Prepared, SimConfig};
use fallow_core::workload::{ArrivalProcess, SyntheticWorkload};
use fallow_core::ServiceModel;
use fallow_live::monitor::{Detector, DiskStat, Inflight, OwnIo, Sample};
use fallow_live::{BgExecutor, Driver, DriverConfig, Event, EventSource, Step};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Heard = Arc<Mutex<(Vec<(u64, u32)>, Vec<(u64, bool)>)>>;

/// Wraps a registry policy and records what it hears. Until it has heard
/// a busy period it stays quiet and forgets idle intervals: the live
/// monitor starts with an idle interval before the trace's first arrival,
/// which the simulator (starting with the first busy period) never has.
struct Recorder {
    inner: Box<dyn Policy>,
    heard: Heard,
}

impl Recorder {
    fn started(&self) -> bool {
        !self.heard.lock().unwrap().0.is_empty()
    }
}

impl Policy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn on_idle(&mut self, ctx: &mut Ctx<'_>) -> Decision {
        if !self.started() {
            return Decision::Quiet;
        }
        self.inner.on_idle(ctx)
    }
    fn on_bg_done(&mut self, ctx: &mut Ctx<'_>, done: u64) -> Decision {
        self.inner.on_bg_done(ctx, done)
    }
    fn on_idle_end(&mut self, idle_ns: u64, collided: bool) {
        if !self.started() {
            return;
        }
        self.heard.lock().unwrap().1.push((idle_ns, collided));
        self.inner.on_idle_end(idle_ns, collided);
    }
    fn on_busy_end(&mut self, busy_ns: u64, requests: u32) {
        self.heard.lock().unwrap().0.push((busy_ns, requests));
        self.inner.on_busy_end(busy_ns, requests);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Job {
    Fg,
    Bg,
}

/// One FCFS non-preemptive server in virtual time.
struct Device {
    now_ns: u64,
    arrival_ns: Vec<u64>,
    service_ns: Vec<u64>,
    next: usize,
    queue: VecDeque<usize>,
    in_service: Option<(Job, u64)>, // what, and when it ends
    stat: DiskStat,
    detector: Detector,
    events: VecDeque<Event>,
    stop: Arc<AtomicBool>,
}

impl Device {
    fn new(arrival_ns: Vec<u64>, service_ns: Vec<u64>, stop: Arc<AtomicBool>) -> Device {
        let mut d = Device {
            now_ns: 0,
            arrival_ns,
            service_ns,
            next: 0,
            queue: VecDeque::new(),
            in_service: None,
            stat: DiskStat::default(),
            detector: Detector::new(),
            events: VecDeque::new(),
            stop,
        };
        // the zero sample, then a quiet one: the monitor's first idle
        d.sample();
        d.sample();
        d
    }

    fn fg_in_flight(&self) -> u64 {
        self.queue.len() as u64 + u64::from(matches!(self.in_service, Some((Job::Fg, _))))
    }

    fn sample(&mut self) {
        let fg = self.fg_in_flight();
        let s = Sample {
            stat: DiskStat {
                in_flight: fg,
                ..self.stat
            },
            inflight: Some(Inflight {
                reads: fg,
                writes: 0,
            }),
        };
        let own = OwnIo::default();
        if let Some(ev) = self.detector.observe(self.now_ns, &s, own, own) {
            self.events.push_back(ev);
        }
    }

    fn start_next_fg(&mut self) {
        if self.in_service.is_none() {
            if let Some(i) = self.queue.pop_front() {
                self.in_service = Some((Job::Fg, self.now_ns + self.service_ns[i]));
            }
        }
    }

    /// When the device's state changes next.
    fn next_change_ns(&self) -> Option<u64> {
        let arrival = self.arrival_ns.get(self.next).copied();
        let end = self.in_service.map(|(_, e)| e);
        match (arrival, end) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    /// Apply the changes at `t`, with the Detector looking before, after,
    /// and once more after.
    fn step_to(&mut self, t: u64) {
        self.now_ns = t;
        self.sample();
        if let Some((job, end)) = self.in_service {
            if end == t {
                self.in_service = None;
                if job == Job::Fg {
                    self.stat.read_ios += 1;
                    self.stat.read_sectors += 8;
                }
            }
        }
        while self.arrival_ns.get(self.next) == Some(&t) {
            self.queue.push_back(self.next);
            self.next += 1;
        }
        self.start_next_fg();
        self.sample();
        self.sample();
    }

    /// Run to `to_ns`; with `stop_at_event`, stop at the first instant
    /// that produced an event.
    fn advance(&mut self, to_ns: u64, stop_at_event: bool) {
        while let Some(t) = self.next_change_ns().filter(|&t| t <= to_ns) {
            self.step_to(t);
            if stop_at_event && !self.events.is_empty() {
                return;
            }
        }
        self.now_ns = self.now_ns.max(to_ns);
        if self.next_change_ns().is_none() && self.events.is_empty() {
            // the trace is over and the device idle: end the run
            self.stop.store(true, Ordering::SeqCst);
        }
    }
}

struct Source(Rc<RefCell<Device>>);

impl EventSource for Source {
    fn now_ns(&self) -> u64 {
        self.0.borrow().now_ns
    }
    fn recv_timeout(&mut self, timeout_ns: u64) -> fallow_live::Result<Option<Event>> {
        let mut d = self.0.borrow_mut();
        if d.events.is_empty() {
            let to = d.now_ns.saturating_add(timeout_ns);
            d.advance(to, true);
        }
        Ok(d.events.pop_front())
    }
    fn try_recv(&mut self) -> fallow_live::Result<Option<Event>> {
        Ok(self.0.borrow_mut().events.pop_front())
    }
    fn look(&self, _timeout_ns: u64) -> bool {
        true
    }
}

/// BG requests of a constant time on the device.
struct Exec {
    dev: Rc<RefCell<Device>>,
    bg_ns: u64,
}

impl BgExecutor for Exec {
    fn run_one(&mut self, _size_bytes: u64) -> fallow_live::Result<Step> {
        let mut d = self.dev.borrow_mut();
        assert!(
            d.in_service.is_none() && d.queue.is_empty(),
            "BG issued at {} while FG is outstanding",
            d.now_ns
        );
        let end = d.now_ns + self.bg_ns;
        d.in_service = Some((Job::Bg, end));
        d.advance(end, false);
        Ok(Step::More)
    }
}

/// A FCFS trace: arrivals and service times.
fn trace(seed: u64) -> (fallow_core::trace::Trace, Vec<u64>, Vec<u64>) {
    let t = SyntheticWorkload {
        arrivals: ArrivalProcess::Poisson { rate_per_s: 40.0 },
        requests: 3000,
        service: ServiceModel::Exponential { mean_ns: 6_000_000 },
        request_size_bytes: 4096,
        capacity_bytes: 1 << 30,
        write_fraction: 0.0,
        seed,
    }
    .generate()
    .unwrap();
    let a = t.arrival_ns().to_vec();
    let c = t
        .completion_ns()
        .expect("synthetic traces complete")
        .to_vec();
    let mut service = Vec::with_capacity(a.len());
    let mut free = 0u64;
    for (&ai, &ci) in a.iter().zip(&c) {
        let start = ai.max(free);
        service.push(ci - start);
        free = ci;
    }
    (t, a, service)
}

type Seq = (Vec<(u64, u32)>, Vec<(u64, bool)>);

fn simulated(t: &fallow_core::trace::Trace, spec: &str, bg_ns: u64) -> (Seq, usize) {
    let prep = Prepared::new(t, None, 0).unwrap();
    let heard: Heard = Default::default();
    let mut rec = Recorder {
        inner: policy::build(spec).unwrap(),
        heard: heard.clone(),
    };
    let cfg = SimConfig {
        bg_service: BgService::Constant { ns: bg_ns },
        bg_work: BgWork::Endless,
        bg_size_bytes: 65_536,
        switch_penalty_ns: 0,
        seed: 3,
    };
    simulate(&prep, &mut rec, &cfg).unwrap();
    let out = heard.lock().unwrap().clone();
    (out, prep.periods().busy_len_ns.len())
}

fn live(a: Vec<u64>, s: Vec<u64>, spec: &str, bg_ns: u64) -> Seq {
    let stop = Arc::new(AtomicBool::new(false));
    let dev = Rc::new(RefCell::new(Device::new(a, s, stop.clone())));
    let heard: Heard = Default::default();
    let rec = Recorder {
        inner: policy::build(spec).unwrap(),
        heard: heard.clone(),
    };
    let cfg = DriverConfig {
        bg_size_bytes: 65_536,
        initial_bg_service: BgService::Constant { ns: bg_ns },
        seed: 3,
        budget: None,
    };
    let mut driver = Driver::new(Box::new(rec), cfg).unwrap();
    let mut exec = Exec {
        dev: dev.clone(),
        bg_ns,
    };
    driver.run_on(&mut Source(dev), &mut exec, &stop).unwrap();
    let out = heard.lock().unwrap().clone();
    out
}

fn agree(spec: &str, seed: u64, bg_ns: u64) {
    let (t, a, s) = trace(seed);
    let ((sim_busy, sim_idle), trace_periods) = simulated(&t, spec, bg_ns);
    let (live_busy, live_idle) = live(a, s, spec, bg_ns);
    let merged = trace_periods - sim_busy.len();
    let collided = sim_idle.iter().filter(|i| i.1).count();
    println!(
        "{spec}: {} busy periods heard ({merged} merges of the trace's {trace_periods}), {collided} collisions",
        sim_busy.len()
    );
    // the case the test is about happens
    assert!(merged > 0 && collided > 0, "{spec}: nothing merged");
    assert_eq!(sim_busy.len(), live_busy.len(), "{spec}: busy periods");
    for (k, (x, y)) in sim_busy.iter().zip(&live_busy).enumerate() {
        assert_eq!(x, y, "{spec}: busy period {k}");
    }
    assert_eq!(sim_idle, live_idle, "{spec}: idle intervals");
}

#[test]
fn aggressive_hears_the_same_busy_periods_live_and_simulated() {
    agree("aggressive", 5, 9_876_543);
}

#[test]
fn fixed_wait_hears_the_same_busy_periods_live_and_simulated() {
    agree("fixed-wait:t=12ms", 6, 31_234_567);
}

#[test]
fn busy_bee_hears_the_same_busy_periods_live_and_simulated() {
    agree("busy-bee:idle-wait=15ms,window=300bp", 7, 17_654_321);
}
