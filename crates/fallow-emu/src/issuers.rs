//! Who issued the disk's requests: FUSE hands the server each request's
//! requester (the calling thread's pid, in the mounting process's pid
//! namespace), which the block layer's tracepoints on the mount point
//! never show (they see the FUSE server). `MOUNTPOINT/issuers` serves the
//! most recent requesters so that `fallow spindown` can name the process
//! that woke the emulated disk (docs/emulated-disk.md).
//!
//! The text, one line each:
//!
//! ```text
//! requests 1234
//! 1230 1233 4711 dd /user.slice/session-3.scope
//! ```
//!
//! `requests` is the number of disk requests recorded so far; each other
//! line is a run of consecutive requests by one thread: the sequence
//! number of its first and last request (1-based), the pid, the `comm`
//! (spaces and control characters replaced by `_`) and the cgroup v2
//! path (from `/proc/PID/cgroup`, `-` when unknown), oldest first. A reader keeps
//! the last sequence number it saw and takes the runs that end after it.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Runs kept: a reader polling every 50 ms sees every requester unless
/// more than this many alternations of requesters happen between polls.
pub const RUNS_KEPT: usize = 64;
/// A cgroup path longer than this is cut (the file stays small).
const CGROUP_MAX_BYTES: usize = 256;
/// What the file's size attribute says: more than its text ever is
/// (64 runs of at most ~300 bytes).
pub const ISSUERS_FILE_BYTES: u64 = 64 << 10;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    first_seq: u64,
    last_seq: u64,
    pid: u32,
    comm: String,
    cgroup: String,
}

/// The recent requesters.
#[derive(Debug, Default)]
pub struct Issuers {
    inner: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    requests: u64,
    runs: VecDeque<Run>,
}

/// `comm` as one word.
fn clean_comm(s: &str) -> String {
    let s = s.trim_end_matches('\n');
    let c: String = s
        .chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if c.is_empty() {
        "?".into()
    } else {
        c
    }
}

/// The process's `comm` and cgroup now (`?` / `-` when it is gone).
fn describe(pid: u32) -> (String, String) {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| "?".to_string(), |s| clean_comm(&s));
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .and_then(|s| {
            // cgroup v2's line is `0::PATH`; v1 machines list controllers
            s.lines()
                .find(|l| l.starts_with("0::"))
                .map(|l| l[3..].to_string())
        })
        .map_or_else(
            || "-".to_string(),
            |c| {
                let c = clean_comm(&c);
                let mut end = c.len().min(CGROUP_MAX_BYTES);
                while !c.is_char_boundary(end) {
                    end -= 1;
                }
                c[..end].to_string()
            },
        );
    (comm, cgroup)
}

impl Issuers {
    /// Record a disk request by thread `pid` (0: the kernel's own, no
    /// process). The process is looked up only when the requester changes,
    /// so a stream of one process's requests costs a lock and a compare.
    pub fn record(&self, pid: u32) {
        let mut st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        st.requests += 1;
        let seq = st.requests;
        if let Some(last) = st.runs.back_mut() {
            if last.pid == pid {
                last.last_seq = seq;
                return;
            }
        }
        // read /proc outside the lock would reorder runs; the reads are
        // a few µs and happen once per change of requester
        let (comm, cgroup) = if pid == 0 {
            ("kernel".to_string(), "-".to_string())
        } else {
            describe(pid)
        };
        st.runs.push_back(Run {
            first_seq: seq,
            last_seq: seq,
            pid,
            comm,
            cgroup,
        });
        while st.runs.len() > RUNS_KEPT {
            st.runs.pop_front();
        }
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let st = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = format!("requests {}\n", st.requests);
        for r in &st.runs {
            s.push_str(&format!(
                "{} {} {} {} {}\n",
                r.first_seq, r.last_seq, r.pid, r.comm, r.cgroup
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_coalesce_by_requester_and_the_oldest_are_dropped() {
        let i = Issuers::default();
        let me = std::process::id();
        i.record(me);
        i.record(me);
        i.record(0);
        i.record(me);
        let text = i.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "requests 4");
        // this test process's comm, read independently
        let comm = clean_comm(&std::fs::read_to_string("/proc/self/comm").unwrap());
        assert!(lines[1].starts_with(&format!("1 2 {me} {comm} ")), "{text}");
        assert_eq!(lines[2], "3 3 0 kernel -");
        assert!(lines[3].starts_with(&format!("4 4 {me} ")), "{text}");
        assert_eq!(lines.len(), 4);
        // alternate past the bound: only the newest RUNS_KEPT runs stay
        for k in 0..(RUNS_KEPT as u32 + 10) {
            i.record(if k % 2 == 0 { 0 } else { me });
        }
        let text = i.to_text();
        let total = 4 + RUNS_KEPT as u64 + 10;
        assert!(text.starts_with(&format!("requests {total}\n")), "{text}");
        assert_eq!(text.lines().count(), 1 + RUNS_KEPT);
        let last = text.lines().last().unwrap();
        assert!(last.starts_with(&format!("{total} {total} ")), "{last}");
        assert!((text.len() as u64) < ISSUERS_FILE_BYTES);
    }

    #[test]
    fn comm_is_one_word() {
        assert_eq!(clean_comm("kworker/u8:2 x\n"), "kworker/u8:2_x");
        assert_eq!(clean_comm("\n"), "?");
    }
}
