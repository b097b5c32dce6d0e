//! One shape for everything fallow looks up by name: BG policies,
//! spin-down policies, trace readers. Like ripgrep's flags
//! (`crates/core/flags/defs.rs`), each item describes itself in its own
//! file and exports its entry; a registry is only the list of those
//! entries, and one generic check (sorted, unique names and aliases) serves
//! every registry, so adding an item is its file plus one line in a list.
//!
//! ```
//! use fallow_core::registry::{Describe, Registry};
//!
//! #[derive(Debug)]
//! struct Fruit { name: &'static str, aliases: &'static [&'static str] }
//! impl Describe for Fruit {
//!     fn name(&self) -> &'static str { self.name }
//!     fn aliases(&self) -> &'static [&'static str] { self.aliases }
//!     fn summary(&self) -> &'static str { "a fruit" }
//! }
//! static FRUITS: &[Fruit] = &[
//!     Fruit { name: "apple", aliases: &["malus"] },
//!     Fruit { name: "pear", aliases: &[] },
//! ];
//! let fruits = Registry::new("fruit", FRUITS);
//! assert_eq!(fruits.find("malus")?.name, "apple");
//! assert!(fruits.find("plum").unwrap_err().to_string().contains("known: apple, pear"));
//! assert_eq!(fruits.check(), Ok(()));
//! # Ok::<(), fallow_core::Error>(())
//! ```

use crate::error::{Error, Result};

/// What an entry says about itself: its name (as written on the command
/// line, in configs and in Python), other accepted names, and one line
/// for `--help` and `fallow policies`.
pub trait Describe: 'static {
    /// The canonical name.
    fn name(&self) -> &'static str;
    /// Other names that select this entry (`waiting` for `fixed-wait`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// One-line summary.
    fn summary(&self) -> &'static str;
}

/// `impl Describe` for an entry struct whose `name`, `aliases` and
/// `summary` fields are what it says about itself (every registry's
/// entries are such structs).
macro_rules! describe_by_fields {
    ($entry:ty) => {
        impl $crate::registry::Describe for $entry {
            fn name(&self) -> &'static str {
                self.name
            }
            fn aliases(&self) -> &'static [&'static str] {
                self.aliases
            }
            fn summary(&self) -> &'static str {
                self.summary
            }
        }
    };
}
pub(crate) use describe_by_fields;

/// A list of self-describing entries of one kind.
pub struct Registry<T: Describe> {
    /// What an entry is, in messages ("policy", "trace format").
    kind: &'static str,
    entries: &'static [T],
}

impl<T: Describe> Registry<T> {
    /// A registry of `entries`, which are alphabetical by name ([`check`]
    /// says whether they are; each registry's test calls it).
    ///
    /// [`check`]: Registry::check
    pub const fn new(kind: &'static str, entries: &'static [T]) -> Self {
        Registry { kind, entries }
    }

    /// Every entry, alphabetically.
    pub fn entries(&self) -> &'static [T] {
        self.entries
    }

    /// Every canonical name, alphabetically.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|e| e.name())
    }

    /// The entry named `name` (or with `name` among its aliases); the
    /// error names the kind and lists the known names.
    pub fn find(&self, name: &str) -> Result<&'static T> {
        let name = name.trim();
        self.entries
            .iter()
            .find(|e| e.name() == name || e.aliases().contains(&name))
            .ok_or_else(|| {
                Error::invalid(
                    self.kind,
                    format!(
                        "unknown {} `{name}` (known: {})",
                        self.kind,
                        self.names().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
    }

    /// The invariants every registry keeps: entries sorted by name, and no
    /// name or alias used twice (an alias equal to another entry's name
    /// would make `find` depend on the order of the list).
    pub fn check(&self) -> std::result::Result<(), String> {
        let names: Vec<&str> = self.names().collect();
        if let Some(w) = names.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "{} registry: `{}` is listed before `{}` (keep the list alphabetical, names unique)",
                self.kind, w[0], w[1]
            ));
        }
        let mut all: Vec<&str> = names.clone();
        for e in self.entries {
            if e.summary().trim().is_empty() {
                return Err(format!("{} `{}` has no summary", self.kind, e.name()));
            }
            all.extend(e.aliases());
        }
        all.sort_unstable();
        if let Some(w) = all.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "{} registry: the name `{}` is used twice",
                self.kind, w[0]
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, &'static [&'static str], &'static str);
    impl Describe for E {
        fn name(&self) -> &'static str {
            self.0
        }
        fn aliases(&self) -> &'static [&'static str] {
            self.1
        }
        fn summary(&self) -> &'static str {
            self.2
        }
    }

    #[test]
    fn check_finds_order_duplicates_and_empty_summaries() {
        static GOOD: &[E] = &[E("a", &["z"], "s"), E("b", &[], "s")];
        assert_eq!(Registry::new("thing", GOOD).check(), Ok(()));
        static UNSORTED: &[E] = &[E("b", &[], "s"), E("a", &[], "s")];
        let err = Registry::new("thing", UNSORTED).check().unwrap_err();
        assert!(err.contains("`b` is listed before `a`"), "{err}");
        static TWICE: &[E] = &[E("a", &[], "s"), E("a", &[], "s")];
        assert!(Registry::new("thing", TWICE).check().is_err());
        static ALIAS_CLASH: &[E] = &[E("a", &["b"], "s"), E("b", &[], "s")];
        let err = Registry::new("thing", ALIAS_CLASH).check().unwrap_err();
        assert!(err.contains("`b` is used twice"), "{err}");
        static EMPTY: &[E] = &[E("a", &[], " ")];
        assert!(Registry::new("thing", EMPTY).check().is_err());
    }

    #[test]
    fn find_accepts_names_and_aliases_and_lists_the_known_ones() {
        static R: &[E] = &[E("fixed-wait", &["waiting"], "s"), E("oracle", &[], "s")];
        let r = Registry::new("policy", R);
        assert_eq!(r.find(" waiting ").unwrap().0, "fixed-wait");
        assert_eq!(r.find("oracle").unwrap().0, "oracle");
        let err = r.find("nope").unwrap_err().to_string();
        assert!(
            err.contains("unknown policy `nope` (known: fixed-wait, oracle)"),
            "{err}"
        );
    }
}
