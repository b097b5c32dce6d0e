//! Which root tests may run beside which. Root tests change the machine
//! (loop devices, mounts, cgroups, namespaces, the page cache) and some
//! time daemons, so the root tests of different files do not run side by
//! side unless their files are in different *lanes* of [`LANES`]: files of
//! one lane take turns (as when each file was a test binary of its own and
//! cargo ran them one after the other), lanes run side by side, and a file
//! in no lane runs alone. Tests of one file run side by side as before
//! (each file keeps its own locks). A root test waits in [`enter`].
//!
//! Why lanes: one file at a time made the root tests a chain of 305 s
//! (the native btrfs tests ~100 s, spin-down ~113 s, the rest ~90 s) that
//! kept the binary's wall time at 5 min with a tenth of the machine's CPU
//! in use. The lanes are groups that share nothing the others touch:
//! - `btrfs` (native, run_kernel): btrfs on loop devices, btrfs-progs'
//!   scrub state in /var/lib/btrfs;
//! - `spindown`: emulated disks (FUSE) and the daemons that watch them,
//!   tracefs unmounted only in a private mount namespace;
//! - `peer`: network namespaces and FUSE mounts of its own.
//!
//! Files whose tests time their own FG against a scrub (scrub, live_tools),
//! freeze cgroups or make namespaces over the machine's mounts (run,
//! systemd_units) stay alone. Nothing in a lane may change what the
//! others see: no global `sync` or `drop_caches` (the peer tests' warm
//! copies went cold when run_kernel dropped every cache), each file system
//! flushed or remounted on its own. The binary needs more test threads than
//! the root tests waiting in their files' locks for the lanes to overlap:
//! scripts/test.sh runs it with `--test-threads 48`.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};

/// The lanes: each a name and the files (as `file!()` ends) in it.
const LANES: &[(&str, &[&str])] = &[
    ("btrfs", &["native.rs", "run_kernel.rs"]),
    ("spindown", &["spindown.rs"]),
    ("peer", &["peer.rs"]),
];

/// The lane of a test file; `None`: it runs alone.
fn lane_of(file: &str) -> Option<&'static str> {
    LANES
        .iter()
        .find(|(_, files)| files.iter().any(|f| file.ends_with(f)))
        .map(|(lane, _)| *lane)
}

/// Whether root tests of files `a` and `b` may run side by side.
fn compatible(a: &str, b: &str) -> bool {
    a == b || matches!((lane_of(a), lane_of(b)), (Some(x), Some(y)) if x != y)
}

/// The files whose root tests run now, each with how many of them.
static NOW: Mutex<Vec<(&'static str, usize)>> = Mutex::new(Vec::new());
static CHANGED: Condvar = Condvar::new();

/// Held by a test's thread until it ends (libtest runs each test on a
/// thread of its own; with `--test-threads 1`, on one thread in turn,
/// the next test's [`enter`] lets go of the last one's).
struct Held(&'static str);

impl Drop for Held {
    fn drop(&mut self) {
        let mut now = NOW.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = now.iter().position(|(f, _)| *f == self.0) {
            now[i].1 -= 1;
            if now[i].1 == 0 {
                now.swap_remove(i);
            }
        }
        CHANGED.notify_all();
    }
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Wait until every root test that runs is of a file that may run beside
/// `file` (see the module's docs), then count this thread's test in until
/// the thread ends.
pub fn enter(file: &'static str) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.as_ref().is_some_and(|held| held.0 == file) {
            return;
        }
        // another file's test ran on this thread before (one test thread)
        h.take();
        let mut now = NOW.lock().unwrap_or_else(|e| e.into_inner());
        while !now.iter().all(|(f, _)| compatible(f, file)) {
            now = CHANGED.wait(now).unwrap_or_else(|e| e.into_inner());
        }
        match now.iter_mut().find(|(f, _)| *f == file) {
            Some(entry) => entry.1 += 1,
            None => now.push((file, 1)),
        }
        *h = Some(Held(file));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_run_side_by_side_and_files_of_one_lane_or_none_take_turns() {
        let at = |f: &str| format!("crates/fallow-cli/tests/integration/{f}");
        let (native, run_kernel) = (at("native.rs"), at("run_kernel.rs"));
        let (spindown, peer, scrub) = (at("spindown.rs"), at("peer.rs"), at("scrub.rs"));
        assert!(compatible(&native, &native));
        assert!(compatible(&scrub, &scrub));
        assert!(compatible(&native, &spindown));
        assert!(compatible(&peer, &spindown));
        assert!(!compatible(&native, &run_kernel));
        assert!(!compatible(&scrub, &native));
        assert!(!compatible(&spindown, &scrub));
        assert!(!compatible(&scrub, &at("run.rs")));
        // every file named is one of the binary's
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration");
        for (_, files) in LANES {
            for f in *files {
                assert!(
                    dir.join(f).is_file(),
                    "{f} is in a lane and not a test file"
                );
            }
        }
    }
}
