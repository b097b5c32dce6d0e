//! Helpers shared by the integration tests of the `fallow` binary: running
//! it, reading its output, the hand-made fixtures and the shared real
//! traces, and the checks that decide whether a root-only test can run.
//! The modules of the test binary (`main.rs`) say `use crate::common;`.

mod command;
mod daemon;
mod exclusive;
mod loopdev;

pub use command::TestCommand;
pub use daemon::{is_mounted, terminate, Cleanup};
pub use loopdev::LoopDev;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The built `fallow` binary, for commands that must not go through
/// [`fallow_cmd`] (run under `nsenter` or `setpriv`, or without `NO_COLOR`).
pub const BIN: &str = env!("CARGO_BIN_EXE_fallow");

/// A temporary directory for a test's disk images: in `/dev/shm` where it
/// is a writable tmpfs, else the default temporary directory. A loop
/// device over an image on the machine's disk makes each flush of the file
/// system on it (a btrfs commit, `sync -f`) an fsync of the image, which
/// waits on every other test's disk I/O; on tmpfs it does not. (The
/// native btrfs tests took 117 s alone either way.)
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if is_tmpfs(shm) {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Whether `dir` is the root of a tmpfs mount (`/proc/self/mounts`).
fn is_tmpfs(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            let mut f = l.split_whitespace();
            let (_, at, kind) = (f.next(), f.next(), f.next());
            at == dir.to_str() && kind == Some("tmpfs")
        })
    })
}

/// `fallow ARGS`, not yet started, with colour off (`NO_COLOR`) so that its
/// output can be matched as text.
pub fn fallow_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).env("NO_COLOR", "1");
    c
}

/// Run `fallow ARGS` to its end with stdin null, stdout and stderr captured.
pub fn fallow(args: &[&str]) -> Output {
    fallow_cmd(args)
        .stdin(Stdio::null())
        .output()
        .expect("the fallow binary runs")
}

/// stdout as text, as written.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stdout as text with the no-break spaces fallow puts between a number and
/// its unit made plain spaces, so that needles such as `"37.5 ms"` can be
/// typed.
pub fn stdout_text(o: &Output) -> String {
    stdout(o).replace('\u{a0}', " ")
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON document on stdout; panics showing stdout and stderr if there is
/// none.
pub fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON on stdout ({e}): {}\nstderr: {}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Run `fallow ARGS --json`, assert that it succeeds and parse its stdout.
pub fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let o = fallow(&all);
    assert!(o.status.success(), "fallow {all:?} failed: {}", stderr(&o));
    json_of(&o)
}

/// Run `fallow ARGS`, expecting exit status 2 (bad input), a message that
/// contains every one of `needles`, and no panic.
pub fn bad_input(args: &[&str], needles: &[&str]) {
    let o = fallow(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "fallow {args:?}: {e}");
    for n in needles {
        assert!(e.contains(n), "fallow {args:?}: `{n}` not in: {e}");
    }
    assert!(!e.contains("panicked"), "{e}");
}

/// The number at a dotted `path` (`"idle.mean_s"`) in `v`; panics naming
/// the path when it is absent or not a number.
pub fn num(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for key in path.split('.') {
        cur = &cur[key];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("`{path}` is not a number: {cur}"))
}

/// Assert `|got − want| ≤ tol`.
pub fn assert_close(got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol, "got {got}, want {want} ± {tol}");
}

/// A path as a command-line argument (the tests' paths are UTF-8).
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A hand-made fixture in `tests/data/cli/`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/cli")
        .join(name)
}

/// [`fixture`] as a command-line argument.
pub fn fixture_arg(name: &str) -> String {
    path_str(&fixture(name)).to_string()
}

/// `tests/data/cli/tiny.csv`, the six-request MSR fixture worked by hand in
/// cli.rs and simulate.rs, as a command-line argument.
pub fn tiny() -> String {
    fixture_arg("tiny.csv")
}

/// The shared real traces: `$FALLOW_SHARED_TRACES`, else `shared/traces`
/// in the nearest folder above this crate that has one (beside the
/// repository, or beside a parent of a worktree's checkout).
pub fn shared_traces_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FALLOW_SHARED_TRACES") {
        return PathBuf::from(d);
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .map(|a| a.join("shared/traces"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| here.join("../../../shared/traces"))
}

/// A file of the shared real traces ([`shared_traces_dir`]). The tests
/// that read them are `#[ignore = "needs ../shared/traces"]`: a plain run
/// counts them as ignored, and one with `--include-ignored` where the file
/// is missing fails here naming it, instead of passing unchecked.
pub fn shared_trace(rel: &str) -> PathBuf {
    let p = shared_traces_dir().join(rel);
    assert!(
        p.is_file(),
        "{} not found: this test needs the shared traces (set FALLOW_SHARED_TRACES, \
         or run without --include-ignored to count it as ignored)",
        p.display()
    );
    p
}

/// Run a program to its end: its stdout, trimmed, or an error naming the
/// program, its arguments and its stderr (or why it could not start).
pub fn run_tool(cmd: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Whether `program` is on PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Whether the tests run as root (effective uid 0 in /proc/self/status: the
/// tests' own check; the binary decides for itself).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Uid:"))?;
            Some(l.split_whitespace().nth(2)? == "0")
        })
        .unwrap_or(false)
}

/// Assert [`is_root`]. The tests that call it are
/// `#[ignore = "needs root"]`: a plain run counts them as ignored, and one
/// with `--include-ignored` (scripts/test.sh as root) where the tests are
/// not root fails here saying `WHAT needs root`, instead of passing
/// unchecked. Then waits until no root test of another file runs (see
/// `exclusive.rs`): from here to its end, the test has the machine to its
/// own file's tests.
#[track_caller]
pub fn need_root(what: &str) {
    assert!(
        is_root(),
        "{what} needs root (run without --include-ignored to count this test as ignored)"
    );
    exclusive::enter(std::panic::Location::caller().file());
}

/// A `fallow tune` result (fixed-wait for a 5 % budget on a Poisson
/// workload at 20 % utilisation, at the request `sizes`) written to
/// `dir/tune.json` for `--tuned`; the parsed result and the file.
pub fn tune_result(dir: &Path, sizes: &str) -> (Value, PathBuf) {
    let o = fallow(&[
        "tune",
        "--workload",
        "poisson",
        "--utilization",
        "0.2",
        "--requests",
        "2000",
        "--policy",
        "fixed-wait",
        "--budget",
        "5%",
        "--sizes",
        sizes,
        "--bg",
        "size",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = dir.join("tune.json");
    std::fs::write(&path, &o.stdout).unwrap();
    // the one budget's answer
    (json_of(&o)["budgets"][0].clone(), path)
}

/// Wait for `child` to exit, at most `timeout`; past it, kill it and fail.
#[track_caller]
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            panic!("fallow did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
