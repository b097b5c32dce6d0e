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
use fallow_core::settings::{ConfigFile, SHARED};
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

/// Where settings that came from the config file were written, by the
/// parameter names fallow-live's errors use for them (`--size`, `monitor`),
/// so an error about a value from the file names the file, the table and
/// the key (`f.toml: [scrub] size: …`) rather than a flag never given.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sources(std::collections::BTreeMap<String, String>);

impl Sources {
    /// Note that the setting errors call `names` came from `[table] key`
    /// of the file at `path`.
    pub fn note(&mut self, names: &[&str], path: &Path, table: &str, key: &str) {
        let label = format!("{}: [{table}] {key}", path.display());
        for n in names {
            self.0.insert(n.to_string(), label.clone());
        }
    }

    /// `FILE: [table] key` for parameter `name`, if its value came from the file.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
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
            }) if self.label(name).is_some() => {
                Error::Setting(format!("{}: {message}", self.label(name).unwrap_or(name)))
            }
            Error::Policy { spec, from, why } if from == "config" => Error::Policy {
                spec,
                from: self.label("--policy").map_or(from, str::to_string),
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

    /// Where to serve metrics: `--metrics`, else `[metrics] addr`.
    pub fn metrics_addr(&self, flag: Option<&str>) -> Option<MetricsAddr> {
        match (flag, &self.metrics.addr) {
            (Some(a), _) => Some(MetricsAddr {
                addr: a.to_string(),
                from: "--metrics".into(),
            }),
            (None, Some(a)) => Some(MetricsAddr {
                addr: a.clone(),
                from: format!("{}: [metrics] addr", self.path.display()),
            }),
            (None, None) => None,
        }
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

/// The policy to run, where it came from, and the tune result if one was named.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyChoice {
    /// Policy spec.
    pub spec: String,
    /// `--policy`, `config`, `tune result` or `default`.
    pub from: &'static str,
    /// The tune result named (by flag or file), read and checked.
    pub tuned: Option<TunedChoice>,
}

/// Choose the policy the same way for every live command. Flags beat the
/// file and the file beats the defaults; within each, an explicit policy
/// beats a tune result's (which then still gives its request size):
/// `--policy`, `--tuned`, the file's `policy`, the file's `tuned`, the
/// default. `file_policy`/`file_tuned` are the command's table's key, else
/// `[live]`'s.
pub fn choose_policy(
    flag_policy: Option<&str>,
    flag_tuned: Option<&Path>,
    file_policy: Option<&str>,
    file_tuned: Option<&Path>,
    default: &str,
) -> Result<PolicyChoice> {
    let tuned = flag_tuned.or(file_tuned).map(read_tuned).transpose()?;
    let (spec, from) = match (flag_policy, flag_tuned, file_policy, &tuned) {
        (Some(p), ..) => (p.to_string(), "--policy"),
        (None, Some(_), _, Some(t)) => (t.spec.clone(), "tune result"),
        (None, None, Some(p), _) => (p.to_string(), "config"),
        (None, None, None, Some(t)) => (t.spec.clone(), "tune result"),
        _ => (default.to_string(), "default"),
    };
    Ok(PolicyChoice { spec, from, tuned })
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
        assert_eq!(
            cfg.metrics_addr(None),
            Some(MetricsAddr {
                addr: "127.0.0.1:9464".into(),
                from: format!("{}: [metrics] addr", p.display())
            })
        );
        assert_eq!(
            cfg.metrics_addr(Some("[::1]:0")),
            Some(MetricsAddr {
                addr: "[::1]:0".into(),
                from: "--metrics".into()
            })
        );
        assert_eq!(Config::<toml::Table>::default().metrics_addr(None), None);
    }

    #[test]
    fn policy_precedence_flag_then_tuned_flag_then_file_then_tuned_file_then_default() {
        let d = tempfile::tempdir().unwrap();
        let t = write(
            d.path(),
            "t.json",
            r#"{"budget_text": "1ms", "best": {"spec": "fixed-wait:t=205ms", "request_size_bytes": 4096}}"#,
        );
        let u = write(
            d.path(),
            "u.json",
            r#"{"budget_text": "1ms", "best": {"spec": "aggressive", "request_size_bytes": 8192}}"#,
        );
        let pick = |fp: Option<&str>, ft: Option<&Path>, cp: Option<&str>, ct: Option<&Path>| {
            let c = choose_policy(fp, ft, cp, ct, "dflt").unwrap();
            (c.spec, c.from, c.tuned.map(|t| t.request_size_bytes))
        };
        let s = |x: &str| x.to_string();
        assert_eq!(pick(None, None, None, None), (s("dflt"), "default", None));
        assert_eq!(
            pick(None, None, None, Some(&u)),
            (s("aggressive"), "tune result", Some(8192))
        );
        // the file's policy beats the file's tune result, which still gives its size
        assert_eq!(
            pick(None, None, Some("random"), Some(&u)),
            (s("random"), "config", Some(8192))
        );
        // a --tuned flag beats the file's policy and its tune result
        assert_eq!(
            pick(None, Some(&t), Some("random"), Some(&u)),
            (s("fixed-wait:t=205ms"), "tune result", Some(4096))
        );
        assert_eq!(
            pick(Some("fixed-wait:t=1s"), Some(&t), Some("random"), Some(&u)),
            (s("fixed-wait:t=1s"), "--policy", Some(4096))
        );
        // a named tune result that cannot be read is an error even when unused
        let e = choose_policy(Some("x"), None, None, Some(Path::new("/no/t.json")), "d")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/t.json"), "{e}");
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
