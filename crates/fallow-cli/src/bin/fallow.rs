//! The `fallow` binary: the command line of the `fallow_cli` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(fallow_cli::main_with_args(std::env::args_os(), None))
}
