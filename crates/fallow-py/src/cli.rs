//! `fallow._fallow._cli_main`: the `fallow` command line, run inside the
//! extension for the Python package's `fallow` console script
//! (`python/fallow/_cli.py`). The CLI is `fallow-cli`'s library, the same
//! code as the `fallow` binary; this only converts the arguments.

use pyo3::prelude::*;
use std::ffi::OsString;
use std::path::PathBuf;

/// Run `fallow ARGV[1:]` and return its exit status. `program` and
/// `leading_args` start fallow again (the console script, or the
/// interpreter with `-m fallow`) for the commands that re-run themselves
/// (`fallow run`'s guardian, `emulate-disk --detach`). The GIL is released:
/// the command may run for hours.
#[pyfunction]
#[pyo3(name = "_cli_main", signature = (argv, program, leading_args))]
pub fn cli_main(
    py: Python<'_>,
    argv: Vec<OsString>,
    program: PathBuf,
    leading_args: Vec<OsString>,
) -> u8 {
    py.allow_threads(|| {
        fallow_cli::main_with_args(
            argv,
            Some(fallow_cli::Relaunch {
                program,
                leading_args,
            }),
        )
    })
}
