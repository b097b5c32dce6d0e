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
    /// Run a command to its end (`["btrfs", "scrub", "resume", "/mnt"]`).
    Exec {
        /// Program and arguments.
        argv: Vec<String>,
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

    /// Do it; what went wrong, in words.
    pub fn perform(&self) -> std::result::Result<(), String> {
        match self {
            ReleaseAction::Exec { argv } => {
                let Some((program, args)) = argv.split_first() else {
                    return Err("an empty command".into());
                };
                let out = Command::new(program)
                    .args(args)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run `{}`: {e}", argv.join(" ")))?;
                if out.status.success() {
                    Ok(())
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
    for r in &spec.release {
        match r.perform() {
            Ok(()) => report.released.push(r.clone()),
            Err(e) => report.errors.push(e),
        }
    }
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
                },
                ReleaseAction::Exec {
                    argv: vec!["false".into()],
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
        let r = guard(&b""[..], &spec, &AtomicBool::new(false), 10);
        assert!(r.fallow_gone);
        assert_eq!(r.released, spec.release[..2]);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "0\n");
        assert!(mark.exists());
        assert_eq!(r.errors.len(), 1, "{r:?}");
        assert!(r.errors[0].contains("`false` failed"), "{r:?}");
    }
}
