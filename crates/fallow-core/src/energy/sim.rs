//! The energy simulation: one pass over the requests per policy and
//! setting, following the disk through the states of SARD's
//! Figure 1 — busy → idle (the timeout) → shutdown → standby → spin-up →
//! busy — with SARD serving requests from peers while the disk is off.
//!
//! Rules (docs/energy.md has them with SARD's sections):
//! - The disk is *on* while busy or idle-spinning, *off* from the moment
//!   its timeout expires (shutdown, standby) until a spin-up completes.
//! - A local request arriving while the disk is off starts a spin-up
//!   (after the shutdown, if one is in progress) and waits for it: the
//!   *exposed spin-up delay* (§II, Table VI). The disk's busy period then
//!   shifts by that wait, like a collision in [`crate::sim`]: the shift
//!   carries into the next idle interval and, when that interval is
//!   shorter, into the busy period after it. Arrival times never move
//!   (open-loop replay, as SARD's Table VI, where the delay is exactly
//!   9 s per spin-up).
//! - A [`Route::Peer`] request is served by a peer when the disk is off
//!   (§III-E heuristic 3) and by the disk when it is on (heuristic 1); with
//!   [`RemoteWhen::Always`] it always goes to the peer. A request served
//!   remotely is not disk activity: it neither wakes the disk nor resets
//!   the timeout, so idle intervals lengthen (Table V). Its response time
//!   is the network time, not an exposed delay.
//! - Optional BG work (fallow's coordination with power management) runs
//!   only while the disk spins anyway: in the idle part of an interval,
//!   after a short wait, never past the spin-down, and never waking a
//!   sleeping disk. An FG request that finds a BG request in service
//!   waits for it.
//!
//! Energy by state: busy (serving requests, at seek power for the
//! estimated seek time of each request and read/write power otherwise;
//! BG work at read/write power), idle (spinning, nothing to do), power
//! cycle (shutdown and spin-up energy) and standby.

use super::filetrace::{FileKind, FileTrace};
use super::metrics::{BgStats, EnergyByState, EnergyRun, RemoteStats, TimeByState};
use super::power::PowerModel;
use super::sard::{self, path_key, uniform, Availability, Network, Route};
use super::spindown::{IdleCtx, SpinDown};
use crate::error::{Error, Result};
use crate::period::{completions_of, CompletionSource};
use crate::polled::cancelled;
use crate::service::fcfs_completions;
use crate::service::BgService;
use crate::service::DiskModel;
use crate::trace::{Op, Trace};
use crate::ServiceModel;
use serde::Serialize;
use std::sync::atomic::AtomicBool;

/// When a [`Route::Peer`] request goes to the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteWhen {
    /// Only while the local disk is off (SARD §III-E).
    #[default]
    Asleep,
    /// Always, even when the disk spins (the literal reading of SARD's
    /// "% of requests served locally").
    Always,
}

/// Where user data of a file-level trace lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UserData {
    /// On the local disk: user-data requests must be served locally.
    #[default]
    Local,
    /// On the central file server (SARD §II): never touches the local disk.
    Server,
}

/// BG work that runs only while the disk spins anyway.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BgPlan {
    /// Total BG work, bytes.
    pub work_bytes: u64,
    /// Size of one BG request, bytes.
    pub size_bytes: u64,
    /// Service time model; each request takes its mean for the size.
    #[serde(skip)]
    pub service: BgService,
    /// Idle time before BG work starts in an interval, ns.
    pub wait_ns: u64,
}

impl BgPlan {
    fn service_ns(&self) -> u64 {
        (self.service.mean_ns(self.size_bytes).round() as u64).max(1)
    }
}

/// Settings of an energy run besides the policy and availability.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyConfig {
    /// The disk's power model.
    pub power: PowerModel,
    /// The network to peers (and to the file server).
    pub network: Network,
    /// When peer-held requests go to the peer.
    pub remote_when: RemoteWhen,
    /// Disk geometry for the seek-time estimate of busy energy.
    pub disk: DiskModel,
    /// BG work to fit into spinning idle time, if any.
    pub bg: Option<BgPlan>,
    /// Seed of the route choice and of the network contention draws.
    pub seed: u64,
}

impl Default for EnergyConfig {
    fn default() -> Self {
        EnergyConfig {
            power: PowerModel::default(),
            network: Network::default(),
            remote_when: RemoteWhen::Asleep,
            disk: DiskModel::default(),
            bg: None,
            seed: crate::dist::DEFAULT_SEED,
        }
    }
}

/// Requests prepared once for many runs: arrival and baseline completion
/// (all served locally), disk position and size, what each could be routed
/// to, and the file (or extent) each belongs to.
#[derive(Debug, Clone)]
pub struct EnergyInput {
    arrival_ns: Vec<u64>,
    completion_ns: Vec<u64>,
    position_bytes: Vec<u64>,
    size_bytes: Vec<u32>,
    base: Vec<Route>,
    key: Vec<u64>,
    /// Path of each request's file, for file-level traces.
    paths: Option<(Vec<u32>, Vec<String>)>,
    span_ns: u64,
    completions: CompletionSource,
}

/// Extent that stands for a file in block traces, for the peer draw.
const EXTENT_SHIFT: u32 = 20;

/// Stream of the network contention draws.
const NET_STREAM: u64 = 0x5A2D_0003;

impl EnergyInput {
    /// A block trace of one device: completions recorded, or from
    /// `service` through a FCFS queue. Every request may go to a peer
    /// (a block trace names no files; see docs/energy.md).
    pub fn from_trace(trace: &Trace, service: Option<&ServiceModel>, seed: u64) -> Result<Self> {
        EnergyInput::from_trace_until(trace, service, seed, None)
    }

    /// [`EnergyInput::from_trace`] that stops with [`Error::Interrupted`]
    /// soon after `cancel` is set (the modelled completions read it every
    /// [`crate::polled::CANCEL_EVERY_REQUESTS`] requests).
    pub fn from_trace_until(
        trace: &Trace,
        service: Option<&ServiceModel>,
        seed: u64,
        cancel: Option<&AtomicBool>,
    ) -> Result<Self> {
        if trace.devices().len() > 1 {
            return Err(Error::Unsupported(format!(
                "{}: the trace holds several devices; select one (--device ID)",
                trace.report().path.display()
            )));
        }
        let (completion_ns, completions) = completions_of(trace, service, seed, cancel)?;
        let n = trace.len();
        Ok(EnergyInput {
            // first arrival to last completion, modelled ones included
            span_ns: trace.span_ns().max(
                completion_ns.iter().copied().max().unwrap_or(0)
                    - trace.arrival_ns().first().copied().unwrap_or(0),
            ),
            arrival_ns: trace.arrival_ns().to_vec(),
            completion_ns: completion_ns.into_owned(),
            position_bytes: trace.offset_bytes().to_vec(),
            size_bytes: trace.size_bytes().to_vec(),
            base: vec![Route::Peer; n],
            key: trace
                .offset_bytes()
                .iter()
                .map(|&o| o >> EXTENT_SHIFT)
                .collect(),
            paths: None,
            completions,
        })
    }

    /// A file-level trace. Application-file reads may go to a peer;
    /// writes and user data stay local, or user data goes to the file
    /// server. Each file sits at a pseudo-random place on the disk (a hash
    /// of its path), so that the disk `service` model sees seeks between
    /// files and sequential runs within one.
    pub fn from_file_trace(
        ft: &FileTrace,
        service: &ServiceModel,
        user_data: UserData,
        seed: u64,
    ) -> Result<Self> {
        let n = ft.len();
        if n == 0 {
            return Err(Error::Empty {
                path: ft.source.clone(),
                detail: String::new(),
            });
        }
        let capacity = match service {
            ServiceModel::Disk(d) => d.capacity_bytes,
            _ => DiskModel::default().capacity_bytes,
        };
        let blocks = ((capacity / 4096.0) as u64).max(1);
        let place: Vec<u64> = ft
            .paths
            .iter()
            .map(|p| (path_key(p) % blocks) * 4096)
            .collect();
        let base: Vec<Route> = (0..n)
            .map(|i| match (ft.kind[i], ft.op[i], user_data) {
                (FileKind::User, _, UserData::Server) => Route::Server,
                (FileKind::User, _, UserData::Local) => Route::Local,
                (FileKind::App, Op::Write, _) => Route::Local,
                (FileKind::App, Op::Read, _) => Route::Peer,
            })
            .collect();
        let keys: Vec<u64> = ft.paths.iter().map(|p| path_key(p)).collect();
        let position_bytes: Vec<u64> = (0..n)
            .map(|i| place[ft.path_id[i] as usize].saturating_add(ft.offset_bytes[i]))
            .collect();
        // the disk queue holds only requests that reach the disk
        let disk: Vec<usize> = (0..n).filter(|&i| base[i] != Route::Server).collect();
        let pick = |v: &[u64]| disk.iter().map(|&i| v[i]).collect::<Vec<_>>();
        let sizes: Vec<u32> = disk.iter().map(|&i| ft.size_bytes[i]).collect();
        let done = fcfs_completions(
            &pick(&ft.arrival_ns),
            &pick(&position_bytes),
            &sizes,
            service,
            seed,
        );
        let mut completion_ns = ft.arrival_ns.clone();
        for (j, &i) in disk.iter().enumerate() {
            completion_ns[i] = done[j];
        }
        let span_ns = completion_ns
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(*ft.arrival_ns.last().unwrap_or(&0));
        Ok(EnergyInput {
            arrival_ns: ft.arrival_ns.clone(),
            completion_ns,
            position_bytes,
            size_bytes: ft.size_bytes.clone(),
            base,
            key: ft.path_id.iter().map(|&pid| keys[pid as usize]).collect(),
            paths: Some((ft.path_id.clone(), ft.paths.clone())),
            span_ns,
            completions: CompletionSource::Modelled {
                model: service.to_string(),
                seed,
            },
        })
    }

    /// Number of requests.
    pub fn requests(&self) -> usize {
        self.arrival_ns.len()
    }

    /// From the first arrival to the last completion, ns.
    pub fn span_ns(&self) -> u64 {
        self.span_ns
    }

    /// The longest idle interval of the disk serving every request: from
    /// the last completion so far to the next arrival, ns (0 when requests
    /// always overlap). What a spin-down policy can act on at most.
    pub fn longest_idle_ns(&self) -> u64 {
        let mut busy_until = 0u64;
        let mut longest = 0u64;
        for (i, (&a, &c)) in self.arrival_ns.iter().zip(&self.completion_ns).enumerate() {
            if i > 0 {
                longest = longest.max(a.saturating_sub(busy_until));
            }
            busy_until = busy_until.max(c);
        }
        longest
    }

    /// Where the completion times come from.
    pub fn completions(&self) -> &CompletionSource {
        &self.completions
    }

    /// Requests that reach the local disk when nothing is remote.
    pub fn disk_requests(&self) -> usize {
        self.base.iter().filter(|&&r| r != Route::Server).count()
    }

    /// Requests that must stay local whatever peers hold.
    pub fn mandatory_local(&self) -> usize {
        self.base.iter().filter(|&&r| r == Route::Local).count()
    }

    /// Routes of every request under `avail` (see [`sard::routes`]).
    pub fn routes(&self, avail: &Availability, seed: u64) -> Result<Vec<Route>> {
        let path_of = |i: usize| {
            self.paths
                .as_ref()
                .map(|(ids, names)| names[ids[i] as usize].clone())
        };
        sard::routes(&self.base, &self.key, &path_of, avail, seed)
    }
}

/// The disk's state between local busy periods, for one idle interval.
struct Gap {
    /// Disk time the disk fell idle, ns.
    start_ns: u64,
    /// The policy's timeout for this interval (`None`: stays on).
    timeout_ns: Option<u64>,
}

/// BG work done in one idle interval.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct BgSlice {
    completed: u64,
    /// BG service time before the interval's end, ns.
    busy_ns: u64,
    /// Rest of the request in service when FG arrived, ns.
    residual_ns: u64,
}

/// BG requests of `plan` in an idle interval starting at `start`, with the
/// spin-down (if any) at `deadline` and the interval ending at `end` — by an
/// FG arrival (`fg_arrives`, which waits for the request in service) or by
/// the end of the trace (only requests that finish by then count).
fn bg_slice(
    plan: &BgPlan,
    remaining_bytes: u64,
    start: u64,
    deadline: Option<u64>,
    end: u64,
    fg_arrives: bool,
) -> BgSlice {
    let d = plan.service_ns();
    let s0 = start.saturating_add(plan.wait_ns);
    if end <= s0 || remaining_bytes == 0 {
        return BgSlice::default();
    }
    let n_work = remaining_bytes.div_ceil(plan.size_bytes.max(1));
    let n_dead = match deadline {
        Some(t) if t > s0 => (t - s0) / d,
        Some(_) => 0,
        None => u64::MAX,
    };
    let mut n = n_work.min(n_dead);
    if !fg_arrives {
        n = n.min((end - s0) / d);
    }
    let bg_end = s0.saturating_add(n.saturating_mul(d));
    if end >= bg_end {
        return BgSlice {
            completed: n,
            busy_ns: n * d,
            residual_ns: 0,
        };
    }
    let k = (end - s0).div_ceil(d);
    BgSlice {
        completed: k,
        busy_ns: end - s0,
        residual_ns: s0 + k * d - end,
    }
}

/// What caused the current shift of the disk's busy period.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cause {
    SpinUp,
    Bg,
}

/// Requests between two reads of a cancel flag in [`simulate_until`]: tens
/// of µs of work, so Ctrl-C is answered at once (docs/energy.md, "Python: `fallow.energy`").
pub const CANCEL_EVERY_REQUESTS: usize = 4096;

/// Run one spin-down policy over `input` with the given routes.
pub fn simulate(
    input: &EnergyInput,
    routes: &[Route],
    policy: &mut dyn SpinDown,
    cfg: &EnergyConfig,
) -> Result<EnergyRun> {
    simulate_until(input, routes, policy, cfg, None)
}

/// [`simulate`] that stops with [`Error::Interrupted`] soon after `cancel`
/// is set (read every [`CANCEL_EVERY_REQUESTS`] requests); with the flag
/// clear or `None` it is [`simulate`].
pub fn simulate_until(
    input: &EnergyInput,
    routes: &[Route],
    policy: &mut dyn SpinDown,
    cfg: &EnergyConfig,
    cancel: Option<&AtomicBool>,
) -> Result<EnergyRun> {
    check_run(input, routes, cfg)?;
    let mut walk = Walk::new(cfg, policy.name(), input.requests());
    for (i, &route) in routes.iter().enumerate() {
        if i % CANCEL_EVERY_REQUESTS == 0 && cancelled(cancel) {
            return Err(Error::Interrupted);
        }
        walk.request(input, i, route, policy);
    }
    walk.end_window(input.span_ns, policy);
    Ok(walk.into_run(input))
}

/// The checks of [`simulate_until`]'s arguments, before any request is walked.
fn check_run(input: &EnergyInput, routes: &[Route], cfg: &EnergyConfig) -> Result<()> {
    if routes.len() != input.requests() {
        return Err(Error::invalid(
            "routes",
            format!("{} routes for {} requests", routes.len(), input.requests()),
        ));
    }
    cfg.power.validate()?;
    cfg.network.validate()?;
    if let Some(b) = &cfg.bg {
        if b.size_bytes == 0 {
            return Err(Error::invalid("BG request size", "must be at least 1 byte"));
        }
    }
    Ok(())
}

/// One run of [`simulate_until`] in progress: the disk's current local busy
/// period and the totals so far, request by request.
struct Walk<'a> {
    cfg: &'a EnergyConfig,
    /// Seed of the network contention draws.
    net_seed: u64,
    /// The current local busy period's end on the baseline clock, ns.
    base_end_ns: u64,
    /// How far the disk's busy period is shifted past `base_end_ns`, ns.
    shift_ns: u64,
    /// What caused the current shift.
    cause: Cause,
    /// Disk time a spin-up completes, ns.
    ready_at_ns: u64,
    /// Disk time the busy period started serving, ns.
    busy_start_ns: u64,
    /// Estimated seek time of the busy period's requests, ns.
    seek_in_busy_ns: u64,
    /// Where the disk head is after the last local request, bytes.
    head_bytes: u64,
    /// The idle interval the disk is in, once its timeout was asked for.
    gap: Option<Gap>,
    /// Time in each state, ns (converted at the end).
    time_ns: TimeByState<u64>,
    run: EnergyRun,
    remote: RemoteStats,
    server: RemoteStats,
    /// Idle intervals that ended in a spin-down, summed, ns.
    idle_period_ns: u128,
    /// All idle intervals ended by a local request, summed, ns.
    gap_ns_total: u128,
    /// Waits for spin-ups, ns.
    stall_ns: u128,
    /// Delays of requests behind a spin-up, summed, ns.
    spin_delay_ns: u128,
    /// BG work not done yet, bytes.
    bg_left_bytes: u64,
    bg: BgStats,
    /// Delays of FG requests behind BG requests, summed, ns.
    bg_delay_ns: u128,
    /// Seek time of the busy periods closed, ns.
    seek_total_ns: u64,
}

impl<'a> Walk<'a> {
    fn new(cfg: &'a EnergyConfig, policy_name: &str, requests: usize) -> Walk<'a> {
        Walk {
            cfg,
            net_seed: cfg.seed ^ NET_STREAM,
            base_end_ns: 0,
            shift_ns: 0,
            cause: Cause::SpinUp,
            ready_at_ns: 0,
            busy_start_ns: 0,
            seek_in_busy_ns: 0,
            head_bytes: 0,
            gap: None,
            time_ns: TimeByState::default(),
            run: EnergyRun::new(policy_name, requests as u64),
            remote: RemoteStats::default(),
            server: RemoteStats::default(),
            idle_period_ns: 0,
            gap_ns_total: 0,
            stall_ns: 0,
            spin_delay_ns: 0,
            bg_left_bytes: cfg.bg.map_or(0, |b| b.work_bytes),
            bg: BgStats::default(),
            bg_delay_ns: 0,
            seek_total_ns: 0,
        }
    }

    /// Ask the policy for the timeout of the idle interval starting at
    /// `start_ns`, once per interval.
    fn open_gap(&mut self, start_ns: u64, policy: &mut dyn SpinDown) {
        if self.gap.is_none() {
            let timeout_ns = policy.on_idle(&IdleCtx {
                now_ns: start_ns,
                power: &self.cfg.power,
            });
            self.gap = Some(Gap {
                start_ns,
                timeout_ns,
            });
        }
    }

    /// The disk fell idle at `disk_end_ns`: count the busy period that ends.
    fn close_busy_period(&mut self, disk_end_ns: u64) {
        let busy = disk_end_ns - self.busy_start_ns;
        self.time_ns.busy += busy;
        self.seek_total_ns += self.seek_in_busy_ns.min(busy);
        self.seek_in_busy_ns = 0;
    }

    /// Request `i`, routed by `route`: to the file server, a peer or the disk.
    fn request(&mut self, input: &EnergyInput, i: usize, route: Route, policy: &mut dyn SpinDown) {
        let size = input.size_bytes[i] as u64;
        if route == Route::Server {
            let ns = self.network_ns(i, size);
            self.server.add(ns, size);
            return;
        }
        if !self.served_locally(input.arrival_ns[i], route, policy) {
            let ns = self.network_ns(i, size);
            self.remote.add(ns, size);
            return;
        }
        self.serve_locally(input, i, policy);
    }

    /// Network time of request `i` of `size` bytes, to a peer or the
    /// server, with its contention draw, ns.
    fn network_ns(&self, i: usize, size: u64) -> u64 {
        self.cfg
            .network
            .time_ns(size, uniform(self.net_seed, i as u64))
    }

    /// Whether a request arriving at `arrival_ns` with `route` goes to the
    /// disk; an arrival after the busy period ends it and opens the gap.
    fn served_locally(&mut self, arrival_ns: u64, route: Route, policy: &mut dyn SpinDown) -> bool {
        let cfg = self.cfg;
        let disk_end = self.base_end_ns + self.shift_ns;
        if arrival_ns <= disk_end {
            // busy, or spinning up for an earlier request
            return route == Route::Local
                || (cfg.remote_when == RemoteWhen::Asleep && arrival_ns >= self.ready_at_ns);
        }
        if self.gap.is_none() {
            // the disk fell idle at disk_end: close the busy period
            self.close_busy_period(disk_end);
        }
        self.open_gap(disk_end, policy);
        let g = self.gap.as_ref().expect("decided");
        let asleep = g.timeout_ns.is_some_and(|to| arrival_ns - g.start_ns > to);
        match route {
            Route::Local => true,
            _ => cfg.remote_when == RemoteWhen::Asleep && !asleep,
        }
    }

    /// Request `i` served by the disk: it ends an idle interval or joins
    /// (or follows) the busy period, and may be delayed by its shift.
    fn serve_locally(&mut self, input: &EnergyInput, i: usize, policy: &mut dyn SpinDown) {
        let a = input.arrival_ns[i];
        let c = input.completion_ns[i];
        let size = input.size_bytes[i] as u64;
        self.run.local_requests += 1;
        let service = c.saturating_sub(a);
        let pos = input.position_bytes[i];
        let seek = self.cfg.disk.seek_ns(pos.abs_diff(self.head_bytes)).round() as u64;
        self.head_bytes = pos.saturating_add(size);

        if let Some(g) = self.gap.take() {
            // a local request ends the idle interval
            self.end_gap(&g, a, policy);
            self.base_end_ns = c;
        } else if a <= self.base_end_ns {
            self.base_end_ns = self.base_end_ns.max(c);
        } else {
            // a new baseline busy period that the shift reaches into
            self.shift_ns = self.base_end_ns + self.shift_ns - a;
            self.base_end_ns = c;
        }
        self.seek_in_busy_ns += seek.min(service);
        if self.shift_ns > 0 {
            match self.cause {
                Cause::SpinUp => {
                    self.run.delayed_requests += 1;
                    self.spin_delay_ns += self.shift_ns as u128;
                }
                Cause::Bg => {
                    self.bg.fg_delayed_requests += 1;
                    self.bg_delay_ns += self.shift_ns as u128;
                }
            }
        }
    }

    /// The idle interval `g` ended by a local request arriving at
    /// `arrival_ns`: its BG work, its spin-down and spin-up if the timeout
    /// expired, and the shift the request starts its busy period with.
    fn end_gap(&mut self, g: &Gap, arrival_ns: u64, policy: &mut dyn SpinDown) {
        let cfg = self.cfg;
        let p = &cfg.power;
        let a = arrival_ns;
        let l = a - g.start_ns;
        self.gap_ns_total += l as u128;
        self.run.idle_intervals += 1;
        let spun = g.timeout_ns.is_some_and(|to| l > to);
        let slice = self.run_bg(g, a, !spun);
        let t = &mut self.time_ns;
        if spun {
            let to = g.timeout_ns.expect("spun down");
            let sd = g.start_ns + to;
            let sd_end = sd + p.shutdown_ns;
            t.idle += to - slice.busy_ns;
            t.shutdown += p.shutdown_ns;
            t.standby += a.saturating_sub(sd_end);
            let ready = a.max(sd_end) + p.spinup_ns;
            t.spinup += p.spinup_ns;
            self.run.shutdowns += 1;
            self.run.spinups += 1;
            self.run.idle_periods += 1;
            self.idle_period_ns += l as u128;
            let wait = ready - a;
            self.stall_ns += wait as u128;
            self.shift_ns = wait;
            self.cause = Cause::SpinUp;
            self.ready_at_ns = ready;
            self.busy_start_ns = ready;
            policy.on_idle_end(l, true);
        } else {
            t.idle += l - slice.busy_ns;
            self.shift_ns = slice.residual_ns;
            self.cause = Cause::Bg;
            if slice.residual_ns > 0 {
                self.bg.collisions += 1;
            }
            self.busy_start_ns = a + slice.residual_ns;
            policy.on_idle_end(l, false);
        }
    }

    /// The BG work done in the idle interval `g` ending at `end_ns` (see
    /// [`bg_slice`]), counted. Without an FG arrival nothing is left in
    /// service (`residual_ns` is 0), so the end of the trace counts only
    /// the BG service time.
    fn run_bg(&mut self, g: &Gap, end_ns: u64, fg_arrives: bool) -> BgSlice {
        let cfg = self.cfg;
        let Some(plan) = &cfg.bg else {
            return BgSlice::default();
        };
        let deadline = g.timeout_ns.map(|to| g.start_ns.saturating_add(to));
        let slice = bg_slice(
            plan,
            self.bg_left_bytes,
            g.start_ns,
            deadline,
            end_ns,
            fg_arrives,
        );
        let bytes = (slice.completed * plan.size_bytes).min(self.bg_left_bytes);
        self.bg_left_bytes -= bytes;
        self.bg.done_bytes += bytes;
        self.bg.done_requests += slice.completed;
        self.time_ns.bg += slice.busy_ns + slice.residual_ns;
        slice
    }

    /// The end of the window: the trace's span, or later if the disk's
    /// work was pushed past it. Closes the last busy period and the idle
    /// interval after it.
    fn end_window(&mut self, span_ns: u64, policy: &mut dyn SpinDown) {
        let cfg = self.cfg;
        let p = &cfg.power;
        let disk_end = self.base_end_ns + self.shift_ns;
        let end = span_ns.max(disk_end);
        if self.gap.is_none() {
            self.close_busy_period(disk_end);
        }
        if end > disk_end {
            self.open_gap(disk_end, policy);
            let g = self.gap.take().expect("decided");
            let l = end - g.start_ns;
            let spun = g.timeout_ns.is_some_and(|to| l > to);
            let slice = self.run_bg(&g, end, false);
            let t = &mut self.time_ns;
            if spun {
                let to = g.timeout_ns.expect("spun down");
                let sd = g.start_ns + to;
                t.idle += to - slice.busy_ns;
                let shutdown = p.shutdown_ns.min(end - sd);
                t.shutdown += shutdown;
                t.standby += end - sd - shutdown;
                self.run.shutdowns += 1;
                self.run.idle_periods += 1;
                self.idle_period_ns += l as u128;
            } else {
                t.idle += l - slice.busy_ns;
            }
        }
        self.time_ns.total = end;
    }

    /// The run's report: energy by state, J, and the delays and means.
    fn into_run(self, input: &EnergyInput) -> EnergyRun {
        let Walk {
            cfg,
            time_ns: t,
            mut run,
            remote,
            server,
            idle_period_ns,
            gap_ns_total,
            stall_ns,
            spin_delay_ns,
            mut bg,
            bg_delay_ns,
            seek_total_ns,
            ..
        } = self;
        let p = &cfg.power;
        let ns_s = |ns: u64| ns as f64 / 1e9;
        let seek_s = ns_s(seek_total_ns);
        let busy_s = ns_s(t.busy);
        let bg_j = ns_s(t.bg) * p.read_write_w;
        // the one definition of a disk's energy, the live daemon's too
        run.energy_j = EnergyByState::of(
            p,
            &super::metrics::PowerSpans {
                serve_s: busy_s,
                seek_s,
                idle_s: ns_s(t.idle),
                standby_s: ns_s(t.standby),
                spinups: run.spinups,
                shutdowns: run.shutdowns,
            },
        );
        // BG work is served at read/write power
        run.energy_j.busy += bg_j;
        run.energy_j.total += bg_j;
        run.time_s = t.to_seconds();
        run.seek_s = seek_s;
        run.mean_idle_s = if run.idle_periods > 0 {
            idle_period_ns as f64 / run.idle_periods as f64 / 1e9
        } else {
            0.0
        };
        run.mean_idle_interval_s = if run.idle_intervals > 0 {
            gap_ns_total as f64 / run.idle_intervals as f64 / 1e9
        } else {
            0.0
        };
        run.exposed_delay_s = stall_ns as f64 / 1e9;
        run.request_delay_s = spin_delay_ns as f64 / 1e9;
        run.exposed_delay_per_request_s = run.request_delay_s / (input.requests().max(1) as f64);
        run.span_s = ns_s(input.span_ns);
        run.execution_s = run.span_s + run.exposed_delay_s;
        run.edp = run.energy_j.total * run.execution_s;
        run.remote = remote.finish();
        run.server = server.finish();
        if let Some(plan) = &cfg.bg {
            bg.requested_bytes = plan.work_bytes;
            bg.energy_j = bg_j;
            bg.fg_added_delay_s = bg_delay_ns as f64 / 1e9;
            bg.busy_s = ns_s(t.bg);
            run.bg = Some(bg);
        }
        run
    }
}

#[cfg(test)]
mod tests {
    //! A small trace worked by hand, times in seconds (request: arrival →
    //! completion), WD2500JD power, timeout 10 s, positions sequential so
    //! no request seeks:
    //!
    //! ```text
    //! r0 0→1   r1 5→6   r2 30→31   r3 42→43   r4 57→58   r5 60→61   r6 70.5→71.5   r7 83→84
    //! ```
    //!
    //! All local: busy [0,1]; idle 4; busy [5,6]; idle 10 (6–16), shutdown
    //! 16–20, standby 20–30, r2 spins the disk up 30–39 (waits 9), busy
    //! [39,40]; idle 2; busy [42,43]; idle 10 (43–53), shutdown 53–57, r4
    //! arrives as it ends: spin-up 57–66 (waits 9); r5 arrives during the
    //! spin-up and is served after r4 (waits 61+… : shift 58+9−60 = 7);
    //! busy [66,68]; idle 2.5; busy [70.5,71.5]; idle 10 (71.5–81.5),
    //! shutdown 81.5–85.5; r7 arrives at 83, during the shutdown: ready at
    //! 94.5 (waits 11.5); busy [94.5,95.5]. The window ends at 95.5.
    use super::*;
    use crate::energy::spindown;

    const S: u64 = 1_000_000_000;

    fn input() -> EnergyInput {
        let a: Vec<u64> = [0.0, 5.0, 30.0, 42.0, 57.0, 60.0, 70.5, 83.0]
            .iter()
            .map(|x| (x * 1e9) as u64)
            .collect();
        let c: Vec<u64> = a.iter().map(|x| x + S).collect();
        let n = a.len();
        let t = Trace::from_columns(
            a,
            Some(c),
            (0..n as u64).map(|i| i * 4096).collect(),
            vec![4096; n],
            vec![Op::Read; n],
            vec![0; n],
        )
        .unwrap();
        EnergyInput::from_trace(&t, None, 1).unwrap()
    }

    fn run(routes: &[Route], cfg: &EnergyConfig) -> EnergyRun {
        let mut p = spindown::build("timeout:t=10s").unwrap();
        simulate(&input(), routes, p.as_mut(), cfg).unwrap()
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
    }

    fn states_add_up(r: &EnergyRun) {
        let t = &r.time_s;
        close(
            t.busy + t.bg + t.idle + t.shutdown + t.standby + t.spinup,
            t.total,
        );
        let e = &r.energy_j;
        close(e.busy + e.idle + e.power_cycle + e.standby, e.total);
    }

    #[test]
    fn standalone_disk_by_hand() {
        let r = run(&[Route::Local; 8], &EnergyConfig::default());
        states_add_up(&r);
        close(r.time_s.busy, 8.0);
        close(r.time_s.idle, 38.5);
        close(r.time_s.shutdown, 12.0);
        close(r.time_s.standby, 10.0);
        close(r.time_s.spinup, 27.0);
        close(r.time_s.total, 95.5);
        close(r.energy_j.busy, 8.0 * 10.6);
        close(r.energy_j.idle, 385.0);
        close(r.energy_j.power_cycle, 3.0 * (148.5 + 6.4));
        close(r.energy_j.standby, 18.0);
        close(r.energy_j.total, 952.5);
        assert_eq!((r.spinups, r.shutdowns, r.idle_periods), (3, 3, 3));
        close(r.mean_idle_s, (24.0 + 14.0 + 11.5) / 3.0);
        assert_eq!(r.idle_intervals, 6);
        close(
            r.mean_idle_interval_s,
            (4.0 + 24.0 + 2.0 + 14.0 + 2.5 + 11.5) / 6.0,
        );
        close(r.exposed_delay_s, 9.0 + 9.0 + 11.5);
        close(r.request_delay_s, 9.0 + 9.0 + 7.0 + 11.5);
        assert_eq!(r.delayed_requests, 4);
        close(r.exposed_delay_per_request_s, 36.5 / 8.0);
        close(r.execution_s, 84.0 + 29.5);
        close(r.edp, 952.5 * 113.5);
        assert_eq!(r.local_requests, 8);
        assert_eq!(r.remote.requests, 0);
    }

    #[test]
    fn always_on_by_hand() {
        let mut p = spindown::build("always-on").unwrap();
        let r = simulate(
            &input(),
            &[Route::Local; 8],
            p.as_mut(),
            &EnergyConfig::default(),
        )
        .unwrap();
        states_add_up(&r);
        close(r.time_s.busy, 8.0);
        close(r.time_s.idle, 76.0);
        close(r.energy_j.total, 8.0 * 10.6 + 760.0);
        assert_eq!((r.spinups, r.idle_periods), (0, 0));
        close(r.exposed_delay_s, 0.0);
    }

    /// r2, r4 and r7 may go to a peer. r2 (30 s) finds the disk asleep
    /// (timed out at 16): remote. r3 (42) must be local: the idle period
    /// 6–42 (36 s) ends with a spin-up, ready at 51, busy [51,52]. r4 (57)
    /// finds the disk on, 5 s into its timeout: local (heuristic 1). r7
    /// (83) finds it shutting down since 81.5: remote. The window ends at
    /// the span, 84: the tail 71.5–84 holds 10 s idle and 2.5 s of shutdown
    /// (its whole energy counted).
    #[test]
    fn sard_serves_peer_requests_only_while_the_disk_is_off() {
        use Route::{Local as L, Peer as P};
        let r = run(&[L, L, P, L, P, L, L, P], &EnergyConfig::default());
        states_add_up(&r);
        close(r.time_s.busy, 6.0);
        close(r.time_s.idle, 4.0 + 10.0 + 5.0 + 2.0 + 9.5 + 10.0);
        close(r.time_s.shutdown, 6.5);
        close(r.time_s.standby, 22.0);
        close(r.time_s.spinup, 9.0);
        close(r.time_s.total, 84.0);
        assert_eq!((r.spinups, r.shutdowns, r.idle_periods), (1, 2, 2));
        close(r.mean_idle_s, (36.0 + 12.5) / 2.0);
        close(r.energy_j.power_cycle, 148.5 + 2.0 * 6.4);
        // r3 is the one local request that seeks: 4096 B past the head
        // (r2 went remote), 0.6 ms + 15.4 ms·√(4096/10¹²) at 13.25 W
        // (the simulation keeps whole nanoseconds)
        let seek = ((0.6e-3 + 15.4e-3 * (4096.0f64 / 1e12).sqrt()) * 1e9).round() / 1e9;
        close(r.seek_s, seek);
        close(r.energy_j.busy, 6.0 * 10.6 + seek * (13.25 - 10.6));
        close(
            r.energy_j.total,
            63.6 + 405.0 + 161.3 + 39.6 + seek * (13.25 - 10.6),
        );
        close(r.exposed_delay_s, 9.0);
        assert_eq!(r.local_requests, 6);
        assert_eq!(r.remote.requests, 2);
        assert_eq!(r.remote.bytes, 8192);
        // 200 µs + 4096 B at 125 MB/s (32.768 µs) × up to 1.2
        assert!(r.remote.mean_response_s >= 232.768e-6 && r.remote.mean_response_s <= 239.33e-6);
    }

    /// With `always`, r4 goes to the peer too: the interval 52–60 (8 s)
    /// stays below the timeout.
    #[test]
    fn remote_always_sends_peer_requests_away_even_when_the_disk_spins() {
        use Route::{Local as L, Peer as P};
        let cfg = EnergyConfig {
            remote_when: RemoteWhen::Always,
            ..EnergyConfig::default()
        };
        let r = run(&[L, L, P, L, P, L, L, P], &cfg);
        states_add_up(&r);
        close(r.time_s.busy, 5.0);
        close(r.time_s.idle, 4.0 + 10.0 + 8.0 + 9.5 + 10.0);
        assert_eq!(r.spinups, 1);
        assert_eq!(r.remote.requests, 3);
    }

    /// BG requests of 1 s after a 0.5 s wait, 5 of them. Interval 1–5:
    /// BG from 1.5, the 4th request is in service when r1 arrives at 5 and
    /// ends at 5.5 (r1 waits 0.5; busy [5.5,6.5]). Interval 6.5–30 (spun
    /// down at 16.5): the last BG request 7–8. Idle time falls by 4.5 s and
    /// standby by 0.5 s (the spin-down comes 0.5 s later): extra energy
    /// 5·10.6 − 4.5·10 − 0.5·1.8 = 7.1 J.
    #[test]
    fn bg_work_runs_only_while_the_disk_spins() {
        let plan = BgPlan {
            work_bytes: 5000,
            size_bytes: 1000,
            service: BgService::Constant { ns: S },
            wait_ns: S / 2,
        };
        let cfg = EnergyConfig {
            bg: Some(plan),
            ..EnergyConfig::default()
        };
        let with = run(&[Route::Local; 8], &cfg);
        let without = run(&[Route::Local; 8], &EnergyConfig::default());
        states_add_up(&with);
        let bg = with.bg.unwrap();
        assert_eq!(
            (bg.done_requests, bg.done_bytes, bg.collisions),
            (5, 5000, 1)
        );
        close(bg.busy_s, 5.0);
        close(bg.energy_j, 53.0);
        assert_eq!(bg.fg_delayed_requests, 1);
        close(bg.fg_added_delay_s, 0.5);
        close(with.time_s.idle, 34.0);
        close(with.time_s.standby, 9.5);
        close(with.energy_j.total - without.energy_j.total, 7.1);
        // the spin-downs and their delays are those of the run without BG
        assert_eq!(with.spinups, without.spinups);
        close(with.exposed_delay_s, without.exposed_delay_s);
    }

    #[test]
    fn bg_slice_by_hand() {
        let plan = BgPlan {
            work_bytes: 10,
            size_bytes: 1,
            service: BgService::Constant { ns: 10 },
            wait_ns: 5,
        };
        // start 0, first request at 5; FG at 32: 3 started, the 3rd ends at 35
        let s = bg_slice(&plan, 10, 0, None, 32, true);
        assert_eq!(
            s,
            BgSlice {
                completed: 3,
                busy_ns: 27,
                residual_ns: 3
            }
        );
        // spin-down at 30: only 2 fit (5–15, 15–25)
        let s = bg_slice(&plan, 10, 0, Some(30), 100, true);
        assert_eq!(
            s,
            BgSlice {
                completed: 2,
                busy_ns: 20,
                residual_ns: 0
            }
        );
        // the trace ends at 32: only finished requests count
        let s = bg_slice(&plan, 10, 0, None, 32, false);
        assert_eq!(
            s,
            BgSlice {
                completed: 2,
                busy_ns: 20,
                residual_ns: 0
            }
        );
        // not enough work left
        let s = bg_slice(&plan, 1, 0, None, 100, true);
        assert_eq!(
            s,
            BgSlice {
                completed: 1,
                busy_ns: 10,
                residual_ns: 0
            }
        );
        assert_eq!(bg_slice(&plan, 10, 0, None, 5, true), BgSlice::default());
    }

    #[test]
    fn file_trace_routes_and_file_server() {
        use crate::energy::filetrace::parse_file_trace;
        let ft = parse_file_trace(
            "0,/usr/bin/vi,0,4096,R,app\n1,/home/u/a.txt,0,4096,R,user\n2,/usr/bin/vi,0,4096,W,app\n",
            std::path::Path::new("f.csv"),
        )
        .unwrap();
        let m: ServiceModel = "const:5ms".parse().unwrap();
        let local = EnergyInput::from_file_trace(&ft, &m, UserData::Local, 1).unwrap();
        assert_eq!(local.base, vec![Route::Peer, Route::Local, Route::Local]);
        assert_eq!(local.disk_requests(), 3);
        assert_eq!(local.mandatory_local(), 2);
        let server = EnergyInput::from_file_trace(&ft, &m, UserData::Server, 1).unwrap();
        assert_eq!(server.base, vec![Route::Peer, Route::Server, Route::Local]);
        assert_eq!(
            server.completion_ns,
            vec![5_000_000, 1_000_000_000, 2_005_000_000]
        );
        let routes = server.routes(&Availability::Standalone, 1).unwrap();
        let mut p = spindown::build("timeout").unwrap();
        let r = simulate(&server, &routes, p.as_mut(), &EnergyConfig::default()).unwrap();
        assert_eq!(r.server.requests, 1);
        assert_eq!(r.local_requests, 2);
    }

    #[test]
    fn bad_routes_length_is_an_error() {
        let mut p = spindown::build("timeout").unwrap();
        let e = simulate(
            &input(),
            &[Route::Local; 3],
            p.as_mut(),
            &EnergyConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("3 routes for 8 requests"), "{e}");
    }
}
