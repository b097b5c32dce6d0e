//! Progress for the long analysis commands (`tune`, `recommend`, `pareto`,
//! `compare`): an indicatif bar on an interactive stderr, as before, or,
//! with `FALLOW_PROGRESS=lines`, one plain line on stderr per update (for
//! logs, CI, and the test that counts updates: progress bars
//! move at least once a second); `FALLOW_PROGRESS=never` hides it.
//!
//! A line reads `progress: <what> <pos>/<len> <message>` and is printed
//! whenever the position or the message changes, so the number of lines
//! is the number of steps the command reports, whatever the clock says.

use crate::BadInput;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

/// The environment variable that chooses how progress is shown.
pub const ENV: &str = "FALLOW_PROGRESS";

/// How progress is shown (`FALLOW_PROGRESS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A bar when stderr is a terminal (the default, and `auto`).
    Auto,
    /// No progress at all.
    Never,
    /// One line per update on stderr, terminal or not.
    Lines,
}

/// The mode from `FALLOW_PROGRESS` (`auto`, `never`, `lines`; unset or
/// empty: `auto`); another value is an error naming the variable.
pub fn mode() -> Result<Mode> {
    let v = std::env::var(ENV).unwrap_or_default();
    Ok(match v.trim() {
        "" | "auto" => Mode::Auto,
        "never" | "off" => Mode::Never,
        "lines" => Mode::Lines,
        other => {
            return Err(BadInput(format!(
                "{ENV}=`{other}` is not a progress mode; use auto, never or lines"
            ))
            .into())
        }
    })
}

/// A bar, or plain lines (see the module docs).
pub struct Progress {
    inner: Inner,
}

enum Inner {
    Bar(ProgressBar),
    Lines {
        what: &'static str,
        state: Mutex<LineState>,
    },
}

#[derive(Default)]
struct LineState {
    len: u64,
    pos: u64,
    msg: String,
    /// Lines printed (none yet: the first update prints even at 0).
    printed: u64,
}

impl Progress {
    /// Progress over `len` steps of `what` (`settings`, `policies`),
    /// drawn with the indicatif `template` when shown as a bar; `None`
    /// when nothing is shown: `FALLOW_PROGRESS=never`, or `auto` when
    /// stderr is not a terminal or `worth_a_bar` is false (a short run).
    pub fn new(
        what: &'static str,
        template: &str,
        len: u64,
        worth_a_bar: bool,
    ) -> Result<Option<Progress>> {
        let inner = match mode()? {
            Mode::Never => return Ok(None),
            Mode::Auto if !(worth_a_bar && std::io::stderr().is_terminal()) => return Ok(None),
            Mode::Auto => {
                let bar = ProgressBar::new(len);
                bar.set_style(
                    ProgressStyle::with_template(template)
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                Inner::Bar(bar)
            }
            Mode::Lines => Inner::Lines {
                what,
                state: Mutex::new(LineState {
                    len,
                    ..LineState::default()
                }),
            },
        };
        Ok(Some(Progress { inner }))
    }

    /// Redraw a bar at least this often, so its clock moves between steps
    /// (no effect on lines).
    pub fn steady_tick(&self, every: Duration) {
        if let Inner::Bar(b) = &self.inner {
            b.enable_steady_tick(every);
        }
    }

    /// Steps in all.
    pub fn set_length(&self, len: u64) {
        match &self.inner {
            Inner::Bar(b) => b.set_length(len),
            Inner::Lines { state, .. } => lock(state).len = len,
        }
    }

    /// Steps done.
    pub fn set_position(&self, pos: u64) {
        match &self.inner {
            Inner::Bar(b) => b.set_position(pos),
            Inner::Lines { what, state } => {
                let mut s = lock(state);
                if s.pos != pos || s.printed == 0 {
                    s.pos = pos;
                    s.print(what);
                }
            }
        }
    }

    /// `n` more steps done.
    pub fn inc(&self, n: u64) {
        match &self.inner {
            Inner::Bar(b) => b.inc(n),
            Inner::Lines { what, state } => {
                let mut s = lock(state);
                s.pos += n;
                s.print(what);
            }
        }
    }

    /// What is being done now.
    pub fn set_message(&self, msg: impl Into<String>) {
        let msg = msg.into();
        match &self.inner {
            Inner::Bar(b) => b.set_message(msg),
            Inner::Lines { what, state } => {
                let mut s = lock(state);
                if s.msg != msg {
                    s.msg = msg;
                    s.print(what);
                }
            }
        }
    }

    /// Done: a bar is cleared, lines say nothing more.
    pub fn finish(self) {
        if let Inner::Bar(b) = self.inner {
            b.finish_and_clear();
        }
    }
}

/// The bar of a tuning of every policy (`recommend`, `demo`): it moves
/// with every setting evaluated and names each policy as it starts.
pub struct TuningBar {
    bar: Option<Progress>,
    names: Vec<&'static str>,
    prefix: String,
}

impl TuningBar {
    /// A bar whose message starts with `prefix` (`tuning for 5%: `).
    pub fn new(prefix: String) -> Result<TuningBar> {
        let bar = Progress::new(
            "settings",
            "{msg} [{wide_bar}] {pos}/{len} settings {elapsed}",
            0,
            true,
        )?;
        if let Some(b) = &bar {
            b.steady_tick(Duration::from_millis(200));
        }
        Ok(TuningBar {
            bar,
            names: fallow_core::tune::recommend::candidates(),
            prefix,
        })
    }

    /// The core's progress callback: a policy starting (`total` 0), or
    /// `done` of `total` settings of it.
    pub fn step(&self, policy: usize, policies: usize, done: u64, total: u64) {
        let Some(b) = &self.bar else { return };
        if total == 0 {
            let name = self.names.get(policy).copied().unwrap_or("done");
            b.set_message(format!(
                "{}policy {}/{policies} {name}",
                self.prefix,
                (policy + 1).min(policies)
            ));
        } else {
            b.set_length(total);
            b.set_position(done);
        }
    }

    /// Done: a bar is cleared.
    pub fn finish(self) {
        if let Some(b) = self.bar {
            b.finish();
        }
    }
}

impl LineState {
    fn print(&mut self, what: &str) {
        self.printed += 1;
        if self.msg.is_empty() {
            eprintln!("progress: {what} {}/{}", self.pos, self.len);
        } else {
            eprintln!("progress: {what} {}/{} {}", self.pos, self.len, self.msg);
        }
    }
}

/// The lock, even if a thread panicked while holding it (the state is
/// only counters and a message).
fn lock(m: &Mutex<LineState>) -> std::sync::MutexGuard<'_, LineState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
