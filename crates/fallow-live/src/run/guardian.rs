//! The guardian: a small process that thaws the managed command if fallow
//! dies, because fallow's own cleanup does not run when it is killed with
//! `SIGKILL` (or crashes), and a frozen command would stay frozen forever.
//!
//! fallow starts it (`fallow __guardian …`, [`GuardianSpec::to_args`])
//! before the command, in its own process group (a Ctrl-C at the terminal
//! does not reach it), with the read end of a pipe as its standard input.
//! Only fallow holds the write end (close-on-exec, so the command does not
//! inherit it). Over the pipe fallow sends `pgid N` once the command runs
//! and `done` when it has cleaned up itself. When the pipe reaches its end
//! without `done`, fallow is gone: the guardian thaws the cgroup (or sends
//! `SIGCONT` to the process group), waits for the command's processes to
//! leave its cgroups, removes them, and exits.
//!
//! `PR_SET_PDEATHSIG` would only signal the command; thawing needs a
//! process that outlives fallow.
//!
//! A native executor ([`crate::native`]) has no process to thaw: it
//! registers [`ReleaseAction`]s instead (`btrfs scrub resume MOUNT` for a
//! scrub fallow cancelled, a speed limit to restore), which the guardian
//! carries out, in order, when fallow is gone.

use super::freezer::{cgroup_is_empty, remove_cgroup, thaw_raw, FreezerKind};
use crate::error::{Error, Result};
use rustix::pipe::{pipe_with, PipeFlags};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// What a guardian watches over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardianSpec {
    /// How the command is frozen.
    pub kind: FreezerKind,
    /// The cgroup's `cgroup.freeze` or `freezer.state` (none for signals).
    pub control: Option<PathBuf>,
    /// Cgroups made for the command, removed once empty.
    pub cgroups: Vec<PathBuf>,
    /// What else to do when fallow is gone, in order (native executors).
    pub release: Vec<ReleaseAction>,
}

/// Something the guardian does when fallow is gone, so a native job is
/// never left paused or throttled by a fallow that no longer runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseAction {
    /// Run a command to its end (`["btrfs", "scrub", "cancel", "/mnt"]`).
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
        /// Exit codes besides 0 that also mean done, not retried (`btrfs
        /// scrub cancel` exits 2 when no scrub runs: nothing to stop, and
        /// a retry could stop a scrub the user starts meanwhile).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ok_codes: Vec<i32>,
    },
    /// Write `text` to the file `path` (a sysfs attribute).
    Write {
        /// The file.
        path: PathBuf,
        /// What to write.
        text: String,
    },
}

impl ReleaseAction {
    /// The action as one command-line argument (JSON).
    pub fn to_arg(&self) -> String {
        serde_json::to_string(self).expect("a release action serialises")
    }

    /// Parse [`ReleaseAction::to_arg`]'s text.
    pub fn from_arg(text: &str) -> Result<ReleaseAction> {
        serde_json::from_str(text)
            .map_err(|e| Error::invalid("--release", format!("`{text}`: {e}")))
    }

    /// Do it: what a command printed on its standard output (trimmed; the
    /// guardian passes it on, so a release action can say what it did),
    /// or what went wrong, in words.
    pub fn perform(&self) -> std::result::Result<String, String> {
        match self {
            ReleaseAction::Exec { argv, ok_codes } => {
                let Some((program, args)) = argv.split_first() else {
                    return Err("an empty command".into());
                };
                let out = Command::new(program)
                    .args(args)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run `{}`: {e}", argv.join(" ")))?;
                if out.status.success() || out.status.code().is_some_and(|c| ok_codes.contains(&c))
                {
                    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
                } else {
                    Err(format!(
                        "`{}` failed ({}): {}",
                        argv.join(" "),
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            }
            ReleaseAction::Write { path, text } => std::fs::write(path, text)
                .map(|()| String::new())
                .map_err(|e| format!("cannot write `{text}` to {}: {e}", path.display())),
        }
    }
}

impl GuardianSpec {
    /// The spec as command-line arguments (`--freezer K [--control F]
    /// [--cgroup D]...`), which the `fallow __guardian` subcommand parses.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["--freezer".into(), self.kind.name().into()];
        if let Some(c) = &self.control {
            a.push("--control".into());
            a.push(c.into());
        }
        for d in &self.cgroups {
            a.push("--cgroup".into());
            a.push(d.into());
        }
        for r in &self.release {
            a.push("--release".into());
            a.push(r.to_arg().into());
        }
        a
    }
}

/// fallow's end of a running guardian.
#[derive(Debug)]
pub struct Guardian {
    child: Child,
    pipe: Option<File>,
}

impl Guardian {
    /// Start `program leading_args… spec-args…` as the guardian.
    pub fn spawn(
        program: &Path,
        leading_args: &[OsString],
        spec: &GuardianSpec,
    ) -> Result<Guardian> {
        // both ends close-on-exec: the guardian gets the read end as its
        // stdin (dup2 clears the flag), and no other child inherits the write end
        let (rd, wr) = pipe_with(PipeFlags::CLOEXEC)
            .map_err(|e| Error::io("pipe", "cannot make the guardian's pipe", e.into()))?;
        let child = Command::new(program)
            .args(leading_args)
            .args(spec.to_args())
            .stdin(Stdio::from(rd))
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(program, "cannot start the guardian", e))?;
        Ok(Guardian {
            child,
            pipe: Some(File::from(wr)),
        })
    }

    /// The guardian's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, line: &str) -> Result<()> {
        let pid = self.child.id();
        match &mut self.pipe {
            Some(p) => p
                .write_all(line.as_bytes())
                .map_err(|e| Error::io(format!("guardian (pid {pid})"), "cannot reach", e)),
            None => Ok(()),
        }
    }

    /// Tell it the command's process group.
    pub fn watch_group(&mut self, pgid: u32) -> Result<()> {
        self.send(&format!("pgid {pgid}\n"))
    }

    /// fallow has thawed and cleaned up: the guardian exits at once.
    pub fn release(mut self) -> Result<()> {
        self.send("done\n")?;
        self.pipe = None;
        self.child
            .wait()
            .map_err(|e| Error::io("guardian", "cannot wait for", e))?;
        Ok(())
    }

    /// Leave the command to the guardian (fallow is about to exit while
    /// the command runs on): it thaws, waits for the command's processes to
    /// leave their cgroups and removes them.
    pub fn hand_over(mut self) {
        // closing the pipe without `done` is the signal
        self.pipe = None;
    }
}

/// What a guardian did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GuardReport {
    /// The pipe ended without `done` (fallow died or handed over).
    pub fallow_gone: bool,
    /// A signal ended the guardian's watch.
    pub signalled: bool,
    /// Process groups it was told of.
    pub pgids: Vec<u32>,
    /// It thawed the command.
    pub thawed: bool,
    /// Cgroups it removed.
    pub removed: Vec<PathBuf>,
    /// Release actions it carried out successfully.
    pub released: Vec<ReleaseAction>,
    /// What those release actions said they did (their standard output).
    pub said: Vec<String>,
    /// Release actions that succeeded only after failing, in words.
    pub retried: Vec<String>,
    /// What went wrong (thawing, removing), in words.
    pub errors: Vec<String>,
}

enum Msg {
    Pgid(u32),
    Done,
    End,
}

/// The guardian's work: read fallow's messages from `input` until `done`
/// (return at once), the end of the input or `stop` (thaw, then wait for
/// the cgroups to empty, checking every `poll_ms`, and remove them).
/// `stop` raised while waiting for the cgroups to empty ends the wait.
pub fn guard(
    input: impl Read + Send + 'static,
    spec: &GuardianSpec,
    stop: &AtomicBool,
    poll_ms: u64,
) -> GuardReport {
    guard_with(input, spec, stop, poll_ms, Retry::default())
}

/// How long the guardian keeps trying a release action that fails.
///
/// A failure can be passing: `btrfs scrub resume` refuses while the
/// cancel fallow issued is still being carried out (the `btrfs scrub
/// start -B` that ran the slice has not yet written its last status), or
/// the tool is slow on a loaded machine. A job left paused because one
/// attempt came too early is what the guardian exists to prevent, so each
/// failing action is tried again, waiting `first_ms`, then twice as long
/// each time up to `max_ms`, until `total_ms` have passed since the
/// first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Wait before the second attempt, ms.
    pub first_ms: u64,
    /// Longest wait between attempts, ms.
    pub max_ms: u64,
    /// No attempt starts later than this after the first, ms.
    pub total_ms: u64,
}

impl Default for Retry {
    /// 0.1 s doubling to 2 s, for up to 60 s: longer than a btrfs cancel
    /// takes to settle on a loaded machine (seconds), short enough that a
    /// guardian whose action can never succeed does not linger.
    fn default() -> Self {
        Retry {
            first_ms: 100,
            max_ms: 2_000,
            total_ms: 60_000,
        }
    }
}

/// Carry out `actions` in order; those that fail are tried again (in
/// order, the ones that succeeded not repeated) as `retry` says. What
/// succeeded goes in `report.released`; an action that succeeded only
/// after failing is also noted in `report.retried`; one that never did,
/// with its last error and how often it was tried, in `report.errors`.
fn release(actions: &[ReleaseAction], retry: &Retry, report: &mut GuardReport) {
    let t0 = std::time::Instant::now();
    // (action, attempts so far, last error)
    let mut pending: Vec<(&ReleaseAction, u32, String)> =
        actions.iter().map(|a| (a, 0, String::new())).collect();
    let mut wait_ms = retry.first_ms;
    loop {
        let mut failed = Vec::new();
        for (a, n, _) in pending {
            let n = n + 1;
            match a.perform() {
                Ok(said) => {
                    if !said.is_empty() {
                        report.said.push(said);
                    }
                    if n > 1 {
                        report.retried.push(format!(
                            "{} succeeded at attempt {n}, {:.1} s after the first",
                            a.to_arg(),
                            t0.elapsed().as_secs_f64()
                        ));
                    }
                    report.released.push(a.clone());
                }
                Err(e) => failed.push((a, n, e)),
            }
        }
        pending = failed;
        if pending.is_empty() {
            return;
        }
        let spent_ms = t0.elapsed().as_millis() as u64;
        if spent_ms + wait_ms > retry.total_ms {
            break;
        }
        std::thread::sleep(Duration::from_millis(wait_ms));
        wait_ms = (wait_ms * 2).min(retry.max_ms);
    }
    for (_, n, e) in pending {
        report.errors.push(format!(
            "{e} (gave up after {n} attempts in {:.1} s)",
            t0.elapsed().as_secs_f64()
        ));
    }
}

/// [`guard`] with a given [`Retry`] for the release actions.
pub fn guard_with(
    input: impl Read + Send + 'static,
    spec: &GuardianSpec,
    stop: &AtomicBool,
    poll_ms: u64,
    retry: Retry,
) -> GuardReport {
    let (tx, rx) = mpsc::channel();
    // a thread, so a signal is seen while the read blocks
    std::thread::spawn(move || {
        for line in BufReader::new(input).lines() {
            let Ok(line) = line else { break };
            let msg = match line.trim().split_once(' ') {
                Some(("pgid", n)) => match n.trim().parse() {
                    Ok(n) => Msg::Pgid(n),
                    Err(_) => continue,
                },
                _ if line.trim() == "done" => Msg::Done,
                _ => continue,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
        let _ = tx.send(Msg::End);
    });
    let mut report = GuardReport::default();
    loop {
        if stop.load(Ordering::SeqCst) {
            report.signalled = true;
            break;
        }
        match rx.recv_timeout(Duration::from_millis(poll_ms)) {
            Ok(Msg::Pgid(g)) => report.pgids.push(g),
            Ok(Msg::Done) => return report,
            Ok(Msg::End) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                report.fallow_gone = true;
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    match thaw_raw(spec.kind, spec.control.as_deref(), &report.pgids) {
        Ok(()) => report.thawed = true,
        Err(e) => report.errors.push(e.to_string()),
    }
    release(&spec.release, &retry, &mut report);
    // the command may run for hours more; its cgroups go when it does
    for dir in &spec.cgroups {
        while !cgroup_is_empty(dir) {
            if stop.load(Ordering::SeqCst) && !report.signalled {
                return report;
            }
            std::thread::sleep(Duration::from_millis(poll_ms));
        }
        if dir.exists() {
            match remove_cgroup(dir, 1000) {
                Ok(()) => report.removed.push(dir.clone()),
                Err(e) => report.errors.push(e.to_string()),
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn args_round_trip_shape() {
        let s = GuardianSpec {
            kind: FreezerKind::Cgroup1,
            control: Some("/c/freezer.state".into()),
            cgroups: vec!["/c".into(), "/b".into()],
            release: vec![],
        };
        let a: Vec<String> = s
            .to_args()
            .into_iter()
            .map(|x| x.into_string().unwrap())
            .collect();
        assert_eq!(
            a,
            [
                "--freezer",
                "cgroup1",
                "--control",
                "/c/freezer.state",
                "--cgroup",
                "/c",
                "--cgroup",
                "/b"
            ]
        );
    }

    #[test]
    fn done_returns_without_thawing() {
        let spec = GuardianSpec {
            kind: FreezerKind::Signal,
            control: None,
            cgroups: vec![],
            release: vec![],
        };
        let r = guard(&b"pgid 12\ndone\n"[..], &spec, &AtomicBool::new(false), 10);
        assert_eq!(r.pgids, vec![12]);
        assert!(!r.fallow_gone && !r.thawed, "{r:?}");
    }

    /// The real thing: a stopped process group, a pipe whose writer goes away.
    #[test]
    fn end_of_input_thaws_a_stopped_group() {
        let mut child = Command::new("sh")
            .args(["-c", "kill -STOP $$; exit 3"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        // wait until it has stopped itself
        let stopped = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s[s.rfind(')').unwrap() + 2..].starts_with('T'))
                .unwrap_or(false)
        });
        assert!(stopped, "the child did not stop");
        let (rd, wr) = pipe_with(PipeFlags::CLOEXEC).unwrap();
        let mut w = File::from(wr);
        writeln!(w, "pgid {pid}").unwrap();
        drop(w); // fallow dies
        let spec = GuardianSpec {
            kind: FreezerKind::Signal,
            control: None,
            cgroups: vec![],
            release: vec![],
        };
        let r = guard(File::from(rd), &spec, &AtomicBool::new(false), 10);
        assert!(r.fallow_gone && r.thawed, "{r:?}");
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(3), "{st:?} {:?}", st.signal());
    }

    /// `btrfs scrub cancel` exits 2 when nothing runs: with `ok_codes` that
    /// is done at the first attempt, not retried (a retry for 60 s could
    /// cancel a scrub the user starts meanwhile); other codes still fail.
    #[test]
    fn an_exit_code_named_ok_is_done_and_not_retried() {
        let exit = |code: i32, ok: Vec<i32>| ReleaseAction::Exec {
            argv: vec!["sh".into(), "-c".into(), format!("exit {code}")],
            ok_codes: ok,
        };
        let spec = GuardianSpec {
            kind: FreezerKind::Signal,
            control: None,
            cgroups: vec![],
            release: vec![exit(2, vec![2]), exit(3, vec![2])],
        };
        let quick = Retry {
            first_ms: 10,
            max_ms: 10,
            total_ms: 30,
        };
        let r = guard_with(&b""[..], &spec, &AtomicBool::new(false), 10, quick);
        assert_eq!(r.released, spec.release[..1]);
        assert!(r.retried.is_empty(), "{r:?}");
        assert_eq!(r.errors.len(), 1, "{r:?}");
        assert!(r.errors[0].contains("exit 3"), "{r:?}");
        // the field is left out of the argument when empty (older guardians)
        assert!(!exit(0, vec![]).to_arg().contains("ok_codes"));
        assert_eq!(
            ReleaseAction::from_arg(&spec.release[0].to_arg()).unwrap(),
            spec.release[0]
        );
    }

    #[test]
    fn release_actions_round_trip_and_run_when_fallow_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("speed");
        let mark = d.path().join("resumed");
        let spec = GuardianSpec {
            kind: FreezerKind::Signal,
            control: None,
            cgroups: vec![],
            release: vec![
                ReleaseAction::Write {
                    path: f.clone(),
                    text: "0\n".into(),
                },
                ReleaseAction::Exec {
                    argv: vec!["touch".into(), mark.display().to_string()],
                    ok_codes: vec![],
                },
                ReleaseAction::Exec {
                    argv: vec!["false".into()],
                    ok_codes: vec![],
                },
            ],
        };
        let args: Vec<String> = spec
            .to_args()
            .into_iter()
            .map(|x| x.into_string().unwrap())
            .collect();
        let back: Vec<ReleaseAction> = args
            .windows(2)
            .filter(|w| w[0] == "--release")
            .map(|w| ReleaseAction::from_arg(&w[1]).unwrap())
            .collect();
        assert_eq!(back, spec.release);
        assert!(ReleaseAction::from_arg("{").is_err());
        // `done`: nothing is done
        let r = guard(&b"done\n"[..], &spec, &AtomicBool::new(false), 10);
        assert!(r.released.is_empty() && !f.exists() && !mark.exists());
        // the end of the input: everything, in order, failures reported
        // after the retries
        let quick = Retry {
            first_ms: 10,
            max_ms: 20,
            total_ms: 100,
        };
        let t0 = std::time::Instant::now();
        let r = guard_with(&b""[..], &spec, &AtomicBool::new(false), 10, quick);
        assert!(r.fallow_gone);
        assert_eq!(r.released, spec.release[..2]);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "0\n");
        assert!(mark.exists());
        assert_eq!(r.errors.len(), 1, "{r:?}");
        assert!(r.errors[0].contains("`false` failed"), "{r:?}");
        // attempts at 0, 10, 30, 50, 70 and 90 ms (waits 10, 20, 20, 20,
        // 20 ms fit in 100 ms; the next would start at 110): at most 6
        // attempts, when running `false` takes no time (6 seen on an idle
        // machine), fewer when each run takes part of the budget (3 seen
        // at load 40)
        let attempts: u32 = r.errors[0]
            .split("gave up after ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no attempt count: {r:?}"));
        assert!((2..=6).contains(&attempts), "{r:?}");
        assert!(r.retried.is_empty(), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    /// An action that fails while the job is still settling (btrfs: the
    /// cancel not yet complete) is tried again until it succeeds; the
    /// actions after it are not held up by it.
    #[test]
    fn a_failing_release_action_is_retried_with_backoff_until_it_succeeds() {
        let d = tempfile::tempdir().unwrap();
        let count = d.path().join("count");
        let after = d.path().join("after");
        // fails on its first two runs, succeeds on the third
        let script = format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; [ $n -ge 3 ]",
            c = count.display()
        );
        let spec = GuardianSpec {
            kind: FreezerKind::Signal,
            control: None,
            cgroups: vec![],
            release: vec![
                ReleaseAction::Exec {
                    argv: vec!["sh".into(), "-c".into(), script],
                    ok_codes: vec![],
                },
                ReleaseAction::Write {
                    path: after.clone(),
                    text: "1\n".into(),
                },
            ],
        };
        let retry = Retry {
            first_ms: 50,
            max_ms: 1_000,
            total_ms: 10_000,
        };
        let t0 = std::time::Instant::now();
        let r = guard_with(&b""[..], &spec, &AtomicBool::new(false), 10, retry);
        let took = t0.elapsed();
        assert!(r.errors.is_empty(), "{r:?}");
        // the write went through in the first round, the command in the third
        assert_eq!(
            r.released,
            [spec.release[1].clone(), spec.release[0].clone()]
        );
        assert_eq!(std::fs::read_to_string(&count).unwrap().trim(), "3");
        assert_eq!(r.retried.len(), 1, "{r:?}");
        assert!(r.retried[0].contains("at attempt 3"), "{r:?}");
        // backed off 50 then 100 ms between the attempts
        assert!(took >= Duration::from_millis(150), "{took:?}");
    }
}
