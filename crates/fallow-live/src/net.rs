//! The monitor for a network interface: foreground (FG) traffic on
//! `IFACE` from `/sys/class/net/IFACE/statistics`, as [`Event`]s the same
//! [`crate::Driver`] and policies use for a disk.
//!
//! Eggert & Touch's idletime scheduler ("Idletime Scheduling
//! with Preemption Intervals") applies one rule to disks and networks
//! alike: after each FG request (for a network, an FG packet, §3.2) a
//! *preemption interval* starts during which no BG work begins, so bursts
//! of FG packets pay at most one preemption (§2). They do it in the kernel,
//! at the interface's output queue (ALTQ); from user space fallow sees the
//! interface's packet counters every millisecond and pauses the whole BG
//! command. The preemption interval is the policy's wait
//! (`preemption-interval:p=…` or `fixed-wait:t=…`); §4.3 found it must
//! exceed the RTT of FG TCP connections to protect them (over 1.25 ms on
//! their LAN, 20–30 ms over a 10 ms-delay WAN).
//!
//! Each sample is *active* when FG packets moved since the previous one;
//! the interface is busy from the first active sample and idle at the
//! first quiet one ([`NetDetector`]). Packets stand for requests
//! (`fg_requests`); received and sent bytes are reported as the monitor's
//! `fg_read_bytes` and `fg_write_bytes`.
//!
//! The managed command's own traffic is kept apart by running it in its
//! own network namespace (`fallow run --netns NAME`). If that namespace
//! reaches the outside through `IFACE` (a veth pair routed or NAT'ed out
//! of it), its packets still cross `IFACE`: they are counted on the
//! namespace's interfaces ([`NamespaceTraffic`], `/proc/<pid>/net/dev` of
//! a process in it) and subtracted, one packet there for one packet here.
//! A packet may cross the two interfaces in either order; the detector
//! compares the namespace's counts with the interface's from one sample
//! earlier, so a packet forwarded within one interval is never taken for
//! FG (FG is then seen one interval late). Not exact where the kernel
//! coalesces packets differently on the two interfaces (GRO of a bulk TCP
//! stream): then part of the command's traffic looks like FG.

use crate::clock::{monotonic_ns, sleep_until, thread_cpu_ns};
use crate::error::{Error, Result};
use crate::monitor::{Event, Monitor, MonitorStats};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

/// Cumulative counters of an interface (or of all of a namespace's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Packets received.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl NetCounters {
    /// Packets in both directions.
    pub fn packets(&self) -> u64 {
        self.rx_packets.wrapping_add(self.tx_packets)
    }

    fn since(&self, base: &NetCounters) -> NetCounters {
        NetCounters {
            rx_packets: self.rx_packets.wrapping_sub(base.rx_packets),
            tx_packets: self.tx_packets.wrapping_sub(base.tx_packets),
            rx_bytes: self.rx_bytes.wrapping_sub(base.rx_bytes),
            tx_bytes: self.tx_bytes.wrapping_sub(base.tx_bytes),
        }
    }
}

/// The counter files of one interface, in sysfs's `statistics/` layout.
const FILES: [&str; 4] = ["rx_packets", "tx_packets", "rx_bytes", "tx_bytes"];

/// Where a network monitor reads its counters: an interface's
/// `statistics/` directory in sysfs, or any directory with the same four
/// files (`rx_packets`, `tx_packets`, `rx_bytes`, `tx_bytes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetSource {
    /// What to call it (`eth0`, or the directory).
    pub label: String,
    /// The directory holding the counter files.
    pub dir: PathBuf,
}

impl NetSource {
    /// Interface `iface` of this network namespace.
    pub fn sysfs(iface: &str) -> Result<NetSource> {
        Self::sysfs_in(Path::new("/sys/class/net"), iface)
    }

    fn sysfs_in(root: &Path, iface: &str) -> Result<NetSource> {
        let iface = iface.trim();
        if iface.is_empty() || iface.contains('/') || iface == "." || iface == ".." {
            return Err(Error::invalid(
                "--net",
                format!("`{iface}` is not an interface name (like eth0)"),
            ));
        }
        let dir = root.join(iface).join("statistics");
        if !dir.join("rx_packets").is_file() {
            return Err(Error::invalid(
                "--net",
                format!(
                    "no network interface `{iface}`: {} does not exist (`ip link` lists the interfaces)",
                    dir.display()
                ),
            ));
        }
        Ok(NetSource {
            label: iface.to_string(),
            dir,
        })
    }

    /// A directory holding the four counter files.
    pub fn dir(path: impl Into<PathBuf>) -> Result<NetSource> {
        let dir: PathBuf = path.into();
        let s = NetSource {
            label: dir.display().to_string(),
            dir,
        };
        s.open()?.read()?;
        Ok(s)
    }

    /// `eth0` (an interface name) or a directory (anything with a `/`).
    pub fn parse(spec: &str) -> Result<NetSource> {
        if spec.contains('/') {
            Self::dir(spec)
        } else {
            Self::sysfs(spec)
        }
    }

    fn open(&self) -> Result<NetReader> {
        // sysfs regenerates a file on every read at offset 0: keep it open
        let files = if self.dir.starts_with("/sys/") {
            let mut v = Vec::with_capacity(4);
            for f in FILES {
                let p = self.dir.join(f);
                v.push(File::open(&p).map_err(|e| Error::io(&p, "cannot open", e))?);
            }
            Some(v)
        } else {
            None
        };
        Ok(NetReader {
            dir: self.dir.clone(),
            files,
            buf: [0; 64],
            last: None,
        })
    }
}

struct NetReader {
    dir: PathBuf,
    files: Option<Vec<File>>,
    buf: [u8; 64],
    last: Option<NetCounters>,
}

impl NetReader {
    fn field(&mut self, i: usize) -> Result<u64> {
        let path = self.dir.join(FILES[i]);
        let n = match &self.files {
            Some(f) => f[i].read_at(&mut self.buf, 0),
            None => File::open(&path).and_then(|f| f.read_at(&mut self.buf, 0)),
        }
        .map_err(|e| Error::io(&path, "cannot read", e))?;
        let text = String::from_utf8_lossy(&self.buf[..n]);
        text.trim().parse().map_err(|_| Error::Parse {
            path: path.clone(),
            message: format!("`{}` is not an unsigned integer", text.trim()),
        })
    }

    fn read(&mut self) -> Result<NetCounters> {
        let (rx_packets, tx_packets) = (self.field(0)?, self.field(1)?);
        // every byte comes in a packet: no new packets, the same bytes (a
        // quiet interface costs two reads a sample, not four). Files
        // rewritten one by one (tests, emulators) are always read whole.
        let c = match self.last {
            Some(l)
                if self.files.is_some()
                    && (l.rx_packets, l.tx_packets) == (rx_packets, tx_packets) =>
            {
                l
            }
            _ => NetCounters {
                rx_packets,
                tx_packets,
                rx_bytes: self.field(2)?,
                tx_bytes: self.field(3)?,
            },
        };
        self.last = Some(c);
        Ok(c)
    }
}

/// The sum over the interfaces of a `/proc/<pid>/net/dev` text, loopback
/// excluded (it never reaches another interface).
pub fn parse_proc_net_dev(text: &str) -> std::result::Result<NetCounters, String> {
    let mut sum = NetCounters::default();
    // two header lines, then `  name: rx_bytes rx_packets … (8) tx_bytes tx_packets …`
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            return Err(format!("`{line}` has no `NAME:`"));
        };
        if name.trim() == "lo" {
            continue;
        }
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| format!("{}: a field is not an unsigned integer", name.trim()))?;
        if v.len() < 10 {
            return Err(format!("{}: {} fields, want 16", name.trim(), v.len()));
        }
        sum.rx_bytes += v[0];
        sum.rx_packets += v[1];
        sum.tx_bytes += v[8];
        sum.tx_packets += v[9];
    }
    Ok(sum)
}

/// All the traffic of a network namespace, from `/proc/<pid>/net/dev` of
/// a process in it (loopback excluded). Counted only while the process is
/// in that namespace: `ip netns exec` enters it after fallow starts
/// watching, and until then the file shows the host's interfaces. Before,
/// and once the process is gone, the last counts stay.
#[derive(Debug)]
pub struct NamespaceTraffic {
    path: PathBuf,
    ns_link: Option<PathBuf>,
    want: Option<String>,
    last: NetCounters,
}

impl NamespaceTraffic {
    /// The namespace named `netns` (`/run/netns/NAME`), seen through
    /// process `pid`, which is in it or about to enter it.
    pub fn of_process_in(pid: u32, netns: &str) -> Result<NamespaceTraffic> {
        use std::os::unix::fs::MetadataExt;
        let ns = Path::new("/run/netns").join(netns);
        let md = std::fs::metadata(&ns)
            .map_err(|e| Error::io(&ns, "cannot find the network namespace", e))?;
        Ok(NamespaceTraffic {
            path: PathBuf::from(format!("/proc/{pid}/net/dev")),
            ns_link: Some(PathBuf::from(format!("/proc/{pid}/ns/net"))),
            // the namespace's id is the inode of its nsfs file
            want: Some(format!("net:[{}]", md.ino())),
            last: NetCounters::default(),
        })
    }

    /// Any file in the `/proc/net/dev` format, always counted.
    pub fn from_file(path: impl Into<PathBuf>) -> NamespaceTraffic {
        NamespaceTraffic {
            path: path.into(),
            ns_link: None,
            want: None,
            last: NetCounters::default(),
        }
    }

    /// The counts now.
    pub fn read(&mut self) -> NetCounters {
        if let (Some(link), Some(want)) = (&self.ns_link, &self.want) {
            match std::fs::read_link(link) {
                Ok(l) if l.as_os_str() == want.as_str() => {}
                _ => return self.last,
            }
        }
        if let Some(c) = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| parse_proc_net_dev(&t).ok())
        {
            self.last = c;
        }
        self.last
    }
}

/// Totals of what a [`NetDetector`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetTotals {
    /// Samples observed.
    pub samples: u64,
    /// Busy periods seen.
    pub busy_periods: u64,
    /// Idle intervals seen.
    pub idle_intervals: u64,
    /// FG packets.
    pub fg_packets: u64,
    /// FG bytes received (estimated).
    pub fg_rx_bytes: u64,
    /// FG bytes sent (estimated).
    pub fg_tx_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Busy {
        start_ns: u64,
        last_active_ns: u64,
        packets: u64,
        first: bool,
    },
    Idle,
}

/// From interface samples to FG events: a pure state machine (see the
/// module documentation).
#[derive(Debug, Clone)]
pub struct NetDetector {
    base: Option<(NetCounters, NetCounters)>,
    /// The previous sample's interface counts, own counts and time.
    prev: Option<(NetCounters, NetCounters, u64)>,
    /// Own packets two samples ago.
    own_before_prev: u64,
    /// Running maxima of the FG estimates: packets, received and sent bytes.
    max_est: [i128; 3],
    state: State,
    totals: NetTotals,
}

impl Default for NetDetector {
    fn default() -> Self {
        Self::new()
    }
}

impl NetDetector {
    /// A detector that takes the interface as busy until a first quiet sample.
    pub fn new() -> NetDetector {
        NetDetector {
            base: None,
            prev: None,
            own_before_prev: 0,
            max_est: [0; 3],
            state: State::Busy {
                start_ns: 0,
                last_active_ns: 0,
                packets: 0,
                first: true,
            },
            totals: NetTotals::default(),
        }
    }

    /// Totals so far.
    pub fn totals(&self) -> NetTotals {
        self.totals
    }

    /// Feed one sample at `t_ns`: the interface's counters and, when the
    /// command runs in its own namespace, that namespace's (read just
    /// after the interface's).
    pub fn observe(
        &mut self,
        t_ns: u64,
        iface: NetCounters,
        own: Option<NetCounters>,
    ) -> Option<Event> {
        let lagged = own.is_some();
        let own = own.unwrap_or_default();
        let (base_i, base_o) = *self.base.get_or_insert((iface, own));
        let Some((prev_i, prev_o, prev_t)) = self.prev else {
            self.prev = Some((iface, own, t_ns));
            self.own_before_prev = own.since(&base_o).packets();
            if let State::Busy {
                start_ns,
                last_active_ns,
                ..
            } = &mut self.state
            {
                (*start_ns, *last_active_ns) = (t_ns, t_ns);
            }
            return None;
        };
        self.totals.samples += 1;
        // with a namespace to subtract, the interface one sample late (see the module doc)
        let i_now = if lagged { prev_i } else { iface };
        let (i, o) = (i_now.since(&base_i), own.since(&base_o));
        let prev_own_p = prev_o.since(&base_o).packets();
        let own_quiet = o.packets() == prev_own_p && prev_own_p == self.own_before_prev;
        // FG = interface − namespace since the start, reported as growth
        // beyond the running maximum (bytes likewise, on their own: a
        // sample may see a packet's bytes before the packet)
        let mut new = [0u64; 3];
        let est = [
            i.packets() as i128 - o.packets() as i128,
            i.rx_bytes as i128 - o.rx_bytes as i128,
            i.tx_bytes as i128 - o.tx_bytes as i128,
        ];
        for k in 0..3 {
            new[k] = (est[k] - self.max_est[k]).max(0) as u64;
            self.max_est[k] = if own_quiet {
                est[k]
            } else {
                self.max_est[k].max(est[k])
            };
        }
        let new_packets = new[0];
        self.totals.fg_packets += new_packets;
        self.totals.fg_rx_bytes += new[1];
        self.totals.fg_tx_bytes += new[2];
        self.own_before_prev = prev_own_p;
        self.prev = Some((iface, own, t_ns));

        match &mut self.state {
            State::Busy {
                start_ns,
                last_active_ns,
                packets,
                first,
            } => {
                if new_packets > 0 {
                    *last_active_ns = t_ns;
                    *packets += new_packets;
                    return None;
                }
                let ev = Event::Idle {
                    at_ns: t_ns,
                    idle_start_ns: *last_active_ns,
                    busy_ns: last_active_ns.saturating_sub(*start_ns),
                    fg_requests: (*packets).min(u32::MAX as u64) as u32,
                    last_arrival_ns: *last_active_ns,
                    first: *first,
                };
                self.state = State::Idle;
                self.totals.idle_intervals += 1;
                Some(ev)
            }
            State::Idle => {
                if new_packets == 0 {
                    return None;
                }
                self.totals.busy_periods += 1;
                self.state = State::Busy {
                    start_ns: prev_t,
                    last_active_ns: t_ns,
                    packets: new_packets,
                    first: false,
                };
                Some(Event::Busy {
                    at_ns: t_ns,
                    after_ns: prev_t,
                })
            }
        }
    }
}

/// Settings of a network monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetMonitorConfig {
    /// Time between samples, ns.
    pub interval_ns: u64,
}

impl Default for NetMonitorConfig {
    fn default() -> Self {
        NetMonitorConfig {
            interval_ns: 1_000_000,
        }
    }
}

/// Start monitoring `source` every `cfg.interval_ns` on a thread of its
/// own, subtracting `own` (the managed command's namespace) if given. The
/// first sample is read here, so an interface that cannot be read fails now.
pub fn start(
    source: &NetSource,
    own: Option<NamespaceTraffic>,
    cfg: NetMonitorConfig,
) -> Result<Monitor> {
    if cfg.interval_ns < 10_000 || cfg.interval_ns > 10_000_000_000 {
        return Err(Error::invalid(
            "monitor interval",
            format!("{} ns: use 10 µs to 10 s", cfg.interval_ns),
        ));
    }
    let mut reader = source.open()?;
    reader.read()?;
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Mutex::new(MonitorStats {
        source: format!("net:{}", source.label),
        interval_s: cfg.interval_ns as f64 / 1e9,
        ..MonitorStats::default()
    }));
    let (stop2, stats2) = (stop.clone(), stats.clone());
    let handle = std::thread::Builder::new()
        .name("fallow-net-monitor".into())
        .spawn(move || sample_loop(reader, own, cfg, tx, stop2, stats2))
        .map_err(|e| Error::Monitor(format!("cannot start the thread: {e}")))?;
    Ok(Monitor::from_parts(rx, stop, handle, stats))
}

/// Consecutive unreadable samples of a non-sysfs source before giving up.
const MAX_SKIPPED_IN_A_ROW: u32 = 1000;

fn sample_loop(
    mut reader: NetReader,
    mut own: Option<NamespaceTraffic>,
    cfg: NetMonitorConfig,
    tx: Sender<Event>,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<MonitorStats>>,
) -> Result<()> {
    let mut det = NetDetector::new();
    let (cpu0, wall0) = (thread_cpu_ns(), monotonic_ns());
    let mut next = wall0;
    let (mut late, mut skipped, mut skipped_in_a_row) = (0u64, 0u64, 0u32);
    let publish = |det: &NetDetector, late: u64, skipped: u64| {
        let t = det.totals();
        let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
        s.samples = t.samples;
        s.late_samples = late;
        s.skipped_samples = skipped;
        s.busy_periods = t.busy_periods;
        s.idle_intervals = t.idle_intervals;
        s.fg_requests = t.fg_packets;
        s.fg_read_bytes = t.fg_rx_bytes;
        s.fg_write_bytes = t.fg_tx_bytes;
        s.cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
        s.wall_s = (monotonic_ns() - wall0) as f64 / 1e9;
    };
    let sysfs = reader.files.is_some();
    let mut n = 0u64;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let sample = reader.read();
        let own_now = own.as_mut().map(NamespaceTraffic::read);
        let t = monotonic_ns();
        match sample {
            Ok(c) => {
                skipped_in_a_row = 0;
                if let Some(ev) = det.observe(t, c, own_now) {
                    if tx.send(ev).is_err() {
                        break Ok(());
                    }
                }
            }
            // an interface that goes away (unplugged, namespace deleted) is an error
            Err(e) if sysfs => break Err(e),
            Err(e) => {
                skipped += 1;
                skipped_in_a_row += 1;
                if skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW {
                    break Err(e);
                }
            }
        }
        n += 1;
        if n % 64 == 0 {
            publish(&det, late, skipped);
        }
        next += cfg.interval_ns;
        let now = monotonic_ns();
        if now > next + cfg.interval_ns {
            late += 1;
            next = now;
        }
        sleep_until(next);
    };
    publish(&det, late, skipped);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(rx: u64, tx: u64) -> NetCounters {
        NetCounters {
            rx_packets: rx,
            tx_packets: tx,
            rx_bytes: rx * 100,
            tx_bytes: tx * 100,
        }
    }

    #[test]
    fn parses_proc_net_dev_without_loopback() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
 lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0\n  \
 veth1:    5000      50    0    0    0     0          0         0     7000      70    0    0    0     0       0          0\n   \
 eth9:     100       1    0    0    0     0          0         0      200       2    0    0    0     0       0          0\n";
        let s = parse_proc_net_dev(text).unwrap();
        assert_eq!(
            s,
            NetCounters {
                rx_packets: 51,
                tx_packets: 72,
                rx_bytes: 5100,
                tx_bytes: 7200
            }
        );
        assert!(parse_proc_net_dev("h\nh\n  x: 1 2 3\n")
            .unwrap_err()
            .contains("3 fields"));
        assert!(parse_proc_net_dev("h\nh\n  x: a b c d e f g h i j\n").is_err());
        // our own namespace's file parses
        let own = std::fs::read_to_string("/proc/self/net/dev").unwrap();
        parse_proc_net_dev(&own).unwrap();
    }

    #[test]
    fn packets_make_busy_periods_and_quiet_samples_idle_ones() {
        let mut d = NetDetector::new();
        assert_eq!(d.observe(0, c(5, 5), None), None);
        // quiet: the first idle
        assert!(matches!(
            d.observe(1, c(5, 5), None),
            Some(Event::Idle { first: true, .. })
        ));
        assert_eq!(d.observe(2, c(5, 5), None), None);
        // two packets arrive, one is sent
        assert_eq!(
            d.observe(3, c(7, 5), None),
            Some(Event::Busy {
                at_ns: 3,
                after_ns: 2
            })
        );
        assert_eq!(d.observe(4, c(7, 6), None), None);
        match d.observe(5, c(7, 6), None) {
            Some(Event::Idle {
                idle_start_ns,
                busy_ns,
                fg_requests,
                first,
                ..
            }) => {
                assert_eq!(
                    (idle_start_ns, busy_ns, fg_requests, first),
                    (4, 2, 3, false)
                );
            }
            e => panic!("{e:?}"),
        }
        let t = d.totals();
        assert_eq!((t.busy_periods, t.idle_intervals, t.fg_packets), (1, 2, 3));
        assert_eq!((t.fg_rx_bytes, t.fg_tx_bytes), (200, 100));
    }

    /// The namespace's packets cross the interface a little before or
    /// after they are counted in the namespace: never FG.
    #[test]
    fn namespace_traffic_is_not_fg_in_either_order() {
        let mut d = NetDetector::new();
        let mut t = 0;
        let mut feed = |d: &mut NetDetector, i: NetCounters, o: NetCounters| {
            t += 1;
            d.observe(t, i, Some(o))
        };
        assert_eq!(feed(&mut d, c(0, 0), c(0, 0)), None);
        assert!(matches!(
            feed(&mut d, c(0, 0), c(0, 0)),
            Some(Event::Idle { first: true, .. })
        ));
        // egress: counted in the namespace first, on the interface next sample
        assert_eq!(feed(&mut d, c(0, 0), c(0, 1)), None);
        assert_eq!(feed(&mut d, c(0, 1), c(0, 1)), None);
        // ingress: on the interface first, in the namespace within the interval
        assert_eq!(feed(&mut d, c(1, 1), c(1, 1)), None);
        for _ in 0..5 {
            assert_eq!(feed(&mut d, c(1, 1), c(1, 1)), None);
        }
        // an FG packet: seen one sample late
        assert_eq!(feed(&mut d, c(2, 1), c(1, 1)), None);
        assert!(matches!(
            feed(&mut d, c(2, 1), c(1, 1)),
            Some(Event::Busy { .. })
        ));
        assert!(matches!(
            feed(&mut d, c(2, 1), c(1, 1)),
            Some(Event::Idle { .. })
        ));
        // traffic of the namespace that never reaches the interface (to the
        // host itself) lowers the estimate; later FG still shows
        for _ in 0..3 {
            assert_eq!(feed(&mut d, c(2, 1), c(11, 11)), None);
        }
        for _ in 0..3 {
            assert_eq!(feed(&mut d, c(2, 1), c(21, 21)), None);
        }
        for _ in 0..3 {
            assert_eq!(feed(&mut d, c(2, 1), c(21, 21)), None);
        }
        assert_eq!(feed(&mut d, c(2, 2), c(21, 21)), None);
        assert!(matches!(
            feed(&mut d, c(2, 2), c(21, 21)),
            Some(Event::Busy { .. })
        ));
        assert_eq!(d.totals().fg_packets, 2);
    }

    #[test]
    fn namespace_traffic_counts_only_inside_the_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("dev");
        let text = |n: u64| format!("h\nh\n  v: {n} {n} 0 0 0 0 0 0 {n} {n} 0 0 0 0 0 0\n");
        std::fs::write(&dev, text(5)).unwrap();
        let mut t = NamespaceTraffic::from_file(&dev);
        assert_eq!(t.read().packets(), 10);
        // our own process is not in a namespace with this id: nothing counted
        let me = std::process::id();
        let mut t = NamespaceTraffic {
            path: dev.clone(),
            ns_link: Some(PathBuf::from(format!("/proc/{me}/ns/net"))),
            want: Some("net:[1]".into()),
            last: NetCounters::default(),
        };
        assert_eq!(t.read().packets(), 0);
        // and once it is
        t.want = Some(
            std::fs::read_link(format!("/proc/{me}/ns/net"))
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
        assert_eq!(t.read().packets(), 10);
        // a vanished file keeps the last counts
        std::fs::remove_file(&dev).unwrap();
        assert_eq!(t.read().packets(), 10);
        let e = NamespaceTraffic::of_process_in(me, "fallow-no-such-ns").unwrap_err();
        assert!(e.to_string().contains("fallow-no-such-ns"), "{e}");
    }

    /// Bytes before packets, as the kernel counts them: a sample that
    /// sees the new packets sees their bytes.
    fn write_counters(dir: &Path, rx: u64, tx: u64) {
        let values = [rx, tx, rx * 64, tx * 64];
        for i in [2, 3, 0, 1] {
            let (name, v) = (FILES[i], values[i]);
            let tmp = dir.join(format!("{name}.tmp"));
            std::fs::write(&tmp, format!("{v}\n")).unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        }
    }

    #[test]
    fn a_directory_source_drives_a_monitor() {
        let dir = tempfile::tempdir().unwrap();
        write_counters(dir.path(), 0, 0);
        let mut m = start(
            &NetSource::dir(dir.path()).unwrap(),
            None,
            NetMonitorConfig {
                interval_ns: 500_000,
            },
        )
        .unwrap();
        let mut next = || {
            m.recv_timeout(2_000_000_000)
                .unwrap()
                .expect("an event in 2 s")
        };
        assert!(matches!(next(), Event::Idle { first: true, .. }));
        write_counters(dir.path(), 3, 1);
        assert!(matches!(next(), Event::Busy { .. }));
        assert!(matches!(next(), Event::Idle { first: false, .. }));
        let s = m.stop().unwrap();
        assert_eq!(s.source, format!("net:{}", dir.path().display()));
        assert_eq!((s.busy_periods, s.fg_requests), (1, 4));
        assert_eq!((s.fg_read_bytes, s.fg_write_bytes), (3 * 64, 64));
    }

    #[test]
    fn bad_sources_are_clear_errors() {
        let e = NetSource::sysfs("fallow-no-such-if0")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no network interface `fallow-no-such-if0`"),
            "{e}"
        );
        let e = NetSource::sysfs("../x").unwrap_err().to_string();
        assert!(e.contains("not an interface name"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = NetSource::dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("rx_packets"), "{e}");
        std::fs::write(dir.path().join("rx_packets"), "x\n").unwrap();
        for f in &FILES[1..] {
            std::fs::write(dir.path().join(f), "0\n").unwrap();
        }
        let e = NetSource::dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not an unsigned integer"), "{e}");
        // loopback exists in every namespace
        assert_eq!(NetSource::sysfs("lo").unwrap().label, "lo");
    }
}
