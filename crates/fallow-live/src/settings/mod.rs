//! The settings of the live commands, one type for all: `fallow scrub`
//! (a block target or a native one) and `fallow run`. A front end puts the
//! flags it parsed into [`Flags`]; [`Settings::resolve`] resolves each
//! setting by the one precedence ([`Layers::resolve`]: flags, then the
//! environment, then the TOML config's command table, then `[live]`, then
//! the default; a tune result is the policy's value of the layer naming
//! it) and checks every value, naming the flag, or the file, table and
//! key, it came from. Each origin is kept in [`Settings::provenance`],
//! the one record of where the settings came from.
//!
//! - [`config`]: reading the config file and the tune result.

pub mod config;

use config::setting;
pub use config::{
    choose_policy, read_config, read_tuned, relative_to, Config, MetricsAddr, PolicyChoice,
    PolicyGiven, Provenance, TunedChoice,
};

use crate::budget::LiveBudget;
use crate::error::{Error, Result};
use crate::run_kinds::{FreezerKind, SLICE_RANGE_NS};
use crate::scrub_order::Order;
use crate::scrub_pace as pace;
use crate::scrub_verify::VerifyMode;
use fallow_core::settings::{ConfigFile, Layers, Origin, Resolved, SHARED};
use fallow_core::sim::BgService;
use serde::Deserialize;
use std::path::PathBuf;

/// The live command the settings are for; each reads its own config table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `fallow scrub` (`[scrub]`).
    Scrub,
    /// `fallow run` (`[run]`).
    Run,
}

impl Command {
    /// Its config table.
    pub fn table(self) -> &'static str {
        match self {
            Command::Scrub => "scrub",
            Command::Run => "run",
        }
    }

    /// The policy when none is given: for a scrub, wait a little after the
    /// last FG request before reading (Practical Scrubbing §V-B2's
    /// Waiting, their best simple policy); for a command, fixed-wait's own
    /// default.
    pub fn default_policy(self) -> &'static str {
        match self {
            Command::Scrub => "fixed-wait:t=100ms",
            Command::Run => "fixed-wait",
        }
    }
}

/// Regions of a staggered order when `--order staggered` comes without
/// `--regions` (Practical Scrubbing §IV-A: as fast as sequential from 128 on).
pub const DEFAULT_REGIONS: u64 = 128;
/// Extra attempts of a failing request and sector when none is given.
pub const DEFAULT_RETRIES: u32 = 3;
/// `fallow run`'s slice when none is given: an FG arrival waits at most this long.
pub const DEFAULT_SLICE_NS: u64 = 20_000_000;
/// The monitors' sampling interval when none is given (the design point).
pub const DEFAULT_INTERVAL_NS: u64 = 1_000_000;

/// `--order` (and `[scrub] order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderChoice {
    /// Segment after segment.
    Sequential,
    /// Segment i of every region before segment i + 1 (Practical Scrubbing §IV-A).
    Staggered,
}

/// A request size: a byte count with a unit, at least 1 byte.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    match fallow_core::units::parse_bytes(s) {
        Ok(0) => Err("must be at least 1 byte".into()),
        Ok(b) => Ok(b),
        Err(e) => Err(e.to_string()),
    }
}

/// Which front end gave the flags: how a message names an option.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Front {
    /// The command line: `--budget`.
    #[default]
    Cli,
    /// Python's keyword arguments: `budget=`.
    Python,
}

impl Front {
    /// How this front end spells the option the CLI calls `--name`.
    pub fn option(self, name: &str) -> String {
        match self {
            Front::Cli => format!("--{name}"),
            Front::Python => format!("{}=", name.replace('-', "_")),
        }
    }
}

/// The flags of a live command as given (`None`, empty or false: not
/// given). Durations and sizes are already parsed (the front end names
/// the flag if they do not parse); the rest is checked here.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// The front end that gave them (how messages name them).
    pub front: Front,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--policy`.
    pub policy: Option<String>,
    /// `--tuned`.
    pub tuned: Option<PathBuf>,
    /// `--budget` (`5%`, `1ms`).
    pub budget: Option<String>,
    /// `--interval`, ns.
    pub interval_ns: Option<u64>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--metrics`.
    pub metrics: Option<String>,
    /// scrub `--monitor`.
    pub monitor: Option<String>,
    /// scrub `--size`.
    pub size: Option<u64>,
    /// scrub `--order`.
    pub order: Option<OrderChoice>,
    /// scrub `--regions`.
    pub regions: Option<u64>,
    /// scrub `--max-rate`.
    pub max_rate: Option<String>,
    /// scrub `--window`s.
    pub windows: Vec<String>,
    /// scrub `--max-bytes`.
    pub max_bytes: Option<u64>,
    /// scrub `--checkpoint`.
    pub checkpoint: Option<PathBuf>,
    /// scrub `--checkpoint-interval`, ns.
    pub checkpoint_interval_ns: Option<u64>,
    /// scrub `--log`.
    pub log: Option<PathBuf>,
    /// scrub `--retries`.
    pub retries: Option<u32>,
    /// scrub `--verify-cmd`.
    pub verify: Option<VerifyMode>,
    /// scrub `--buffered`.
    pub buffered: bool,
    /// run `--device`.
    pub device: Option<String>,
    /// run `--net`.
    pub net: Option<String>,
    /// run `--netns`.
    pub netns: Option<String>,
    /// run `--freezer`.
    pub freezer: Option<String>,
    /// run `--slice`, ns.
    pub slice_ns: Option<u64>,
    /// run `--report`.
    pub report: Option<PathBuf>,
}

/// The disk `fallow run` watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disk {
    /// As `--device` takes it (the device, node, file or stat file);
    /// where it was given is the provenance's `device`.
    Named(String),
    /// The current directory's disk (the default without a network).
    CurrentDir,
    /// None: only the network is watched.
    Unwatched,
}

/// The settings of a live command after flags, config, tune result and
/// defaults. One type for every live command: the keys a command does not
/// take keep their defaults.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The command they are for.
    pub command: Command,
    /// The policy spec.
    pub policy: String,
    /// Where each setting came from, by its config key (`policy`,
    /// `budget`, `size`): the one record of it.
    pub provenance: Provenance,
    /// The tune result named, if any.
    pub tuned_path: Option<PathBuf>,
    /// Its request size.
    pub tuned_size: Option<u64>,
    /// Its BG service model.
    pub bg_service: Option<BgService>,
    /// The FG budget held live, if any ([`crate::budget`]).
    pub budget: Option<LiveBudget>,
    /// Monitor sampling interval, ns.
    pub interval_ns: u64,
    /// Seed of the policy's random stream.
    pub seed: u64,
    /// Where to serve metrics (`HOST:PORT`).
    pub metrics_addr: Option<String>,
    /// scrub: `auto`, `none`, a device or a stat file.
    pub monitor: String,
    /// scrub: request size, if given.
    pub size: Option<u64>,
    /// scrub: visiting order, if given.
    pub order: Option<Order>,
    /// scrub: rate ceiling, bytes/s.
    pub max_rate: Option<f64>,
    /// scrub: daily windows.
    pub windows: pace::Windows,
    /// scrub: stop the run after this many bytes.
    pub max_bytes: Option<u64>,
    /// scrub: the checkpoint, if given.
    pub checkpoint: Option<PathBuf>,
    /// scrub: least time between checkpoint writes, ns.
    pub checkpoint_interval_ns: u64,
    /// scrub: per-request log.
    pub log: Option<PathBuf>,
    /// scrub: extra attempts.
    pub retries: u32,
    /// scrub: SCSI VERIFY or reads.
    pub verify: VerifyMode,
    /// scrub: through the page cache.
    pub buffered: bool,
    /// run: the disk to watch.
    pub disk: Disk,
    /// run: the interface to watch.
    pub net: Option<String>,
    /// run: the command's network namespace.
    pub netns: Option<String>,
    /// run: how to pause the command.
    pub freezer: Option<FreezerKind>,
    /// run: the slice, ns.
    pub slice_ns: u64,
    /// run: the JSON report.
    pub report: Option<PathBuf>,
}

/// `[scrub]`: settings of `fallow scrub` (the `[live]` keys may be
/// repeated here to differ for scrubbing).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrubSection {
    policy: Option<String>,
    tuned: Option<PathBuf>,
    budget: Option<String>,
    monitor: Option<String>,
    interval: Option<String>,
    seed: Option<u64>,
    size: Option<String>,
    /// Visiting order.
    pub order: Option<OrderChoice>,
    regions: Option<u64>,
    max_rate: Option<String>,
    windows: Option<Vec<String>>,
    max_bytes: Option<String>,
    /// The checkpoint (relative to the file).
    pub checkpoint: Option<PathBuf>,
    checkpoint_interval: Option<String>,
    log: Option<PathBuf>,
    retries: Option<u32>,
    verify_cmd: Option<VerifyMode>,
    buffered: Option<bool>,
}

/// `[run]`: settings of `fallow run` (the `[live]` keys policy, tuned,
/// interval and seed may be repeated here to differ for it). The command
/// itself is not here: it stays on the command line after `--`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    policy: Option<String>,
    tuned: Option<PathBuf>,
    budget: Option<String>,
    interval: Option<String>,
    seed: Option<u64>,
    device: Option<String>,
    net: Option<String>,
    netns: Option<String>,
    freezer: Option<String>,
    slice: Option<String>,
    report: Option<PathBuf>,
}

/// Read a config for `fallow scrub`: `[live]`, `[metrics]` and `[scrub]`
/// strictly, paths relative to the file.
pub fn read_scrub_config(path: &std::path::Path) -> Result<Config<ScrubSection>> {
    let mut cfg: Config<ScrubSection> = read_config(path, "scrub")?;
    let sc = &mut cfg.own;
    sc.tuned = sc.tuned.take().map(|p| relative_to(path, p));
    sc.checkpoint = sc.checkpoint.take().map(|p| relative_to(path, p));
    sc.log = sc.log.take().map(|p| relative_to(path, p));
    Ok(cfg)
}

/// Read a config for `fallow run`: `[live]`, `[metrics]` and `[run]`
/// strictly, paths relative to the file.
pub fn read_run_config(path: &std::path::Path) -> Result<Config<RunSection>> {
    let mut cfg: Config<RunSection> = read_config(path, "run")?;
    let own = &mut cfg.own;
    own.tuned = own.tuned.take().map(|p| relative_to(path, p));
    own.report = own.report.take().map(|p| relative_to(path, p));
    Ok(cfg)
}

/// The environment variable that gives the budget when `--budget` does not.
pub const BUDGET_ENV: &str = "FALLOW_BUDGET";

/// The budget's layers: `--budget`, else [`BUDGET_ENV`], else the
/// command's table's `budget`, else `[live]`'s.
fn budget_layers<'f>(
    a: &Flags,
    file: Option<&'f ConfigFile>,
    own: Option<&str>,
    live: Option<&str>,
) -> Layers<'f, String> {
    let env = std::env::var(BUDGET_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    Layers::of(file)
        .flag(&a.front.option("budget"), a.budget.clone())
        .env(BUDGET_ENV, env)
        .own("budget", own.map(str::to_string))
        .shared("budget", live.map(str::to_string))
}

/// The budget of `given`, refused beside a tune result (it would fix the
/// setting the budget refits). The default policy becomes `fixed-wait`
/// with its wait left to the tuner.
fn apply_budget(s: &mut Settings, given: Layers<'_, String>) -> Result<()> {
    let Some(text) = s.provenance.take("budget", given.resolve()) else {
        return Ok(());
    };
    let from = s.provenance.origin("budget").to_string();
    let budget: fallow_core::tune::Budget = text
        .parse()
        .map_err(|e: fallow_core::Error| Error::Setting(format!("{from}: {e}")))?;
    if let Some(t) = &s.tuned_path {
        return Err(Error::Setting(format!(
            "{} and the tune result {} together: a tune result fixes the setting offline, a budget refits it live; give one of them",
            // `--budget 5%`, `FALLOW_BUDGET 5%`, Python's `budget="5%"`
            if from.ends_with('=') {
                format!("{from}\"{budget}\"")
            } else {
                format!("{from} {budget}")
            },
            t.display()
        )));
    }
    if s.provenance.origin("policy") == &Origin::Default {
        s.policy = "fixed-wait".into();
    }
    s.budget = Some(LiveBudget::new(budget));
    Ok(())
}

/// The monitor's interval (ns) and the seed, which every command's table
/// may repeat from `[live]` (`own`: the command's table's `interval` and
/// `seed`), their origins kept in `p`.
fn interval_and_seed(
    p: &mut Provenance,
    file: Option<&ConfigFile>,
    a: &Flags,
    (own_interval, own_seed): (Option<&str>, Option<u64>),
    live: &config::LiveSection,
) -> Result<(u64, u64)> {
    let dur = |s: &str| fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string());
    let interval = Layers::of(file)
        .flag("--interval", a.interval_ns)
        .own_parsed("interval", own_interval, dur)
        .and_then(|l| l.shared_parsed("interval", live.interval.as_deref(), dur))
        .map_err(setting)?;
    let seed = Layers::of(file)
        .flag("--seed", a.seed)
        .own("seed", own_seed)
        .shared("seed", live.seed);
    Ok((
        p.take_or("interval", interval.or(DEFAULT_INTERVAL_NS)),
        p.take_or("seed", seed.or(fallow_core::sim::DEFAULT_SEED)),
    ))
}

/// The policy's layers and the tune result's, from the flags, the
/// command's table and `[live]` (each a `policy` and a `tuned`): at each
/// layer a `policy` beats a tune result, and each layer beats the layers
/// below ([`choose_policy`]).
fn policy_layers<'f>(
    file: Option<&'f ConfigFile>,
    a: &Flags,
    own: (Option<&String>, Option<&PathBuf>),
    shared: (Option<&String>, Option<&PathBuf>),
) -> (Layers<'f, PolicyGiven>, Layers<'f, PathBuf>) {
    let tuned = Layers::of(file)
        .flag(&a.front.option("tuned"), a.tuned.clone())
        .own("tuned", own.1.cloned())
        .shared("tuned", shared.1.cloned());
    let (flag, flag_value) = PolicyGiven::of((a.policy.as_ref(), a.tuned.as_ref()));
    let (own, own_value) = PolicyGiven::of(own);
    let (shared, shared_value) = PolicyGiven::of(shared);
    let policy = Layers::of(file)
        .flag(&a.front.option(flag), flag_value)
        .own(own, own_value)
        .shared(shared, shared_value);
    (policy, tuned)
}

impl Settings {
    /// Resolve `flags` for `command` (see the module doc).
    pub fn resolve(command: Command, flags: &Flags) -> Result<Settings> {
        match command {
            Command::Scrub => Self::scrub(flags),
            Command::Run => Self::run(flags),
        }
    }

    /// `--policy`, `config`, `tune result` or `default`: where the policy
    /// came from, in the JSON's `policy_from` word.
    pub fn policy_from(&self) -> &'static str {
        let p = self.provenance.origin("policy");
        match p {
            Origin::Default => "default",
            // the layer that gave the policy gave it as its tune result
            _ if p == self.provenance.origin("tuned") => "tune result",
            Origin::File { .. } => "config",
            Origin::Flag(_) | Origin::Env(_) => "--policy",
        }
    }

    /// Where a policy no flag gave was written, for its errors:
    /// `FILE: [run] policy`, or `TUNED: best.spec`.
    pub fn policy_source(&self) -> Option<String> {
        match self.policy_from() {
            "config" => self.provenance.from_file("policy"),
            "tune result" => self
                .tuned_path
                .as_deref()
                .map(|p| format!("{}: best.spec", p.display())),
            _ => None,
        }
    }

    /// Where the budget was given: `--budget`, `FALLOW_BUDGET`, `FILE: [table] budget`.
    pub fn budget_from(&self) -> Option<String> {
        self.provenance.given("budget")
    }

    /// Where to serve metrics, and where that was given (for its errors).
    pub fn metrics(&self) -> Option<MetricsAddr> {
        self.metrics_addr.clone().map(|addr| MetricsAddr {
            addr,
            from: self.provenance.origin("metrics").to_string(),
        })
    }

    /// The defaults of every key not given, and the policy of `policy`
    /// (else the command's default) with the tune result of `tuned`.
    fn base(
        command: Command,
        (policy, tuned): (Layers<'_, PolicyGiven>, Layers<'_, PathBuf>),
    ) -> Result<Settings> {
        let mut provenance = Provenance::default();
        let choice = choose_policy(policy, tuned, command.default_policy(), &mut provenance)?;
        let tuned = choice.tuned.as_ref();
        Ok(Settings {
            command,
            policy: choice.spec.clone(),
            provenance,
            tuned_path: tuned.map(|(p, _)| p.clone()),
            tuned_size: tuned.map(|(_, t)| t.request_size_bytes),
            bg_service: tuned.and_then(|(_, t)| t.bg_service),
            budget: None,
            interval_ns: DEFAULT_INTERVAL_NS,
            seed: fallow_core::sim::DEFAULT_SEED,
            metrics_addr: None,
            monitor: "auto".into(),
            size: None,
            order: None,
            max_rate: None,
            windows: pace::Windows::default(),
            max_bytes: None,
            checkpoint: None,
            checkpoint_interval_ns: 0,
            log: None,
            retries: DEFAULT_RETRIES,
            verify: VerifyMode::Off,
            buffered: false,
            disk: Disk::CurrentDir,
            net: None,
            netns: None,
            freezer: None,
            slice_ns: DEFAULT_SLICE_NS,
            report: None,
        })
    }

    fn scrub(a: &Flags) -> Result<Settings> {
        let cfg = match &a.config {
            Some(p) => read_scrub_config(p)?,
            None => Config::default(),
        };
        let (live, sc) = (&cfg.live, &cfg.own);
        let file = cfg.file.as_ref();
        let dur = |s: &String| fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string());
        let size = |s: &String| parse_size(s);
        let mut s = Settings::base(
            Command::Scrub,
            policy_layers(
                file,
                a,
                (sc.policy.as_ref(), sc.tuned.as_ref()),
                (live.policy.as_ref(), live.tuned.as_ref()),
            ),
        )?;
        let p = &mut s.provenance;
        let given = Layers::of(file)
            .flag("--size", a.size)
            .own_parsed("size", sc.size.as_ref(), size)
            .map_err(setting)?;
        s.size = p.take("size", given.resolve());
        let given = Layers::of(file)
            .flag(&a.front.option("regions"), a.regions)
            .own("regions", sc.regions);
        let regions = p.take("regions", given.resolve());
        let given = Layers::of(file)
            .flag(&a.front.option("order"), a.order)
            .own("order", sc.order);
        s.order = match (p.take("order", given.resolve()), regions) {
            (Some(OrderChoice::Sequential), Some(_)) => {
                let (order, regions) = (p.origin("order"), p.origin("regions"));
                return Err(Error::Setting(match (order, regions) {
                    (_, Origin::File { .. }) => {
                        format!("{regions}: goes with order staggered, not sequential")
                    }
                    (Origin::File { .. }, _) => {
                        format!("{order}: sequential does not go with {regions}")
                    }
                    _ => format!("{regions} goes with {order} staggered, not sequential"),
                }));
            }
            (Some(OrderChoice::Sequential), None) => Some(Order::Sequential),
            (Some(OrderChoice::Staggered), r) | (None, r @ Some(_)) => Some(Order::Staggered {
                regions: r.unwrap_or(DEFAULT_REGIONS),
            }),
            (None, None) => None,
        };
        // a file's value that fails names the file and key; a flag's, the flag
        let given = Layers::of(file)
            .flag("--max-rate", a.max_rate.clone())
            .own("max_rate", sc.max_rate.clone())
            .resolve()
            .map(|r| match pace::parse_rate(&r.value) {
                Ok(rate) => Ok(Resolved {
                    value: rate,
                    origin: r.origin,
                }),
                Err(e) if matches!(r.origin, Origin::File { .. }) => {
                    Err(Error::Setting(format!("{}: {e}", r.origin)))
                }
                Err(e) => Err(Error::Setting(e.to_string())),
            })
            .transpose()?;
        s.max_rate = p.take("max_rate", given);
        let parse_windows = |texts: &[String]| -> std::result::Result<pace::Windows, String> {
            texts
                .iter()
                .map(|w| w.parse::<pace::Window>().map_err(|e| e.to_string()))
                .collect::<std::result::Result<_, _>>()
                .map(pace::Windows)
        };
        let flag = (!a.windows.is_empty()).then(|| a.windows.clone());
        let given = Layers::of(file)
            .flag("--window", flag)
            .own("windows", sc.windows.clone())
            .resolve();
        let texts = p.take("windows", given).unwrap_or_default();
        s.windows = parse_windows(&texts).map_err(|e| match p.from_file("windows") {
            Some(from) => Error::Setting(format!("{from}: {e}")),
            None => Error::Setting(e),
        })?;
        let given = Layers::of(file)
            .flag("--max-bytes", a.max_bytes)
            .own_parsed("max_bytes", sc.max_bytes.as_ref(), size)
            .map_err(setting)?;
        s.max_bytes = p.take("max_bytes", given.resolve());
        let given = Layers::of(file)
            .flag("--checkpoint", a.checkpoint.clone())
            .own("checkpoint", sc.checkpoint.clone());
        s.checkpoint = p.take("checkpoint", given.resolve());
        let given = Layers::of(file)
            .flag("--checkpoint-interval", a.checkpoint_interval_ns)
            .own_parsed("checkpoint_interval", sc.checkpoint_interval.as_ref(), dur)
            .map_err(setting)?;
        s.checkpoint_interval_ns = p.take_or("checkpoint_interval", given.or(0));
        let given = Layers::of(file)
            .flag("--log", a.log.clone())
            .own("log", sc.log.clone());
        s.log = p.take("log", given.resolve());
        let given = Layers::of(file)
            .flag("--retries", a.retries)
            .own("retries", sc.retries);
        s.retries = p.take_or("retries", given.or(DEFAULT_RETRIES));
        let given = Layers::of(file)
            .flag("--verify-cmd", a.verify)
            .own("verify_cmd", sc.verify_cmd);
        s.verify = p.take_or("verify_cmd", given.or(VerifyMode::Off));
        let given = Layers::of(file)
            .flag("--buffered", a.buffered.then_some(true))
            .own("buffered", sc.buffered);
        s.buffered = p.take_or("buffered", given.or(false));
        let given = Layers::of(file)
            .flag("--monitor", a.monitor.clone())
            .own("monitor", sc.monitor.clone())
            .shared("monitor", live.monitor.clone());
        s.monitor = p.take_or("monitor", given.or("auto".into()));
        (s.interval_ns, s.seed) =
            interval_and_seed(p, file, a, (sc.interval.as_deref(), sc.seed), live)?;
        let given = cfg.metrics_layers(a.metrics.clone());
        s.metrics_addr = p.take("metrics", given.resolve());
        let budget = budget_layers(a, file, sc.budget.as_deref(), live.budget.as_deref());
        apply_budget(&mut s, budget)?;
        Ok(s)
    }

    fn run(a: &Flags) -> Result<Settings> {
        let cfg = match &a.config {
            Some(p) => read_run_config(p)?,
            None => Config::default(),
        };
        let (shared, own) = (&cfg.live, &cfg.own);
        let f = cfg.file.as_ref();
        let mut s = Settings::base(
            Command::Run,
            policy_layers(
                f,
                a,
                (own.policy.as_ref(), own.tuned.as_ref()),
                (shared.policy.as_ref(), shared.tuned.as_ref()),
            ),
        )?;
        let p = &mut s.provenance;
        let net = Layers::of(f)
            .flag("--net", a.net.clone())
            .own("net", own.net.clone());
        s.net = p.take("net", net.resolve());
        // [live] monitor is what scrub watches; for run it names the disk,
        // with `auto` run's default and `none` no disk at all
        let disk = Layers::of(f)
            .flag("--device", a.device.clone())
            .own("device", own.device.clone())
            .shared("monitor", shared.monitor.clone())
            .resolve();
        // `none` and `auto` are words of [live] monitor; given as a
        // device (flag or [run] device) they are names
        let monitor_word = |r: &Resolved<String>, word: &str| {
            r.value == word && matches!(&r.origin, Origin::File { table, .. } if table == SHARED)
        };
        s.disk = match disk {
            Some(r) if monitor_word(&r, "none") => Disk::Unwatched,
            Some(r) if !monitor_word(&r, "auto") => Disk::Named(p.take_or("device", r)),
            _ if s.net.is_some() => Disk::Unwatched,
            _ => Disk::CurrentDir,
        };
        if s.disk == Disk::Unwatched && s.net.is_none() {
            return Err(cfg.bad(
                "live",
                "monitor",
                "`none` leaves fallow run nothing to watch: give --device or --net, or [run] device or net",
            ));
        }
        let freezer = Layers::of(f)
            .flag("--freezer", a.freezer.clone())
            .own("freezer", own.freezer.clone())
            .resolve();
        s.freezer = match freezer {
            None => None,
            Some(r) if matches!(r.origin, Origin::Flag(_)) => Some(r.value.parse::<FreezerKind>()?),
            Some(Resolved { value: f, .. }) => Some(
                FreezerKind::ALL
                    .into_iter()
                    .find(|k| k.name() == f.trim())
                    .ok_or_else(|| {
                        cfg.bad(
                            "run",
                            "freezer",
                            format!("`{f}`: use cgroup2, cgroup1 or signal"),
                        )
                    })?,
            ),
        };
        let dur = |s: &str| fallow_core::units::parse_duration_ns(s).map_err(|e| e.to_string());
        let (lo, hi) = SLICE_RANGE_NS;
        let slice = Layers::of(f)
            .flag(&a.front.option("slice"), a.slice_ns)
            .own_parsed("slice", own.slice.as_deref(), dur)
            .map_err(setting)?
            .or(DEFAULT_SLICE_NS)
            .try_map(|ns| match (lo..=hi).contains(&ns) {
                true => Ok(ns),
                false => Err(format!("{ns} ns: use 1 ms to 60 s")),
            })
            .map_err(setting)?;
        s.slice_ns = p.take_or("slice", slice);
        (s.interval_ns, s.seed) =
            interval_and_seed(p, f, a, (own.interval.as_deref(), own.seed), shared)?;
        let netns = Layers::of(f)
            .flag("--netns", a.netns.clone())
            .own("netns", own.netns.clone());
        s.netns = p.take("netns", netns.resolve());
        let report = Layers::of(f)
            .flag("--report", a.report.clone())
            .own("report", own.report.clone());
        s.report = p.take("report", report.resolve());
        s.metrics_addr = p.take("metrics", cfg.metrics_layers(a.metrics.clone()).resolve());
        let budget = budget_layers(a, f, own.budget.as_deref(), shared.budget.as_deref());
        apply_budget(&mut s, budget)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn config_sections_are_strict_and_others_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\npolicy = \"aggressive\"\n[scrub]\nsize = \"4MiB\"\norder = \"staggered\"\nregions = 8\nwindows = [\"01:00-06:00\"]\ncheckpoint = \"ck.json\"\n[run]\nanything = 1\n",
        );
        let cfg = read_scrub_config(&p).unwrap();
        let (live, sc) = (cfg.live, cfg.own);
        assert_eq!(live.policy.as_deref(), Some("aggressive"));
        assert_eq!(sc.size.as_deref(), Some("4MiB"));
        assert_eq!(sc.order, Some(OrderChoice::Staggered));
        assert_eq!(sc.checkpoint, Some(d.path().join("ck.json")));
        let p = write(d.path(), "g.toml", "[scrub]\nsise = \"4MiB\"\n");
        let e = read_scrub_config(&p).unwrap_err().to_string();
        assert!(e.contains("g.toml") && e.contains("sise"), "{e}");
        let p = write(d.path(), "h.toml", "policy = \"x\"\n");
        let e = read_scrub_config(&p).unwrap_err().to_string();
        assert!(e.contains("top-level key `policy`"), "{e}");
        let p = write(d.path(), "i.toml", "[scrub\n");
        assert!(read_scrub_config(&p)
            .unwrap_err()
            .to_string()
            .contains("i.toml"));
    }

    /// One precedence for both commands: a flag beats the command's table,
    /// which beats `[live]`, which beats the default; each command keeps
    /// its own defaults.
    #[test]
    fn flags_beat_the_commands_table_which_beats_live_for_scrub_and_run() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\ninterval = \"2ms\"\nseed = 7\n[scrub]\nseed = 8\n[run]\ninterval = \"3ms\"\n",
        );
        let of = |cmd, flags: Flags| {
            Settings::resolve(
                cmd,
                &Flags {
                    config: Some(p.clone()),
                    ..flags
                },
            )
            .unwrap()
        };
        let s = of(Command::Scrub, Flags::default());
        assert_eq!((s.interval_ns, s.seed), (2_000_000, 8));
        assert_eq!(
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait:t=100ms", "default")
        );
        let r = of(Command::Run, Flags::default());
        assert_eq!((r.interval_ns, r.seed), (3_000_000, 7));
        assert_eq!(
            (r.policy.as_str(), r.policy_from()),
            ("fixed-wait", "default")
        );
        // each value's origin is kept, the defaults' too
        let file = |key: &str| format!("{}: [{key}", p.display());
        assert!(r
            .provenance
            .origin("interval")
            .to_string()
            .starts_with(&file("run] interval")));
        assert!(r
            .provenance
            .origin("seed")
            .to_string()
            .starts_with(&file("live] seed")));
        assert_eq!(r.provenance.origin("slice"), &Origin::Default);
        let flags = Flags {
            interval_ns: Some(5_000_000),
            seed: Some(3),
            ..Flags::default()
        };
        for cmd in [Command::Scrub, Command::Run] {
            let s = of(cmd, flags.clone());
            assert_eq!((s.interval_ns, s.seed), (5_000_000, 3), "{cmd:?}");
        }
        // without a file, the defaults
        let s = Settings::resolve(Command::Scrub, &Flags::default()).unwrap();
        assert_eq!(
            (s.interval_ns, s.seed, s.retries, s.monitor.as_str()),
            (DEFAULT_INTERVAL_NS, 1, DEFAULT_RETRIES, "auto")
        );
        // a flag that cannot be used names the flag, not the file
        let e = Settings::resolve(
            Command::Scrub,
            &Flags {
                order: Some(OrderChoice::Sequential),
                regions: Some(4),
                ..Flags::default()
            },
        )
        .unwrap_err();
        assert!(e.is_bad_input());
        assert_eq!(
            e.to_string(),
            "--regions goes with --order staggered, not sequential"
        );
    }

    #[test]
    fn the_slice_is_checked_once_naming_where_it_came_from() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "f.toml", "[run]\nslice = \"100us\"\n");
        let run = |flags: Flags| Settings::resolve(Command::Run, &flags);
        let e = run(Flags {
            config: Some(p.clone()),
            ..Flags::default()
        })
        .unwrap_err();
        let file = format!("{}: [run] slice: 100000 ns: use 1 ms to 60 s", p.display());
        assert_eq!((e.to_string(), e.is_bad_input()), (file, true));
        // a flag's value wins over the file's and is checked the same way,
        // named as its front end spells it
        for (front, name) in [(Front::Cli, "--slice"), (Front::Python, "slice=")] {
            let e = run(Flags {
                front,
                config: Some(p.clone()),
                slice_ns: Some(61_000_000_000),
                ..Flags::default()
            })
            .unwrap_err();
            let want = format!("{name}: 61000000000 ns: use 1 ms to 60 s");
            assert_eq!(e.to_string(), want);
        }
        let s = run(Flags {
            config: Some(p),
            slice_ns: Some(5_000_000),
            ..Flags::default()
        })
        .unwrap();
        assert_eq!(s.slice_ns, 5_000_000);
        let s = run(Flags::default()).unwrap();
        assert_eq!(s.slice_ns, DEFAULT_SLICE_NS);
    }

    #[test]
    fn a_budget_comes_from_the_flag_then_the_commands_table_then_live_and_refuses_a_tune_result() {
        // (FALLOW_BUDGET is tested through the binary: a unit test setting
        // it would race the other tests that resolve settings)
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\nbudget = \"2ms\"\n[scrub]\nbudget = \"3%\"\n",
        );
        let of = |cmd, budget: Option<&str>| {
            Settings::resolve(
                cmd,
                &Flags {
                    config: Some(p.clone()),
                    budget: budget.map(str::to_string),
                    ..Flags::default()
                },
            )
            .unwrap()
        };
        let s = of(Command::Scrub, None);
        assert_eq!(s.budget.unwrap().budget.to_string(), "3%");
        assert!(s.budget_from().unwrap().ends_with("f.toml: [scrub] budget"));
        // the default policy leaves its wait to the tuner
        assert_eq!(
            (s.policy.as_str(), s.policy_from()),
            ("fixed-wait", "default")
        );
        let r = of(Command::Run, None);
        assert_eq!(r.budget.unwrap().budget.to_string(), "2ms");
        assert!(r.budget_from().unwrap().ends_with("f.toml: [live] budget"));
        let s = of(Command::Scrub, Some("5%"));
        assert_eq!(s.budget.unwrap().budget, "5%".parse().unwrap());
        assert_eq!(s.budget_from().as_deref(), Some("--budget"));
        assert_eq!(s.budget.unwrap().window, crate::budget::LIVE_WINDOW);
        // no budget anywhere: none, and the usual default policy
        let s = Settings::resolve(Command::Scrub, &Flags::default()).unwrap();
        assert!(s.budget.is_none());
        assert_eq!(s.policy, "fixed-wait:t=100ms");
        // a bad budget names where it came from
        let e = Settings::resolve(
            Command::Scrub,
            &Flags {
                budget: Some("fast".into()),
                ..Flags::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--budget") && e.contains("fast"), "{e}");
        // with a tune result: refused, naming both
        let t = write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"policy": "fixed-wait", "spec": "fixed-wait:t=205ms",
                "params": {"t": "205ms"}, "request_size_bytes": 262144, "bg_size_bytes": 262144,
                "reproduce_args": ["simulate", "x", "--policy", "fixed-wait:t=205ms"]}}"#,
        );
        for cmd in [Command::Scrub, Command::Run] {
            let e = Settings::resolve(
                cmd,
                &Flags {
                    budget: Some("5%".into()),
                    tuned: Some(t.clone()),
                    ..Flags::default()
                },
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("--budget 5%") && e.contains("t.json") && e.contains("give one of them"),
                "{e}"
            );
        }
        // from Python, in Python's words
        let e = Settings::resolve(
            Command::Scrub,
            &Flags {
                front: Front::Python,
                budget: Some("5%".into()),
                tuned: Some(t.clone()),
                ..Flags::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("budget=\"5%\" and the tune result"), "{e}");
    }

    /// The policy by the one precedence: a higher layer beats a lower one
    /// (flags, the command's table, `[live]`, the default), and within a
    /// layer a policy beats a tune result, which still gives its size.
    #[test]
    fn policy_precedence_by_layer_then_policy_before_tune_result() {
        let d = tempfile::tempdir().unwrap();
        let t = write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"spec": "fixed-wait:t=205ms", "request_size_bytes": 4096}}"#,
        );
        write(
            d.path(),
            "u.json",
            r#"{"budget_text": "1ms", "best": {"spec": "aggressive", "request_size_bytes": 8192}}"#,
        );
        let pick = |name: &str, toml: &str, policy: Option<&str>, tuned: Option<&Path>| {
            let p = write(d.path(), name, toml);
            let s = Settings::resolve(
                Command::Scrub,
                &Flags {
                    config: Some(p),
                    policy: policy.map(str::to_string),
                    tuned: tuned.map(Path::to_path_buf),
                    ..Flags::default()
                },
            )
            .unwrap();
            let from = s.policy_from();
            (s.policy, from, s.tuned_size, s.provenance.given("policy"))
        };
        let at = |name: &str, key: &str| Some(format!("{}: {key}", d.path().join(name).display()));
        let x = |s: &str| s.to_string();
        assert_eq!(
            pick("a.toml", "", None, None),
            (x("fixed-wait:t=100ms"), "default", None, None)
        );
        assert_eq!(
            pick("b.toml", "[scrub]\ntuned = \"u.json\"\n", None, None),
            (
                x("aggressive"),
                "tune result",
                Some(8192),
                at("b.toml", "[scrub] tuned")
            )
        );
        // the file's policy beats its tune result, which still gives its size
        assert_eq!(
            pick(
                "c.toml",
                "[scrub]\npolicy = \"random\"\ntuned = \"u.json\"\n",
                None,
                None
            ),
            (
                x("random"),
                "config",
                Some(8192),
                at("c.toml", "[scrub] policy")
            )
        );
        // the command's table beats [live], whichever key each gives
        assert_eq!(
            pick(
                "e.toml",
                "[live]\npolicy = \"random\"\n[scrub]\ntuned = \"u.json\"\n",
                None,
                None
            ),
            (
                x("aggressive"),
                "tune result",
                Some(8192),
                at("e.toml", "[scrub] tuned")
            )
        );
        assert_eq!(
            pick(
                "f.toml",
                "[live]\ntuned = \"u.json\"\n[scrub]\npolicy = \"random\"\n",
                None,
                None
            ),
            (
                x("random"),
                "config",
                Some(8192),
                at("f.toml", "[scrub] policy")
            )
        );
        // a --tuned flag beats the file's policy and tune result
        let both = "[scrub]\npolicy = \"random\"\ntuned = \"u.json\"\n";
        assert_eq!(
            pick("g.toml", both, None, Some(&t)),
            (
                x("fixed-wait:t=205ms"),
                "tune result",
                Some(4096),
                Some(x("--tuned"))
            )
        );
        // --policy beats everything; --tuned still gives the size
        assert_eq!(
            pick("h.toml", both, Some("fixed-wait:t=1s"), Some(&t)),
            (
                x("fixed-wait:t=1s"),
                "--policy",
                Some(4096),
                Some(x("--policy"))
            )
        );
        // a named tune result that cannot be read is an error even when unused
        let e = Settings::resolve(
            Command::Run,
            &Flags {
                policy: Some("aggressive".into()),
                tuned: Some("/no/t.json".into()),
                ..Flags::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/no/t.json"), "{e}");
    }
}
