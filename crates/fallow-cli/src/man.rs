//! `fallow man [SUBCOMMAND]`: the manual page in roff, generated from the
//! command's own definition (its help, flags and examples) by
//! `clap_mangen`: fallow(1), or fallow-SUBCOMMAND(1) for one subcommand;
//! `fallow man --dir DIR` writes every page (fallow.1, one per visible
//! subcommand and nested subcommand) into DIR through the output guard.

use crate::atomic::{self, OverwriteArg};
use crate::output;
use crate::BadInput;
use anyhow::Result;
use clap::{Args, Command, CommandFactory};
use fallow_core::outpath::OutputKind;
use std::path::{Path, PathBuf};

/// Arguments of `fallow man`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  fallow man | man -l -
      read fallow(1) now
  fallow man > /usr/local/share/man/man1/fallow.1
      install it (then `man fallow`)
  fallow man --dir /usr/local/share/man/man1
      every page: fallow.1 and fallow-SUBCOMMAND.1 (then `man fallow-scrub`)")]
pub struct ManArgs {
    /// The subcommand whose page to print (fallow-SUBCOMMAND(1)); fallow(1) without it.
    #[arg(conflicts_with = "dir")]
    pub subcommand: Option<String>,
    /// Write every page into this existing directory (fallow.1 and
    /// fallow-SUBCOMMAND.1 for each subcommand, fallow-peer-serve.1 for
    /// nested ones) instead of printing one. A page already there is
    /// replaced only if it is fallow's own (or with --overwrite).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub overwrite: OverwriteArg,
}

/// Run `fallow man`.
pub fn run(args: ManArgs) -> Result<()> {
    if let Some(dir) = &args.dir {
        return write_all(dir, args.overwrite);
    }
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
    output::print(&String::from_utf8_lossy(&render(cmd)?))
}

fn render(cmd: Command) -> Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    Ok(page)
}

/// Every visible command under `root` with its page name: `fallow`, then
/// `fallow-analyze`, `fallow-peer`, `fallow-peer-serve`, ... (depth first).
fn pages(root: Command) -> Vec<(String, Command)> {
    fn walk(page: &str, bin: &str, cmd: &Command, out: &mut Vec<(String, Command)>) {
        for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            // `emulate-disk` keeps its hyphen in the usage line
            let (page, bin) = (
                format!("{page}-{}", sub.get_name()),
                format!("{bin} {}", sub.get_name()),
            );
            let c = sub
                .clone()
                .name(page.clone())
                .bin_name(bin.clone())
                .version(env!("CARGO_PKG_VERSION"));
            out.push((page.clone(), c));
            walk(&page, &bin, sub, out);
        }
    }
    let mut out = vec![("fallow".to_string(), root.clone())];
    walk("fallow", "fallow", &root, &mut out);
    out
}

/// `fallow man --dir DIR`: every page checked first (no page is written
/// when one of them may not be), then each written atomically.
fn write_all(dir: &Path, overwrite: OverwriteArg) -> Result<()> {
    if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Err(BadInput(format!(
            "fallow man --dir {}: not an existing directory (create it first)",
            dir.display()
        ))
        .into());
    }
    let guard = overwrite.guard(std::iter::empty::<&Path>());
    let pages = pages(crate::Cli::command());
    let paths: Vec<PathBuf> = pages
        .iter()
        .map(|(name, _)| dir.join(format!("{name}.1")))
        .collect();
    for p in &paths {
        atomic::check(&guard, p, OutputKind::ManPage, "--dir")?;
    }
    for ((_, cmd), path) in pages.into_iter().zip(&paths) {
        let page = render(cmd)?;
        atomic::write_atomically(path, |w| Ok(w.write_all(&page)?))?;
    }
    eprintln!(
        "fallow man: wrote {} pages to {}",
        paths.len(),
        dir.display()
    );
    Ok(())
}
