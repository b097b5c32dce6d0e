//! The live commands' tables of the config file (`fallow scrub`, `fallow
//! run`, `fallow spindown`): `[live]` and `[metrics]`, the policy's
//! precedence of flags, config, tune result and defaults, and what a
//! `fallow tune --json` result says to run.
//!
//! The file's format is fallow's one config format
//! ([`fallow_core::settings::ConfigFile`]): `[live]` (policy, tune result,
//! monitor, interval, seed, budget), `[metrics]` (`addr`) and one table
//! per command (`[scrub]`, `[run]`, `[spindown]` read by
//! `crate::spindown::settings`, `[peer]` read by `fallow peer`); each
//! command reads its own strictly and skips the other commands'. A key
//! outside any table is an error, as is an unknown key in `[live]` or
//! `[metrics]`, and a table no command reads (`[scrubb]`): a misspelt
//! table would otherwise be ignored in silence.

use crate::error::{Error, Result};
use fallow_core::settings::{ConfigFile, Layers, Origin, Resolved, SHARED};
use fallow_core::sim::BgService;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub use fallow_core::settings::{relative_to, TABLES};

/// `[live]`: settings shared by the live commands.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveSection {
    /// Policy spec (`fixed-wait:t=50ms`).
    pub policy: Option<String>,
    /// A `fallow tune --json` result (relative to the config file).
    pub tuned: Option<PathBuf>,
    /// Counters to watch: `auto`, `none`, a device name or a stat file.
    pub monitor: Option<String>,
    /// Monitor sampling interval (`1ms`).
    pub interval: Option<String>,
    /// Seed of the policy's random stream.
    pub seed: Option<u64>,
    /// The FG budget to hold live (`5%`, `1ms`), as `--budget` takes it.
    pub budget: Option<String>,
}

/// `[metrics]`: the Prometheus endpoint of the live commands.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// Where to serve `/metrics` (`127.0.0.1:9464`), as `--metrics` takes it.
    pub addr: Option<String>,
}

/// A config file, read: `[live]`, `[metrics]` and the command's own table
/// `S`. The default (no file) has every key absent.
#[derive(Debug, Default)]
pub struct Config<S> {
    /// The file (empty without one).
    pub path: PathBuf,
    /// `[live]`, with `tuned` relative to the file.
    pub live: LiveSection,
    /// `[metrics]`.
    pub metrics: MetricsSection,
    /// The command's table (its `Default` if absent).
    pub own: S,
    /// The file as read (None without one): what settings resolved
    /// through [`fallow_core::settings::Layers`] name as their origin.
    pub file: Option<ConfigFile>,
}

/// Read `path`: `[live]`, `[metrics]` and the `command`'s table into `S`,
/// all strictly; other commands' tables are ignored. `[live]`'s `tuned`
/// is made relative to the file; the caller does the same for `S`'s paths.
pub fn read_config<S: DeserializeOwned + Default>(path: &Path, command: &str) -> Result<Config<S>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Setting(format!("{}: cannot read the config: {e}", path.display())))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| Error::Setting(format!("{}: {e}", path.display())))?;
    config_of(path, table, command)
}

/// [`read_config`] of a file already parsed into `table` (a caller that
/// looked at its layout first reads and parses it once).
pub fn config_of<S: DeserializeOwned + Default>(
    path: &Path,
    table: toml::Table,
    command: &str,
) -> Result<Config<S>> {
    let file = ConfigFile::of(path, table, command).map_err(setting)?;
    let mut cfg = Config {
        path: path.to_path_buf(),
        live: file.table(SHARED).map_err(setting)?,
        metrics: file.table("metrics").map_err(setting)?,
        own: file.table(command).map_err(setting)?,
        file: Some(file),
    };
    cfg.live.tuned = cfg.live.tuned.map(|p| relative_to(path, p));
    Ok(cfg)
}

/// Where each setting of a live command came from: the one provenance
/// record. Each setting resolved through [`Layers::resolve`] is kept here
/// under its config key (`size`, `budget`, `policy`) with its [`Origin`];
/// a setting not here has its default. Status lines and the JSON's
/// `policy_from` read it, and errors found later (by a session, which
/// names a setting by its flag: `--size`, `monitor interval`) are renamed
/// through it to the file's table and key when that is where the value
/// came from (`f.toml: [scrub] size: …`), never a flag not given.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Provenance(std::collections::BTreeMap<&'static str, Origin>);

/// The names fallow-live's errors give a setting, and its config key.
const ERROR_NAMES: [(&str, &str); 12] = [
    ("--policy", "policy"),
    ("policy", "policy"),
    ("--size", "size"),
    ("--regions", "regions"),
    ("--max-rate", "max_rate"),
    ("--window", "windows"),
    ("--checkpoint", "checkpoint"),
    ("--log", "log"),
    ("--monitor", "monitor"),
    ("monitor", "monitor"),
    ("--interval", "interval"),
    ("monitor interval", "interval"),
];

impl Provenance {
    /// The value of `r`, if any, its origin kept under `key`.
    pub fn take<T>(&mut self, key: &'static str, r: Option<Resolved<T>>) -> Option<T> {
        let r = r?;
        self.0.insert(key, r.origin);
        Some(r.value)
    }

    /// The value of `r`, its origin kept under `key` (a default too).
    pub fn take_or<T>(&mut self, key: &'static str, r: Resolved<T>) -> T {
        self.take(key, Some(r)).expect("a value was given")
    }

    /// Where `key`'s value came from ([`Origin::Default`] if it was not given).
    pub fn origin(&self, key: &str) -> &Origin {
        self.0.get(key).unwrap_or(&Origin::Default)
    }

    /// `--budget`, `FALLOW_BUDGET`, `FILE: [table] key`: where `key`'s
    /// value was given, if it was.
    pub fn given(&self, key: &str) -> Option<String> {
        match self.origin(key) {
            Origin::Default => None,
            o => Some(o.to_string()),
        }
    }

    /// `FILE: [table] key` for setting `key`, if its value came from the file.
    pub fn from_file(&self, key: &str) -> Option<String> {
        match self.origin(key) {
            o @ Origin::File { .. } => Some(o.to_string()),
            _ => None,
        }
    }

    /// [`Provenance::from_file`] of the setting an error calls `name`.
    fn label(&self, name: &str) -> Option<String> {
        let (_, key) = ERROR_NAMES.iter().find(|(n, _)| *n == name)?;
        self.from_file(key)
    }

    /// `e` with the parameter at fault renamed `FILE: [table] key` when its
    /// value came from the file (an [`Error::Setting`] then), and a policy
    /// from the file named by its table and key; other errors as they are.
    pub fn rename(&self, e: Error) -> Error {
        match e {
            Error::Invalid {
                ref name,
                ref message,
            }
            | Error::Core(fallow_core::Error::InvalidParameter {
                ref name,
                ref message,
            }) => match self.label(name) {
                Some(label) => Error::Setting(format!("{label}: {message}")),
                None => e,
            },
            Error::Policy { spec, from, why } if from == "config" => Error::Policy {
                spec,
                from: self.label("--policy").unwrap_or(from),
                why,
            },
            Error::Context {
                context,
                why,
                bad_input,
            } => Error::Context {
                context,
                why: Box::new(self.rename(*why)),
                bad_input,
            },
            e => e,
        }
    }
}

/// A setting's error from the core ([`ConfigFile`], `Layers`) as this
/// crate's, its message `ORIGIN: why` (`FILE: [table] key: why`,
/// `--slice: why`) as the file's other errors.
pub(crate) fn setting(e: fallow_core::Error) -> Error {
    match e {
        fallow_core::Error::InvalidParameter { name, message } => {
            Error::Setting(format!("{name}: {message}"))
        }
        e => Error::Core(e),
    }
}

impl<S> Config<S> {
    /// An error about `[table] key` of the file.
    pub fn bad(&self, table: &str, key: &str, why: impl std::fmt::Display) -> Error {
        Error::Setting(format!("{}: [{table}] {key}: {why}", self.path.display()))
    }

    /// Where to serve metrics: `--metrics`, else `[metrics] addr` (the
    /// one table that gives it, so a part of the file's layers).
    pub fn metrics_layers(&self, flag: Option<String>) -> Layers<'_, String> {
        Layers::of(self.file.as_ref()).flag("--metrics", flag).part(
            "metrics",
            "addr",
            self.metrics.addr.clone(),
        )
    }
}

/// A metrics address and where it was given (for errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsAddr {
    /// `HOST:PORT`.
    pub addr: String,
    /// `--metrics` or `FILE: [metrics] addr`.
    pub from: String,
}

/// A policy as one layer gives it (the flags, the command's table,
/// `[live]`): its `policy`, else its tune result, whose best policy runs.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyGiven {
    /// A policy spec.
    Spec(String),
    /// A `fallow tune --json` result.
    Tuned(PathBuf),
}

impl PolicyGiven {
    /// A layer's `policy`, else its `tuned`: the key that gave it
    /// (`policy` or `tuned`) and its value, if either is given.
    pub fn of(
        (policy, tuned): (Option<&String>, Option<&PathBuf>),
    ) -> (&'static str, Option<PolicyGiven>) {
        match (policy, tuned) {
            (Some(p), _) => ("policy", Some(PolicyGiven::Spec(p.clone()))),
            (None, t) => ("tuned", t.cloned().map(PolicyGiven::Tuned)),
        }
    }
}

/// The policy to run, and the tune result named (its path, read and checked).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyChoice {
    /// Policy spec.
    pub spec: String,
    /// The tune result named, by flag or file.
    pub tuned: Option<(PathBuf, TunedChoice)>,
}

/// Choose the policy the same way for every live command, by the one
/// precedence ([`Layers::resolve`]): the highest layer's of `policy`, in
/// which a policy beats a tune result ([`PolicyGiven::of`]), else
/// `default`. The highest layer's tune result of `tuned` is read and
/// checked even where a policy beat it: it still gives the request size
/// and the BG model. Both origins are kept in `provenance` (`policy`,
/// `tuned`).
pub fn choose_policy(
    policy: Layers<'_, PolicyGiven>,
    tuned: Layers<'_, PathBuf>,
    default: &str,
    provenance: &mut Provenance,
) -> Result<PolicyChoice> {
    let tuned = provenance
        .take("tuned", tuned.resolve())
        .map(|p| read_tuned(&p).map(|t| (p, t)))
        .transpose()?;
    let spec = match provenance.take("policy", policy.resolve()) {
        Some(PolicyGiven::Spec(spec)) => spec,
        // the same layer gave `tuned`, so this is the tune result read above
        Some(PolicyGiven::Tuned(p)) => match &tuned {
            Some((_, t)) => t.spec.clone(),
            None => read_tuned(&p)?.spec,
        },
        None => default.to_string(),
    };
    Ok(PolicyChoice { spec, tuned })
}

/// What a `fallow tune --json` result says to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TunedChoice {
    /// The policy spec to run (`best.spec`).
    pub spec: String,
    /// Request size, bytes (`best.request_size_bytes`).
    pub request_size_bytes: u64,
    /// The BG service model tune simulated (`--bg` of `best.reproduce_args`).
    pub bg_service: Option<BgService>,
}

/// Read a `fallow tune --json` result (one budget).
pub fn read_tuned(path: &Path) -> Result<TunedChoice> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Setting(format!(
            "{}: cannot read the tune result: {e}",
            path.display()
        ))
    })?;
    let bad = |m: String| Error::Setting(format!("{}: {m}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "not JSON ({e}); give the output of `fallow tune --json`"
        ))
    })?;
    // schema 2: one object, a `budgets` list; before: an object per budget
    // or a list of them
    let v = match v.get("budgets").and_then(|b| b.as_array()) {
        Some(list) if list.len() == 1 => list[0].clone(),
        Some(list) => serde_json::Value::Array(list.clone()),
        None => v,
    };
    if let Some(list) = v.as_array() {
        let budgets: Vec<String> = list
            .iter()
            .filter_map(|d| d["budget_text"].as_str().map(str::to_string))
            .collect();
        return Err(bad(format!(
            "holds results for {} budgets ({}): tune with the one budget to run",
            list.len(),
            budgets.join(", ")
        )));
    }
    let best = match v.get("best") {
        Some(serde_json::Value::Null) => {
            return Err(bad(format!(
                "no setting met the budget {}: nothing to run",
                v["budget_text"].as_str().unwrap_or("?")
            )))
        }
        Some(b) => b,
        None => {
            return Err(bad(
                "no `best` key: give the output of `fallow tune --json`".into(),
            ))
        }
    };
    let spec = best["spec"]
        .as_str()
        .ok_or_else(|| bad("`best.spec` is missing or not a string".into()))?
        .to_string();
    let request_size_bytes = best["request_size_bytes"]
        .as_u64()
        .filter(|&b| b > 0)
        .ok_or_else(|| {
            bad("`best.request_size_bytes` is missing or not a positive integer".into())
        })?;
    // the BG model tune used, from the reproducing command (`--bg MODEL`)
    let bg_service = best["reproduce_args"].as_array().and_then(|a| {
        a.iter()
            .position(|x| x == "--bg")
            .and_then(|i| a.get(i + 1))
            .and_then(|m| m.as_str())
            .and_then(|m| m.parse().ok())
    });
    Ok(TunedChoice {
        spec,
        request_size_bytes,
        bg_service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn live_and_metrics_are_strict_the_commands_table_is_returned_and_others_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "f.toml",
            "[live]\npolicy = \"aggressive\"\ntuned = \"t.json\"\n[metrics]\naddr = \"127.0.0.1:9464\"\n[scrub]\nsize = \"4MiB\"\n[run]\nanything = 1\n",
        );
        let cfg: Config<toml::Table> = read_config(&p, "scrub").unwrap();
        assert_eq!(cfg.live.policy.as_deref(), Some("aggressive"));
        assert_eq!(cfg.live.tuned, Some(d.path().join("t.json")));
        assert_eq!(cfg.metrics.addr.as_deref(), Some("127.0.0.1:9464"));
        assert_eq!(cfg.own["size"].as_str(), Some("4MiB"));
        let cfg: Config<toml::Table> = read_config(&p, "record").unwrap();
        assert!(cfg.own.is_empty());
        let bad = |name: &str, text: &str| -> String {
            let p = write(d.path(), name, text);
            read_config::<toml::Table>(&p, "scrub")
                .unwrap_err()
                .to_string()
        };
        let e = bad("g.toml", "[live]\npolicyy = \"x\"\n");
        assert!(e.contains("g.toml") && e.contains("policyy"), "{e}");
        let e = bad("m.toml", "[metrics]\naddr = \"127.0.0.1:1\"\nport = 9464\n");
        assert!(
            e.contains("m.toml") && e.contains("[metrics]") && e.contains("port"),
            "{e}"
        );
        let e = bad("n.toml", "[metrics]\naddr = 9464\n");
        assert!(e.contains("n.toml") && e.contains("[metrics]"), "{e}");
        let e = bad("h.toml", "policy = \"x\"\n");
        assert!(e.contains("top-level key `policy`"), "{e}");
        assert!(bad("i.toml", "[scrub\n").contains("i.toml"));
        // a misspelt table is an error naming the file and the table
        let e = bad("j.toml", "[scrubb]\nsize = \"4MiB\"\n");
        assert!(
            e.contains("j.toml") && e.contains("unknown table [scrubb]"),
            "{e}"
        );
        let e = bad("k.toml", "[live]\n[scrub]\n[metric]\naddr = \"x\"\n");
        assert!(e.contains("k.toml") && e.contains("[metric]"), "{e}");
    }

    #[test]
    fn the_metrics_flag_beats_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "f.toml", "[metrics]\naddr = \"127.0.0.1:9464\"\n");
        let cfg: Config<toml::Table> = read_config(&p, "run").unwrap();
        let of = |l: Layers<String>| l.resolve().map(|r| (r.value, r.origin.to_string()));
        let file = format!("{}: [metrics] addr", p.display());
        assert_eq!(
            of(cfg.metrics_layers(None)),
            Some(("127.0.0.1:9464".into(), file))
        );
        assert_eq!(
            of(cfg.metrics_layers(Some("[::1]:0".into()))),
            Some(("[::1]:0".into(), "--metrics".into()))
        );
        assert_eq!(
            of(Config::<toml::Table>::default().metrics_layers(None)),
            None
        );
    }

    #[test]
    fn tuned_results_give_spec_size_and_bg_model() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"policy": "fixed-wait", "spec": "fixed-wait:t=205ms",
                "params": {"t": "205ms"}, "request_size_bytes": 262144, "bg_size_bytes": 262144,
                "reproduce_args": ["simulate", "x", "--bg", "const:5ms", "--policy", "fixed-wait:t=205ms"]}}"#,
        );
        assert_eq!(
            read_tuned(&p).unwrap(),
            TunedChoice {
                spec: "fixed-wait:t=205ms".into(),
                request_size_bytes: 262144,
                bg_service: Some(BgService::Constant { ns: 5_000_000 })
            }
        );
        let p = write(
            d.path(),
            "n.json",
            r#"{"budget_text": "1ms", "best": null}"#,
        );
        let e = read_tuned(&p).unwrap_err().to_string();
        assert!(e.contains("no setting met the budget 1ms"), "{e}");
        let p = write(
            d.path(),
            "l.json",
            r#"[{"budget_text": "1ms"}, {"budget_text": "2ms"}]"#,
        );
        let e = read_tuned(&p).unwrap_err().to_string();
        assert!(e.contains("2 budgets (1ms, 2ms)"), "{e}");
        let p = write(d.path(), "x.json", r#"{"best": {"spec": 3}}"#);
        assert!(read_tuned(&p)
            .unwrap_err()
            .to_string()
            .contains("best.spec"));
    }
}
