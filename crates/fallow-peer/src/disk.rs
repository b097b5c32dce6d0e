//! The local disk's power state: is it spinning (a local read is cheap) or
//! asleep (a local read waits for a spin-up)?
//!
//! Three sources: a real drive asked with ATA CHECK POWER MODE (what
//! `hdparm -C` sends; the query itself never spins the drive up), an
//! emulated drive that follows the energy simulation's model (`fallow
//! energy`, SARD Figure 1 and §II: after each request a timer starts,
//! the disk shuts down when it exceeds the timeout, the next local request
//! waits for the rest of the shutdown and a whole spin-up), or a disk that
//! never sleeps. The emulated drive's spin-down rule is a policy from the
//! core's spin-down registry (`timeout:t=10s`), and its spin-up wait is
//! really slept, so the mount behaves like a sleeping disk in real time.
//!
//! Every disk also feeds a *shadow* model — the same spin-down rule fed
//! with every read, local or remote — whose spin-ups are those of the
//! standalone disk; `spinups_avoided` is the shadow's spin-ups minus the
//! real ones.

use crate::error::{Error, Result};
use fallow_core::energy::spindown::{self, IdleCtx, SpinDown};
use fallow_core::energy::PowerModel;
use fallow_core::policy::Params;
use serde::Serialize;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the power state comes from, as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum DiskSpec {
    /// `emulated[:t=10s,spinup=9s,shutdown=4s,start=awake|asleep]`.
    Emulated(EmulatedConfig),
    /// `device:/dev/sdX[,t=10s]`: the drive's own state; `t` is the
    /// drive's standby timeout, used only by the shadow model.
    Device {
        /// The block device.
        path: PathBuf,
        /// Timeout of the shadow model, ns.
        shadow_timeout_ns: u64,
    },
    /// `awake`: a disk that never sleeps (every read is local).
    Awake,
}

/// Parameters of the emulated disk.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatedConfig {
    /// Idle time before it spins down, ns.
    pub timeout_ns: u64,
    /// Time of one spin-up, ns (the WD2500JD's 9 s by default).
    pub spinup_ns: u64,
    /// Time of one shutdown, ns (4 s by default).
    pub shutdown_ns: u64,
    /// Start spun down.
    pub start_asleep: bool,
}

impl Default for EmulatedConfig {
    fn default() -> Self {
        let p = PowerModel::default();
        EmulatedConfig {
            timeout_ns: 10_000_000_000,
            spinup_ns: p.spinup_ns,
            shutdown_ns: p.shutdown_ns,
            start_asleep: false,
        }
    }
}

impl DiskSpec {
    /// Parse `emulated[:k=v,…]`, `device:/dev/sdX[,t=10s]` or `awake`.
    pub fn parse(spec: &str) -> Result<DiskSpec> {
        let what = "--disk-state";
        let spec = spec.trim();
        if spec == "awake" {
            return Ok(DiskSpec::Awake);
        }
        if let Some(rest) = spec.strip_prefix("device:") {
            let mut parts = rest.split(',');
            let path = PathBuf::from(parts.next().unwrap_or("").trim());
            if path.as_os_str().is_empty() {
                return Err(Error::invalid(
                    what,
                    "device: needs a path (device:/dev/sda)",
                ));
            }
            let (_, mut p) =
                Params::parse(&format!("device:{}", parts.collect::<Vec<_>>().join(",")))?;
            let shadow_timeout_ns = p.duration_ns_or("t", 10_000_000_000)?;
            p.finish(&["t"])?;
            return Ok(DiskSpec::Device {
                path,
                shadow_timeout_ns,
            });
        }
        let (name, mut p) = Params::parse(spec)?;
        if name != "emulated" {
            return Err(Error::invalid(
                what,
                format!("`{spec}`: expected emulated[:t=10s,spinup=9s,shutdown=4s,start=asleep], device:/dev/sdX[,t=10s] or awake"),
            ));
        }
        let d = EmulatedConfig::default();
        let start_asleep = match p.take("start").as_deref() {
            None | Some("awake") => false,
            Some("asleep") => true,
            Some(other) => {
                return Err(Error::invalid(
                    what,
                    format!("start=`{other}`: expected awake or asleep"),
                ))
            }
        };
        let cfg = EmulatedConfig {
            timeout_ns: p.duration_ns_or("t", d.timeout_ns)?,
            spinup_ns: p.duration_ns_or("spinup", d.spinup_ns)?,
            shutdown_ns: p.duration_ns_or("shutdown", d.shutdown_ns)?,
            start_asleep,
        };
        p.finish(&["t", "spinup", "shutdown", "start"])?;
        Ok(DiskSpec::Emulated(cfg))
    }
}

/// Where a disk model is in SARD's Figure 1 cycle.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Serving local reads.
    Busy,
    /// Spinning with nothing to do since `since_ns`; spins down after
    /// `timeout_ns` (never when `None`).
    Idle {
        since_ns: u64,
        timeout_ns: Option<u64>,
    },
    /// Shut down (or shutting down) since `since_ns`; in standby from
    /// `standby_ns` (when the shutdown is over).
    Off { since_ns: u64, standby_ns: u64 },
}

/// Time and events of a disk model, for metrics and energy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DiskCounts {
    /// Spin-ups (a local read found the disk off).
    pub spinups: u64,
    /// Spin-downs (an idle interval outlasted the timeout).
    pub spindowns: u64,
    /// Time spent serving, ns.
    pub busy_ns: u64,
    /// Time spinning idle, ns.
    pub idle_ns: u64,
    /// Time in standby (after the shutdown, before the spin-up), ns.
    pub standby_ns: u64,
    /// Energy by the power model: busy at read/write power, idle, standby,
    /// and each shutdown and spin-up, J.
    pub energy_j: f64,
}

/// The disk power-state model of `fallow energy` (SARD §II, Figure 1),
/// driven by real reads: a pure state machine on a caller's clock.
pub struct DiskModel {
    policy: Box<dyn SpinDown>,
    power: PowerModel,
    phase: Phase,
    inflight: u32,
    /// A spin-up in progress completes here, ns.
    ready_ns: u64,
    /// Accounted up to here, ns.
    last_ns: u64,
    counts: DiskCounts,
}

impl std::fmt::Debug for DiskModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskModel")
            .field("policy", &self.policy.name())
            .field("phase", &self.phase)
            .field("counts", &self.counts)
            .finish()
    }
}

impl DiskModel {
    /// A disk under spin-down `policy` (a registry spec, `timeout:t=10s`),
    /// spinning idle (or already in standby) at time 0.
    pub fn new(policy: &str, power: PowerModel, start_asleep: bool) -> Result<DiskModel> {
        let mut policy = spindown::build(policy)?;
        let phase = if start_asleep {
            // shut down before time 0: standby from time 0
            Phase::Off {
                since_ns: 0,
                standby_ns: 0,
            }
        } else {
            let timeout_ns = policy.on_idle(&IdleCtx {
                now_ns: 0,
                power: &power,
            });
            Phase::Idle {
                since_ns: 0,
                timeout_ns,
            }
        };
        Ok(DiskModel {
            policy,
            power,
            phase,
            inflight: 0,
            ready_ns: 0,
            last_ns: 0,
            counts: DiskCounts::default(),
        })
    }

    /// The emulated disk of `cfg`.
    pub fn emulated(cfg: &EmulatedConfig) -> Result<DiskModel> {
        let power = PowerModel {
            spinup_ns: cfg.spinup_ns,
            shutdown_ns: cfg.shutdown_ns,
            ..PowerModel::default()
        };
        DiskModel::new(
            &format!("timeout:t={}ns", cfg.timeout_ns),
            power,
            cfg.start_asleep,
        )
    }

    /// Bring the accounts to `now_ns` (spinning down if the timeout
    /// expired meanwhile).
    fn advance(&mut self, now_ns: u64) {
        let now = now_ns.max(self.last_ns);
        let from = self.last_ns;
        match self.phase {
            Phase::Busy => {
                // a spin-up in progress is in the spin-up's energy
                let start = from.max(self.ready_ns).min(now);
                self.counts.busy_ns += now - start;
            }
            Phase::Idle {
                since_ns,
                timeout_ns,
            } => {
                let off_at = timeout_ns.map(|t| since_ns.saturating_add(t));
                match off_at {
                    Some(off) if now >= off => {
                        self.counts.idle_ns += off.saturating_sub(from);
                        self.counts.spindowns += 1;
                        self.phase = Phase::Off {
                            since_ns: off,
                            standby_ns: off.saturating_add(self.power.shutdown_ns),
                        };
                        self.last_ns = off.max(from);
                        self.advance(now);
                        return;
                    }
                    _ => self.counts.idle_ns += now - from,
                }
            }
            Phase::Off { standby_ns, .. } => {
                self.counts.standby_ns += now.saturating_sub(standby_ns.max(from));
            }
        }
        self.last_ns = now;
    }

    /// True when a local read at `now_ns` would wait for a spin-up: the
    /// timeout expired (shutting down or in standby) or a spin-up is still
    /// in progress (SARD §III-E: "off" until the spin-up completes).
    pub fn is_off(&mut self, now_ns: u64) -> bool {
        self.advance(now_ns);
        matches!(self.phase, Phase::Off { .. }) || self.ready_ns > now_ns
    }

    /// A local read starts at `now_ns`: how long it waits for the disk
    /// (the rest of a shutdown and a spin-up when the disk is off, the rest
    /// of a spin-up in progress, else 0). Counts a spin-up.
    pub fn start_read(&mut self, now_ns: u64) -> u64 {
        self.advance(now_ns);
        let now = self.last_ns;
        match self.phase {
            Phase::Off {
                since_ns,
                standby_ns,
            } => {
                self.ready_ns = now.max(standby_ns) + self.power.spinup_ns;
                self.counts.spinups += 1;
                self.policy.on_idle_end(now.saturating_sub(since_ns), true);
            }
            Phase::Idle { since_ns, .. } => {
                self.policy.on_idle_end(now - since_ns, false);
            }
            Phase::Busy => {}
        }
        self.phase = Phase::Busy;
        self.inflight += 1;
        self.ready_ns.saturating_sub(now)
    }

    /// A local read ends at `now_ns`; the last one in flight starts an idle
    /// interval and the policy picks its timeout.
    pub fn end_read(&mut self, now_ns: u64) {
        self.advance(now_ns);
        self.inflight = self.inflight.saturating_sub(1);
        if self.inflight == 0 {
            let now = self.last_ns;
            let timeout_ns = self.policy.on_idle(&IdleCtx {
                now_ns: now,
                power: &self.power,
            });
            self.phase = Phase::Idle {
                since_ns: now,
                timeout_ns,
            };
        }
    }

    /// The accounts up to `now_ns`, with the energy by the power model.
    pub fn counts(&mut self, now_ns: u64) -> DiskCounts {
        self.advance(now_ns);
        let p = &self.power;
        let mut c = self.counts;
        c.energy_j = c.busy_ns as f64 / 1e9 * p.read_write_w
            + c.idle_ns as f64 / 1e9 * p.idle_w
            + c.standby_ns as f64 / 1e9 * p.standby_w
            + c.spindowns as f64 * p.shutdown_j
            + c.spinups as f64 * p.spinup_j;
        c
    }
}

/// The power state a drive reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerState {
    /// Spinning (active or idle).
    Active,
    /// Spun down.
    Standby,
}

/// Decode the sector count register after ATA CHECK POWER MODE (ACS-3
/// 7.3): 00h standby, 40h NV cache with the spindle down, 41h NV cache
/// with the spindle up, 80h idle, FFh active or idle.
pub fn decode_power_mode(count: u8) -> Result<PowerState, u8> {
    match count {
        0x00 | 0x40 => Ok(PowerState::Standby),
        0x41 | 0x80..=0x83 | 0xff => Ok(PowerState::Active),
        other => Err(other),
    }
}

/// A real drive's power state, by ATA CHECK POWER MODE, cached briefly.
#[derive(Debug)]
struct Device {
    path: PathBuf,
    file: File,
    last: Mutex<(Instant, PowerState)>,
}

/// How long a queried drive state is trusted.
const DEVICE_STATE_TTL: Duration = Duration::from_millis(200);

impl Device {
    fn open(path: PathBuf) -> Result<Device> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let state = query(&path, &file)?;
        Ok(Device {
            path,
            file,
            last: Mutex::new((Instant::now(), state)),
        })
    }

    fn state(&self) -> PowerState {
        let mut last = self.last.lock().expect("device lock");
        if last.0.elapsed() > DEVICE_STATE_TTL {
            // a failing query later on is treated as awake: the read then
            // goes to the disk, which is always correct
            let s = query(&self.path, &self.file).unwrap_or(PowerState::Active);
            *last = (Instant::now(), s);
        }
        last.1
    }

    fn mark_active(&self) {
        *self.last.lock().expect("device lock") = (Instant::now(), PowerState::Active);
    }
}

fn query(path: &std::path::Path, f: &File) -> Result<PowerState> {
    let count = crate::sys::ata_check_power_mode(f.as_fd()).map_err(|e| Error::Device {
        device: path.to_path_buf(),
        message: format!("ATA CHECK POWER MODE failed: {e} (not an ATA/SATA disk?)"),
    })?;
    decode_power_mode(count).map_err(|c| Error::Device {
        device: path.to_path_buf(),
        message: format!("unknown power mode 0x{c:02x}"),
    })
}

enum Source {
    Emulated(Mutex<DiskModel>),
    Device(Device),
    Awake,
}

/// A snapshot of the disk for metrics.
#[derive(Debug, Clone, Serialize)]
pub struct DiskSnapshot {
    /// `emulated`, `device` or `awake`.
    pub kind: &'static str,
    /// Off (asleep) now.
    pub asleep: bool,
    /// The disk's own accounts (emulated only).
    pub disk: Option<DiskCounts>,
    /// Spin-ups caused by local reads (emulated: the model's; device:
    /// local reads that found the drive in standby).
    pub spinups: u64,
    /// The shadow model: every read local, as without peers.
    pub standalone: DiskCounts,
    /// Standalone spin-ups minus real ones.
    pub spinups_avoided: u64,
}

/// The local disk as the overlay sees it: thread-safe, on the real clock.
pub struct Disk {
    source: Source,
    shadow: Mutex<DiskModel>,
    device_spinups: Mutex<u64>,
    t0: Instant,
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disk").field("kind", &self.kind()).finish()
    }
}

impl Disk {
    /// Open the disk of `spec` (querying a device once, so a wrong path
    /// fails here).
    pub fn open(spec: &DiskSpec) -> Result<Disk> {
        let (source, shadow) = match spec {
            DiskSpec::Emulated(cfg) => (
                Source::Emulated(Mutex::new(DiskModel::emulated(cfg)?)),
                DiskModel::emulated(cfg)?,
            ),
            DiskSpec::Device {
                path,
                shadow_timeout_ns,
            } => (
                Source::Device(Device::open(path.clone())?),
                DiskModel::new(
                    &format!("timeout:t={shadow_timeout_ns}ns"),
                    PowerModel::default(),
                    false,
                )?,
            ),
            DiskSpec::Awake => (
                Source::Awake,
                DiskModel::new("always-on", PowerModel::default(), false)?,
            ),
        };
        Ok(Disk {
            source,
            shadow: Mutex::new(shadow),
            device_spinups: Mutex::new(0),
            t0: Instant::now(),
        })
    }

    fn now_ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    fn kind(&self) -> &'static str {
        match self.source {
            Source::Emulated(_) => "emulated",
            Source::Device(_) => "device",
            Source::Awake => "awake",
        }
    }

    /// True when a local read would wait for a spin-up.
    pub fn is_asleep(&self) -> bool {
        match &self.source {
            Source::Emulated(m) => m.lock().expect("disk lock").is_off(self.now_ns()),
            Source::Device(d) => d.state() == PowerState::Standby,
            Source::Awake => false,
        }
    }

    /// A local read begins: returns how long it waited for a spin-up (the
    /// emulated disk sleeps that long here, so call it off the async
    /// runtime's worker threads).
    pub fn begin_local_read(&self) -> Duration {
        let now = self.now_ns();
        self.shadow.lock().expect("shadow lock").start_read(now);
        match &self.source {
            Source::Emulated(m) => {
                let wait = m.lock().expect("disk lock").start_read(now);
                let wait = Duration::from_nanos(wait);
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                wait
            }
            Source::Device(d) => {
                if d.state() == PowerState::Standby {
                    *self.device_spinups.lock().expect("lock") += 1;
                }
                d.mark_active();
                Duration::ZERO
            }
            Source::Awake => Duration::ZERO,
        }
    }

    /// A local read ended.
    pub fn end_local_read(&self) {
        let now = self.now_ns();
        self.shadow.lock().expect("shadow lock").end_read(now);
        if let Source::Emulated(m) = &self.source {
            m.lock().expect("disk lock").end_read(now);
        }
    }

    /// A read was served without the local disk (by a peer or the page
    /// cache): only the shadow model sees it.
    pub fn note_read_elsewhere(&self) {
        let now = self.now_ns();
        let mut s = self.shadow.lock().expect("shadow lock");
        s.start_read(now);
        s.end_read(now);
    }

    /// Counters for metrics.
    pub fn snapshot(&self) -> DiskSnapshot {
        let now = self.now_ns();
        let standalone = self.shadow.lock().expect("shadow lock").counts(now);
        let (disk, spinups) = match &self.source {
            Source::Emulated(m) => {
                let c = m.lock().expect("disk lock").counts(now);
                (Some(c), c.spinups)
            }
            Source::Device(_) => (None, *self.device_spinups.lock().expect("lock")),
            Source::Awake => (None, 0),
        };
        DiskSnapshot {
            kind: self.kind(),
            asleep: self.is_asleep(),
            disk,
            spinups,
            standalone,
            spinups_avoided: standalone.spinups.saturating_sub(spinups),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn model(asleep: bool) -> DiskModel {
        DiskModel::emulated(&EmulatedConfig {
            timeout_ns: 10 * S,
            spinup_ns: 9 * S,
            shutdown_ns: 4 * S,
            start_asleep: asleep,
        })
        .unwrap()
    }

    #[test]
    fn the_seeds_cycle_by_hand() {
        // read 0–1 s; idle until the 10 s timeout at 11 s; shutdown 11–15 s;
        // standby 15–20 s; a read at 20 s waits 9 s (spin-up 20–29 s),
        // is served 29–30 s; a read at 32 s finds the disk spinning.
        let mut m = model(false);
        assert_eq!(m.start_read(0), 0);
        m.end_read(S);
        assert!(!m.is_off(11 * S - 1));
        assert!(m.is_off(11 * S));
        assert_eq!(m.start_read(20 * S), 9 * S);
        assert!(m.is_off(25 * S), "off until the spin-up completes");
        m.end_read(30 * S);
        assert!(!m.is_off(32 * S));
        assert_eq!(m.start_read(32 * S), 0);
        m.end_read(33 * S);
        let c = m.counts(40 * S);
        assert_eq!((c.spinups, c.spindowns), (1, 1));
        assert_eq!(c.busy_ns, S + S + S, "0–1, 29–30, 32–33");
        assert_eq!(c.idle_ns, 10 * S + 2 * S + 7 * S, "1–11, 30–32, 33–40");
        assert_eq!(c.standby_ns, 5 * S, "15–20");
        let p = PowerModel::default();
        let want =
            3.0 * p.read_write_w + 19.0 * p.idle_w + 5.0 * p.standby_w + p.shutdown_j + p.spinup_j;
        assert!((c.energy_j - want).abs() < 1e-9, "{} {want}", c.energy_j);
    }

    #[test]
    fn a_read_during_the_shutdown_waits_for_it_and_a_spin_up() {
        let mut m = model(false);
        m.start_read(0);
        m.end_read(0);
        // timeout at 10 s, shutdown until 14 s; a read at 12 s waits
        // 2 s + 9 s; a second read during the spin-up waits for its rest
        assert_eq!(m.start_read(12 * S), 11 * S);
        assert_eq!(m.start_read(20 * S), 3 * S);
        m.end_read(24 * S);
        m.end_read(24 * S);
        assert_eq!(m.counts(24 * S).spinups, 1);
    }

    #[test]
    fn starting_asleep_and_the_shadow_difference() {
        let mut m = model(true);
        assert!(m.is_off(0));
        assert_eq!(m.start_read(5 * S), 9 * S, "no shutdown left to wait for");
        m.end_read(15 * S);
        let c = m.counts(15 * S);
        assert_eq!((c.spinups, c.spindowns, c.standby_ns), (1, 0, 5 * S));
    }

    #[test]
    fn specs() {
        assert_eq!(DiskSpec::parse("awake").unwrap(), DiskSpec::Awake);
        assert_eq!(
            DiskSpec::parse("emulated:t=2s,spinup=200ms,shutdown=0s,start=asleep").unwrap(),
            DiskSpec::Emulated(EmulatedConfig {
                timeout_ns: 2 * S,
                spinup_ns: 200_000_000,
                shutdown_ns: 0,
                start_asleep: true
            })
        );
        assert_eq!(
            DiskSpec::parse("emulated").unwrap(),
            DiskSpec::Emulated(EmulatedConfig::default())
        );
        assert_eq!(
            DiskSpec::parse("device:/dev/sdb,t=30s").unwrap(),
            DiskSpec::Device {
                path: "/dev/sdb".into(),
                shadow_timeout_ns: 30 * S
            }
        );
        for (bad, needle) in [
            ("emulated:t=soon", "soon"),
            ("emulated:x=1", "unknown parameter `x`"),
            ("emulated:start=later", "start=`later`"),
            ("device:", "needs a path"),
            ("floppy", "expected emulated"),
        ] {
            let e = DiskSpec::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains(needle) && e.is_bad_input(),
                "{bad}: {e}"
            );
        }
        assert_eq!(decode_power_mode(0x00), Ok(PowerState::Standby));
        assert_eq!(decode_power_mode(0xff), Ok(PowerState::Active));
        assert_eq!(decode_power_mode(0x80), Ok(PowerState::Active));
        assert_eq!(decode_power_mode(0x12), Err(0x12));
    }

    #[test]
    fn a_device_that_is_not_a_drive_is_a_clear_error() {
        let e = Disk::open(&DiskSpec::Device {
            path: "/dev/null".into(),
            shadow_timeout_ns: S,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/dev/null") && e.contains("CHECK POWER MODE"),
            "{e}"
        );
    }

    #[test]
    fn real_time_emulated_disk_sleeps_the_spin_up() {
        let d = Disk::open(&DiskSpec::Emulated(EmulatedConfig {
            timeout_ns: 60 * S,
            spinup_ns: 50_000_000,
            shutdown_ns: 0,
            start_asleep: true,
        }))
        .unwrap();
        assert!(d.is_asleep());
        d.note_read_elsewhere();
        let t = Instant::now();
        assert_eq!(d.begin_local_read(), Duration::from_millis(50));
        assert!(t.elapsed() >= Duration::from_millis(50));
        d.end_local_read();
        assert!(!d.is_asleep());
        let s = d.snapshot();
        // the shadow spun up for the first (remote) read, the disk for the
        // local one: nothing avoided
        assert_eq!(
            (s.spinups, s.standalone.spinups, s.spinups_avoided),
            (1, 1, 0)
        );
    }
}
