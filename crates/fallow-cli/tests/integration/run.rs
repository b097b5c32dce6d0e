//! `fallow run` end to end: the built binary runs real commands, paused by
//! real freezers, against a counters file, a loop device and veth pairs in
//! network namespaces. Tests that need root, cgroups, loop devices or
//! `ip` are `#[ignore = "needs root"]`; a missing tool is a `skip:` line.

use crate::common;

use common::{
    bad_input, fallow, fallow_cmd, have, is_root, need_root, stderr, tune_result, wait_exit,
    LoopDev, BIN,
};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn sh(script: &str) -> ExitStatus {
    Command::new("sh").args(["-c", script]).status().unwrap()
}

fn sh_ok(script: &str) {
    let st = sh(script);
    assert!(st.success(), "`{script}`: {st}");
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A disk's counters in a file: idle, or busy with one FG read in flight.
struct StatFile(PathBuf);

impl StatFile {
    fn new(dir: &Path) -> StatFile {
        let s = StatFile(dir.join("stat"));
        s.set(false);
        s
    }

    fn set(&self, busy: bool) {
        let tmp = self.0.with_extension("tmp");
        let line = if busy {
            "1 0 8 0 0 0 0 0 1 0 0 0 0 0 0 0 0\n"
        } else {
            "1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        };
        std::fs::write(&tmp, line).unwrap();
        std::fs::rename(&tmp, &self.0).unwrap();
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

/// Lines of a file (0 if absent).
fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .map(|t| t.lines().map(String::from).collect())
        .unwrap_or_default()
}

/// A command that appends a realtime timestamp (ns) to `out` every 10 ms
/// until `stop` exists.
fn ticker(out: &Path, stop: &Path) -> String {
    format!(
        "while [ ! -e {s} ]; do date +%s%N >> {o}; sleep 0.01; done",
        s = stop.display(),
        o = out.display()
    )
}

fn timestamps(p: &Path) -> Vec<u64> {
    lines(p)
        .iter()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The first line of fallow's stderr, which names the pid and cgroup.
fn header(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    line
}

/// `pid N` and the cgroup in `(…)` from the header line.
fn pid_and_cgroup(header: &str) -> (u32, Option<PathBuf>) {
    let pid = header
        .split("pid ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in `{header}`"));
    let cgroup = header
        .split_once(" (/")
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(p, _)| PathBuf::from(format!("/{p}")));
    (pid, cgroup)
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

// ---------------------------------------------------------------- no root needed

/// A command fallow recognises as kernel-run maintenance is
/// refused before it runs (exit 2), naming the exact native command:
/// freezing it would pause nothing, and its time would have been counted
/// as frozen while the device read. The shell's `touch` shows nothing ran.
#[test]
fn kernel_run_maintenance_is_refused_with_the_native_command() {
    common::bad_input(
        &["run", "--", "btrfs", "scrub", "start", "-B", "/mnt/x"],
        &["`fallow scrub btrfs:/mnt/x`", "nothing was run"],
    );
    common::bad_input(
        &["run", "--", "sudo", "btrfs", "scrub", "resume", "/mnt/x"],
        &["`fallow scrub btrfs:/mnt/x --resume`"],
    );
    common::bad_input(
        &["run", "--", "zpool", "scrub", "tank"],
        &["`fallow scrub zfs:tank`"],
    );
    common::bad_input(
        &["run", "--", "fstrim", "-v", "/srv"],
        &["`fallow trim /srv`"],
    );
    let d = tempfile::tempdir().unwrap();
    let mark = d.path().join("ran");
    let script = format!(
        "echo check > /sys/block/md9/md/sync_action; touch {}",
        mark.display()
    );
    common::bad_input(
        &["run", "--", "sh", "-c", &script],
        &["`fallow scrub md:/dev/md9`"],
    );
    assert!(!mark.exists(), "the command ran");
}

#[test]
fn exit_status_and_output_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let o = fallow(&[
        "run",
        "-q",
        "--device",
        stat.arg(),
        "--",
        "sh",
        "-c",
        "echo out; exit 7",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n");
    assert_eq!(stderr(&o), "", "-q prints nothing of fallow's own");
    // ended by a signal: 128 + 15, as a shell reports it
    let o = fallow(&[
        "run",
        "-q",
        "--device",
        stat.arg(),
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    // the command's arguments are its own, dashes and all
    let o = fallow(&[
        "run",
        "-q",
        "--device",
        stat.arg(),
        "--",
        "echo",
        "--policy",
        "-x",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "--policy -x\n");
}

#[test]
fn bad_input_is_a_clear_error_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--device", "fallow-no-such-disk", "--", "true"],
            "no block device `fallow-no-such-disk`",
        ),
        (
            &["run", "--device", "/no/such/path", "--", "true"],
            "/no/such/path",
        ),
        (
            &[
                "run",
                "--device",
                stat.arg(),
                "--",
                "fallow-no-such-command",
            ],
            "`fallow-no-such-command` is not found in PATH",
        ),
        (
            &[
                "run",
                "--device",
                stat.arg(),
                "--policy",
                "no-such-policy",
                "--",
                "true",
            ],
            "no-such-policy",
        ),
        (
            &[
                "run",
                "--device",
                stat.arg(),
                "--policy",
                "oracle",
                "--",
                "true",
            ],
            "clairvoyant",
        ),
        (
            &[
                "run",
                "--device",
                stat.arg(),
                "--freezer",
                "cgroup3",
                "--",
                "true",
            ],
            "cgroup2, cgroup1 or signal",
        ),
        (
            &["run", "--net", "fallow-no-if0", "--", "true"],
            "no network interface `fallow-no-if0`",
        ),
        (
            &[
                "run",
                "--device",
                stat.arg(),
                "--netns",
                "fallow-no-such-ns",
                "--",
                "true",
            ],
            "no network namespace `fallow-no-such-ns`",
        ),
        (
            &["run", "--device", stat.arg(), "--slice", "0", "--", "true"],
            "--slice",
        ),
    ];
    for (args, want) in cases {
        bad_input(args, &[want]);
    }
    // no command at all: usage
    assert_eq!(
        fallow(&["run", "--device", stat.arg()]).status.code(),
        Some(2)
    );
}

/// The signal freezer needs no privileges: run it as whoever we are.
#[test]
fn signal_freezer_pauses_while_busy_and_resumes_when_idle() {
    paused_while_busy_file(Some("signal"));
}

/// Against a counters file: busy (an FG read in flight) → the command
/// stops within a slice; idle again → it resumes after the policy's wait.
fn paused_while_busy_file(freezer: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let (out, stop) = (dir.path().join("ticks"), dir.path().join("stop"));
    let mut args = vec![
        "run",
        "--device",
        stat.arg(),
        "--policy",
        "fixed-wait:t=50ms",
    ];
    if let Some(f) = freezer {
        args.extend(["--freezer", f]);
    }
    let script = ticker(&out, &stop);
    args.extend(["--", "sh", "-c", &script]);
    let mut child = fallow_cmd(&args).stderr(Stdio::piped()).spawn().unwrap();
    wait_until("the first tick", Duration::from_secs(10), || {
        !lines(&out).is_empty()
    });
    stat.set(true);
    let busy_from = now_ns();
    std::thread::sleep(Duration::from_millis(600));
    let busy_to = now_ns();
    stat.set(false);
    std::thread::sleep(Duration::from_millis(400));
    std::fs::write(&stop, "").unwrap();
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let ticks = timestamps(&out);
    // a slice (20 ms) plus sampling and scheduling slack
    let during: Vec<_> = ticks
        .iter()
        .filter(|&&t| t > busy_from + 100_000_000 && t < busy_to)
        .collect();
    assert!(during.is_empty(), "ticks while busy: {during:?}");
    let after = ticks.iter().filter(|&&t| t > busy_to).count();
    assert!(
        after >= 5,
        "only {after} ticks in the 400 ms after the device fell idle"
    );
}

// ---------------------------------------------------------------- root

/// The freezers this machine has: cgroup2 where a v2 hierarchy is mounted,
/// cgroup1 where the v1 freezer is, and signal always.
fn freezers() -> Vec<&'static str> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut v = vec![];
    if mounts.lines().any(|l| l.contains(" - cgroup2 ")) {
        v.push("cgroup2");
    }
    if mounts
        .lines()
        .any(|l| l.contains(" - cgroup ") && l.split(',').any(|o| o.trim() == "freezer"))
    {
        v.push("cgroup1");
    }
    v.push("signal");
    v
}

#[test]
#[ignore = "needs root"]
fn cgroup_freezers_pause_while_busy_and_resume_when_idle() {
    need_root("the cgroup freezers");
    for f in freezers() {
        if f != "signal" {
            paused_while_busy_file(Some(f));
        }
    }
}

#[test]
#[ignore = "needs root"]
fn non_root_gets_a_clear_error_for_cgroup_freezers() {
    need_root("switching to an unprivileged user");
    if !have("setpriv") {
        eprintln!("skip: no setpriv (util-linux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    sh_ok(&format!("chmod 755 {}", dir.path().display()));
    let stat = StatFile::new(dir.path());
    for f in freezers().into_iter().filter(|f| *f != "signal") {
        let o = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(BIN)
            .args(["run", "--freezer", f, "--device", stat.arg(), "--", "true"])
            .output()
            .unwrap();
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{f}: {e}");
        assert!(e.contains("needs root"), "{f}: {e}");
    }
}

/// kill -9 fallow while the command is frozen: the guardian thaws it, it
/// runs to its end, and its cgroup is removed once it is gone.
#[test]
fn kill_9_while_frozen_leaves_the_command_running_to_its_end() {
    let freezers = if is_root() {
        freezers()
    } else {
        vec!["signal"]
    };
    for f in freezers {
        killed_while_frozen(f, "KILL", None);
    }
}

/// SIGTERM: fallow thaws the command itself, leaves it running and exits 143.
#[test]
fn sigterm_leaves_the_command_running_thawed() {
    let f = if is_root() { freezers()[0] } else { "signal" };
    killed_while_frozen(f, "TERM", Some(143));
}

fn killed_while_frozen(freezer: &str, signal: &str, want_status: Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let out = dir.path().join("count");
    let script = format!(
        "for i in $(seq 60); do echo $i >> {o}; sleep 0.02; done; echo END >> {o}",
        o = out.display()
    );
    let mut child = fallow_cmd(&["run", "--freezer", freezer, "--device", stat.arg()])
        .args(["--policy", "fixed-wait:t=10ms", "--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (pid, cgroup) = pid_and_cgroup(&header(&mut child));
    wait_until("the command to start", Duration::from_secs(10), || {
        lines(&out).len() >= 3
    });
    stat.set(true);
    // frozen: the count stops growing
    std::thread::sleep(Duration::from_millis(200));
    let n = lines(&out).len();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        lines(&out).len() <= n + 1,
        "{freezer}: not frozen while busy"
    );
    sh_ok(&format!("kill -{signal} {}", child.id()));
    let st = wait_exit(&mut child, Duration::from_secs(10));
    if let Some(code) = want_status {
        assert_eq!(st.code(), Some(code), "{freezer}: {st}");
    }
    // the device is still busy, yet the command goes on to its end
    wait_until(
        &format!("{freezer}: the command's END after kill -{signal}"),
        Duration::from_secs(20),
        || lines(&out).last().map(String::as_str) == Some("END"),
    );
    assert_eq!(lines(&out).len(), 61);
    wait_until("the command's exit", Duration::from_secs(5), || !alive(pid));
    if let Some(cg) = cgroup {
        wait_until(
            &format!("{} to be removed", cg.display()),
            Duration::from_secs(5),
            || !cg.exists(),
        );
    }
}

/// The command exits and leaves a child running in its cgroup: fallow
/// returns its status at once and the guardian removes the cgroup later.
#[test]
#[ignore = "needs root"]
fn a_leftover_child_does_not_hold_fallow_and_its_cgroup_goes_later() {
    need_root("cgroups");
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let t0 = Instant::now();
    let mut child = fallow_cmd(&["run", "--device", stat.arg(), "--policy", "aggressive"])
        .args(["--", "sh", "-c", "sleep 1 & exit 4"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (_, cgroup) = pid_and_cgroup(&header(&mut child));
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(st.code(), Some(4));
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    if let Some(cg) = cgroup {
        wait_until(
            &format!("{} to be removed", cg.display()),
            Duration::from_secs(5),
            || !cg.exists(),
        );
    }
}

/// Ctrl-C reaches fallow only (the command has its own process group):
/// fallow passes it on, and the command's status (130) is fallow's.
#[test]
fn sigint_is_passed_on_to_the_command() {
    let f = if is_root() { freezers()[0] } else { "signal" };
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let out = dir.path().join("ticks");
    let script = ticker(&out, &dir.path().join("never"));
    let mut child = fallow_cmd(&[
        "run",
        "-q",
        "--freezer",
        f,
        "--device",
        stat.arg(),
        "--policy",
        "aggressive",
    ])
    .args(["--", "sh", "-c", &script])
    .spawn()
    .unwrap();
    wait_until("the first tick", Duration::from_secs(10), || {
        !lines(&out).is_empty()
    });
    stat.set(true); // frozen: the SIGINT must thaw it to be seen
    std::thread::sleep(Duration::from_millis(100));
    sh_ok(&format!("kill -INT {}", child.id()));
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(st.code(), Some(130), "{st}");
}

/// A loop device over a sparse file, detached on drop.
struct Loop {
    dev: String,
    _attached: LoopDev,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn new() -> Option<Loop> {
        if !have("losetup") {
            eprintln!("skip: no losetup");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let attached = match LoopDev::sparse(&dir.path().join("disk.img"), 1 << 30) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("skip: no loop device: {e}");
                return None;
            }
        };
        Some(Loop {
            dev: attached.dev.clone(),
            _attached: attached,
            _dir: dir,
        })
    }
}

/// FG bursts of direct reads on a real loop device: no ticks during a
/// burst beyond one slice, ticks again once it has been idle for the
/// policy's wait.
#[test]
#[ignore = "needs root"]
fn paused_during_fg_io_on_a_loop_device() {
    need_root("a loop device");
    let Some(lo) = Loop::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (out, stop, report) = (
        dir.path().join("ticks"),
        dir.path().join("stop"),
        dir.path().join("report.json"),
    );
    let script = ticker(&out, &stop);
    let mut child = fallow_cmd(&[
        "run",
        "-q",
        "--device",
        &lo.dev,
        "--policy",
        "fixed-wait:t=100ms",
    ])
    .args(["--slice", "20ms", "--report", report.to_str().unwrap()])
    .args(["--", "sh", "-c", &script])
    .spawn()
    .unwrap();
    wait_until("the first tick", Duration::from_secs(10), || {
        !lines(&out).is_empty()
    });
    let mut bursts = vec![];
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(500));
        let from = now_ns();
        fg_direct_reads_for(&lo.dev, 0, Duration::from_millis(700));
        bursts.push((from, now_ns()));
    }
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(&stop, "").unwrap();
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let ticks = timestamps(&out);
    for (from, to) in &bursts {
        let during: Vec<_> = ticks
            .iter()
            .filter(|&&t| t > from + 100_000_000 && t < *to)
            .collect();
        assert!(during.is_empty(), "ticks during an FG burst: {during:?}");
        let after = ticks
            .iter()
            .filter(|&&t| t > *to && t < to + 500_000_000)
            .count();
        assert!(after >= 5, "only {after} ticks in the 500 ms after a burst");
    }
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(r["monitor"]["busy_periods"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["run"]["frozen_s"].as_f64().unwrap() > 1.0, "{r}");
}

/// The command reading the watched disk itself is not FG: it is never
/// paused for its own I/O.
#[test]
#[ignore = "needs root"]
fn the_commands_own_io_is_not_foreground() {
    need_root("a loop device and cgroups");
    let Some(lo) = Loop::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "dd if={} of=/dev/null bs=64k count=2048 iflag=direct 2>/dev/null",
        lo.dev
    );
    for f in freezers() {
        // FALLOW_MONITOR=auto: the default, as a user runs it
        let r = run_on_loop(
            &lo,
            "auto",
            f,
            &dir.path().join(format!("{f}.json")),
            &script,
        );
        // taken for FG, each 20 ms slice of 128 MiB of reads would end in a
        // busy period and a 50 ms pause: dozens of them
        let busy = r["monitor"]["busy_periods"].as_u64().unwrap();
        assert!(busy <= 2, "{f}: {busy} busy periods: {r}");
        assert!(
            r["monitor"]["fg_read_bytes"].as_u64().unwrap() < 4 << 20,
            "{f}: the command's reads counted as FG: {r}"
        );
    }
}

// ---------------------------------------------------------------- network

/// A veth pair: `host` in this namespace with 10.213.N.1/30, the peer in
/// namespace `ns` with .2. Removed on drop.
struct Veth {
    host: String,
    ns: String,
    host_ip: String,
    peer_ip: String,
}

impl Veth {
    fn new(tag: &str, subnet: u8) -> Option<Veth> {
        if !have("ip") {
            eprintln!("skip: no `ip` (iproute2)");
            return None;
        }
        let id = std::process::id() % 100_000;
        let v = Veth {
            host: format!("fl{tag}{id}"),
            ns: format!("fallow-test-{tag}-{id}"),
            host_ip: format!("10.213.{subnet}.1"),
            peer_ip: format!("10.213.{subnet}.2"),
        };
        let peer = format!("{}p", v.host);
        let script = format!(
            "set -e
            ip netns add {ns}
            ip link add {h} type veth peer name {p}
            ip link set {p} netns {ns}
            sysctl -qw net.ipv6.conf.{h}.disable_ipv6=1
            ip netns exec {ns} sysctl -qw net.ipv6.conf.{p}.disable_ipv6=1
            ip addr add {hip}/30 dev {h}
            ip link set {h} up
            ip netns exec {ns} ip addr add {pip}/30 dev {p}
            ip netns exec {ns} ip link set {p} up
            ip netns exec {ns} ip link set lo up",
            ns = v.ns,
            h = v.host,
            p = peer,
            hip = v.host_ip,
            pip = v.peer_ip,
        );
        if !sh(&script).success() {
            eprintln!("skip: cannot make a veth pair and a network namespace");
            return None;
        }
        Some(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = sh(&format!(
            "ip link del {} 2>/dev/null; ip netns del {} 2>/dev/null",
            self.host, self.ns
        ));
    }
}

/// FG UDP traffic on the watched interface pauses the command; idle
/// resumes it (Eggert & Touch's idletime scheduling, for a network).
#[test]
#[ignore = "needs root"]
fn fg_traffic_on_the_interface_pauses_the_command() {
    need_root("veth pairs and network namespaces");
    let Some(v) = Veth::new("a", 1) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (out, stop) = (dir.path().join("ticks"), dir.path().join("stop"));
    let script = ticker(&out, &stop);
    let mut child = fallow_cmd(&[
        "run",
        "-q",
        "--net",
        &v.host,
        "--policy",
        "preemption-interval:p=100ms",
    ])
    .args(["--", "sh", "-c", &script])
    .spawn()
    .unwrap();
    wait_until("the first tick", Duration::from_secs(10), || {
        !lines(&out).is_empty()
    });
    let sock = std::net::UdpSocket::bind((v.host_ip.as_str(), 0)).unwrap();
    let mut bursts = vec![];
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(500));
        let from = now_ns();
        let end = Instant::now() + Duration::from_millis(700);
        while Instant::now() < end {
            let _ = sock.send_to(b"fg", (v.peer_ip.as_str(), 9));
            std::thread::sleep(Duration::from_millis(2));
        }
        bursts.push((from, now_ns()));
    }
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(&stop, "").unwrap();
    let st = wait_exit(&mut child, Duration::from_secs(10));
    assert!(st.success(), "{st}");
    let ticks = timestamps(&out);
    for (from, to) in &bursts {
        let during: Vec<_> = ticks
            .iter()
            .filter(|&&t| t > from + 100_000_000 && t < *to)
            .collect();
        assert!(during.is_empty(), "ticks during FG traffic: {during:?}");
        let after = ticks
            .iter()
            .filter(|&&t| t > *to && t < to + 500_000_000)
            .count();
        assert!(
            after >= 5,
            "only {after} ticks in the 500 ms after the traffic"
        );
    }
}

/// The command's own traffic, from its namespace across the watched
/// interface, is told apart: it is never paused for it.
#[test]
#[ignore = "needs root"]
fn the_commands_traffic_from_its_namespace_is_not_foreground() {
    need_root("veth pairs and network namespaces");
    if !have("bash") {
        eprintln!("skip: no bash (for /dev/udp)");
        return;
    }
    let Some(v) = Veth::new("b", 2) else { return };
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    // 150 datagrams, one every 5 ms, to the host end of the pair
    let script = format!(
        "for i in $(seq 150); do echo x > /dev/udp/{}/9; sleep 0.005; done",
        v.host_ip
    );
    let o = fallow(&[
        "run",
        "-q",
        "--net",
        &v.host,
        "--netns",
        &v.ns,
        "--policy",
        "fixed-wait:t=50ms",
        "--report",
        report.to_str().unwrap(),
        "--",
        "bash",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    // taken for FG, every 20 ms slice (about 3 datagrams) would end in a
    // busy period and a 50 ms pause: about 50 of them
    let busy = r["monitor"]["busy_periods"].as_u64().unwrap();
    assert!(busy <= 3, "{busy} busy periods: {r}");
    assert!(r["monitor"]["fg_requests"].as_u64().unwrap() <= 6, "{r}");
}

#[test]
fn a_tune_result_sets_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let (tuned, path) = tune_result(dir.path(), "64KiB");
    let spec = tuned["best"]["spec"].as_str().unwrap().to_string();
    let o = fallow(&[
        "run",
        "--device",
        stat.arg(),
        "--tuned",
        path.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("policy {spec}")),
        "{spec}: {}",
        stderr(&o)
    );
    // not both
    let o = fallow(&[
        "run",
        "--tuned",
        path.to_str().unwrap(),
        "--policy",
        "aggressive",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `--config`: the file's [live], [run] and [metrics] keys are used where
/// no flag is given (the defaulted flags must not mask them), and a flag
/// beats the file.
#[test]
fn a_config_file_sets_policy_slice_report_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let cfg = dir.path().join("fallow.toml");
    std::fs::write(
        &cfg,
        format!(
            "[live]\npolicy = \"aggressive\"\nmonitor = \"{}\"\ninterval = \"2ms\"\nseed = 5\n\n\
             [run]\nslice = \"40ms\"\nfreezer = \"signal\"\nreport = \"report.json\"\n\n\
             [metrics]\naddr = \"127.0.0.1:0\"\n\n[scrub]\nsize = \"1MiB\"\n",
            stat.arg()
        ),
    )
    .unwrap();
    let report = dir.path().join("report.json");
    let o = fallow(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(
        e.contains("policy aggressive (config), 40.0\u{a0}ms slices"),
        "{e}"
    );
    assert!(
        e.contains("fallow run: metrics at http://127.0.0.1:"),
        "{e}"
    );
    // the report, relative to the config file
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["policy"], "aggressive");
    assert_eq!(v["policy_from"], "config");
    assert_eq!(v["driver"]["policy"], "aggressive");
    assert_eq!(v["slice_s"], 0.04);
    assert_eq!(v["freezer"], "signal");
    assert_eq!(v["monitor"]["interval_s"], 0.002);
    assert_eq!(v["monitor"]["source"], stat.arg());
    assert_eq!(v["exit_code"], 3);

    // flags beat the file
    std::fs::remove_file(&report).unwrap();
    let other = dir.path().join("other.json");
    let o = fallow(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--policy",
        "fixed-wait:t=10ms",
        "--slice",
        "10ms",
        "--interval",
        "1ms",
        "--report",
        other.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!report.exists(), "the file's report path was overridden");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&other).unwrap()).unwrap();
    assert_eq!(v["policy"], "fixed-wait:t=10ms");
    assert_eq!(v["policy_from"], "--policy");
    assert_eq!(v["slice_s"], 0.01);
    assert_eq!(v["monitor"]["interval_s"], 0.001);
    assert_eq!(v["freezer"], "signal");
}

/// A bad config is refused before the command starts: status 2, and the
/// message names the file and the key.
#[test]
fn a_bad_config_is_a_clear_error_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let stat = StatFile::new(dir.path());
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let cases: &[(&str, &[&str])] = &[
        (
            "[run]\nslise = \"20ms\"\n",
            &["unknown field `slise`", "[run]"],
        ),
        ("[run]\nslice = \"soon\"\n", &["[run] slice"]),
        ("[run]\nseed = -1\n", &["[run]", "seed"]),
        (
            "[metrics]\naddress = \"127.0.0.1:0\"\n",
            &["[metrics]", "address"],
        ),
        (
            "[live]\npolicy = \"no-such-policy\"\n",
            &["[live] policy", "no-such-policy"],
        ),
        (
            "[run]\ndevice = \"fallow-no-such-disk\"\n",
            &["[run] device"],
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let cfg = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let mut args = vec!["run", "--config", cfg.to_str().unwrap()];
        // every case but the device one has a disk to watch
        if !text.contains("device") {
            args.extend(["--device", stat.arg()]);
        }
        args.extend(["--", "sh", "-c", &touch]);
        let file = format!("bad{i}.toml");
        let mut needles = vec![file.as_str()];
        needles.extend_from_slice(want);
        bad_input(&args, &needles);
        assert!(!marker.exists(), "{text}: the command ran");
    }
}

// ------------------------------------------------- run on the event monitor

/// FG work on `dev`: 4 KiB direct reads one after another from 4 KiB
/// block `skip_blocks` on, for `dur` (`dd`, killed at the end).
fn fg_direct_reads_for(dev: &str, skip_blocks: u64, dur: Duration) {
    let mut dd = Command::new("dd")
        .args([
            &format!("if={dev}"),
            "of=/dev/null",
            "bs=4k",
            &format!("skip={skip_blocks}"),
            "iflag=direct",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(dur);
    dd.kill().unwrap();
    dd.wait().unwrap();
}

/// `fallow run -q` on `lo` with `FALLOW_MONITOR=monitor`, the freezer
/// `freezer`, the policy `fixed-wait:t=50ms` and the report at `report`,
/// running `script` under `sh -c`; not started.
fn run_on_loop_cmd(
    lo: &Loop,
    monitor: &str,
    freezer: &str,
    report: &Path,
    script: &str,
) -> Command {
    let mut c = fallow_cmd(&[
        "run",
        "-q",
        "--freezer",
        freezer,
        "--device",
        &lo.dev,
        "--policy",
        "fixed-wait:t=50ms",
        "--report",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ]);
    c.env("FALLOW_MONITOR", monitor);
    c
}

/// [`run_on_loop_cmd`] run to its end; the parsed report.
fn run_on_loop(lo: &Loop, monitor: &str, freezer: &str, report: &Path, script: &str) -> Value {
    let o = run_on_loop_cmd(lo, monitor, freezer, report, script)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap()
}

/// Under the event monitor (`FALLOW_MONITOR=events`, an error if it cannot
/// run) the command's own direct reads and writes on the watched loop
/// device are its own, told apart by the cgroup that queued each bio: no
/// FG bytes, no busy periods beyond the start.
#[test]
#[ignore = "needs root"]
fn the_commands_own_io_is_not_foreground_under_the_event_monitor() {
    need_root("a loop device, cgroups and perf events");
    let Some(lo) = Loop::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    // (what, script, bios of the command at least: one per `dd` block)
    let io = [
        (
            "reads",
            format!(
                "dd if={} of=/dev/null bs=64k count=2048 iflag=direct",
                lo.dev
            ),
            2048,
        ),
        (
            "writes",
            format!(
                "dd if=/dev/zero of={} bs=64k count=1024 oflag=direct",
                lo.dev
            ),
            1024,
        ),
        // buffered, written out by its own fsync (in its context, so
        // attributed; write-back by the flusher is left to the counters)
        (
            "fsync",
            format!(
                "dd if=/dev/zero of={} bs=64k count=512 seek=2048 conv=fsync",
                lo.dev
            ),
            1,
        ),
        // buffered, written out by `sync` in the command (on Linux 6.18
        // `sync` writes a block device's dirty pages in its own context:
        // 4,096 bios of 4 KiB, all queued by the `sync` process)
        (
            "sync",
            format!(
                "dd if=/dev/zero of={} bs=64k count=256 seek=4096 && sync",
                lo.dev
            ),
            1,
        ),
    ];
    for (what, script, min_bios) in io {
        let r = run_on_loop(
            &lo,
            "events",
            "cgroup2",
            &dir.path().join(format!("{what}.json")),
            &format!("{script} 2>/dev/null"),
        );
        let m = &r["monitor"];
        assert_eq!(m["kind"], "events", "{what}: {r}");
        assert!(
            r["io_accounting"]
                .as_str()
                .unwrap()
                .contains("block_bio_queue"),
            "{what}: {r}"
        );
        // taken for FG, each 20 ms slice of the command's I/O would end in
        // a busy period and a 50 ms pause: dozens of them
        let busy = m["busy_periods"].as_u64().unwrap();
        assert!(busy <= 2, "{what}: {busy} busy periods: {r}");
        let fg = m["fg_read_bytes"].as_u64().unwrap() + m["fg_write_bytes"].as_u64().unwrap();
        assert!(fg < 4 << 20, "{what}: the command's I/O counted as FG: {r}");
        assert!(m["cpu_s"].as_f64().unwrap() > 0.0, "{what}: {r}");
        // each direct `dd` block is at least one bio of the command's
        let bios = r["bios"]["command_bios"].as_u64().unwrap();
        assert!(bios >= min_bios, "{what}: {bios} bios: {r}");
    }
}

/// Under the event monitor, FG reads of another process while the
/// command reads the same device are seen: the command is paused for
/// them, and only they are counted as FG.
#[test]
#[ignore = "needs root"]
fn fg_io_during_the_commands_own_io_is_seen_by_the_event_monitor() {
    need_root("a loop device, cgroups and perf events");
    let Some(lo) = Loop::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (stop, report) = (dir.path().join("stop"), dir.path().join("r.json"));
    // the command: 4 MiB direct reads, over and over, until `stop`
    let script = format!(
        "while [ ! -e {} ]; do dd if={} of=/dev/null bs=64k count=64 iflag=direct 2>/dev/null; done",
        stop.display(),
        lo.dev
    );
    let mut child = run_on_loop_cmd(&lo, "events", "cgroup2", &report, &script)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // FG: 4 KiB direct reads from the far half of the device for 1 s
    fg_direct_reads_for(&lo.dev, 131_072, Duration::from_millis(1000));
    std::thread::sleep(Duration::from_millis(500));
    // FG writes: 4 MiB buffered and written out by fsync (or, partly, by
    // the flusher, whose bios are left to the counters, which do not take
    // them for the command's)
    sh_ok(&format!(
        "dd if=/dev/zero of={} bs=64k count=64 seek=12288 conv=fsync 2>/dev/null",
        lo.dev
    ));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&stop, "").unwrap();
    let st = wait_exit(&mut child, Duration::from_secs(30));
    assert!(st.success(), "{st}");
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let m = &r["monitor"];
    assert_eq!(m["kind"], "events", "{r}");
    assert!(m["busy_periods"].as_u64().unwrap() >= 1, "{r}");
    // the FG reads are counted (a second of 4 KiB direct reads is far more
    // than 1 MiB even on a loaded machine), and the command was paused for
    // a good part of that second
    assert!(m["fg_read_bytes"].as_u64().unwrap() > 1 << 20, "{r}");
    assert!(m["fg_write_bytes"].as_u64().unwrap() >= 4 << 20, "{r}");
    // both kinds of bios were seen and told apart
    assert!(r["bios"]["command_bios"].as_u64().unwrap() >= 64, "{r}");
    assert!(r["bios"]["foreground_bios"].as_u64().unwrap() >= 64, "{r}");
    assert!(m["busy_periods"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["run"]["frozen_s"].as_f64().unwrap() > 0.3, "{r}");
}

/// Where the command's bios cannot be told apart (no cgroup v2 of its
/// own: the signal and cgroup1 freezers), `auto` falls back to the poller
/// and says why; its own reads are still not FG. Asking for the events
/// there is a clear error.
#[test]
#[ignore = "needs root"]
fn without_a_cgroup2_of_its_own_run_polls_and_says_why() {
    need_root("a loop device and cgroups");
    let Some(lo) = Loop::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "dd if={} of=/dev/null bs=64k count=1024 iflag=direct 2>/dev/null",
        lo.dev
    );
    for f in freezers().into_iter().filter(|f| *f != "cgroup2") {
        let r = run_on_loop(
            &lo,
            "auto",
            f,
            &dir.path().join(format!("{f}.json")),
            &script,
        );
        let m = &r["monitor"];
        assert_eq!(m["kind"], "poll", "{f}: {r}");
        assert!(
            m["kind_reason"]
                .as_str()
                .unwrap()
                .contains("no cgroup v2 of its own"),
            "{f}: {r}"
        );
        assert!(m["busy_periods"].as_u64().unwrap() <= 2, "{f}: {r}");
        assert!(m["fg_read_bytes"].as_u64().unwrap() < 4 << 20, "{f}: {r}");
        let o = fallow_cmd(&[
            "run",
            "-q",
            "--freezer",
            f,
            "--device",
            &lo.dev,
            "--",
            "true",
        ])
        .env("FALLOW_MONITOR", "events")
        .stdin(Stdio::null())
        .output()
        .unwrap();
        assert!(!o.status.success(), "{f}");
        assert!(
            stderr(&o).contains("no cgroup v2 of its own"),
            "{f}: {}",
            stderr(&o)
        );
    }
    // and FALLOW_MONITOR=poll is obeyed, with the cgroup2 freezer too
    let r = run_on_loop(&lo, "poll", "cgroup2", &dir.path().join("p.json"), &script);
    assert_eq!(r["monitor"]["kind"], "poll", "{r}");
    assert!(r["monitor"]["busy_periods"].as_u64().unwrap() <= 2, "{r}");
    assert!(
        !r["io_accounting"].as_str().unwrap().contains("bios"),
        "{r}"
    );
    assert!(r["bios"].is_null(), "{r}");
}
