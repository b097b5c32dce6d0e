//! The policies of a comparison (`fallow compare`, `fallow.compare`): the
//! specs given, or the default line-up (every registered policy with its
//! default parameters, deployable ones first, clairvoyant references
//! last), built before any work so a typo fails at once.

use super::{check_sizes, BgService};
use crate::error::Result;
use crate::policy::{self, Policy};

/// The policies to run, in order, with the specs they were built from,
/// and why a default one was left out.
pub struct Lineup {
    /// (spec, policy), in the order given.
    pub policies: Vec<(String, Box<dyn Policy>)>,
    /// `skipping SPEC: REASON`, one line per policy of the default
    /// line-up that cannot run here (front ends show them as warnings).
    pub skipped: Vec<String>,
}

/// The default line-up's specs.
pub fn default_specs() -> Vec<String> {
    let reg = policy::registry();
    reg.iter()
        .filter(|e| !e.clairvoyant)
        .chain(reg.iter().filter(|e| e.clairvoyant))
        .map(|e| e.name.to_string())
        .collect()
}

/// Build `specs` (None: the default line-up) for a run with BG service
/// `bg`. A policy that chooses its own request sizes needs a BG model that
/// charges for size ([`check_sizes`]): the default line-up leaves one out
/// and says why, one named explicitly is an error.
pub fn lineup(specs: Option<Vec<String>>, bg: &BgService) -> Result<Lineup> {
    let explicit = specs.is_some();
    let specs = specs.unwrap_or_else(default_specs);
    let mut out = Lineup {
        policies: Vec::with_capacity(specs.len()),
        skipped: Vec::new(),
    };
    for spec in specs {
        let built = policy::build(&spec).and_then(|p| {
            if p.chooses_size() {
                check_sizes(bg, Some(p.name()), 1)?;
            }
            Ok(p)
        });
        match built {
            Ok(p) => out.policies.push((spec, p)),
            Err(e) if !explicit => out.skipped.push(format!("skipping {spec}: {e}")),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_lineup_puts_clairvoyant_last_and_skips_size_choosers() {
        let charges = "size".parse::<BgService>().unwrap();
        let flat = "const:5ms".parse::<BgService>().unwrap();
        assert!(charges.charges_for_size() && !flat.charges_for_size());
        let all = lineup(None, &charges).unwrap();
        assert!(all.skipped.is_empty());
        assert_eq!(all.policies.len(), policy::registry().len());
        let first_clairvoyant = all.policies.iter().position(|(_, p)| p.clairvoyant());
        let first_clairvoyant = first_clairvoyant.expect("the registry has references");
        assert!(all.policies[first_clairvoyant..]
            .iter()
            .all(|(_, p)| p.clairvoyant()));
        let choosers = all
            .policies
            .iter()
            .filter(|(_, p)| p.chooses_size())
            .count();
        assert!(choosers > 0);
        let flat_lineup = lineup(None, &flat).unwrap();
        assert_eq!(flat_lineup.skipped.len(), choosers);
        assert_eq!(flat_lineup.policies.len() + choosers, all.policies.len());
    }

    #[test]
    fn an_explicit_policy_fails() {
        let flat = "const:5ms".parse::<BgService>().unwrap();
        let chooser = policy::registry()
            .iter()
            .find(|e| policy::build(e.name).unwrap().chooses_size())
            .unwrap();
        assert!(lineup(Some(vec![chooser.name.into()]), &flat).is_err());
        assert!(lineup(Some(vec!["no-such".into()]), &flat).is_err());
        assert_eq!(
            lineup(Some(vec!["aggressive".into()]), &flat)
                .unwrap()
                .policies
                .len(),
            1
        );
    }
}
