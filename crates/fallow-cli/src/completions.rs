//! `fallow completions SHELL`: the shell completion script, generated from
//! the command's own definition by `clap_complete`, so it always knows every
//! subcommand and flag of this build.

use crate::output;
use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Arguments of `fallow completions`.
#[derive(Debug, Args)]
#[command(after_help = "\
Install (one of):
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
        &mut crate::Cli::command(),
        "fallow",
        &mut script,
    );
    output::print(&String::from_utf8_lossy(&script))
}
