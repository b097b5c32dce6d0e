//! [`TestCommand`]: one `fallow` command line under construction, then run
//! with the check the test wants (success and stdout, its JSON, a given
//! exit status, a bad-input error), after ripgrep's `tests/util.rs`. Set-ups
//! that many tests share (the quiet plain-file scrub, say) are functions
//! returning one, to which a test adds only what it is about.

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// `fallow ARGS…`, not yet run; colour off (`NO_COLOR`) so that output can
/// be matched as text, stdin null.
pub struct TestCommand {
    cmd: Command,
}

impl TestCommand {
    /// `fallow` with `args`.
    pub fn new(args: &[&str]) -> TestCommand {
        let mut cmd = Command::new(super::BIN);
        cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null());
        TestCommand { cmd }
    }

    /// Append one argument.
    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.arg(a);
        self
    }

    /// Append arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut TestCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    /// Append `flag value`.
    pub fn flag(&mut self, flag: &str, value: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.arg(flag).arg(value);
        self
    }

    /// Append `flag PATH`.
    pub fn path_flag(&mut self, flag: &str, path: &Path) -> &mut TestCommand {
        self.flag(flag, path)
    }

    /// Set an environment variable of the command.
    pub fn env(&mut self, key: &str, value: impl AsRef<OsStr>) -> &mut TestCommand {
        self.cmd.env(key, value);
        self
    }

    /// The command itself, for what the builder does not cover (running
    /// it as another user, say).
    pub fn command(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// Start it with stdout and stderr piped, for a test that signals it
    /// or reads it while it runs.
    pub fn spawn(&mut self) -> Child {
        self.spawn_stdio(Stdio::piped(), Stdio::piped())
    }

    /// Start it with the given stdout and stderr.
    pub fn spawn_stdio(&mut self, stdout: Stdio, stderr: Stdio) -> Child {
        self.cmd
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.line()))
    }

    /// The command line as typed, for messages.
    pub fn line(&self) -> String {
        std::iter::once(self.cmd.get_program())
            .chain(self.cmd.get_args())
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Run to the end, stdout and stderr captured.
    pub fn output(&mut self) -> Output {
        self.cmd
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.line()))
    }

    /// Run it, assert it succeeds (else panic with its stderr) and return
    /// its output.
    pub fn ok(&mut self) -> Output {
        let o = self.output();
        assert!(
            o.status.success(),
            "{} failed ({}): {}",
            self.line(),
            o.status,
            super::stderr(&o)
        );
        o
    }

    /// Run it with `--json`, assert it succeeds and parse its stdout.
    pub fn json(&mut self) -> Value {
        self.arg("--json");
        super::json_of(&self.ok())
    }

    /// Run it, assert exit status `code` and return its output.
    pub fn code(&mut self, code: i32) -> Output {
        let o = self.output();
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}: {}",
            self.line(),
            super::stderr(&o)
        );
        o
    }

    /// Run it, expecting exit status 2 (bad input), a message containing
    /// every one of `needles`, and no panic.
    pub fn bad_input(&mut self, needles: &[&str]) {
        let o = self.code(2);
        let e = super::stderr(&o);
        for n in needles {
            assert!(e.contains(n), "{}: `{n}` not in: {e}", self.line());
        }
        assert!(!e.contains("panicked"), "{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::TestCommand;

    #[test]
    fn the_builder_runs_the_line_it_shows() {
        let mut c = TestCommand::new(&["policies"]);
        c.flag("--output", "x").arg("y");
        assert!(
            c.line().ends_with("fallow policies --output x y"),
            "{}",
            c.line()
        );
        // `fallow --version` through the builder, checked against Cargo's
        let o = TestCommand::new(&["--version"]).ok();
        assert!(
            super::super::stdout(&o).contains(env!("CARGO_PKG_VERSION")),
            "{}",
            super::super::stdout(&o)
        );
    }
}
