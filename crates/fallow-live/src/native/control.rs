//! How a native executor speaks to its tool: commands (program + args,
//! captured output, exit status, a timeout), background jobs, and
//! sysfs-like files under a root prefix. [`SystemControl`] does it for
//! real; [`RecordedControl`] answers from recorded outputs and a directory
//! tree, so an executor is tested against the interface of a kernel this
//! machine does not have (md, ZFS) and every command it issues is logged.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a finished command printed and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit code; `None` if a signal ended it.
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Output {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// An output with `code` and `stdout` (for recordings).
    pub fn new(code: i32, stdout: &str) -> Output {
        Output {
            code: Some(code),
            stdout: stdout.to_string(),
            stderr: String::new(),
        }
    }

    /// Standard error, else standard output, trimmed: for messages.
    pub fn message(&self) -> String {
        let e = self.stderr.trim();
        if e.is_empty() {
            self.stdout.trim().to_string()
        } else {
            e.to_string()
        }
    }
}

/// A command started in the background (`btrfs scrub start -B` in its own
/// process).
pub trait Job: Send + std::fmt::Debug {
    /// Wait up to `timeout_ns` for it to end: its output if it has.
    fn wait_ns(&mut self, timeout_ns: u64) -> Result<Option<Output>>;
    /// Its process id (0 for a recorded job).
    fn pid(&self) -> u32;
}

/// Commands and files of a native tool.
pub trait Control: Send + Sync + std::fmt::Debug {
    /// Run `program args…` to its end, at most `timeout_ns` (then it is
    /// killed and this is an error).
    fn run(&self, program: &str, args: &[&str], timeout_ns: u64) -> Result<Output>;
    /// Start `program args…` in the background, in its own process group
    /// (a Ctrl-C at the terminal reaches fallow, which stops it cleanly),
    /// its output discarded: a job may outlive fallow (`kill -9`), and a
    /// pipe nobody reads would kill it with `SIGPIPE` when it reports at
    /// its end, before it has saved its state. Its state is the tool's to
    /// report (`btrfs scrub status`).
    fn spawn(&self, program: &str, args: &[&str]) -> Result<Box<dyn Job>>;
    /// The text of file `path` (absolute, taken under the root).
    fn read(&self, path: &Path) -> Result<String>;
    /// Write `text` to file `path` (a sysfs attribute: written in place).
    fn write(&self, path: &Path, text: &str) -> Result<()>;
    /// Entry names of directory `path`, sorted.
    fn list(&self, path: &Path) -> Result<Vec<String>>;
    /// Where absolute path `path` is for this control (`/` + path for
    /// the real system, the recorded tree's copy for a recording).
    fn resolve(&self, path: &Path) -> PathBuf;
}

fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn command_line(program: &str, args: &[&str]) -> String {
    std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The real system: commands run, files under `root` (`/` normally).
#[derive(Debug, Clone)]
pub struct SystemControl {
    root: PathBuf,
}

impl SystemControl {
    /// Files under `/`.
    pub fn new() -> SystemControl {
        SystemControl { root: "/".into() }
    }

    /// Files under `root` (a copy of `/sys` in a test), commands for real.
    pub fn with_root(root: impl Into<PathBuf>) -> SystemControl {
        SystemControl { root: root.into() }
    }
}

impl Default for SystemControl {
    fn default() -> Self {
        Self::new()
    }
}

/// A spawned process whose output is collected by two threads.
#[derive(Debug)]
struct ProcJob {
    line: String,
    child: Child,
    out: Option<std::thread::JoinHandle<String>>,
    err: Option<std::thread::JoinHandle<String>>,
}

/// How often a wait looks whether the process has ended, ns: a finished
/// job is noticed this late at most.
const POLL_NS: u64 = 2_000_000;

fn drain(r: Option<impl Read + Send + 'static>) -> Option<std::thread::JoinHandle<String>> {
    r.map(|mut r| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            s.push_str(&String::from_utf8_lossy(&buf));
            s
        })
    })
}

impl ProcJob {
    fn start(program: &str, args: &[&str], capture: bool) -> Result<ProcJob> {
        let line = command_line(program, args);
        let pipe = || {
            if capture {
                Stdio::piped()
            } else {
                Stdio::null()
            }
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(pipe())
            .stderr(pipe())
            .env("LC_ALL", "C")
            .process_group(0)
            .spawn()
            .map_err(|e| Error::io(program, format!("cannot run `{line}`"), e))?;
        let out = drain(child.stdout.take());
        let err = drain(child.stderr.take());
        Ok(ProcJob {
            line,
            child,
            out,
            err,
        })
    }

    fn output(&mut self, status: std::process::ExitStatus) -> Output {
        let take = |h: &mut Option<std::thread::JoinHandle<String>>| {
            h.take().and_then(|h| h.join().ok()).unwrap_or_default()
        };
        Output {
            code: status.code().or_else(|| status.signal().map(|s| 128 + s)),
            stdout: take(&mut self.out),
            stderr: take(&mut self.err),
        }
    }
}

impl Job for ProcJob {
    fn wait_ns(&mut self, timeout_ns: u64) -> Result<Option<Output>> {
        let deadline = crate::clock::monotonic_ns().saturating_add(timeout_ns);
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => return Ok(Some(self.output(st))),
                Ok(None) => {}
                Err(e) => return Err(Error::io(&self.line, "cannot wait for", e)),
            }
            let now = crate::clock::monotonic_ns();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_nanos((deadline - now).min(POLL_NS)));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Control for SystemControl {
    fn run(&self, program: &str, args: &[&str], timeout_ns: u64) -> Result<Output> {
        let mut job = ProcJob::start(program, args, true)?;
        match job.wait_ns(timeout_ns)? {
            Some(o) => Ok(o),
            None => {
                let _ = job.child.kill();
                let _ = job.child.wait();
                Err(Error::Unsupported(format!(
                    "`{}` did not finish within {:.1} s and was killed",
                    job.line,
                    timeout_ns as f64 / 1e9
                )))
            }
        }
    }

    fn spawn(&self, program: &str, args: &[&str]) -> Result<Box<dyn Job>> {
        Ok(Box::new(ProcJob::start(program, args, false)?))
    }

    fn read(&self, path: &Path) -> Result<String> {
        let p = under(&self.root, path);
        std::fs::read_to_string(&p).map_err(|e| Error::io(p, "cannot read", e))
    }

    fn write(&self, path: &Path, text: &str) -> Result<()> {
        let p = under(&self.root, path);
        std::fs::write(&p, text).map_err(|e| Error::io(p, "cannot write", e))
    }

    fn list(&self, path: &Path) -> Result<Vec<String>> {
        let p = under(&self.root, path);
        let mut v: Vec<String> = std::fs::read_dir(&p)
            .map_err(|e| Error::io(&p, "cannot list", e))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    }

    fn resolve(&self, path: &Path) -> PathBuf {
        under(&self.root, path)
    }
}

/// A recorded job: running for `waits` calls of [`Job::wait_ns`] (or
/// until the control runs the command line `until`, as a cancel ends a
/// scrub), then ended with `output`.
#[derive(Debug, Clone)]
pub struct RecordedJob {
    /// Waits that still find it running.
    pub waits: u32,
    /// How it ends.
    pub output: Output,
    /// A command line (`btrfs scrub cancel /mnt`) that ends it when run.
    pub until: Option<String>,
}

#[derive(Debug)]
struct RecordedRun {
    job: RecordedJob,
    log: Arc<Mutex<Vec<String>>>,
    spawned_at: usize,
}

impl Job for RecordedRun {
    fn wait_ns(&mut self, timeout_ns: u64) -> Result<Option<Output>> {
        let ended_by_command = self.job.until.as_ref().is_some_and(|u| {
            let want = format!("run {u}");
            self.log.lock().unwrap_or_else(|p| p.into_inner())[self.spawned_at..].contains(&want)
        });
        if ended_by_command {
            return Ok(Some(self.job.output.clone()));
        }
        self.job.wait_ns(timeout_ns)
    }

    fn pid(&self) -> u32 {
        0
    }
}

impl Job for RecordedJob {
    fn wait_ns(&mut self, timeout_ns: u64) -> Result<Option<Output>> {
        if self.waits == 0 {
            return Ok(Some(self.output.clone()));
        }
        self.waits -= 1;
        // a running job takes the time a real one would, up to 200 ms
        std::thread::sleep(Duration::from_nanos(timeout_ns.min(200_000_000)));
        Ok(None)
    }

    fn pid(&self) -> u32 {
        0
    }
}

/// A recorded tool: each command line answers with its next recorded
/// output (the last one repeats), files live under a directory tree, and
/// every command and write is logged in order.
#[derive(Debug)]
pub struct RecordedControl {
    root: PathBuf,
    runs: Mutex<BTreeMap<String, VecDeque<(Output, bool)>>>,
    jobs: Mutex<BTreeMap<String, VecDeque<(RecordedJob, bool)>>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl RecordedControl {
    /// Files under `root` (a recorded `/sys` tree, say `root/sys/block/md0/md/…`).
    pub fn new(root: impl Into<PathBuf>) -> RecordedControl {
        RecordedControl {
            root: root.into(),
            runs: Mutex::new(BTreeMap::new()),
            jobs: Mutex::new(BTreeMap::new()),
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// `line` (program and args joined by spaces) answers `outputs` in
    /// turn, after those recorded before (an answer already given gives way).
    pub fn on_run(&self, line: &str, outputs: impl IntoIterator<Item = Output>) {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(line.to_string())
            .or_default()
            .extend(outputs.into_iter().map(|o| (o, false)));
    }

    /// Spawning `line` gives `jobs` in turn.
    pub fn on_spawn(&self, line: &str, jobs: impl IntoIterator<Item = RecordedJob>) {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(line.to_string())
            .or_default()
            .extend(jobs.into_iter().map(|j| (j, false)));
    }

    /// Everything done so far: `run LINE`, `spawn LINE`, `write PATH TEXT`.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note(&self, s: String) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    /// The next answer: a used one gives way to any recorded after it;
    /// the last one repeats until another is recorded.
    fn next<T: Clone>(map: &Mutex<BTreeMap<String, VecDeque<(T, bool)>>>, line: &str) -> Option<T> {
        let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
        let q = m.get_mut(line)?;
        while q.len() > 1 && q.front().is_some_and(|f| f.1) {
            q.pop_front();
        }
        let f = q.front_mut()?;
        f.1 = true;
        Some(f.0.clone())
    }
}

impl Control for RecordedControl {
    fn run(&self, program: &str, args: &[&str], _timeout_ns: u64) -> Result<Output> {
        let line = command_line(program, args);
        self.note(format!("run {line}"));
        Self::next(&self.runs, &line)
            .ok_or_else(|| Error::Unsupported(format!("no recorded output for `{line}`")))
    }

    fn spawn(&self, program: &str, args: &[&str]) -> Result<Box<dyn Job>> {
        let line = command_line(program, args);
        self.note(format!("spawn {line}"));
        let spawned_at = self.log.lock().unwrap_or_else(|p| p.into_inner()).len();
        Self::next(&self.jobs, &line)
            .map(|job| {
                Box::new(RecordedRun {
                    job,
                    log: self.log.clone(),
                    spawned_at,
                }) as Box<dyn Job>
            })
            .ok_or_else(|| Error::Unsupported(format!("no recorded job for `{line}`")))
    }

    fn read(&self, path: &Path) -> Result<String> {
        let p = under(&self.root, path);
        std::fs::read_to_string(&p).map_err(|e| Error::io(p, "cannot read", e))
    }

    fn write(&self, path: &Path, text: &str) -> Result<()> {
        self.note(format!("write {} {}", path.display(), text.trim()));
        let p = under(&self.root, path);
        std::fs::write(&p, text).map_err(|e| Error::io(p, "cannot write", e))
    }

    fn list(&self, path: &Path) -> Result<Vec<String>> {
        SystemControl::with_root(&self.root).list(path)
    }

    fn resolve(&self, path: &Path) -> PathBuf {
        under(&self.root, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_runs_commands_with_output_status_and_timeout() {
        let c = SystemControl::new();
        let o = c
            .run(
                "sh",
                &["-c", "echo out; echo err >&2; exit 3"],
                5_000_000_000,
            )
            .unwrap();
        assert_eq!(
            (o.code, o.stdout.as_str(), o.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
        assert_eq!(o.message(), "err");
        let t0 = crate::clock::monotonic_ns();
        let e = c.run("sleep", &["5"], 100_000_000).unwrap_err().to_string();
        assert!(e.contains("did not finish"), "{e}");
        assert!(crate::clock::monotonic_ns() - t0 < 2_000_000_000);
        assert!(c.run("/no/such/tool", &[], 1_000_000_000).is_err());
    }

    #[test]
    fn system_jobs_run_in_the_background() {
        let c = SystemControl::new();
        let mut j = c
            .spawn("sh", &["-c", "sleep 0.2; echo done; exit 4"])
            .unwrap();
        assert!(j.pid() > 0);
        assert_eq!(j.wait_ns(20_000_000).unwrap(), None);
        let o = j.wait_ns(5_000_000_000).unwrap().unwrap();
        assert!(o.code == Some(4) && o.stdout.is_empty(), "{o:?}");
    }

    #[test]
    fn files_live_under_the_root() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("sys/x")).unwrap();
        std::fs::write(d.path().join("sys/x/b"), "1\n").unwrap();
        std::fs::write(d.path().join("sys/x/a"), "2\n").unwrap();
        let c = SystemControl::with_root(d.path());
        assert_eq!(c.read(Path::new("/sys/x/b")).unwrap(), "1\n");
        assert_eq!(c.list(Path::new("/sys/x")).unwrap(), ["a", "b"]);
        c.write(Path::new("/sys/x/a"), "7").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/x/a")).unwrap(),
            "7"
        );
        let e = c.read(Path::new("/sys/none")).unwrap_err().to_string();
        assert!(e.contains("sys/none"), "{e}");
    }

    #[test]
    fn recordings_answer_in_turn_and_log_everything() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "0").unwrap();
        let c = RecordedControl::new(d.path());
        c.on_run("tool a", [Output::new(0, "one"), Output::new(1, "two")]);
        c.on_spawn(
            "tool b",
            [RecordedJob {
                waits: 1,
                output: Output::new(0, "b"),
                until: None,
            }],
        );
        assert_eq!(c.run("tool", &["a"], 0).unwrap().stdout, "one");
        assert_eq!(c.run("tool", &["a"], 0).unwrap().stdout, "two");
        assert_eq!(c.run("tool", &["a"], 0).unwrap().stdout, "two");
        assert!(c.run("tool", &["c"], 0).is_err());
        c.on_run("tool a", [Output::new(0, "three")]);
        assert_eq!(c.run("tool", &["a"], 0).unwrap().stdout, "three");
        let mut j = c.spawn("tool", &["b"]).unwrap();
        assert_eq!(j.wait_ns(1).unwrap(), None);
        assert_eq!(j.wait_ns(1).unwrap().unwrap().stdout, "b");
        c.write(Path::new("/f"), "idle\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("f")).unwrap(),
            "idle\n"
        );
        assert_eq!(
            c.log(),
            [
                "run tool a",
                "run tool a",
                "run tool a",
                "run tool c",
                "run tool a",
                "spawn tool b",
                "write /f idle"
            ]
        );
    }
}
