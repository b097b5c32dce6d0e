//! `zfs:POOL`: a ZFS scrub driven through `zpool scrub`'s own pause.
//!
//! **Not run live here**: this kernel has no ZFS. The executor is tested
//! against a fake `zpool` (`tests/data/zfs/zpool`) that prints what
//! OpenZFS's `zpool status` prints in each state, composed from the format
//! strings of `cmd/zpool/zpool_main.c` (openzfs/zfs at be7657e3,
//! `print_scan_scrub_resilver_status` and `scan_status_nvlist`), not
//! against a real pool.
//!
//! OpenZFS removed its idle throttle (`zfs_scan_idle`, PR 6256) and ZFS
//! ignores ionice; what it kept is the pause: `zpool scrub -p POOL` pauses
//! a scrub (its position is in the pool, across reboots), `zpool scrub
//! POOL` resumes it. So, like `btrfs:`, one BG request lets the scrub run
//! for a *slice* of time and [`BgExecutor::pause`] pauses it; back-to-back
//! requests leave it running.
//!
//! - **Slice**: `--slice` if given, else the request size over the
//!   measured issue rate (100 MB/s until measured), within
//!   [`SLICE_MIN_NS`]..[`SLICE_MAX_NS`].
//! - **Progress**: `zpool status -j -p POOL` where `-j` exists (OpenZFS ≥
//!   2.3): `scan_stats` `function`, `state`, `to_examine`, `examined`,
//!   `issued`, `processed`, `errors`, `scrub_pause` (exact with `-p`);
//!   else the text's `scan:` lines ([`ScanStatus::parse_text`]): `scrub in
//!   progress since …`, `scrub paused since …`, `X / Y scanned …, Z / W
//!   issued …` (2.2+) or `X scanned …, Z issued …, T total` (older),
//!   `R repaired, P% done`, `scrub repaired R in T with N errors on …`.
//! - **Devices**: every leaf vdev (a disk or a partition's disk) from the
//!   JSON's `vdevs` tree (`path`) or the text's `config:` section of
//!   `zpool status -P`.
//! - **If fallow dies**: the guardian pauses a scrub in progress (`zpool
//!   scrub -p POOL`, only if `zpool status` says `scrub in progress`), so
//!   it never runs on unwatched, and leaves a paused, cancelled or finished
//!   one as it is: it never resumes (a user's pause or cancel stands) and
//!   never starts one; it logs which it did. A clean stop (Ctrl-C) leaves
//!   it paused too: `--resume` (or `zpool scrub POOL`) continues it.
//! - **Granularity**: a pause is `zpool scrub -p`, a sync task: it takes
//!   effect when ZFS syncs the next transaction group (the command waits
//!   for it), and I/O the scan has already queued completes.
//!   ZFS has no rate or speed knob fallow could use as a brake, so a BG
//!   request is a slice of time, and an FG arrival waits for the slice's
//!   end and the pause (not measured here: no ZFS in this kernel).

use super::control::Control;
use super::gate::Gate;
use super::{Kind, NativeConfig, NativeExecutor, NativeReport, NativeTarget};
use crate::clock::monotonic_ns;
use crate::driver::{BgExecutor, Step};
use crate::error::{Error, Result};
use crate::monitor::StatSource;
use crate::run::guardian::ReleaseAction;
use crate::scrub::{Resume, Windows};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The registry entry.
pub const KIND: Kind = Kind {
    prefix: "zfs",
    summary: "ZFS scrub of a pool: runs a slice per BG request, paused by `zpool scrub -p`, continued by `zpool scrub` (tested against recorded zpool output: no ZFS in this kernel)",
    open,
};

/// Shortest slice, ns: a pause is a txg sync, seconds at worst.
pub const SLICE_MIN_NS: u64 = 100_000_000;
/// Longest slice, ns.
pub const SLICE_MAX_NS: u64 = 10_000_000_000;
/// Issue rate assumed until one has been measured, bytes/s.
const INITIAL_RATE: f64 = 100e6;
/// Longest a `zpool` command may take, ns.
const TOOL_TIMEOUT_NS: u64 = 120_000_000_000;

fn open(
    t: &NativeTarget,
    cfg: &NativeConfig,
    ctl: Arc<dyn Control>,
) -> Result<Box<dyn NativeExecutor>> {
    Ok(Box::new(Zfs::open(t, cfg, ctl)?))
}

/// Where a pool's scan is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanState {
    /// No scan ever (`none requested`).
    None,
    /// A scrub runs.
    Scrubbing,
    /// A scrub is paused.
    Paused,
    /// The last scrub finished.
    Finished,
    /// The last scrub was cancelled.
    Canceled,
    /// A resilver runs (a scrub cannot start).
    Resilvering,
}

/// A pool's scan status.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanStatus {
    /// Where the scan is.
    pub state: ScanState,
    /// Bytes to examine.
    pub total_bytes: u64,
    /// Bytes examined (metadata scanned).
    pub examined_bytes: u64,
    /// Bytes issued (read and verified).
    pub issued_bytes: u64,
    /// Bytes repaired.
    pub repaired_bytes: u64,
    /// Percent done as `zpool` prints it (issued / (total − skipped)).
    pub percent_done: f64,
    /// Errors of a finished scrub.
    pub errors: u64,
    /// Leaf vdev paths or names (`/dev/sdb1`, `sdb`).
    pub leaves: Vec<String>,
}

/// A `zfs_nicenum` number (`1.50G`, `512B`, `0B`, `12.3M`, or plain
/// digits) in bytes; K, M, G… are powers of 1024 (zutil_nicenum.c).
pub fn parse_nice_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_suffix('B').unwrap_or(s);
    let (num, mult) = match s.chars().last()? {
        c @ ('K' | 'M' | 'G' | 'T' | 'P' | 'E') => {
            let i = "KMGTPE".find(c)? as u32 + 1;
            (&s[..s.len() - 1], 1024f64.powi(i as i32))
        }
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult).round() as u64)
}

impl ScanStatus {
    /// Parse the text of `zpool status [-P] [-p] POOL`.
    pub fn parse_text(text: &str) -> std::result::Result<ScanStatus, String> {
        let lines: Vec<&str> = text.lines().collect();
        let scan_at = lines
            .iter()
            .position(|l| l.trim_start().starts_with("scan:"))
            .ok_or("no `scan:` line")?;
        let head = lines[scan_at].trim_start()["scan:".len()..].trim();
        let mut st = ScanStatus {
            state: ScanState::None,
            total_bytes: 0,
            examined_bytes: 0,
            issued_bytes: 0,
            repaired_bytes: 0,
            percent_done: 0.0,
            errors: 0,
            leaves: leaves_of_text(&lines),
        };
        let bytes = |w: &str, line: &str| {
            parse_nice_bytes(w).ok_or_else(|| format!("`{w}` is not a size in `{}`", line.trim()))
        };
        if head.starts_with("none requested") {
            return Ok(st);
        }
        if let Some(rest) = head
            .strip_prefix("scrub repaired ")
            .or_else(|| head.strip_prefix("thorough scrub repaired "))
        {
            // scrub repaired %s in %s with %llu errors on %s
            st.state = ScanState::Finished;
            let w = rest.split_whitespace().next().unwrap_or("");
            st.repaired_bytes = bytes(w, head)?;
            let errs = rest
                .split(" with ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .ok_or_else(|| format!("no error count in `{head}`"))?;
            st.errors = errs
                .parse()
                .map_err(|_| format!("`{errs}` is not an error count in `{head}`"))?;
            st.percent_done = 100.0;
            return Ok(st);
        }
        if head.contains("canceled on") {
            st.state = ScanState::Canceled;
            return Ok(st);
        }
        st.state = if head.starts_with("resilver") {
            ScanState::Resilvering
        } else if head.contains("scrub paused since") {
            ScanState::Paused
        } else if head.contains("scrub in progress since") {
            ScanState::Scrubbing
        } else if head.starts_with("resilvered") {
            ScanState::Finished
        } else {
            return Err(format!("unknown scan state `{head}`"));
        };
        // the detail lines follow, tab-indented
        for l in lines[scan_at + 1..].iter().take(4) {
            let t = l.trim();
            if t.contains(" scanned") && t.contains(" issued") {
                // 2.2+: `X / Y scanned[ at R/s], Z / W issued[ at R/s]`
                // older: `X scanned[ at R/s], Z issued[ at R/s], T total`
                let parts: Vec<&str> = t.split(", ").collect();
                for p in parts {
                    let w: Vec<&str> = p.split_whitespace().collect();
                    if w.len() >= 4 && w[1] == "/" && w[3] == "scanned" {
                        st.examined_bytes = bytes(w[0], t)?;
                        st.total_bytes = bytes(w[2], t)?;
                    } else if w.len() >= 4 && w[1] == "/" && w[3] == "issued" {
                        st.issued_bytes = bytes(w[0], t)?;
                    } else if w.len() >= 2 && w[1] == "scanned" {
                        st.examined_bytes = bytes(w[0], t)?;
                    } else if w.len() >= 2 && w[1] == "issued" {
                        st.issued_bytes = bytes(w[0], t)?;
                    } else if w.len() >= 2 && w[1] == "total" {
                        st.total_bytes = bytes(w[0], t)?;
                    }
                }
            } else if t.contains("% done") {
                // `R repaired, P% done[, …]`
                let w: Vec<&str> = t.split_whitespace().collect();
                if w.len() >= 2 && w[1].starts_with("repaired") {
                    st.repaired_bytes = bytes(w[0], t)?;
                }
                let pct = t
                    .split("% done")
                    .next()
                    .and_then(|a| a.rsplit([' ', ',']).next())
                    .ok_or_else(|| format!("no percentage in `{t}`"))?;
                st.percent_done = pct
                    .parse()
                    .map_err(|_| format!("`{pct}` is not a percentage in `{t}`"))?;
            }
        }
        Ok(st)
    }

    /// Parse `zpool status -j -p POOL` (OpenZFS ≥ 2.3) for `pool`.
    pub fn parse_json(text: &str, pool: &str) -> std::result::Result<ScanStatus, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let p = v
            .get("pools")
            .and_then(|p| p.get(pool))
            .ok_or_else(|| format!("no pool `{pool}` under `pools`"))?;
        let mut leaves = Vec::new();
        for key in ["vdevs", "logs", "l2cache", "spares", "special", "dedup"] {
            if let Some(t) = p.get(key) {
                leaves_of_json(t, &mut leaves);
            }
        }
        let mut st = ScanStatus {
            state: ScanState::None,
            total_bytes: 0,
            examined_bytes: 0,
            issued_bytes: 0,
            repaired_bytes: 0,
            percent_done: 0.0,
            errors: 0,
            leaves,
        };
        let Some(s) = p.get("scan_stats") else {
            return Ok(st);
        };
        // strings with -p (decimal), numbers with --json-int
        let num = |k: &str| -> std::result::Result<u64, String> {
            match s.get(k) {
                None => Ok(0),
                Some(serde_json::Value::Number(n)) => {
                    n.as_u64().ok_or_else(|| format!("scan_stats.{k}: `{n}`"))
                }
                Some(serde_json::Value::String(t)) => t
                    .parse()
                    .map_err(|_| format!("scan_stats.{k}: `{t}` is not a number (run with -p)")),
                Some(o) => Err(format!("scan_stats.{k}: `{o}`")),
            }
        };
        let word = |k: &str| s.get(k).and_then(|x| x.as_str()).unwrap_or("");
        let (func, state) = (word("function"), word("state"));
        st.total_bytes = num("to_examine")?;
        st.examined_bytes = num("examined")?;
        st.issued_bytes = num("issued")?;
        st.repaired_bytes = num("processed")?;
        st.errors = num("errors")?;
        let skipped = num("skipped")?;
        let denom = st.total_bytes.saturating_sub(skipped);
        st.percent_done = if denom > 0 {
            100.0 * st.issued_bytes as f64 / denom as f64
        } else {
            0.0
        };
        st.state = match (func, state) {
            ("NONE", _) | (_, "NONE") => ScanState::None,
            ("RESILVER", "SCANNING") => ScanState::Resilvering,
            ("SCRUB", "SCANNING") if num("scrub_pause")? != 0 => ScanState::Paused,
            ("SCRUB", "SCANNING") => ScanState::Scrubbing,
            (_, "FINISHED") => ScanState::Finished,
            (_, "CANCELED") => ScanState::Canceled,
            _ => return Err(format!("unknown scan `{func}` `{state}`")),
        };
        Ok(st)
    }
}

/// Leaf vdevs of the `config:` section: lines below `NAME STATE …` whose
/// next line is not indented deeper (a disk, a partition or a file).
fn leaves_of_text(lines: &[&str]) -> Vec<String> {
    let Some(c) = lines.iter().position(|l| l.trim() == "config:") else {
        return Vec::new();
    };
    let rows: Vec<(usize, &str)> = lines[c + 1..]
        .iter()
        .skip_while(|l| !l.trim_start().starts_with("NAME"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let body = l.trim_start_matches('\t');
            (body.len() - body.trim_start().len(), body.trim())
        })
        .collect();
    let mut out = Vec::new();
    for (i, (indent, row)) in rows.iter().enumerate() {
        let deeper_next = rows.get(i + 1).is_some_and(|(n, _)| n > indent);
        let mut words = row.split_whitespace();
        let name = words.next().unwrap_or("");
        // section headers (logs, cache, spares) have no state column
        if *indent == 0 || deeper_next || words.next().is_none() {
            continue;
        }
        out.push(name.to_string());
    }
    out
}

fn leaves_of_json(tree: &serde_json::Value, out: &mut Vec<String>) {
    let Some(map) = tree.as_object() else { return };
    for v in map.values() {
        match v.get("vdevs") {
            Some(children) if children.as_object().is_some_and(|m| !m.is_empty()) => {
                leaves_of_json(children, out)
            }
            _ => {
                if let Some(p) = v.get("path").and_then(|p| p.as_str()) {
                    out.push(p.to_string());
                } else if let Some(n) = v.get("name").and_then(|n| n.as_str()) {
                    if v.get("vdev_type").and_then(|t| t.as_str()) != Some("root") {
                        out.push(n.to_string());
                    }
                }
            }
        }
    }
}

/// The kernel name of the disk holding leaf vdev `leaf` (`/dev/sdb1` →
/// `sdb`; `/dev/disk/by-id/…` followed; `sdb` as is).
fn disk_of_leaf(ctl: &dyn Control, leaf: &str) -> Option<String> {
    let path = if leaf.starts_with('/') {
        leaf.to_string()
    } else {
        format!("/dev/{leaf}")
    };
    let p = ctl.resolve(Path::new(&path));
    let name = std::fs::canonicalize(&p)
        .ok()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .or_else(|| {
            Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })?;
    let class = ctl.resolve(Path::new(&format!("/sys/class/block/{name}")));
    if !class.exists() {
        // a file vdev: the disk under it, if the control is the real system
        return crate::monitor::resolve_device(&p)
            .ok()
            .flatten()
            .map(|d| d.disk);
    }
    if class.join("partition").exists() {
        return std::fs::canonicalize(&class).ok().and_then(|c| {
            c.parent()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        });
    }
    Some(name)
}

/// A pool's scrub, run slice by slice.
pub struct Zfs {
    label: String,
    pool: String,
    zpool: String,
    ctl: Arc<dyn Control>,
    json: bool,
    devices: Vec<String>,
    gate: Arc<Gate>,
    slice_ns: Option<u64>,
    rate_bytes_per_s: f64,
    running: bool,
    status: ScanStatus,
    start_issued: u64,
    windows: Windows,
    max_bytes: Option<u64>,
    requests: u64,
    active_ns: u64,
    t0_ns: u64,
}

impl std::fmt::Debug for Zfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zfs")
            .field("label", &self.label)
            .field("status", &self.status)
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl Zfs {
    /// Open `zfs:POOL`. Option `zpool=PATH` names the `zpool` program.
    pub fn open(t: &NativeTarget, cfg: &NativeConfig, ctl: Arc<dyn Control>) -> Result<Zfs> {
        cfg.check_options("zfs", &["zpool"])?;
        let label = t.to_string();
        let pool = t.arg.clone();
        let ok = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
        if pool.is_empty()
            || !pool.chars().all(ok)
            || !pool.starts_with(|c: char| c.is_ascii_alphabetic())
        {
            return Err(Error::invalid(
                "target",
                format!("{label}: `{pool}` is not a pool name (letters, digits, _ - . :)"),
            ));
        }
        if cfg.max_rate_bytes_per_s.is_some() {
            return Err(Error::Unsupported(format!(
                "{label}: --max-rate: ZFS has no per-scrub rate limit that fallow could set (zfs_scrub_delay is gone since OpenZFS 0.8); use a policy or --window"
            )));
        }
        let zpool = cfg
            .options
            .get("zpool")
            .cloned()
            .unwrap_or_else(|| "zpool".into());
        let mut z = Zfs {
            label,
            pool,
            zpool,
            ctl,
            json: false,
            devices: Vec::new(),
            gate: Gate::new(&[])?,
            slice_ns: cfg.slice_ns,
            rate_bytes_per_s: INITIAL_RATE,
            running: false,
            status: ScanStatus {
                state: ScanState::None,
                total_bytes: 0,
                examined_bytes: 0,
                issued_bytes: 0,
                repaired_bytes: 0,
                percent_done: 0.0,
                errors: 0,
                leaves: vec![],
            },
            start_issued: 0,
            windows: cfg.windows.clone(),
            max_bytes: cfg.max_bytes,
            requests: 0,
            active_ns: 0,
            t0_ns: monotonic_ns(),
        };
        // -j where this zpool has it (OpenZFS ≥ 2.3): exact numbers
        let j = z.zpool(&["status", "-j", "-p", "-P", &z.pool.clone()]);
        z.json = matches!(&j, Ok(o) if o.success() && ScanStatus::parse_json(&o.stdout, &z.pool).is_ok());
        z.status = z.poll()?;
        match (z.status.state, cfg.resume) {
            (ScanState::Resilvering, _) => {
                return Err(Error::Unsupported(format!(
                    "{}: a resilver is running; a scrub can start once it has finished",
                    z.label
                )))
            }
            (ScanState::Scrubbing, _) => {
                return Err(Error::Unsupported(format!(
                    "{}: a scrub is already running outside fallow: pause it (`{} scrub -p {}`) and fallow continues it in idle time",
                    z.label, z.zpool, z.pool
                )))
            }
            (ScanState::Paused, Resume::No) => {
                return Err(Error::CheckpointMismatch {
                    path: format!("zpool {}", z.pool).into(),
                    message: format!(
                        "a paused scrub of {} is at {:.2} %: --resume continues it, --restart starts over",
                        z.pool, z.status.percent_done
                    ),
                })
            }
            (ScanState::Paused, Resume::Restart) => {
                z.zpool_ok(&["scrub", "-s", &z.pool.clone()])?;
                z.status = z.poll()?;
            }
            _ => {}
        }
        z.devices = {
            let mut d: Vec<String> = z
                .status
                .leaves
                .iter()
                .filter_map(|l| disk_of_leaf(z.ctl.as_ref(), l))
                .collect();
            d.sort();
            d.dedup();
            d
        };
        let sources = z
            .devices
            .iter()
            .map(|d| {
                StatSource::file(
                    z.ctl
                        .resolve(Path::new(&format!("/sys/class/block/{d}/stat"))),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        z.gate = Gate::new(&sources)?;
        z.start_issued = match z.status.state {
            ScanState::Paused => z.status.issued_bytes,
            _ => 0,
        };
        Ok(z)
    }

    fn zpool(&self, args: &[&str]) -> Result<super::Output> {
        self.ctl.run(&self.zpool, args, TOOL_TIMEOUT_NS)
    }

    fn zpool_ok(&self, args: &[&str]) -> Result<super::Output> {
        let o = self.zpool(args)?;
        if !o.success() {
            return Err(Error::Unsupported(format!(
                "{}: `{} {}` failed: {}",
                self.label,
                self.zpool,
                args.join(" "),
                o.message()
            )));
        }
        Ok(o)
    }

    /// The scan status now.
    fn poll(&self) -> Result<ScanStatus> {
        let pool = self.pool.clone();
        let (o, parsed) = if self.json {
            let o = self.zpool_ok(&["status", "-j", "-p", "-P", &pool])?;
            let p = ScanStatus::parse_json(&o.stdout, &pool);
            (o, p)
        } else {
            let o = self.zpool_ok(&["status", "-p", "-P", &pool])?;
            let p = ScanStatus::parse_text(&o.stdout);
            (o, p)
        };
        let _ = o;
        parsed.map_err(|m| Error::Parse {
            path: format!("{} status {pool}", self.zpool).into(),
            message: m,
        })
    }

    /// `new`, with what a finished scrub's text no longer says (its
    /// total) kept from before: all of it was issued.
    fn merge(&self, mut new: ScanStatus) -> ScanStatus {
        if new.state == ScanState::Finished && new.total_bytes == 0 {
            new.total_bytes = self.status.total_bytes;
            new.examined_bytes = self.status.total_bytes;
            new.issued_bytes = self.status.total_bytes;
        }
        new
    }

    fn slice_ns(&self, size_bytes: u64) -> u64 {
        match self.slice_ns {
            Some(ns) => ns,
            None => ((size_bytes as f64 / self.rate_bytes_per_s * 1e9) as u64)
                .clamp(SLICE_MIN_NS, SLICE_MAX_NS),
        }
    }

    fn run_bytes(&self) -> u64 {
        self.status.issued_bytes.saturating_sub(self.start_issued)
    }
}

impl BgExecutor for Zfs {
    fn ready_in_ns(&mut self, _size_bytes: u64, _now_ns: u64) -> Result<u64> {
        Ok(u64::from(self.windows.wait_now_s()) * 1_000_000_000)
    }

    fn run_one(&mut self, size_bytes: u64) -> Result<Step> {
        if self.status.state == ScanState::Finished && self.requests > 0
            || self.max_bytes.is_some_and(|m| self.run_bytes() >= m)
        {
            return Ok(Step::Finished);
        }
        let t0 = monotonic_ns();
        if !self.running {
            self.gate.open();
            // starts a scrub, or resumes a paused one
            if let Err(e) = self.zpool_ok(&["scrub", &self.pool.clone()]) {
                self.gate.close();
                return Err(e);
            }
            self.running = true;
        }
        let before = self.status.issued_bytes;
        std::thread::sleep(Duration::from_nanos(self.slice_ns(size_bytes)));
        self.status = self.merge(self.poll()?);
        let took = monotonic_ns() - t0;
        self.active_ns += took;
        self.requests += 1;
        let moved = self.status.issued_bytes.saturating_sub(before);
        if moved > 0 {
            let r = moved as f64 / (took as f64 / 1e9);
            self.rate_bytes_per_s += 0.3 * (r - self.rate_bytes_per_s);
        }
        if matches!(self.status.state, ScanState::Finished | ScanState::Canceled) {
            self.running = false;
            self.gate.close();
            if self.status.state == ScanState::Canceled {
                return Err(Error::Unsupported(format!(
                    "{}: the scrub was cancelled outside fallow",
                    self.label
                )));
            }
            return Ok(Step::Finished);
        }
        Ok(if self.max_bytes.is_some_and(|m| self.run_bytes() >= m) {
            Step::Finished
        } else {
            Step::More
        })
    }

    fn pause(&mut self) -> Result<()> {
        if !self.running {
            return Ok(());
        }
        let r = self.zpool_ok(&["scrub", "-p", &self.pool.clone()]);
        self.running = false;
        self.gate.close();
        if let Err(e) = r {
            // it may have finished since the last look: then nothing to pause
            self.status = self.merge(self.poll()?);
            if self.status.state == ScanState::Scrubbing {
                return Err(e);
            }
        }
        Ok(())
    }
}

impl NativeExecutor for Zfs {
    fn devices(&self) -> Vec<String> {
        self.devices.clone()
    }

    fn gate(&self) -> Arc<Gate> {
        self.gate.clone()
    }

    /// If fallow dies: a scrub in progress (fallow's slice) is paused,
    /// never left running; a paused, cancelled or finished one is left as
    /// it is (never resumed: a user's pause or cancel stands, and `zpool
    /// scrub` on a finished pool would start a new scrub). The action says
    /// what it did on its standard output, which the guardian logs; `zpool
    /// status` then shows `scrub paused since …` and `zpool history` the
    /// `zpool scrub -p`.
    fn release_actions(&self) -> Vec<ReleaseAction> {
        let script = r#"s=$("$1" status "$2") || exit 1
case "$s" in
*"scrub in progress since"*)
    "$1" scrub -p "$2" || exit 1
    echo "fallow is gone: paused the scrub of $2 it was running ('$1 status $2': scrub paused since ...); fallow scrub zfs:$2 --resume, or $1 scrub $2, continues it" ;;
*"scrub paused since"*)
    echo "fallow is gone: the scrub of $2 stays paused, as it was; fallow scrub zfs:$2 --resume, or $1 scrub $2, continues it" ;;
esac
exit 0"#;
        vec![ReleaseAction::Exec {
            argv: vec![
                "sh".into(),
                "-c".into(),
                script.into(),
                "fallow-zfs-release".into(),
                self.zpool.clone(),
                self.pool.clone(),
            ],
            ok_codes: vec![],
        }]
    }

    fn report(&mut self) -> Result<NativeReport> {
        let s = &self.status;
        let mut native = BTreeMap::new();
        native.insert("examined_bytes".to_string(), s.examined_bytes);
        native.insert("issued_bytes".to_string(), s.issued_bytes);
        native.insert("repaired_bytes".to_string(), s.repaired_bytes);
        native.insert("errors".to_string(), s.errors);
        Ok(NativeReport {
            target: self.label.clone(),
            kind: "zfs".into(),
            tool: format!(
                "{} ({})",
                self.zpool,
                if self.json {
                    "status -j"
                } else {
                    "status text"
                }
            ),
            target_bytes: Some(s.total_bytes),
            scrubbed_bytes: s.issued_bytes,
            position_bytes: s.examined_bytes,
            run_bytes: self.run_bytes(),
            run_requests: self.requests,
            run_active_s: self.active_ns as f64 / 1e9,
            run_elapsed_s: (monotonic_ns() - self.t0_ns) as f64 / 1e9,
            complete: s.state == ScanState::Finished,
            // ZFS reports bytes repaired (in `native`), not a count of
            // corrected errors; `with N errors` is what it could not repair
            errors_corrected: None,
            errors_uncorrectable: (s.state == ScanState::Finished).then_some(s.errors),
            native,
            rate_limit: None,
            checkpoint: Some(format!("kept by ZFS in pool {}", self.pool)),
        })
    }

    fn finish(&mut self) -> Result<()> {
        // a clean stop leaves it paused, its position in the pool
        self.pause()?;
        if !matches!(self.status.state, ScanState::Finished) {
            self.status = self.merge(self.poll()?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
