//! How this process was started and how to start `fallow` again: the
//! guardian of `fallow run` and native scrubs, and `emulate-disk`'s
//! detached child, run fallow anew. From the `fallow` binary that is the
//! binary itself; from the Python package's `fallow` command (the CLI
//! running inside the Python extension, see `python/fallow/_cli.py`) the
//! current executable is the Python interpreter, so the front end says how
//! to reach fallow (the console script, or `python -m fallow`).

use anyhow::{Context, Result};
use fallow_live::run::GuardianCommand;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// A command line that starts `fallow`: `program leading_args… SUBCOMMAND …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relaunch {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before fallow's own (`-m fallow` for the interpreter).
    pub leading_args: Vec<OsString>,
}

struct Invocation {
    /// `None`: this executable ([`std::env::current_exe`]).
    relaunch: Option<Relaunch>,
    /// This run's arguments after the program name.
    args: Vec<OsString>,
}

static INVOCATION: OnceLock<Invocation> = OnceLock::new();

/// Remember how this run was started (once per process: the first call wins,
/// as a process runs one command).
pub(crate) fn set(relaunch: Option<Relaunch>, args: Vec<OsString>) {
    let _ = INVOCATION.set(Invocation { relaunch, args });
}

/// How to start fallow again.
pub(crate) fn relaunch() -> Result<Relaunch> {
    match INVOCATION.get().and_then(|i| i.relaunch.clone()) {
        Some(r) => Ok(r),
        None => Ok(Relaunch {
            program: std::env::current_exe().context("cannot find the fallow executable")?,
            leading_args: Vec::new(),
        }),
    }
}

/// This run's arguments after the program name.
pub(crate) fn args() -> Vec<OsString> {
    match INVOCATION.get() {
        Some(i) => i.args.clone(),
        None => std::env::args_os().skip(1).collect(),
    }
}

/// The guardian's command line: fallow's hidden `__guardian` subcommand.
pub(crate) fn guardian() -> Result<GuardianCommand> {
    let me = relaunch().context("starting the guardian")?;
    let mut leading_args = me.leading_args;
    leading_args.push("__guardian".into());
    Ok(GuardianCommand {
        program: me.program,
        leading_args,
    })
}
