//! `fallow man [SUBCOMMAND]`: the manual page in roff, generated from the
//! command's own definition (its help, flags and examples) by
//! `clap_mangen`: fallow(1), or fallow-SUBCOMMAND(1) for one subcommand.

use crate::output;
use crate::BadInput;
use anyhow::Result;
use clap::{Args, CommandFactory};

/// Arguments of `fallow man`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow man | man -l -
      read fallow(1) now
  fallow man > /usr/local/share/man/man1/fallow.1
      install it (then `man fallow`)
  for c in analyze simulate scrub; do fallow man $c > /usr/local/share/man/man1/fallow-$c.1; done
      a page per subcommand, as `man fallow-scrub`")]
pub struct ManArgs {
    /// The subcommand whose page to print (fallow-SUBCOMMAND(1)); fallow(1) without it.
    pub subcommand: Option<String>,
}

/// Run `fallow man`.
pub fn run(args: ManArgs) -> Result<()> {
    let root = crate::Cli::command();
    let cmd = match &args.subcommand {
        None => root,
        Some(name) => {
            let Some(sub) = root
                .get_subcommands()
                .find(|c| c.get_name() == name && !c.is_hide_set())
            else {
                let known: Vec<&str> = root
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(|c| c.get_name())
                    .collect();
                return Err(BadInput(format!(
                    "fallow man: no subcommand `{name}` (one of: {})",
                    known.join(", ")
                ))
                .into());
            };
            // the page's name and the usage line say `fallow SUBCOMMAND`
            sub.clone()
                .name(format!("fallow-{name}"))
                .bin_name(format!("fallow {name}"))
                .version(env!("CARGO_PKG_VERSION"))
        }
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    output::print(&String::from_utf8_lossy(&page))
}
