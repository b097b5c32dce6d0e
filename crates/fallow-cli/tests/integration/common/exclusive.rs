//! Root tests of different files one file at a time. They change the
//! machine (loop devices, mounts, cgroups, namespaces, the page cache) and
//! some time daemons; when each file was a test binary of its own, cargo
//! ran the files one after the other, and so they still run: a root test
//! waits in [`enter`] while a root test of another file runs. Tests of one
//! file run side by side as before (each file keeps its own locks).

use std::cell::RefCell;
use std::sync::{Condvar, Mutex};

/// The file whose root tests run now, and how many of them.
static NOW: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static CHANGED: Condvar = Condvar::new();

/// Held by a test's thread until it ends (libtest runs each test on a
/// thread of its own; with `--test-threads 1`, on one thread in turn,
/// the next test's [`enter`] lets go of the last one's).
struct Held(&'static str);

impl Drop for Held {
    fn drop(&mut self) {
        let mut now = NOW.lock().unwrap_or_else(|e| e.into_inner());
        now.1 -= 1;
        if now.1 == 0 {
            now.0 = None;
        }
        CHANGED.notify_all();
    }
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Wait until no root test of a file other than `file` runs, then count
/// this thread's test in until the thread ends.
pub fn enter(file: &'static str) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.as_ref().is_some_and(|held| held.0 == file) {
            return;
        }
        // another file's test ran on this thread before (one test thread)
        h.take();
        let mut now = NOW.lock().unwrap_or_else(|e| e.into_inner());
        while now.0.is_some_and(|f| f != file) {
            now = CHANGED.wait(now).unwrap_or_else(|e| e.into_inner());
        }
        now.0 = Some(file);
        now.1 += 1;
        *h = Some(Held(file));
    });
}
