//! How fallow's long-running commands take their settings: one config
//! file format for all of them ([`ConfigFile`]) and one precedence
//! ([`Layers::resolve`]): a flag over the environment over the config
//! file (a part of the command's own table, such as one disk's, then the
//! table, then the shared `[live]`) over the default, each value kept
//! with where it came from ([`Origin`]), so an error or a status line
//! names the flag, variable, or file, table and key at fault.
//!
//! A config file holds `[live]` and `[metrics]` (shared by the live
//! commands) and one table per command: `[scrub]`, `[run]`, `[spindown]`,
//! `[peer]`. Each command reads its own table and the shared ones strictly
//! and skips the other commands'; a key outside any table, or a table no
//! command reads (a misspelt `[scrubb]`), is an error rather than a
//! setting ignored in silence.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// Every table a config file may hold: the shared ones, then one per
/// command that reads the file.
pub const TABLES: [&str; 6] = ["live", "metrics", "scrub", "run", "spindown", "peer"];

/// The table every live command shares (below its own in precedence).
pub const SHARED: &str = "live";

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Given by no layer: the library's default.
    Default,
    /// A key of the config file.
    File {
        /// The file.
        path: PathBuf,
        /// Its table (`peer`, `live`).
        table: String,
        /// The key.
        key: String,
    },
    /// An environment variable.
    Env(String),
    /// A flag or keyword argument, as the front end spells it (`--listen`,
    /// `listen=`).
    Flag(String),
}

impl fmt::Display for Origin {
    /// `--listen`, `FALLOW_BUDGET`, `/etc/fallow.toml: [peer] listen`,
    /// `default`: how errors and status lines name the value's source.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File { path, table, key } => {
                write!(f, "{}: [{table}] {key}", path.display())
            }
            Origin::Env(var) => f.write_str(var),
            Origin::Flag(name) => f.write_str(name),
        }
    }
}

/// A setting's value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved<T> {
    /// The value.
    pub value: T,
    /// Its layer.
    pub origin: Origin,
}

impl<T> Resolved<T> {
    /// Convert the value with `f`; a failure names the value's origin
    /// (`invalid --chunk-size: …`, `invalid f.toml: [peer] chunk_size: …`).
    pub fn try_map<U>(
        self,
        f: impl FnOnce(T) -> std::result::Result<U, String>,
    ) -> Result<Resolved<U>> {
        let origin = self.origin;
        match f(self.value) {
            Ok(value) => Ok(Resolved { value, origin }),
            Err(m) => Err(Error::invalid(origin.to_string(), m)),
        }
    }
}

/// One setting as each layer gives it; [`Layers::resolve`] picks by the
/// one precedence. Each layer is set at most once, in any order.
#[derive(Debug)]
pub struct Layers<'f, T> {
    file: Option<&'f ConfigFile>,
    flag: Option<(T, String)>,
    env: Option<(T, String)>,
    part: Option<(T, String, String)>,
    own: Option<(T, String)>,
    shared: Option<(T, String)>,
}

impl<'f, T> Layers<'f, T> {
    /// A setting of the command reading `file` (None: no config file).
    pub fn of(file: Option<&'f ConfigFile>) -> Self {
        Layers {
            file,
            flag: None,
            env: None,
            part: None,
            own: None,
            shared: None,
        }
    }

    /// The flag `name` (as the front end spells it), if given.
    pub fn flag(mut self, name: &str, value: Option<T>) -> Self {
        self.flag = value.map(|v| (v, name.to_string()));
        self
    }

    /// The environment variable `var`'s value, if set (already parsed).
    pub fn env(mut self, var: &str, value: Option<T>) -> Self {
        self.env = value.map(|v| (v, var.to_string()));
        self
    }

    /// `key` of a part of the command's table that is more specific than
    /// the table itself (one disk's `[[spindown.disk]]`), named `table`
    /// and `key` in its origin, if the file has it.
    pub fn part(mut self, table: &str, key: &str, value: Option<T>) -> Self {
        self.part = value.map(|v| (v, table.to_string(), key.to_string()));
        self
    }

    /// `key` of the command's own table, if the file has it.
    pub fn own(mut self, key: &str, value: Option<T>) -> Self {
        self.own = value.map(|v| (v, key.to_string()));
        self
    }

    /// `key` of the command's own table as written (`"500ms"`), converted
    /// by `parse`; a failure names the file, table and key.
    pub fn own_parsed<S>(
        self,
        key: &str,
        written: Option<S>,
        parse: impl FnOnce(S) -> std::result::Result<T, String>,
    ) -> Result<Self> {
        let table = self.file.map_or(String::new(), |f| f.command.clone());
        let value = self.parsed(&table, key, written, parse)?;
        Ok(self.own(key, value))
    }

    /// `key` of the shared `[live]` table, if the file has it.
    pub fn shared(mut self, key: &str, value: Option<T>) -> Self {
        self.shared = value.map(|v| (v, key.to_string()));
        self
    }

    /// `key` of the shared `[live]` table as written, converted by `parse`;
    /// a failure names the file, `[live]` and the key.
    pub fn shared_parsed<S>(
        self,
        key: &str,
        written: Option<S>,
        parse: impl FnOnce(S) -> std::result::Result<T, String>,
    ) -> Result<Self> {
        let value = self.parsed(SHARED, key, written, parse)?;
        Ok(self.shared(key, value))
    }

    /// `written` converted by `parse`, a failure naming `key` of `table`
    /// in the file.
    fn parsed<S>(
        &self,
        table: &str,
        key: &str,
        written: Option<S>,
        parse: impl FnOnce(S) -> std::result::Result<T, String>,
    ) -> Result<Option<T>> {
        let Some(w) = written else { return Ok(None) };
        parse(w).map(Some).map_err(|m| {
            let origin = match self.file {
                Some(f) => f.origin(table, key),
                None => Origin::Default,
            };
            Error::invalid(origin.to_string(), m)
        })
    }

    /// The value of the highest layer that gives one: the flag, then the
    /// environment, then a part of the command's table, then the table,
    /// then `[live]`. This is the one place the precedence is written.
    pub fn resolve(self) -> Option<Resolved<T>> {
        let file = |table: &str, key: String| match self.file {
            Some(f) => f.origin(table, &key),
            // a file layer without a file: a caller's slip, named as such
            None => Origin::File {
                path: PathBuf::new(),
                table: table.to_string(),
                key,
            },
        };
        if let Some((value, name)) = self.flag {
            return Some(Resolved {
                value,
                origin: Origin::Flag(name),
            });
        }
        if let Some((value, var)) = self.env {
            return Some(Resolved {
                value,
                origin: Origin::Env(var),
            });
        }
        if let Some((value, table, key)) = self.part {
            return Some(Resolved {
                value,
                origin: file(&table, key),
            });
        }
        let command = self.file.map_or("", |f| f.command.as_str()).to_string();
        if let Some((value, key)) = self.own {
            return Some(Resolved {
                value,
                origin: file(&command, key),
            });
        }
        self.shared.map(|(value, key)| Resolved {
            value,
            origin: file(SHARED, key),
        })
    }

    /// [`Layers::resolve`], else `default` (its origin [`Origin::Default`]).
    pub fn or(self, default: T) -> Resolved<T> {
        self.resolve().unwrap_or(Resolved {
            value: default,
            origin: Origin::Default,
        })
    }
}

/// A config file read for one command: its tables, the layout checked.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// The file.
    pub path: PathBuf,
    /// The command reading it (its own table's name).
    pub command: String,
    tables: toml::Table,
}

impl ConfigFile {
    /// Read `path` for `command` (one of [`TABLES`] past the shared ones).
    pub fn read(path: &Path, command: &str) -> Result<ConfigFile> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            Error::invalid(path.display().to_string(), one_line(&e))
        })?;
        ConfigFile::of(path, table, command)
    }

    /// A file already parsed into `table`: every top-level item must be
    /// one of [`TABLES`].
    pub fn of(path: &Path, table: toml::Table, command: &str) -> Result<ConfigFile> {
        let bad = |m: String| Error::invalid(path.display().to_string(), m);
        for (k, v) in &table {
            match v {
                toml::Value::Table(_) if TABLES.contains(&k.as_str()) => {}
                toml::Value::Table(_) => {
                    return Err(bad(format!(
                        "unknown table [{k}]: a config holds [{}]",
                        TABLES.join("], [")
                    )))
                }
                _ => {
                    return Err(bad(format!(
                    "top-level key `{k}`: settings go in a [live], [metrics] or [{command}] table"
                )))
                }
            }
        }
        Ok(ConfigFile {
            path: path.to_path_buf(),
            command: command.to_string(),
            tables: table,
        })
    }

    /// A file read by other means (an older layout), for the origins of
    /// the values taken from it.
    pub fn named(path: &Path, command: &str) -> ConfigFile {
        ConfigFile {
            path: path.to_path_buf(),
            command: command.to_string(),
            tables: toml::Table::new(),
        }
    }

    /// Table `name` into `S`, strictly (`S` denies unknown keys); `S`'s
    /// default when the file has no such table.
    pub fn table<S: DeserializeOwned + Default>(&self, name: &str) -> Result<S> {
        match self.tables.get(name) {
            Some(toml::Value::Table(t)) => t.clone().try_into().map_err(|e: toml::de::Error| {
                Error::invalid(format!("{}: [{name}]", self.path.display()), one_line(&e))
            }),
            _ => Ok(S::default()),
        }
    }

    /// The origin of `key` in `table` of this file.
    pub fn origin(&self, table: &str, key: &str) -> Origin {
        Origin::File {
            path: self.path.clone(),
            table: table.to_string(),
            key: key.to_string(),
        }
    }

    /// A path written in the file, relative to the file's directory.
    pub fn relative(&self, p: PathBuf) -> PathBuf {
        relative_to(&self.path, p)
    }
}

/// `p` as written in the config file at `file`: relative to its directory.
pub fn relative_to(file: &Path, p: PathBuf) -> PathBuf {
    if p.is_relative() {
        file.parent().unwrap_or(Path::new(".")).join(p)
    } else {
        p
    }
}

/// A TOML error on one line (toml puts "in `key`" on a line of its own).
pub fn one_line(e: &toml::de::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str, command: &str) -> Result<ConfigFile> {
        ConfigFile::of(Path::new("/etc/f.toml"), text.parse().unwrap(), command)
    }

    #[test]
    fn each_layer_wins_over_the_ones_below_it() {
        let f = file("[peer]\nx = 1\n[live]\nx = 2\n", "peer").unwrap();
        let all = || {
            Layers::of(Some(&f))
                .flag("--x", Some(4))
                .env("FALLOW_X", Some(3))
                .own("x", Some(1))
                .shared("x", Some(2))
        };
        let r = all().or(0);
        assert_eq!((r.value, r.origin.to_string()), (4, "--x".to_string()));
        let r = all().flag("--x", None).or(0);
        assert_eq!((r.value, r.origin.to_string()), (3, "FALLOW_X".to_string()));
        let r = all().flag("--x", None).env("FALLOW_X", None).or(0);
        assert_eq!(r.value, 1);
        assert_eq!(r.origin.to_string(), "/etc/f.toml: [peer] x");
        let r = all()
            .flag("--x", None)
            .env("FALLOW_X", None)
            .own("x", None)
            .or(0);
        assert_eq!(r.value, 2);
        assert_eq!(r.origin.to_string(), "/etc/f.toml: [live] x");
        let r = all()
            .flag("--x", None)
            .env("FALLOW_X", None)
            .part("peer.one", "x", Some(5));
        let r = r.or(0);
        assert_eq!(r.value, 5);
        assert_eq!(r.origin.to_string(), "/etc/f.toml: [peer.one] x");
        let r = Layers::of(Some(&f)).or(7);
        assert_eq!((r.value, r.origin), (7, Origin::Default));
        // the order the layers are given in does not matter
        let r = Layers::of(Some(&f))
            .shared("x", Some(2))
            .own("x", Some(1))
            .env("FALLOW_X", Some(3))
            .or(0);
        assert_eq!(r.value, 3);
    }

    #[test]
    fn a_bad_value_names_its_origin() {
        let f = file("[peer]\nsize = \"huge\"\n", "peer").unwrap();
        let r = Layers::of(Some(&f)).own("size", Some("huge")).or("1KiB");
        let e = r
            .try_map(|s| crate::units::parse_bytes(s).map_err(|e| e.to_string()))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid /etc/f.toml: [peer] size: "),
            "{e}"
        );
        // text of the command's table and of [live], each named by its table
        let bytes = |s: &str| crate::units::parse_bytes(s).map_err(|e| e.to_string());
        let e = Layers::of(Some(&f))
            .own_parsed("size", Some("huge"), bytes)
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid /etc/f.toml: [peer] size: "),
            "{e}"
        );
        let e = Layers::of(Some(&f))
            .own_parsed("size", Some("1KiB"), bytes)
            .and_then(|l| l.shared_parsed("size", Some("huge"), bytes))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid /etc/f.toml: [live] size: "),
            "{e}"
        );
        let r = Layers::of(Some(&f))
            .shared_parsed("size", Some("2KiB"), bytes)
            .unwrap()
            .or(0);
        let origin = r.origin.to_string();
        assert_eq!(
            (r.value, origin.as_str()),
            (2048, "/etc/f.toml: [live] size")
        );
    }

    #[test]
    fn the_layout_is_checked_and_other_commands_tables_skipped() {
        let f = file("[scrub]\nsize = \"1MiB\"\n[peer]\nlisten = \"x\"\n", "peer").unwrap();
        #[derive(serde::Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        struct Peer {
            listen: Option<String>,
        }
        assert_eq!(
            f.table::<Peer>("peer").unwrap().listen.as_deref(),
            Some("x")
        );
        assert!(f.table::<Peer>("run").unwrap().listen.is_none());
        let e = file("[peer]\nlisten = \"x\"\nlisten_on = 1\n", "peer")
            .unwrap()
            .table::<Peer>("peer")
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("[peer]") && e.to_string().contains("listen_on"),
            "{e}"
        );
        let e = file("[peeer]\n", "peer").unwrap_err().to_string();
        assert!(e.contains("unknown table [peeer]"), "{e}");
        let e = file("listen = 1\n", "peer").unwrap_err().to_string();
        assert!(e.contains("top-level key `listen`"), "{e}");
        assert_eq!(
            f.relative(PathBuf::from("keys")),
            PathBuf::from("/etc/keys")
        );
    }
}
