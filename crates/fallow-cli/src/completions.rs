//! `fallow completions SHELL`: the shell completion script, generated from
//! the command's own definition by `clap_complete`, so it always knows every
//! subcommand and flag of this build.

use crate::output;
use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::{Arg, Args, Command, CommandFactory};
use clap_complete::Shell;
use fallow_core::trace::Format;

/// Arguments of `fallow completions`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples (install one of):
  fallow completions bash > /etc/bash_completion.d/fallow     (or ~/.local/share/bash-completion/completions/fallow)
  fallow completions zsh > \"${fpath[1]}/_fallow\"
  fallow completions fish > ~/.config/fish/completions/fallow.fish")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Run `fallow completions`.
pub fn run(args: CompletionsArgs) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(
        args.shell,
        &mut for_completion(crate::Cli::command()),
        "fallow",
        &mut script,
    );
    output::print(&String::from_utf8_lossy(&script))
}

/// The command line as a shell should complete it: internal (hidden)
/// subcommands left out, and the names the registries know offered as the
/// values of `--format` (trace readers) and `--policy` (BG policies; the
/// spin-down policies for `energy` and `spindown`). The values are added
/// here only: parsing still goes through the library, whose errors name
/// the flag and list what it accepts, and `NAME:k=v` stays valid.
fn for_completion(root: Command) -> Command {
    let formats: Vec<&'static str> = Format::all().map(Format::name).collect();
    let bg: Vec<&'static str> = fallow_core::policy::registry()
        .iter()
        .map(|e| e.name)
        .collect();
    let spin: Vec<&'static str> = fallow_core::energy::spindown::registry()
        .iter()
        .map(|e| e.name)
        .collect();
    fn values(cmd: Command, long: &str, names: &[&'static str]) -> Command {
        let ids: Vec<String> = cmd
            .get_arguments()
            .filter(|a| a.get_long() == Some(long))
            .map(|a| a.get_id().to_string())
            .collect();
        ids.into_iter().fold(cmd, |cmd, id| {
            cmd.mut_arg(id, |a: Arg| {
                a.value_parser(PossibleValuesParser::new(names.to_vec()))
            })
        })
    }
    fn visible(cmd: Command, f: &dyn Fn(Command) -> Command) -> Command {
        let subs: Vec<Command> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| visible(f(c.clone()), f))
            .collect();
        // clap cannot remove a subcommand: the same command, rebuilt with
        // the visible ones only
        let mut out = Command::new(cmd.get_name().to_string());
        for a in cmd.get_arguments() {
            out = out.arg(a.clone());
        }
        out.subcommands(subs)
    }
    let enrich = |c: Command| {
        let policies = if matches!(c.get_name(), "energy" | "spindown") {
            &spin
        } else {
            &bg
        };
        values(values(c, "format", &formats), "policy", policies)
    };
    visible(root, &enrich)
}
